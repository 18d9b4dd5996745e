import AudioSessionWire
import ArgumentParser
import DBus
import Foundation
import PolicyAgent

/// `audiosessionctl silent [on|off]`: the agent's silent mode (SPEC.md 5.10: ambient and soloAmbient
/// output silenced, not playback or calls), through its `SilentMode` on the session bus.
struct Silent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show silent mode, or turn it on or off (ambient sounds silenced; music and calls are not).")

    @Argument(help: "on or off (nothing: show it).")
    var state: String?

    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.")
    var bus: String?

    func validate() throws {
        if let state, state != "on", state != "off" {
            throw ValidationError("silent takes on or off, not '\(Escape.forDisplay(String(state.prefix(40))))'")
        }
    }

    func run() async throws {
        try await reporting {
            let connection: DBusConnection
            do {
                connection = try DBusConnection.connect(.session, address: bus, name: "audiosessionctl")
            } catch {
                throw Failure("no session bus: \(error)")
            }
            defer { connection.close() }
            let agent = Wire.busName
            guard try await connection.callDaemon("NameHasOwner", [.string(agent)]).first?.bool == true else {
                throw Failure("no audiosessiond on the session bus (nobody owns \(agent))")
            }
            let path = Wire.agentPath
            do {
                if let state {
                    _ = try await connection.call(agent, path, "org.freedesktop.DBus.Properties", "Set",
                                                  [.string(Wire.agentInterface), .string("SilentMode"), .variant(.bool(state == "on"))])
                }
                let on = try await connection.call(agent, path, "org.freedesktop.DBus.Properties", "Get",
                                                   [.string(Wire.agentInterface), .string("SilentMode")]).first?.bool
                print("silent mode: \(on == true ? "on (ambient sounds silenced)" : "off")")
            } catch DBusError.remote(let name, let message) {
                throw Failure("the agent refused: \(name): \(message)")
            }
        }
    }
}

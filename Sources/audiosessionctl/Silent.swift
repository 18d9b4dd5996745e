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
            let on = try await agentProperty("SilentMode", set: state.map { _ in { _ in state == "on" } }, bus: bus)
            print("silent mode: \(on ? "on (ambient sounds silenced)" : "off")")
        }
    }
}

/// `audiosessionctl mic [mute|unmute|toggle]`: the microphone muted for every app (every capture
/// stream that is not a sink's monitor, those started later too), through the agent's `InputMuted`.
struct Mic: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the microphone's mute for every app, or mute, unmute or toggle it (apps that declared a session are told).")

    @Argument(help: "mute, unmute or toggle (nothing: show it).")
    var action: String?

    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.")
    var bus: String?

    func validate() throws {
        if let action, !["mute", "unmute", "toggle"].contains(action) {
            throw ValidationError("mic takes mute, unmute or toggle, not '\(Escape.forDisplay(String(action.prefix(40))))'")
        }
    }

    func run() async throws {
        try await reporting {
            let change: ((Bool) -> Bool)? = switch action {
            case "mute": { _ in true }
            case "unmute": { _ in false }
            case "toggle": { !$0 }
            default: nil
            }
            let muted = try await agentProperty("InputMuted", set: change, bus: bus)
            print("microphone: \(muted ? "muted for every app" : "not muted by the agent")")
        }
    }
}

/// Reads a boolean property of the agent's object on the session bus, after setting it to what `set`
/// makes of its value if asked; returns its value then.
func agentProperty(_ name: String, set: ((Bool) -> Bool)?, bus: String?) async throws -> Bool {
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
    let path = Wire.agentPath, properties = "org.freedesktop.DBus.Properties"
    do {
        func read() async throws -> Bool {
            guard let value = try await connection.call(agent, path, properties, "Get", [.string(Wire.agentInterface), .string(name)]).first?.bool else {
                throw Failure("the agent has no \(name) (an older audiosessiond?)")
            }
            return value
        }
        guard let set else { return try await read() }
        let wanted = set(try await read())
        _ = try await connection.call(agent, path, properties, "Set", [.string(Wire.agentInterface), .string(name), .variant(.bool(wanted))])
        return try await read()
    } catch DBusError.remote(let name, let message) {
        throw Failure("the agent refused: \(name): \(message)")
    }
}

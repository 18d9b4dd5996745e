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

/// `audiosessionctl mic [mute|unmute|toggle] [APP]`: the microphone muted for every app (every
/// capture stream that is not a sink's monitor, those started later too), through the agent's
/// `InputMuted`; with APP, for that app alone (`SetAppInputMuted`).
struct Mic: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the microphone's mute, or mute, unmute or toggle it for every app or for one (apps that declared a session are told).",
        discussion: "APP is a Flatpak app id, else the program's file name (or the name of its policy file). Its captures are muted, those it starts later too, until it is unmuted or the agent stops.")

    @Argument(help: "mute, unmute or toggle (nothing: show it).")
    var action: String?

    @Argument(help: "The app (nothing: every app).")
    var app: String?

    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.")
    var bus: String?

    func validate() throws {
        if let action, !["mute", "unmute", "toggle"].contains(action) {
            throw ValidationError("mic takes mute, unmute or toggle, not '\(Escape.forDisplay(String(action.prefix(40))))'")
        }
        if let app, !RecordPermissions.isName(app) {
            throw ValidationError("'\(Escape.forDisplay(String(app.prefix(80))))' is not an app name (printable, no spaces, at most 255 bytes)")
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
            if let app, let change {
                let muted = try await setAppInputMuted(app, change, bus: bus)
                print("microphone of \(Escape.forDisplay(app)): \(muted.contains(app) ? "muted" : "not muted by the agent")")
                return
            }
            let muted = try await agentProperty("InputMuted", set: change, bus: bus)
            print("microphone: \(muted ? "muted for every app" : "not muted by the agent")")
            if action == nil {
                for name in try await mutedApps(bus: bus) { print("microphone of \(Escape.forDisplay(name)): muted") }
            }
        }
    }
}

/// The apps whose microphone the user muted (the agent's `InputMutedApps`).
func mutedApps(bus: String?) async throws -> [String] {
    try await withAgent(bus: bus) { connection in
        let value = try await connection.call(Wire.busName, Wire.agentPath, "org.freedesktop.DBus.Properties", "Get",
                                              [.string(Wire.agentInterface), .string("InputMutedApps")]).first
        guard let names = value?.array else { throw Failure("the agent has no InputMutedApps (an older audiosessiond?)") }
        return names.compactMap(\.string)
    }
}

/// Mutes or unmutes one app's microphone to what `change` makes of its mute now; returns the apps
/// muted then.
func setAppInputMuted(_ app: String, _ change: (Bool) -> Bool, bus: String?) async throws -> [String] {
    let wanted = change(try await mutedApps(bus: bus).contains(app))
    return try await withAgent(bus: bus) { connection in
        let names = try await connection.call(Wire.busName, Wire.agentPath, Wire.agentInterface, "SetAppInputMuted", [.string(app), .bool(wanted)]).first
        return names?.array?.compactMap(\.string) ?? []
    }
}

/// Runs `body` with a connection to the session bus once the agent is known to be on it; the agent's
/// refusals said as such.
func withAgent<T>(bus: String?, _ body: (DBusConnection) async throws -> T) async throws -> T {
    let connection: DBusConnection
    do {
        connection = try DBusConnection.connect(.session, address: bus, name: "audiosessionctl")
    } catch {
        throw Failure("no session bus: \(error)")
    }
    defer { connection.close() }
    guard try await connection.callDaemon("NameHasOwner", [.string(Wire.busName)]).first?.bool == true else {
        throw Failure("no audiosessiond on the session bus (nobody owns \(Wire.busName))")
    }
    do {
        return try await body(connection)
    } catch DBusError.remote(let name, let message) {
        throw Failure("the agent refused: \(name): \(Escape.forDisplay(message))")
    }
}

/// Reads a boolean property of the agent's object on the session bus, after setting it to what `set`
/// makes of its value if asked; returns its value then.
func agentProperty(_ name: String, set: ((Bool) -> Bool)?, bus: String?) async throws -> Bool {
    try await withAgent(bus: bus) { connection in
        let agent = Wire.busName, path = Wire.agentPath, properties = "org.freedesktop.DBus.Properties"
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
    }
}

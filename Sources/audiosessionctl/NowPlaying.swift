import AgentTower
import AudioSessionWire
import ArgumentParser
import DBus
import Foundation
import PolicyAgent

/// `audiosessionctl now-playing [--json]`: the session now playing (the one that last started
/// non-mixable playback and has not ended), where the media keys go, and its players.
struct NowPlaying: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "now-playing",
        abstract: "Say which app is now playing: where play-pause, next and previous go.")

    @Flag(name: .long, help: "As JSON: {\"session\": ..., \"players\": [...]} (a declared app: \"path\"), or {} when nothing is.")
    var json = false

    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.")
    var bus: String?

    struct Answer: Codable {
        var session: String?
        var players: [String]?
        var path: String?
    }

    func run() async throws {
        try await reporting {
            let report = try await Status.report(bus: bus).get()
            if json { return try printJSON(Answer(session: report.nowPlaying, players: report.nowPlayingPlayers, path: report.nowPlayingPath)) }
            print(Escape.forDisplay(Self.words(report)))
        }
    }

    static func words(_ report: StatusReport) -> String {
        guard let session = report.nowPlaying else { return "nothing (no app has started playing)" }
        if let path = report.nowPlayingPath { return "\(session) (declared: told RemoteCommand on \(path))" }
        let players = report.nowPlayingPlayers ?? []
        return session + (players.isEmpty ? " (no media player of its app on the session bus)" : " (\(players.joined(separator: ", ")))")
    }
}

/// A media key from the command line, for desktops that bind keys to commands: sent to what is now
/// playing (`RemoteCommand` on the agent's object).
protocol MediaKey: AsyncParsableCommand {
    static var word: String { get }
    var bus: String? { get }
}

extension MediaKey {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: word, abstract: "Send \(word) to the app now playing (as a media key would).")
    }

    func run() async throws {
        try await reporting {
            let connection: DBusConnection
            do { connection = try DBusConnection.connect(.session, address: bus, name: "audiosessionctl") } catch {
                throw Failure("no session bus: \(error)")
            }
            defer { connection.close() }
            do {
                let target = try await connection.call(Wire.busName, Wire.agentPath, Wire.agentInterface, "RemoteCommand", [.string(Self.word)])
                    .first?.string ?? "?"
                print(Escape.forDisplay("\(Self.word): sent to \(target)"))
            } catch DBusError.remote(let name, let message) {
                throw Failure(name == "org.freedesktop.DBus.Error.ServiceUnknown" ? "no audiosessiond on the session bus" : message)
            }
        }
    }
}

struct PlayPauseKey: MediaKey {
    static let word = "play-pause"
    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.") var bus: String?
}
struct PlayKey: MediaKey {
    static let word = "play"
    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.") var bus: String?
}
struct PauseKey: MediaKey {
    static let word = "pause"
    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.") var bus: String?
}
struct StopKey: MediaKey {
    static let word = "stop"
    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.") var bus: String?
}
struct NextKey: MediaKey {
    static let word = "next"
    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.") var bus: String?
}
struct PreviousKey: MediaKey {
    static let word = "previous"
    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.") var bus: String?
}

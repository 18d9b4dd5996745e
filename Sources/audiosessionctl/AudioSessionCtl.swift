import ArgumentParser
import AudioPolicy
import Foundation
import PolicyAgent
import PulseClient

@main
struct AudioSessionCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audiosessionctl",
        abstract: "Show and explain audio sessions, devices and streams on the desktop's sound server.",
        version: Release.version,
        subcommands: [Status.self, Devices.self, Streams.self, Monitor.self, Policies.self, Log.self, Silent.self, Mic.self, Permission.self, NowPlaying.self, Route.self,
                      PlayPauseKey.self, PlayKey.self, PauseKey.self, StopKey.self, NextKey.self, PreviousKey.self])
}

/// Options every command that talks to the server shares.
struct ServerOptions: ParsableArguments {
    @Option(name: .long, help: "Sound server address (unix:/path or tcp:host:port). Default: $PULSE_SERVER, then the user's server.")
    var server: String?

    @Flag(name: .long, help: "Print JSON instead of a table.")
    var json = false

    func connect() async throws -> PulseClient {
        do {
            return try await PulseClient.connect(.init(server: server, applicationName: "audiosessionctl", reconnects: false))
        } catch let error as PulseError {
            throw Failure(error.description)
        }
    }
}

/// A runtime error: printed as one line, exit status 1.
struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension AsyncParsableCommand {
    /// Runs the body; a failure becomes one clear line on stderr and exit status 1.
    func reporting(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let failure as Failure {
            printError("audiosessionctl: \(failure.description)")
            throw ExitCode.failure
        } catch let error as PulseError {
            printError("audiosessionctl: \(error.description)")
            throw ExitCode.failure
        }
    }
}

// The CLI's output. What apps, devices and files control (names, binaries, roles, ids, descriptions,
// paths) is shown through `Escape.forDisplay` in the human outputs and `Escape.inJSON` in the JSON
// ones: a control character can neither break a line nor drive the terminal.

/// Writes one line to stderr, escaped.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((Escape.forDisplay(text) + "\n").utf8))
}

func printJSON<T: Encodable>(_ value: T) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(Escape.inJSON(String(decoding: try encoder.encode(value), as: UTF8.self)))
}

/// Rows as left-aligned columns, each cell escaped before the columns are measured.
func escapedTable(_ header: [String], _ rows: [[String]]) -> [String] {
    let all = ([header] + rows).map { $0.map(Escape.forDisplay) }
    let widths = header.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
    return all.map { row in
        row.enumerated().map { i, cell in
            i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
        }.joined(separator: "  ")
    }
}

/// Prints rows as left-aligned columns.
func printTable(_ header: [String], _ rows: [[String]]) {
    for line in escapedTable(header, rows) { print(line) }
}

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
        subcommands: [Devices.self, Streams.self, Monitor.self, Policies.self, Log.self])
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
            FileHandle.standardError.write(Data("audiosessionctl: \(failure.description)\n".utf8))
            throw ExitCode.failure
        } catch let error as PulseError {
            FileHandle.standardError.write(Data("audiosessionctl: \(error.description)\n".utf8))
            throw ExitCode.failure
        }
    }
}

func printJSON<T: Encodable>(_ value: T) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// Prints rows as left-aligned columns.
func printTable(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
    for row in all {
        let line = row.enumerated().map { i, cell in
            i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
        }.joined(separator: "  ")
        print(line)
    }
}

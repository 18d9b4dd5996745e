import ArgumentParser
import AudioPolicy
import Foundation
import PolicyAgent
import PulseClient

struct Policies: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check policy files, and explain which policy gives each running stream its session.",
        subcommands: [Check.self, Explain.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate policy files: every error with file:line:column. Exit status 1 if any file is bad.")

        @Argument(help: "Directories or files to check. Default: every layer the agent reads.")
        var paths: [String] = []

        func run() async throws {
            var errors: [PolicyFileError] = []
            var good = 0
            let targets = paths.isEmpty ? PolicyFiles.layers(extra: []) : paths
            for path in targets {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                    if !paths.isEmpty { errors.append(PolicyFileError(file: path, line: 1, column: 1, message: "no such file or directory")) }
                    continue
                }
                if isDirectory.boolValue {
                    let (policies, bad) = PolicyFiles.load(layers: [path])
                    good += policies.count
                    errors += bad
                } else {
                    do {
                        let text = try String(contentsOfFile: path, encoding: .utf8)
                        let name = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
                        _ = try PolicyFiles.parse(text, name: name, path: path)
                        good += 1
                    } catch let error as PolicyFileError {
                        errors.append(error)
                    }
                }
            }
            for error in errors { FileHandle.standardError.write(Data("\(error)\n".utf8)) }
            print("\(good) good, \(errors.count) bad")
            if !errors.isEmpty { throw ExitCode.failure }
        }
    }

    struct Explain: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "For each running stream: its app, the session it gets and why (which policy file or role default).")

        @OptionGroup var options: ServerOptions

        @Option(name: .long, help: "A policy directory of the highest precedence (repeatable), as the agent's --policies.")
        var policies: [String] = []

        func run() async throws {
            try await reporting {
                let (loaded, errors) = PolicyFiles.load(layers: PolicyFiles.layers(extra: policies))
                for error in errors { FileHandle.standardError.write(Data("skipped: \(error)\n".utf8)) }
                let client = try await options.connect()
                defer { client.close() }
                let snapshot = client.snapshot
                struct Row: Encodable {
                    var stream: String
                    var application: AppIdentity
                    var category: String
                    var mode: String
                    var options: [String]
                    var why: String
                }
                let rows = (snapshot.streams(.output) + snapshot.streams(.input)).map { stream in
                    let app = snapshot.identity(of: stream)
                    let c = Classifier.classify(app, policies: loaded)
                    return Row(stream: "\(stream.direction == .output ? "playback" : "capture") #\(stream.id)", application: app,
                               category: c.configuration.category.rawValue, mode: c.configuration.mode.rawValue,
                               options: c.configuration.options.names, why: c.explanation)
                }
                if options.json { return try printJSON(rows) }
                if rows.isEmpty { print("no streams"); return }
                for row in rows {
                    let who = [row.application.binary, row.application.appID, row.application.role.map { "role=\($0)" }]
                        .compactMap { $0 }.joined(separator: " ")
                    print("\(row.stream) [\(who)]: \(row.why)")
                }
            }
        }
    }
}

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the route-change log: why sound went where it went.")

    @Argument(help: "The log file (audiosessiond --route-log). Default: $XDG_STATE_HOME/audiosession/routes.jsonl.")
    var file: String?

    @Flag(name: .shortAndLong, help: "Keep printing new entries as they are written.")
    var follow = false

    @Flag(name: .long, help: "Print the JSON lines as they are.")
    var json = false

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        let path = file ?? "\(env["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(env["HOME"] ?? "")/.local/state")/audiosession/routes.jsonl"
        guard let handle = FileHandle(forReadingAtPath: path) else {
            FileHandle.standardError.write(Data("audiosessionctl: cannot read the route-change log \(path)\n".utf8))
            throw ExitCode.failure
        }
        var pending = Data()
        var lineNumber = 0
        func emit(_ data: Data) {
            pending.append(data)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = pending[pending.startIndex..<newline]
                pending = Data(pending[(newline + 1)...])
                lineNumber += 1
                guard !line.isEmpty else { continue }
                // Unbuffered: a pipe sees each entry as it is written.
                if json { FileHandle.standardOutput.write(Data(line + [UInt8(ascii: "\n")])); continue }
                if let entry = try? JSONDecoder().decode(RouteLogEntry.self, from: line) {
                    FileHandle.standardOutput.write(Data((entry.line + "\n").utf8))
                } else {
                    FileHandle.standardError.write(Data("\(path):\(lineNumber): not a route-change entry\n".utf8))
                }
            }
        }
        emit(handle.readDataToEndOfFile())
        while follow {
            try await Task.sleep(for: .milliseconds(200))
            emit(handle.readDataToEndOfFile())
        }
    }
}

import ArgumentParser
import AudioPolicy
import Foundation
import Glibc
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
                var info = stat()
                guard stat(path, &info) == 0 else {
                    // A layer that does not exist is no error (most XDG layers do not); a path given
                    // that does not exist, or any path that cannot be looked at, is.
                    let code = errno
                    if code != ENOENT || !paths.isEmpty {
                        errors.append(PolicyFileError(file: path, line: 1, column: 1,
                                                      message: code == ENOENT ? "no such file or directory" : "cannot read: \(String(cString: strerror(code)))"))
                    }
                    continue
                }
                if info.st_mode & S_IFMT == S_IFDIR {
                    let (policies, bad) = PolicyFiles.load(layers: [path])
                    good += policies.count
                    errors += bad
                } else {
                    do {
                        let file = (path as NSString).lastPathComponent
                        let name = PolicyFiles.policyName(ofFile: file) ?? (file as NSString).deletingPathExtension
                        _ = try PolicyFiles.load(file: path, name: name)
                        good += 1
                    } catch {
                        errors.append(error)
                    }
                }
            }
            for error in errors { printError("\(error)") }
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
                let layers = PolicyFiles.layers(extra: policies)
                let (loaded, errors) = PolicyFiles.load(layers: layers)
                for error in errors { printError("skipped: \(error)") }
                var none: [String: OutputRoutes] = [:]
                let (outputs, outputErrors) = OutputRoutesFile.load(paths: OutputRoutesFile.paths(layers: layers), lastGood: &none)
                for error in outputErrors { printError("not read: \(error)") }
                let client = try await options.connect()
                defer { client.close() }
                let snapshot = client.snapshot
                // The processes that record from a device (not a sink's monitor) and play, both uncorked: the
                // agent takes such an app for a call while it is heard (SPEC.md section 1).
                let running = (snapshot.streams(.output) + snapshot.streams(.input)).filter { !$0.isCorked && !snapshot.isMonitorCapture($0) }
                func processes(_ direction: Direction) -> Set<Int> {
                    Set(running.filter { $0.direction == direction }.compactMap { snapshot.identity(of: $0).processID })
                }
                let inCall = processes(.input).intersection(processes(.output))
                let index = PolicyIndex(loaded)
                let rows = (snapshot.streams(.output) + snapshot.streams(.input)).map { stream in
                    let app = snapshot.identity(of: stream)
                    let c = Classifier.classify(app, index: index)
                    var why = c.explanation
                    // outputs.yaml: its app's list outranks the policy's output:, which outranks its category's.
                    let appName = c.source.policyName ?? app.binary ?? app.name
                    if let list = appName.flatMap({ outputs.apps[$0] }) {
                        why += "; outputs.yaml names its app (\(appName ?? "")): \(list.map(\.description).joined(separator: ", ")) first"
                    } else if c.preferredOutputs.isEmpty, let list = outputs.categories[c.configuration.category] {
                        why += "; outputs.yaml gives its category \(list.map(\.description).joined(separator: ", ")) first"
                    }
                    if c.infersCalls, !c.configuration.isCall, let pid = app.processID, inCall.contains(pid) {
                        why += "; now: process \(pid) records while it plays, a call (playAndRecord/voiceChat) while it is heard"
                    }
                    return ExplainRow(stream: "\(stream.direction == .output ? "playback" : "capture") #\(stream.id)", application: app,
                                      category: c.configuration.category.rawValue, mode: c.configuration.mode.rawValue,
                                      options: c.configuration.options.names, why: why)
                }
                if options.json { return try printJSON(rows) }
                if rows.isEmpty { print("no streams"); return }
                for row in rows { print(row.line) }
            }
        }
    }
}

/// One stream in `audiosessionctl policies explain`.
struct ExplainRow: Encodable {
    var stream: String
    var application: AppIdentity
    var category: String
    var mode: String
    var options: [String]
    var why: String

    /// The human output: `playback #12 [vlc org.VideoLAN.VLC role=video]: policy vlc.yaml ...`, escaped.
    var line: String {
        let who = [application.binary, application.appID, application.role.map { "role=\($0)" }]
            .compactMap { $0 }.joined(separator: " ")
        return Escape.forDisplay("\(stream) [\(who)]: \(why)")
    }
}

import ArgumentParser
import Foundation
import SoundServerTesting

/// `scripts/soak`: the agent through a seeded storm of apps, users, crashes and server restarts, on
/// each server, for as long as asked; prints the seed of any failure (see `Soak`).
@main
struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audiosession-soak",
        abstract: "Runs audiosessiond through a seeded storm of streams, user changes, kill -9 and server restarts.")

    @Option(help: "The seed (default: a new one, printed).")
    var seed: UInt64?

    @Option(help: "Minutes per server.")
    var minutes: Double = 1

    @Option(help: "pulseaudio, pipewire or pipewire-1.4 (repeatable; default: all three).")
    var server: [String] = []

    @Option(help: "The audiosessiond to run.")
    var agent: String

    func run() async throws {
        let kinds = server.isEmpty ? ServerKind.allCases : try server.map {
            guard let kind = ServerKind(rawValue: $0) else { throw ValidationError("unknown server '\($0)' (pulseaudio, pipewire, pipewire-1.4)") }
            return kind
        }
        let policies = NSTemporaryDirectory() + "audiosession-soak-policies-\(getpid())"
        try Soak.writePolicies(to: policies)
        defer { try? FileManager.default.removeItem(atPath: policies) }
        var failed = false
        for kind in kinds {
            let seed = seed ?? UInt64.random(in: 1...UInt64(UInt32.max))
            print("\(kind): seed \(seed), \(minutes) min ...")
            let report = try await Soak(.init(kind: kind, seed: seed, duration: .milliseconds(Int(minutes * 60_000)),
                                              agent: agent, policies: policies)).run()
            print("\(kind): seed \(seed): \(report.summary)")
            if report.problems.isEmpty {
                print("\(kind): seed \(seed): nothing left held, every fresh stream as the user left it")
                if let kept = report.keptLog { print("\(kind): seed \(seed): the agent's log: \(kept)") }
            } else {
                failed = true
                print("\(kind): seed \(seed): FAILED")
                for problem in report.problems { print("  " + problem.replacingOccurrences(of: "\n", with: "\n  ")) }
                print("  the actions: \(report.actions.joined(separator: "; "))")
            }
        }
        if failed { throw ExitCode.failure }
    }
}

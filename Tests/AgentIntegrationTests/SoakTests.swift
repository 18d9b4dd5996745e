import Foundation
import SoundServerTesting
import Testing

/// A short, seeded soak on every server (scripts/soak runs longer ones): apps starting and stopping,
/// calls, a screen reader, a recorder, the user's own changes, `kill -9` of the agent and restarts of
/// the sound server; at the end nothing may be left held and every fresh stream must start as the
/// user left it.
@Suite("soak", .serialized, .timeLimit(.minutes(6)))
struct SoakTests {
    /// About a minute per server, as issue 10 asks. (It once found, on WirePlumber 0.5 under the whole
    /// suite's load, a put-back through streams that WirePlumber did not take at the agent's stop.)
    static let seconds = 60

    @Test("soak, 60 s, seed 1, on every server", arguments: ServerKind.allCases)
    func soak(_ kind: ServerKind) async throws {
        let policies = NSTemporaryDirectory() + "audiosession-soak-test-\(getpid())-\(kind.rawValue)"
        try Soak.writePolicies(to: policies)
        defer { try? FileManager.default.removeItem(atPath: policies) }
        let report = try await Soak(.init(kind: kind, seed: 1, duration: .seconds(Self.seconds),
                                          agent: AgentProcessScenarios.binary, policies: policies)).run()
        #expect(report.actions.count > 20, "the soak did too little: \(report.summary)")
        #expect(report.problems.isEmpty, """
            \(kind), seed 1: \(report.problems.joined(separator: "\\n"))
            the actions: \(report.actions.joined(separator: "; "))
            """)
    }
}

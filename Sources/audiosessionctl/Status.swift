import ArgumentParser
import PolicyAgent
import PulseClient

/// One agent as the server shows it.
struct AgentReport: Encodable {
    var processID: String
    var host: String?
    /// "writable", or "failing: <why>": whether a successor could undo what it holds after a crash.
    var journal: String
}

/// `audiosessionctl status`: is an agent looking after this sound server, and is it healthy? The
/// agent says so through properties of its own client on the server (no D-Bus needed).
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show whether audiosessiond runs on the sound server, and whether its journal can be written.",
        discussion: "Exits 1 if no agent runs, 2 if its journal cannot be written (a crash would leave what it holds held).")

    @OptionGroup var options: ServerOptions

    func run() async throws {
        var journalFailing = false
        var found = false
        try await reporting {
            let client = try await options.connect()
            defer { client.close() }
            let agents = Agent.agentClients(in: client.snapshot)
                .map { AgentReport(processID: $0.properties["application.process.id"] ?? "?",
                                   host: $0.properties["application.process.host"],
                                   journal: $0.properties[ControlTower.journalProperty] ?? "unknown") }
            found = !agents.isEmpty
            journalFailing = agents.contains { $0.journal.hasPrefix("failing") }
            if options.json { return try printJSON(agents) }
            guard found else { return print("audiosessiond: not running on this sound server") }
            for agent in agents {
                print(Escape.forDisplay("audiosessiond: running (process \(agent.processID)\(agent.host.map { " on \($0)" } ?? ""))"))
                print(Escape.forDisplay("  journal: \(agent.journal)"))
            }
        }
        if !found { throw ExitCode.failure }
        if journalFailing { throw ExitCode(2) }
    }
}

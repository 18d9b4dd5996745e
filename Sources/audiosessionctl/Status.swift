import AudioSessionWire
import ArgumentParser
import DBus
import Foundation
import PolicyAgent
import PulseClient

/// One agent as the server shows it.
struct AgentReport: Encodable {
    var processID: String
    var host: String?
    /// "writable", or "failing: <why>": whether a successor could undo what it holds after a crash.
    var journal: String
    /// "served", or "not served: <why>": whether apps reach the agent on the session bus
    /// (`org.audiosession.Agent1` is its own); nil from an agent that does not say.
    var apps: String?
}

/// What `status --json` prints.
struct StatusJSON: Encodable {
    var agents: [AgentReport]
    /// Every session, the route and its last change, from the agent on the session bus (nil when it
    /// cannot be asked there).
    var sessions: StatusReport?
    /// Why the sound server could not be asked (it does not answer), if it could not.
    var server: String?
}

/// `audiosessionctl status`: is an agent looking after this sound server, and is it healthy? The
/// agent says so through properties of its own client on the server (no D-Bus needed). Then every
/// session, its state and since when, what the agent holds on it and why, and the route: asked of the
/// agent on the session bus.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show whether audiosessiond runs on the sound server, its journal, every session and why it is as it is, and the route.",
        discussion: """
            Exits 1 if no agent runs, else 2 if its journal cannot be written (a crash would leave what it holds held), \
            else 3 if apps cannot reach it on the session bus (org.audiosession.Agent1 is not its own: another process has \
            the name, or the agent has no session bus), else 4 if the sound server does not answer (or the agent has \
            lost it) while the agent answers on the session bus.
            """)

    @OptionGroup var options: ServerOptions

    @Option(name: .long, help: "The session bus's address, where the agent tells its sessions. Default: $DBUS_SESSION_BUS_ADDRESS.")
    var bus: String?

    /// The agent's report over the session bus, or why there is none.
    func report() async -> Result<StatusReport, Failure> { await Self.report(bus: bus) }

    /// The report of the agent on the session bus at `bus` (nil: the user's), or why there is none.
    static func report(bus: String?) async -> Result<StatusReport, Failure> {
        let connection: DBusConnection
        do { connection = try DBusConnection.connect(.session, address: bus, name: "audiosessionctl") } catch {
            return .failure(Failure("no session bus (\(error)): the sessions cannot be asked"))
        }
        defer { connection.close() }
        do {
            let json = try await connection.call(Wire.busName, Wire.agentPath, Wire.agentInterface, "Status").first?.string ?? ""
            return .success(try JSONDecoder().decode(StatusReport.self, from: Data(json.utf8)))
        } catch {
            return .failure(Failure("the agent does not answer on the session bus (\(error))"))
        }
    }

    func run() async throws {
        var journalFailing = false
        var appsUnserved = false
        var found = false
        var serverLost = false
        try await reporting {
            let client: PulseClient
            do { client = try await options.connect() } catch let failure as Failure {
                // A stalled server: the agent may still answer on the bus, and say since when it lost it.
                let report = await report()
                if options.json { try printJSON(StatusJSON(agents: [], sessions: try? report.get(), server: failure.description)) }
                guard case .success(let sessions) = report else { throw failure }
                serverLost = true
                if options.json { return }
                print(Escape.forDisplay("sound server: \(failure.description)"))
                print("audiosessiond: answers on the session bus")
                return Self.show(sessions)
            }
            defer { client.close() }
            let agents = Agent.agentClients(in: client.snapshot)
                .map { AgentReport(processID: $0.properties["application.process.id"] ?? "?",
                                   host: $0.properties["application.process.host"],
                                   journal: $0.properties[ControlTower.journalProperty] ?? "unknown",
                                   apps: $0.properties[ControlTower.appsProperty]) }
            found = !agents.isEmpty
            journalFailing = agents.contains { if case .failing? = JournalHealth(words: $0.journal) { true } else { false } }
            appsUnserved = agents.contains { $0.apps.map { AppsReach(words: $0) != .served } ?? false }
            // (No agent among the server's clients may still be an agent that lost this server and is
            // connecting again: the bus is asked all the same.)
            let report = await report()
            serverLost = (try? report.get())?.serverLost != nil
            if options.json { return try printJSON(StatusJSON(agents: agents, sessions: found || serverLost ? try? report.get() : nil)) }
            guard found else {
                guard serverLost, case .success(let sessions) = report else { return print("audiosessiond: not running on this sound server") }
                print("audiosessiond: running, but not on this sound server now: it lost it and is connecting again")
                return Self.show(sessions)
            }
            for agent in agents {
                print(Escape.forDisplay("audiosessiond: running (process \(agent.processID)\(agent.host.map { " on \($0)" } ?? ""))"))
                print(Escape.forDisplay("  journal: \(agent.journal)"))
                if let apps = agent.apps {
                    print(Escape.forDisplay(AppsReach(words: apps) == .served ? "  apps: served on the session bus (org.audiosession.Agent1)"
                                                             : "  apps: cannot reach the agent: \(apps)"))
                }
            }
            switch report {
            case .failure(let why): print(Escape.forDisplay("  sessions: \(why.description)"))
            case .success(let report): Self.show(report)
            }
        }
        if serverLost && !found { throw ExitCode(4) }
        if !found { throw ExitCode.failure }
        if journalFailing { throw ExitCode(2) }
        if appsUnserved { throw ExitCode(3) }
        if serverLost { throw ExitCode(4) }
    }
}

extension Status {
    /// What a session's preferred outputs say, after its route: "(prefers usbAudio, headphones, the
    /// first connected)", and "the built-in speaker too, at once" for `everywhere`.
    static func prefers(_ list: String) -> String {
        let all = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let places = all.filter { $0 != "everywhere" }
        var words = places.isEmpty ? [] : ["prefers \(places.joined(separator: ", ")), the first connected"]
        if places.count != all.count { words.append("the built-in speaker too, at once") }
        return " (" + words.joined(separator: "; ") + ")"
    }

    /// The sessions and the route, for people: one line a session, then what it holds and why.
    static func show(_ report: StatusReport) {
        let now = Date()
        func since(_ seconds: Double?, _ word: String = "since") -> String {
            guard let seconds else { return "" }
            let at = now.addingTimeInterval(-seconds)
            var time = tm()
            var clock = time_t(at.timeIntervalSince1970)
            localtime_r(&clock, &time)
            return String(format: " \(word) %02d:%02d:%02d", time.tm_hour, time.tm_min, time.tm_sec)
        }
        print(report.sessions.isEmpty ? "sessions: none" : "sessions:")
        for line in report.sessions {
            print(Escape.forDisplay("  \(line.session): \(line.state)\(since(line.secondsInState)) - \(line.configuration), \(line.origin) (\(line.source))"))
            if let call = line.inferredCall { print(Escape.forDisplay("    \(call)\(since(line.secondsInCall))")) }
            if !line.holds.isEmpty {
                print(Escape.forDisplay("    holds: \(line.holds.joined(separator: ", "))\(line.why.map { ": \($0)" } ?? "")"))
            } else if let why = line.why {
                print(Escape.forDisplay("    \(why)"))
            }
            if let streams = line.streams, !streams.isEmpty { print(Escape.forDisplay("    streams: \(streams.joined(separator: "; "))")) }
            if let route = line.route {
                print(Escape.forDisplay("    route: \(route)\(line.preferredOutputs.map(Self.prefers) ?? "")"))
            }
        }
        if let lost = report.serverLost {
            print(Escape.forDisplay("sound server: lost\(since(report.secondsServerLost)): \(lost)"))
        }
        print(Escape.forDisplay("route: out \(report.outputs.joined(separator: ", ")); in \(report.inputs.joined(separator: ", "))"))
        if let change = report.lastRouteChange {
            print(Escape.forDisplay("  last change: \(change)\(since(report.secondsSinceRouteChange, "at"))"))
        }
        print(Escape.forDisplay("now playing: \(NowPlaying.words(report))"))
        if report.inputMuted == true { print("microphone: muted for every app") }
        for app in report.inputMutedApps ?? [] { print(Escape.forDisplay("microphone of \(app): muted")) }
        if let choices = report.routeChoices, !choices.isEmpty { print(Escape.forDisplay("route choices: \(choices.joined(separator: "; ")) (with \(report.deviceSet ?? "these devices"))")) }
    }
}

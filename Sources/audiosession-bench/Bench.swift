import AgentTower
import AudioSessionWire
import AudioPolicy
import DBus
import Foundation
import PulseClient
import SoundServerTesting
import TowerTesting
import Synchronization

/// The benchmark of issue 5: how fast and light the agent is, side by side with PulseAudio's own
/// policy modules and a minimal C client (the floor for any external client), in one run on private
/// servers. Prints one table. Run it through `scripts/bench`, which builds everything in release mode.
@main
struct Bench {
    static func main() async throws {
        if CommandLine.arguments.count == 3, CommandLine.arguments[1] == "--declared-caller" {
            return try await declaredCaller(bus: CommandLine.arguments[2])
        }
        var trials = 30
        var idleSeconds = 30
        var meterSeconds = 60
        var storm = 200
        var churnClients = 56
        var churnSeconds = 60
        /// The parts asked for (`--only a,b`): side by side in one run, on the same machine's mood.
        var only: Set<String> = []
        var servers: [ServerKind] = ServerKind.allCases
        /// `--check`: issue 22's targets after the table; exits 1 when one is missed.
        var check = false
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            switch argument {
            case "--trials": trials = Int(arguments.popFirst() ?? "") ?? trials
            case "--idle-seconds": idleSeconds = Int(arguments.popFirst() ?? "") ?? idleSeconds
            case "--storm": storm = Int(arguments.popFirst() ?? "") ?? storm
            case "--quick": trials = 10; idleSeconds = 5; storm = 50; churnSeconds = 10; meterSeconds = 10
            case "--meter-seconds": meterSeconds = Int(arguments.popFirst() ?? "") ?? meterSeconds
            case "--churn-seconds": churnSeconds = Int(arguments.popFirst() ?? "") ?? churnSeconds
            case "--churn-clients": churnClients = Int(arguments.popFirst() ?? "") ?? churnClients
            case "--only": only = Set((arguments.popFirst() ?? "").split(separator: ",").map(String.init))
            case "--agent": _ = arguments.popFirst()  // read by `agentBinary`
            case "--agent-verbose": break  // read by `agentVerbose`
            case "--check": check = true
            case "--agent-option": _ = arguments.popFirst()  // read by `agentOptions`
            case "--core-sessions": _ = arguments.popFirst()  // read by `coreSessions`
            case "--agent-trace": setenv("AUDIOSESSION_PATH_TRACE", "1", 1)  // the agents inherit it; read by `agentLogged`
            case "--server":
                guard let kind = arguments.popFirst().flatMap(ServerKind.init(rawValue:)) else {
                    FileHandle.standardError.write(Data("audiosession-bench: --server takes pulseaudio, pipewire or pipewire-1.4\n".utf8))
                    exit(2)
                }
                servers = [kind]
            default:
                FileHandle.standardError.write(Data("usage: audiosession-bench [--trials N] [--idle-seconds N] [--storm N] [--quick] [--only PART[,PART...]: interruption, declared, ducking, storm, mpris, load, core, tower, idle, voice, meters] [--meter-seconds N] [--churn-seconds N] [--churn-clients N] [--server pulseaudio|pipewire|pipewire-1.4] [--agent PATH] [--agent-verbose] [--agent-trace] [--check] [--core-sessions N[,N...]] [--agent-option OPTIONS]\n".utf8))
                exit(2)
            }
        }
        var table = Table()
        func wanted(_ part: String) -> Bool { only.isEmpty || only.contains(part) }
        for kind in servers where wanted("interruption") {
            if agentLogged { for variant in [Variant.agent, .agentWithoutMeters] { unlink(agentLog(kind.rawValue, variant)) } }
            table.add(contentsOf: try await alternating(Variant.interruption(kind), trials: trials) { variant, trials in
                progress("interruption latency, \(kind), \(variant), \(trials) trials")
                return try await reaction(kind, variant, duck: false, trials: trials)
            })
            if agentLogged { table.add(contentsOf: pathBreakdown(kind, log: agentLog(kind.rawValue, .agent), inputs: "server")) }
        }
        for kind in servers where wanted("declared") {
            table.add(contentsOf: try await declaredCall(kind, trials: trials))
            if agentLogged { table.add(contentsOf: pathBreakdown(kind, log: declaredLog(kind), inputs: "app call")) }
        }
        if wanted("ducking") && servers.contains(.pulseaudio) {
            table.add(contentsOf: try await alternating(Variant.ducking, trials: trials) { variant, trials in
                progress("ducking latency, pulseaudio, \(variant), \(trials) trials")
                return try await reaction(.pulseaudio, variant, duck: true, trials: trials)
            })
        }
        for kind in servers where wanted("storm") {
            progress("event storm, \(kind), \(storm) streams")
            table.add(contentsOf: try await eventStorm(kind, streams: storm))
        }
        for kind in servers where wanted("mpris") {
            progress("MPRIS pause, \(kind), \(trials) calls")
            table.add(contentsOf: try await playerPause(kind, trials: trials))
        }
        for kind in servers where wanted("load") {
            progress("load, \(kind), \(churnClients) clients for \(churnSeconds) s")
            table.add(contentsOf: try await load(kind, clients: churnClients, seconds: churnSeconds))
        }
        if wanted("core") {
            progress("policy core cost")
            table.add(contentsOf: coreCost())
        }
        if wanted("tower") {
            progress("control tower cost, warm, in memory")
            table.add(contentsOf: towerCost())
        }
        for kind in servers where wanted("idle") {
            progress("idle for \(idleSeconds) s, \(kind)")
            table.add(contentsOf: try await idle(kind, seconds: idleSeconds))
        }
        for kind in servers where wanted("voice") {
            progress("a screen reader's voice, \(kind), \(trials) utterances")
            table.add(contentsOf: try await voiceDucking(kind, trials: trials))
        }
        for kind in servers where wanted("meters") {
            for meters in [true, false] {
                progress("10 silent streams of 5 apps, \(kind), \(meterSeconds) s, \(meters ? "metered" : "--no-meters")")
                table.add(contentsOf: try await silentStreams(kind, seconds: meterSeconds, meters: meters))
            }
        }
        print(table.render())
        if check {
            let checks = Targets.check(table.rows)
            print("")
            print(checks.isEmpty ? "--check: no target's rows were measured (interruption, declared, load, meters)" : Targets.render(checks))
            if checks.contains(where: { !$0.holds }) { exit(1) }
        }
    }

    static func progress(_ text: String) {
        FileHandle.standardError.write(Data("bench: \(text)\n".utf8))
    }
}

/// Who reacts to the call (or the ducking voice).
enum Variant: String, CustomStringConvertible {
    case roleCork = "module-role-cork (in the server)"
    case roleDucking = "module-role-ducking (in the server)"
    case floor = "C floor client"
    case agent = "audiosessiond"
    /// The agent as it was before meters (`--no-meters`: every running stream counts): what a call's
    /// path cost before them, measured in the same run.
    case agentWithoutMeters = "audiosessiond --no-meters"

    var description: String { rawValue }
    /// The floor in the declared-call part (`audiosession-floor --bus`).
    static let busFloorName = "C floor client on the bus"

    static func interruption(_ kind: ServerKind) -> [Variant] {
        kind == .pulseaudio ? [.roleCork, .floor, .agent, .agentWithoutMeters] : [.floor, .agent, .agentWithoutMeters]
    }
    /// module-role-ducking lowers with a volume factor that no client can see: it is measured as heard only.
    static let ducking: [Variant] = [.roleDucking, .floor, .agent]
}

/// The built binaries next to this one.
let binDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path

/// The agent measured: `--agent PATH` (scripts/bench passes one linked with the Swift libraries
/// statically, as it would be shipped), else the one next to this binary.
let agentBinary: String = {
    let arguments = CommandLine.arguments
    if let i = arguments.firstIndex(of: "--agent"), i + 1 < arguments.count { return arguments[i + 1] }
    return "\(binDirectory)/audiosessiond"
}()

/// `--agent-option "--run-after-mute 3"`: options added to the measured agents' command line (split at spaces).
let agentOptions: [String] = {
    let arguments = CommandLine.arguments
    guard let i = arguments.firstIndex(of: "--agent-option"), i + 1 < arguments.count else { return [] }
    return arguments[i + 1].split(separator: " ").map(String.init)
}()

/// `--agent-verbose`: the agent logs every decision: the load run's in /tmp/audiosession-load-KIND.log,
/// the other parts' (interruption, ducking, the screen reader's voice) in /tmp/audiosession-agent-KIND.log,
/// appended.
let agentVerbose = CommandLine.arguments.contains("--agent-verbose")
/// `--agent-trace`: the agents stamp their event path (AUDIOSESSION_PATH_TRACE=1, `PathTrace`) without the
/// verbose log; their logs go where `--agent-verbose` puts them, and the stamps are summed up in the table.
let agentLogged = agentVerbose || CommandLine.arguments.contains("--agent-trace")

/// Where `--agent-verbose` puts the log of the agent (one file per server kind and variant).
func agentLog(_ kind: String, _ variant: Variant) -> String {
    "/tmp/audiosession-agent-\(kind)\(variant == .agentWithoutMeters ? "-no-meters" : "").log"
}

/// Where the declared-call part puts its agent's log (`--agent-trace`, `--agent-verbose`).
func declaredLog(_ kind: ServerKind) -> String { "/tmp/audiosession-agent-\(kind.rawValue)-declared.log" }

/// The agent's own stamps of the event path (its `event path` lines at the debug level, `PathTrace`),
/// for the batches that sent a command and begin with `inputs` (server events in the interruption
/// part, an app's call in the declared part): each stage's median and p95, in microseconds.
func pathBreakdown(_ kind: ServerKind, log: String, inputs: String) -> [Row] {
    guard let text = try? String(contentsOfFile: log, encoding: .utf8) else { return [] }
    var stages: [String: [Duration]] = [:]
    var batches = 0
    for entry in text.split(separator: "\n") where entry.hasSuffix("event path") && entry.contains("inputs=\(inputs)") {
        batches += 1
        var stamps: [String: Duration] = [:]
        for field in entry.split(separator: " ") {
            let pair = field.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].hasSuffix("_us"), let micros = Int(pair[1]) else { continue }
            stamps[String(pair[0].dropLast(3))] = .microseconds(micros)
        }
        // (An app's call, the whole: its time on the bus side, then the path from the inbox on.)
        if let bus = stamps["bus"], let path = stamps["to_socket"] { stamps["from_bus"] = bus + path }
        for (stage, time) in stamps { stages[stage, default: []].append(time) }
    }
    let order = [("info", "a server event: the server's word of the stream → its info in hand, pushed"),
                 ("bus", "an app's call: the bus thread took it → pushed into the inbox, through its caller's lane"),
                 ("waited", "pushed → the loop has the batch"), ("decided", "the tower and the core decide"),
                 ("journal", "the journal's writes"), ("queued", "the commands handed to libpulse"),
                 ("socket", "→ the loop's next turn: libpulse has written them"), ("to_socket", "the whole: pushed → on the socket"),
                 ("from_bus", "an app's call, the whole: the bus thread took it → on the socket"),
                 ("told", "after the path: the log lines and the route log")]
    return order.compactMap { stage, words in
        stages[stage].map { Row(measurement: "agent's path, stamped: \(stage.replacingOccurrences(of: "_", with: " "))", server: kind.description,
                                who: agentVerbose ? "audiosessiond --verbose" : "audiosessiond", samples: $0, unit: .microseconds,
                                note: "\(words); \(batches) batches (\(inputs)) that sent a command") }
    }
}

/// Starts the reacting party on the server and returns what stops it.
func startReactor(_ variant: Variant, on server: PrivateServer, observer: PulseClient, duck: Bool) async throws -> () async -> Void {
    switch variant {
    case .roleCork:
        let index = try await observer.loadModule("module-role-cork", arguments: "trigger_roles=phone cork_roles=music")
        return { try? await observer.unloadModule(index) }
    case .roleDucking:
        let index = try await observer.loadModule(
            "module-role-ducking", arguments: "trigger_roles=a11y ducking_roles=music volume=-14dB")
        return { try? await observer.unloadModule(index) }
    case .floor, .agent, .agentWithoutMeters:
        let arguments = variant == .floor
            ? ["\(binDirectory)/audiosession-floor", "--server", server.address] + (duck ? ["--duck"] : [])
            : [agentBinary, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", "\(server.directory)/agent",
               "--keep-server-modules"] + (variant == .agentWithoutMeters ? ["--no-meters"] : []) + agentOptions
                + (agentVerbose && variant != .floor ? ["--verbose"] : [])
        let kind = server.kind.rawValue
        let logFD = agentLogged && variant != .floor ? open(agentLog(kind, variant), O_WRONLY | O_CREAT | O_APPEND, 0o644) : -1
        defer { if logFD >= 0 { close(logFD) } }
        let child = try ChildProcess.spawn(arguments, stderr: logFD >= 0 ? logFD : nil)
        let name = variant == .floor ? "audiosession-floor" : "audiosessiond"
        try await observer.wait(for: "\(name) to connect") { s in s.clients.values.contains { $0.name == name } ? true : nil }
        // Let it read the whole server before the first trial (setup, not measured).
        try await Task.sleep(for: .milliseconds(500))
        return {
            child.signal(SIGTERM)
            _ = await child.wait()
        }
    }
}

/// Every server event the observer sees, with the instant it arrived: taken in libpulse's callback, on
/// the observer's loop thread (a task reading `events()` stamped them when the shared pool got to it,
/// and the pool's delays, not the reacting party's, set the spread of the figures).
final class Recorder: Sendable {
    final class Log: Sendable {
        let entries = Mutex<[(ContinuousClock.Instant, PulseEvent)]>([])
    }
    private let log = Log()

    init(_ observer: PulseClient) {
        observer.forwardEvents { [log] event in
            let now = ContinuousClock.now
            log.entries.withLock { $0.append((now, event)) }
        }
    }

    /// The first instant an event matching the predicate arrived, at or after `since`.
    func first(since: ContinuousClock.Instant, _ predicate: (PulseEvent) -> Bool) -> ContinuousClock.Instant? {
        log.entries.withLock { entries in entries.first { $0.0 >= since && predicate($0.1) }?.0 }
    }

    /// The same, waiting up to `timeout` for such an event (a stream's event the observer's snapshot
    /// already shows is recorded by then: both are fed in the same callback; a client's news may come a
    /// moment after its snapshot shows it, held for a stream's info).
    func first(since: ContinuousClock.Instant, waiting timeout: Duration, _ predicate: (PulseEvent) -> Bool) async -> ContinuousClock.Instant? {
        let deadline = ContinuousClock.now + timeout
        repeat {
            if let hit = first(since: since, predicate) { return hit }
            try? await Task.sleep(for: .milliseconds(1))
        } while ContinuousClock.now < deadline
        return nil
    }
}

/// The music as heard: `audiosession-listen` plays a tone as the music stream and writes, each time
/// the level on the sink's monitor moves, the instant (CLOCK_MONOTONIC) and the peak, to a file read here.
struct Ear {
    let child: ChildProcess
    let path: String
    /// The tone's amplitude (the listener's AMPLITUDE).
    static let level = 0.5

    init(child: ChildProcess, path: String) {
        self.child = child; self.path = path
    }

    init(on server: PrivateServer, sink: String) throws {
        path = "\(server.directory)/heard.txt"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer { close(fd) }
        child = try ChildProcess.spawn(["\(binDirectory)/audiosession-listen", "--server", server.address, "--sink", sink], stdout: fd)
    }

    /// Every level line so far: (instant, peak).
    func lines() -> [(ContinuousClock.Instant, Double)] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let us = Int64(parts[0]), let peak = Double(parts[1]) else { return nil }
            return (MonotonicClock.instant(microseconds: us), peak)
        }
    }

    /// The first instant at or after `since` when the level heard met the condition, waiting up to `timeout`.
    /// (The benchmark reads the listener's file every millisecond: a harness, not a test.)
    func first(since: ContinuousClock.Instant, timeout: Duration = .seconds(2), _ condition: (Double) -> Bool) async -> ContinuousClock.Instant? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let hit = lines().first(where: { $0.0 >= since && condition($0.1) }) { return hit.0 }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return nil
    }

    func stop() async {
        child.signal(SIGTERM)
        _ = await child.wait()
    }
}

/// CLOCK_MONOTONIC (the listener's clock) to ContinuousClock instants.
enum MonotonicClock {
    static let reference: (ContinuousClock.Instant, Int64) = {
        var ts = timespec()
        let now = ContinuousClock.now
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return (now, Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000)
    }()

    static func instant(microseconds: Int64) -> ContinuousClock.Instant {
        reference.0 + .microseconds(microseconds - reference.1)
    }
}

/// Interruption (or ducking) latency: from the moment the observer learns of the call stream to the
/// moment it learns the music stream was muted (or lowered), as the server reports them through the same
/// observer, so every variant pays the same; and from that same moment to the moment the silence (or the
/// lowered level) reaches the sink's monitor, as heard.
func reaction(_ kind: ServerKind, _ variant: Variant, duck: Bool, trials: Int) async throws -> Reaction {
    try await withPrivateServer(kind, devices: [.speaker]) { server in
        let observer = try await server.connect()
        defer { observer.close() }
        let stop = try await startReactor(variant, on: server, observer: observer, duck: duck)
        let ear = try Ear(on: server, sink: "builtin_speaker")
        let earPID = "\(ear.child.pid)"
        let musicIndex = try await observer.wait(for: "the tone") { s in
            s.sinkInputs.values.first { $0.properties["application.process.id"] == earPID && $0.properties["media.role"] == "music" && !$0.isCorked }?.id
        }
        // The tone heard: the sink renders in small blocks from now on (PulseAudio's null sink first
        // renders a long block, before the listener asks for low latency).
        _ = await ear.first(since: .now, timeout: .seconds(10)) { $0 > Ear.level * 0.9 }
        try await Task.sleep(for: .milliseconds(300))
        let recorder = Recorder(observer)
        var reported: [Duration] = []
        var afterLinking: [Duration] = []
        var heard: [Duration] = []
        // module-role-ducking lowers with a factor no client can see: for it only the level heard tells.
        let visible = variant != .roleDucking
        @Sendable func silenced(_ s: AudioStream) -> Bool { duck ? s.volume.overall < Volume.norm : s.isMuted }
        func quiet(_ peak: Double) -> Bool { duck ? peak < Ear.level * 0.9 : peak < Ear.level * 0.05 }
        // Trial 0 warms the fresh server and the party up and is not counted.
        for trial in 0...trials {
            let start = ContinuousClock.now
            // (Silent: what is heard on the monitor is the music alone. A new stream counts from its start,
            // metered or not.)
            let trigger = try ClientStream.start(
                on: server, applicationName: duck ? "Voice" : "Call", properties: ["media.role": duck ? "a11y" : "phone"], sound: .silence)
            let pid = "\(trigger.processID)"
            let reacted: Bool
            if visible {
                reacted = (try? await observer.wait(for: "the reaction", timeout: .seconds(3), { s in
                    s.sinkInputs[musicIndex].flatMap { silenced($0) ? true : nil }
                })) != nil
            } else {
                reacted = await ear.first(since: start, timeout: .seconds(3), quiet) != nil
            }
            let appeared = await recorder.first(since: start, waiting: .seconds(1)) {
                if case .added(.sinkInput(let s)) = $0 { return s.properties["application.process.id"] == pid }
                return false
            }
            if reacted, let appeared, trial > 0 {
                if visible, let reportedAt = await recorder.first(since: start, waiting: .seconds(1), {
                    if case .changed(_, .sinkInput(let s)) = $0 { return s.id == musicIndex && silenced(s) }
                    return false
                }) {
                    reported.append(reportedAt >= appeared ? reportedAt - appeared : .zero)
                    // From the call's stream running on a device (linked: WirePlumber 0.4 links it some
                    // milliseconds after it appears, and a stream that has not started is no call yet).
                    if let linked = await recorder.first(since: start, waiting: .seconds(1), {
                        switch $0 {
                        case .added(.sinkInput(let s)), .changed(_, .sinkInput(let s)):
                            return s.properties["application.process.id"] == pid && !s.isCorked && s.device != nil
                        default: return false
                        }
                    }) {
                        afterLinking.append(reportedAt >= linked ? reportedAt - linked : .zero)
                    }
                }
                if let heardAt = await ear.first(since: start, quiet) {
                    heard.append(heardAt >= appeared ? heardAt - appeared : .zero)
                }
            }
            trigger.stop()
            // The music back, and heard again, before the next trial.
            let back = ContinuousClock.now
            if visible {
                try await observer.wait(for: "the music back", timeout: .seconds(5)) { s in
                    s.sinkInputs[musicIndex].flatMap { silenced($0) ? nil : true }
                }
            }
            _ = await ear.first(since: back, timeout: .seconds(5)) { $0 > Ear.level * 0.97 }
        }
        await ear.stop()
        await stop()
        return Reaction(kind: kind, variant: variant, duck: duck, trials: trials, reported: visible ? reported : nil,
                        afterLinking: visible ? afterLinking : nil, heard: heard)
    }
}

/// The samples of one party's reactions to the trigger.
struct Reaction {
    var kind: ServerKind
    var variant: Variant
    var duck: Bool
    var trials: Int
    /// nil: the reaction is not visible to clients (module-role-ducking), only heard.
    var reported: [Duration]?
    /// From the call's stream running on a device (linked) to the music's change, as reported.
    var afterLinking: [Duration]?
    var heard: [Duration]

    static func + (a: Reaction, b: Reaction) -> Reaction {
        Reaction(kind: a.kind, variant: a.variant, duck: a.duck, trials: a.trials + b.trials,
                 reported: a.reported.map { $0 + (b.reported ?? []) }, afterLinking: a.afterLinking.map { $0 + (b.afterLinking ?? []) },
                 heard: a.heard + b.heard)
    }

    var rows: [Row] {
        let what = duck ? "lowered" : "muted"
        let measurement = duck ? "ducking latency" : "interruption latency"
        var rows: [Row] = []
        if let reported {
            rows.append(Row(measurement: measurement, server: kind.description, who: variant.description, samples: reported,
                            unit: .milliseconds, note: "\(reported.count)/\(trials) trials; call appears → music \(what), as the server reports"))
        }
        if let afterLinking {
            rows.append(Row(measurement: "\(measurement), after linking", server: kind.description, who: variant.description, samples: afterLinking,
                            unit: .milliseconds, note: "\(afterLinking.count)/\(trials) trials; the call's stream runs on a device → music \(what), as the server reports"))
        }
        rows.append(Row(measurement: "\(measurement), as heard", server: kind.description, who: variant.description, samples: heard,
                        unit: .milliseconds, note: "\(heard.count)/\(trials) trials; call appears → the sink's monitor hears the music \(what)"))
        return rows
    }
}

/// The parties measured in turns of at most 10 trials each (floor, agent, floor, agent ...), each turn
/// on a fresh server: this machine's speed drifts from minute to minute, by more than the difference
/// between the parties, and each party's figures then come from the same minutes.
func alternating(_ variants: [Variant], trials: Int, isolation: isolated (any Actor)? = #isolation,
                 _ measure: (Variant, Int) async throws -> Reaction) async throws -> [Row] {
    let merged = try await inTurns(variants, trials: trials, measure, merge: +)
    return variants.flatMap { merged[$0]?.rows ?? [] }
}

/// Each party's samples, measured in turns as `alternating` says, merged per party.
func inTurns<R>(_ variants: [Variant], trials: Int, isolation: isolated (any Actor)? = #isolation,
                _ measure: (Variant, Int) async throws -> R, merge: (R, R) -> R) async throws -> [Variant: R] {
    let turns = max(1, (trials + 9) / 10)
    var merged: [Variant: R] = [:]
    for turn in 0..<turns {
        let count = trials / turns + (turn < trials % turns ? 1 : 0)
        // (The order turns about each turn: a drift within a turn does not always land on the same party.)
        for variant in turn.isMultiple(of: 2) ? variants : variants.reversed() {
            let result = try await measure(variant, count)
            merged[variant] = merged[variant].map { merge($0, result) } ?? result
        }
    }
    return merged
}

/// A declared call (issue 14): from the instant an app's `SetActive(true)` leaves it on the session bus to
/// the music (another app's stream, role music) muted as the server reports it and as heard. The call
/// has no stream: the agent interrupts at activation. Set against the floor of this path (the C floor
/// with `--bus`: it takes the agent's name and mutes the music in the callback that took the call), in
/// alternating turns of at most 10 trials on a fresh server and bus, as the stream path's parties are;
/// and against the stream path above (a call's stream appearing), whose clock starts later: when the
/// server has announced the stream, not when the app asked for it.
func declaredCall(_ kind: ServerKind, trials: Int) async throws -> [Row] {
    unlink(declaredLog(kind))
    let merged = try await inTurns([.floor, .agent], trials: trials, { try await declaredReaction(kind, $0, trials: $1) }, merge: +)
    func rows(_ variant: Variant, who: String) -> [Row] {
        guard let r = merged[variant] else { return [] }
        return [
            Row(measurement: "interruption latency, declared call", server: kind.description, who: who, samples: r.reported, unit: .milliseconds,
                note: "\(r.reported.count)/\(r.trials) trials; SetActive(true) sent on the session bus → music muted, as the server reports"),
            Row(measurement: "interruption latency, declared call, as heard", server: kind.description, who: who, samples: r.heard, unit: .milliseconds,
                note: "\(r.heard.count)/\(r.trials) trials; SetActive(true) sent → the sink's monitor hears the music muted"),
        ]
    }
    let pings = merged[.agent]?.pings ?? []
    return [Row(measurement: "D-Bus round trip to the agent's connection (Peer.Ping)", server: kind.description, who: "bus daemon, sd-bus", samples: pings,
                unit: .milliseconds, note: "\(pings.count)/\(trials); from the declared caller, through the same library: half of it is a call's way to the agent")]
        + rows(.floor, who: Variant.busFloorName) + rows(.agent, who: "audiosessiond")
}

/// One party's samples of the declared call.
struct DeclaredReaction {
    var trials = 0
    var reported: [Duration] = []
    var heard: [Duration] = []
    var pings: [Duration] = []

    static func + (a: DeclaredReaction, b: DeclaredReaction) -> DeclaredReaction {
        DeclaredReaction(trials: a.trials + b.trials, reported: a.reported + b.reported, heard: a.heard + b.heard, pings: a.pings + b.pings)
    }
}

/// One turn of the declared call: `.floor` (the C floor on the bus) or `.agent`, on a fresh server and bus.
func declaredReaction(_ kind: ServerKind, _ variant: Variant, trials: Int) async throws -> DeclaredReaction {
    Bench.progress("interruption latency, \(kind), a declared call (D-Bus), \(variant == .floor ? Variant.busFloorName : "audiosessiond"), \(trials) trials")
    let bus = try await PrivateSessionBus.start()
    defer { bus.stop() }
    return try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
        let observer = try await server.connect()
        defer { observer.close() }
        // (The agent's log, with `--agent-trace` or `--agent-verbose`, where the stamps of its path are read.)
        let logFD = agentLogged && variant == .agent ? open(declaredLog(kind), O_WRONLY | O_CREAT | O_APPEND, 0o644) : -1
        defer { if logFD >= 0 { close(logFD) } }
        let party = variant == .floor
            ? try ChildProcess.spawn(["\(binDirectory)/audiosession-floor", "--server", server.address, "--bus", bus.address])
            : try ChildProcess.spawn([agentBinary, "--system-bus", "none", "--server", server.address,
                                      "--state-dir", "\(server.directory)/agent", "--session-bus", bus.address]
                                         + (agentVerbose ? ["--verbose"] : []),
                                     stderr: logFD >= 0 ? logFD : nil)
        defer { party.signal(SIGTERM) }  // (on a failure; the normal end waits for it below)
        if variant == .floor {
            try await observer.wait(for: "audiosession-floor to connect") { s in s.clients.values.contains { $0.name == "audiosession-floor" } ? true : nil }
        } else {
            try await observer.waitForAgentClient(processID: party.pid)
        }
        // The call is another process (this binary, `--declared-caller`): the ear's tone is a child of
        // this one, and a declared session owns its caller's children's streams.
        let app = try SessionApp(command: [CommandLine.arguments[0], "--declared-caller", bus.address], server: server, bus: bus)
        try await app.wait(for: "ready")
        let ear = try Ear(on: server, sink: "builtin_speaker")
        let earPID = "\(ear.child.pid)"
        let musicIndex = try await observer.wait(for: "the tone") { s in
            s.sinkInputs.values.first { $0.properties["application.process.id"] == earPID && $0.properties["media.role"] == "music" && !$0.isCorked }?.id
        }
        _ = await ear.first(since: .now, timeout: .seconds(10)) { $0 > Ear.level * 0.9 }
        try await Task.sleep(for: .milliseconds(300))
        let recorder = Recorder(observer)
        var result = DeclaredReaction(trials: trials)
        // Trial 0 warms the fresh server, bus and party up and is not counted.
        for trial in 0...trials {
            let before = app.count
            app.send("on")
            let sent = try await app.wait(for: "sent ", after: before)
            try await app.wait(for: "done", after: before)
            let start = MonotonicClock.instant(microseconds: Int64(sent.dropFirst("sent ".count)) ?? 0)
            if trial > 0, let mutedAt = await recorder.first(since: start, waiting: .seconds(3), {
                if case .changed(_, .sinkInput(let s)) = $0 { return s.id == musicIndex && s.isMuted }
                return false
            }) {
                result.reported.append(mutedAt - start)
            }
            if trial > 0, let heardAt = await ear.first(since: start, { $0 < Ear.level * 0.05 }) { result.heard.append(heardAt - start) }
            let off = app.count
            app.send("off")
            try await app.wait(for: "done", after: off)
            let back = ContinuousClock.now
            try await observer.wait(for: "the music back", timeout: .seconds(5)) { s in s.sinkInputs[musicIndex].flatMap { $0.isMuted ? nil : true } }
            _ = await ear.first(since: back, timeout: .seconds(5)) { $0 > Ear.level * 0.97 }
        }
        // The bus's own part: a round trip to the agent's connection through the same library and bus
        // daemon (Peer.Ping, which sd-bus answers on the agent's bus thread, no agent code): half of it
        // is what any D-Bus call takes to reach the agent, before the agent does anything.
        if variant == .agent {
            for _ in 0..<trials {
                let before = app.count
                app.send("ping")
                let line = try await app.wait(for: "ping ", after: before)
                if let us = Int64(line.dropFirst("ping ".count)) { result.pings.append(.microseconds(us)) }
            }
        }
        await ear.stop()
        await app.stop()
        party.signal(SIGTERM)
        _ = await party.wait()
        return result
    }
}

/// `audiosession-bench --declared-caller BUS`: the app of the declared-call benchmark. Declares a call
/// session on the bus; on "on" sends SetActive(true) and, with the answer, prints the CLOCK_MONOTONIC
/// microseconds at which it sent it ("sent N"), then "done"; on "off" deactivates (notifyOthersOnDeactivation); on "ping"
/// prints the microseconds a Peer.Ping to the agent's connection took ("ping N"); "quit" ends.
func declaredCaller(bus address: String) async throws {
    func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    let app = try DBusConnection.connect(.session, address: address, name: "bench-caller")
    let name = Wire.busName
    let owners = app.signals(matching: "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(name)'")
    if try await app.callDaemon("NameHasOwner", [.string(name)]).first?.bool != true {
        for await _ in owners { break }
    }
    let session = try await app.call(name, Wire.agentPath, Wire.agentInterface, "GetSession").first?.string ?? ""
    let interface = Wire.sessionInterface
    _ = try await app.call(name, session, interface, "SetCategory",
                           [.string("playAndRecord"), .string("voiceChat"), .array(elementSignature: "s", [])])
    say("ready")
    while let line = readLine() {
        switch line {
        case "on":
            // (The instant is said once the answer is in: a line said before the call would wake the
            // bench, on a 2-core machine, while the parties measured work.)
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            _ = try await app.call(name, session, interface, "SetActive", [.bool(true), .array(elementSignature: "s", [])])
            say("sent \(Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000)")
        case "off":
            _ = try await app.call(name, session, interface, "SetActive",
                                   [.bool(false), .array(elementSignature: "s", [.string("notifyOthersOnDeactivation")])])
        case "ping":
            let start = ContinuousClock.now
            _ = try await app.call(name, "/", "org.freedesktop.DBus.Peer", "Ping")
            say("ping \(Int64(((ContinuousClock.now - start).seconds * 1e6).rounded()))")
            continue
        default:
            app.close()
            return
        }
        say("done")
    }
    app.close()
}

/// 200 music streams started as fast as a load generator can (audiosession-load), then stopped: each new one interrupts
/// the one before, so all but the last must end up muted; afterwards nothing may stay stuck.
func eventStorm(_ kind: ServerKind, streams count: Int) async throws -> [Row] {
    try await withPrivateServer(kind, devices: [.speaker]) { server in
        let observer = try await server.connect()
        defer { observer.close() }
        let state = "\(server.directory)/agent"
        // The agent's log of the storm, for a look afterwards.
        let logFD = open("/tmp/audiosession-storm-\(kind.rawValue).log", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer { close(logFD) }
        let agent = try ChildProcess.spawn([agentBinary, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", state],
                                           stderr: logFD)
        try await observer.wait(for: "the agent") { s in s.clients.values.contains { $0.name == "audiosessiond" } ? true : nil }
        try await Task.sleep(for: .milliseconds(500))
        let cpuBefore = cpuSeconds(agent.pid)
        var running: [UInt32: ContinuousClock.Instant] = [:]
        var muted: [UInt32: ContinuousClock.Instant] = [:]
        var order: [UInt32] = []
        // When each stream first ran (PulseAudio: at once; PipeWire: once WirePlumber has linked it, which
        // under a storm comes seconds after it appeared and not in the order created), and when each was muted.
        let recorder = Task { [observer] () -> ([UInt32: ContinuousClock.Instant], [UInt32: ContinuousClock.Instant], [UInt32]) in
            var r: [UInt32: ContinuousClock.Instant] = [:]
            var m: [UInt32: ContinuousClock.Instant] = [:]
            var o: [UInt32] = []
            for await event in observer.events() {
                let now = ContinuousClock.now
                switch event {
                case .added(.sinkInput(let s)), .changed(_, .sinkInput(let s)):
                    if r[s.id] == nil && !s.isCorked && s.device != nil { r[s.id] = now; o.append(s.id) }
                    if s.isMuted && m[s.id] == nil { m[s.id] = now }
                default: break
                }
            }
            return (r, m, o)
        }
        // One client with all the streams (the servers take ~64 clients), each stream its own app.
        let load = try ChildProcess.spawn(["\(binDirectory)/audiosession-load", "--streams", "\(count)", "--server", server.address])
        // Settled: every stream there, and of those the server runs, all but one muted. (PipeWire 0.3's
        // mixer takes 128 streams per sink: the others it never links, and they play nothing.)
        // Settled also means quiet: WirePlumber links a storm's streams over seconds, so the state must
        // hold with no more streams starting to run for 2 s.
        @Sendable func runs(_ s: AudioStream) -> Bool { !s.isCorked && s.device != nil }
        @Sendable func decided(_ s: Snapshot) -> Bool {
            s.sinkInputs.count == count && s.sinkInputs.values.filter { runs($0) && !$0.isMuted }.count == 1
                && !s.sinkInputs.values.contains { !runs($0) && $0.isMuted }
        }
        let deadline = ContinuousClock.now + .seconds(60)
        var settled: Bool?
        while ContinuousClock.now < deadline {
            guard (try? await observer.wait(for: "the storm to settle", timeout: deadline - .now) { decided($0) ? true : nil }) != nil
            else { break }
            let before = observer.snapshot.sinkInputs.values.filter(runs).count
            try await Task.sleep(for: .seconds(2))
            let now = observer.snapshot
            if decided(now) && now.sinkInputs.values.filter(runs).count == before { settled = true; break }
        }
        let snapshot = observer.snapshot
        let playing = snapshot.sinkInputs.values.filter(runs)
        let neverRan = snapshot.sinkInputs.count - playing.count
        let unmuted = playing.filter { !$0.isMuted }.count
        let missed = settled == nil ? abs(snapshot.sinkInputs.count - count) + max(0, unmuted - 1) : 0
        load.signal(SIGTERM)
        _ = await load.wait()
        try await observer.wait(for: "the storm to end", timeout: .seconds(60)) { s in s.sinkInputs.isEmpty ? true : nil }
        let cpu = cpuSeconds(agent.pid) - cpuBefore
        recorder.cancel()
        // A fresh music stream after the storm: it must start unmuted at full volume.
        let fresh = try ClientStream.start(on: server, properties: ["media.role": "music"])
        _ = try await observer.wait(for: fresh)
        // Stuck means it stays so: the agent may still be working through the storm's removals.
        let waitStart = ContinuousClock.now
        var freshStream: AudioStream
        do {
            freshStream = try await observer.wait(for: "the fresh stream unmuted at full volume", timeout: .seconds(5)) { s in
                fresh.find(in: s).flatMap { !$0.isMuted && $0.volume.overall == .norm ? $0 : nil }
            }
        } catch {
            Bench.progress("storm: \(error) (after \(ContinuousClock.now - waitStart))")
            freshStream = fresh.find(in: observer.snapshot)!
        }
        (running, muted, order) = await recorder.value
        // Stuck: a fresh music stream after the storm must start unmuted at full volume, and the
        // agent's journal must be empty.
        var stuck = (freshStream.isMuted || freshStream.volume.overall != .norm) ? 1 : 0
        var why: [String] = []
        if stuck > 0 {
            why.append("a fresh stream started \(freshStream.isMuted ? "muted" : "unmuted") at \(freshStream.volume)")
            let inputs = (try? await server.pactl("list", "sink-inputs")) ?? ""
            Bench.progress("stuck: the server says\n\(inputs)")
        }
        agent.signal(SIGTERM)
        _ = await agent.wait()
        let journal = (try? String(contentsOfFile: "\(state)/held.log", encoding: .utf8)) ?? ""
        if !journal.isEmpty { stuck += 1; why.append("the journal kept entries") }
        // Per-event decision latency: stream k runs → stream k-1 (the one it interrupts) is muted.
        var samples: [Duration] = []
        for k in order.indices.dropFirst() {
            if let ranAt = running[order[k]], let mutedAt = muted[order[k - 1]], mutedAt >= ranAt {
                samples.append(mutedAt - ranAt)
            }
        }
        return [
            Row(measurement: "event storm: decision latency", server: kind.description, who: "audiosessiond",
                samples: samples, unit: .milliseconds,
                note: "\(count) streams\(neverRan > 0 ? " (\(neverRan) never run by the server)" : ""); missed \(missed), stuck \(stuck)\(why.isEmpty ? "" : " (\(why.joined(separator: "; ")))"); agent CPU \(String(format: "%.2f", cpu)) s"),
        ]
    }
}

/// Issue 13: a call's stream appearing → the player's PlaybackStatus turning Paused (mpv with Debian's
/// mpv-mpris on a private session bus, the agent paused it through MPRIS), and the call's stream gone →
/// Playing again.
func playerPause(_ kind: ServerKind, trials: Int) async throws -> [Row] {
    let bus = try await PrivateSessionBus.start()
    defer { bus.stop() }
    return try await withPrivateServer(kind, devices: [.speaker]) { server in
        let observer = try await server.connect()
        defer { observer.close() }
        let agent = try ChildProcess.spawn([agentBinary, "--system-bus", "none", "--server", server.address, "--state-dir", "\(server.directory)/agent",
                                            "--session-bus", bus.address])
        try await observer.waitForAgentClient(processID: agent.pid)
        let mpv = try MPVPlayer.start(on: server, bus: bus)
        let connection = try bus.connect()
        defer { connection.close() }
        let remote = PlayerRemote(connection, name: MPVPlayer.busName)
        try await remote.wait(for: "Playing")
        // The agent has seen it once its stream is classified and a moment has passed (the agent's
        // listing of the bus's players is not visible from outside; a first call warms everything up).
        _ = try await observer.wait(for: "mpv's stream") { s in
            s.sinkInputs.values.first { $0.properties["application.process.id"] == "\(mpv.process.pid)" && !$0.isCorked }
        }
        try await Task.sleep(for: .seconds(1))
        let recorder = Recorder(observer)
        var paused: [Duration] = []
        var resumed: [Duration] = []
        for trial in 0...trials {
            let start = ContinuousClock.now
            let call = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
            let pid = "\(call.processID)"
            try await remote.wait(for: "Paused")
            let pausedAt = ContinuousClock.now
            let appeared = await recorder.first(since: start, waiting: .seconds(1)) {
                if case .added(.sinkInput(let s)) = $0 { return s.properties["application.process.id"] == pid }
                return false
            }
            let stopped = ContinuousClock.now
            call.stop()
            try await remote.wait(for: "Playing")
            let playingAt = ContinuousClock.now
            let gone = await recorder.first(since: stopped, waiting: .seconds(1)) {
                if case .removed(.sinkInput(let s)) = $0 { return s.properties["application.process.id"] == pid }
                return false
            }
            guard trial > 0 else { continue }  // (the first warms up)
            if let appeared { paused.append(pausedAt >= appeared ? pausedAt - appeared : .zero) }
            if let gone { resumed.append(playingAt >= gone ? playingAt - gone : .zero) }
        }
        await mpv.stop()
        agent.signal(SIGTERM)
        _ = await agent.wait()
        return [
            Row(measurement: "MPRIS: call stream appeared → player Paused", server: kind.description, who: "audiosessiond",
                samples: paused, unit: .milliseconds, note: "mpv + mpv-mpris on a private session bus, \(paused.count) calls"),
            Row(measurement: "MPRIS: call stream gone → player Playing", server: kind.description, who: "audiosessiond",
                samples: resumed, unit: .milliseconds, note: "includes the agent's grace period after a call ends"),
        ]
    }
}

/// Issue 10, case 5: clients each starting and stopping a music stream in a loop (audiosession-load
/// --churn) while calls come and go, with the user's music playing. The agent's resident memory before,
/// at its peak, and once idle again; how long after the load it goes quiet (its last change to the
/// music); and whether the music is left unmuted at its volume. (56 clients: the servers take ~64, and
/// the agent, the observer, the music and the call are clients too.)
func load(_ kind: ServerKind, clients: Int, seconds: Int) async throws -> [Row] {
    try await withPrivateServer(kind, devices: [.speaker]) { server in
        let observer = try await server.connect()
        defer { observer.close() }
        let logFD = open("/tmp/audiosession-load-\(kind.rawValue).log", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer { close(logFD) }
        let agent = try ChildProcess.spawn([agentBinary, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", "\(server.directory)/agent"]
                                               + (agentVerbose ? ["--verbose"] : []),
                                           stderr: logFD)
        try await observer.waitForAgentClient(processID: agent.pid)
        let music = try ClientStream.start(on: server, applicationName: "Music", properties: ["media.role": "music"])
        _ = try await observer.wait(for: music)
        try await Task.sleep(for: .seconds(1))
        let before = residentKiB(agent.pid)
        let cpuBefore = cpuSeconds(agent.pid)
        // When the agent last changed the music (its mute or volume), seen by the observer.
        let watcher = Task { [observer] () -> ContinuousClock.Instant? in
            var last: ContinuousClock.Instant?
            for await event in observer.events() {
                if case .changed(.sinkInput(let old), .sinkInput(let new)) = event, music.find(in: observer.snapshot)?.id == new.id,
                   old.isMuted != new.isMuted || old.volume != new.volume {
                    last = .now
                }
            }
            return last
        }
        let churn = try ChildProcess.spawn(["\(binDirectory)/audiosession-load", "--churn", "\(clients)", "--seconds", "\(seconds)",
                                            "--server", server.address], stdout: logFD, stderr: logFD)
        var peak = before
        var calls = 0
        let end = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < end {
            let call = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
            calls += 1
            try await Task.sleep(for: .seconds(1))
            peak = max(peak, residentKiB(agent.pid))
            call.stop()
            try await Task.sleep(for: .seconds(1))
            peak = max(peak, residentKiB(agent.pid))
        }
        _ = await churn.wait()
        let loadEnded = ContinuousClock.now
        // How far behind the server itself is: a fresh client's first answer (pipewire-pulse 0.3 took
        // 14 s after this load with no agent at all).
        let serverAnswered = (try? await server.pactl("info")) != nil
        let serverCaughtUp = ContinuousClock.now - loadEnded
        // The sound server itself may give out under the load (pipewire-pulse 0.3 did): then nothing the
        // agent does can be measured, and the row says so. Its log is kept next to the agent's.
        let protocolServer = kind == .pulseaudio ? "pulseaudio" : "pipewire-pulse"
        let serverAlive = (try? String(contentsOfFile: "\(server.directory)/pid.\(protocolServer)", encoding: .utf8))
            .flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            .map { kill($0, 0) == 0 } ?? false
        let serverLog = (try? String(contentsOfFile: "\(server.directory)/\(protocolServer).log", encoding: .utf8)) ?? ""
        // pipewire-pulse 1.4 ran out of file descriptors (20,000) 24 s into this load, with no agent too.
        let outOfFiles = serverLog.contains("Too many open files")
        _ = try? FileManager.default.removeItem(atPath: "/tmp/audiosession-load-\(kind.rawValue)-server.log")
        try? FileManager.default.copyItem(atPath: "\(server.directory)/\(protocolServer).log",
                                          toPath: "/tmp/audiosession-load-\(kind.rawValue)-server.log")
        // Quiet: the music unmuted at full volume and no change for 3 s.
        var restored: Bool
        do {
            _ = try await observer.wait(for: "the music back", timeout: .seconds(30)) { s in
                music.find(in: s).flatMap { !$0.isMuted && $0.volume.overall == .norm ? true : nil }
            }
            try await Task.sleep(for: .seconds(3))
            restored = music.find(in: observer.snapshot).map { !$0.isMuted && $0.volume.overall == .norm } ?? false
        } catch {
            restored = false
        }
        // Music left muted: whether the server serves anyone at all by now (an agent cannot unmute on a
        // server that answers nobody).
        let answersAtEnd = restored ? true : (try? await server.pactl("info")) != nil
        try await Task.sleep(for: .seconds(5))
        let idle = residentKiB(agent.pid)
        let (idleAnonymous, idleFiles) = (residentKiB(agent.pid, field: "RssAnon:"), residentKiB(agent.pid, field: "RssFile:"))
        let cpu = cpuSeconds(agent.pid) - cpuBefore
        watcher.cancel()  // (an AsyncStream's iteration ends when its task is cancelled)
        let lastChange = await watcher.value
        let quietAfter = lastChange.map { $0 > loadEnded ? $0 - loadEnded : .zero } ?? .zero
        agent.signal(SIGTERM)
        _ = await agent.wait()
        music.stop()
        func mb(_ kib: Int) -> String { String(format: "%.1f MB", Double(kib) / 1024) }
        return [
            Row(measurement: "load: resident memory before / peak / idle after", server: kind.description, who: "audiosessiond",
                value: "\(mb(before)) / \(mb(peak)) / \(mb(idle))",
                note: "\(clients) clients starting and stopping music streams for \(seconds) s, \(calls) calls; agent CPU \(String(format: "%.1f", cpu)) s; "
                    + "after: \(mb(idleAnonymous)) its own, \(mb(idleFiles)) pages of the program and its libraries"),
            Row(measurement: "load: last change to the music after the load", server: kind.description, who: "audiosessiond",
                value: String(format: "%.0f ms", quietAfter.seconds * 1000),
                note: serverAlive
                    ? "music \(restored ? "unmuted at its volume" : "LEFT MUTED OR LOWERED") once the clients are gone; "
                        + (answersAtEnd ? "" : "at the end the server served no fresh client (pactl failed); ")
                        + (serverAnswered
                            ? String(format: "the server answered a fresh client %.0f ms after the load", serverCaughtUp.seconds * 1000)
                            : String(format: "the server did NOT serve a fresh client (pactl failed %.0f ms after the load)", serverCaughtUp.seconds * 1000))
                        + (outOfFiles ? "; \(protocolServer) ran out of file descriptors under the load" : "")
                    : "NOT MEASURED: \(protocolServer) itself died under the load (its log: /tmp/audiosession-load-\(kind.rawValue)-server.log)"),
        ]
    }
}

/// Time per event in the policy core with 10 ... 10,000 sessions (no server: the pure core).
/// The control tower's own cost (with the core inside it), warm, on an in-memory server: a call's stream
/// appearing beside music (its first event: classified, a new session declared, the music interrupted)
/// and going, each timed from the server's events handed to the tower to its effects returned. The
/// agent's stamps of the same step on a real server (`--agent-trace`) show what the cold path costs.
func towerCost() -> [Row] {
    // Music playing, and a session bus, as the live agent has (a session's players are looked for at each pause).
    func musicPlaying() -> TowerWorld {
        var world = TowerWorld(.pulseAudio)
        _ = world.server.play(["media.role": "music"], name: "Music", pid: 100, binary: "music")
        world.deliver()
        world.run([.players(.busConnected(address: "unix:path=/bench"))])
        return world
    }
    func mutes(_ effects: [TowerEffect]) -> Bool { effects.contains { if case .send(_, .setStreamMute(_, true)) = $0 { true } else { false } } }
    var world = musicPlaying()
    let clock = ContinuousClock()
    var appear: [Duration] = []
    var coldAppear: [Duration] = []
    var gone: [Duration] = []
    // Every other call comes with the caches cold: as on a real desktop, where the agent waits idle between
    // events and other programs fill the caches (the live agent's stamps show ~3x the warm cost).
    var evictor = [UInt8](repeating: 0, count: 32 << 20)
    var evicted = 0  // (read back, so that the writes are not optimized away)
    func emptyCaches(_ i: Int) {
        evictor.withUnsafeMutableBytes { bytes in for at in stride(from: 0, to: bytes.count, by: 64) { bytes[at] &+= 1 } }
        evicted &+= Int(evictor[i % evictor.count])
    }
    for i in 0..<2_000 {
        world.now += .seconds(2)
        let call = world.server.play(["media.role": "phone"], name: "Call", pid: 10_000 + i, binary: "call")
        var inputs = world.server.takeEvents().map(TowerInput.server)
        let cold = i % 2 == 1
        if cold { emptyCaches(i) }
        var start = clock.now
        var effects = world.tower.handle(inputs, at: world.now)
        if cold { coldAppear.append(clock.now - start) } else { appear.append(clock.now - start) }
        precondition(mutes(effects), "the call muted nothing")
        world.carryOut(effects)
        world.now += .seconds(2)
        world.server.stop(call)
        inputs = world.server.takeEvents().map(TowerInput.server)
        start = clock.now
        effects = world.tower.handle(inputs, at: world.now)
        gone.append(clock.now - start)
        world.carryOut(effects)
        // Past the grace period: the music back.
        world.now += .seconds(5)
        world.run([.tick])
    }
    // The mutes a call's stream brings, decided ahead of its batch's run (`ControlTower.reflex`): what the
    // live agent puts on the socket before the run, so what a call waits on.
    var reflexWorld = musicPlaying()
    var reflex: [Duration] = []
    var coldReflex: [Duration] = []
    for i in 0..<2_000 {
        reflexWorld.now += .seconds(2)
        let call = reflexWorld.server.play(["media.role": "phone"], name: "Call", pid: 10_000 + i, binary: "call")
        let inputs = reflexWorld.server.takeEvents().map(TowerInput.server)
        let cold = i % 2 == 1
        if cold { emptyCaches(i) }
        let start = clock.now
        let ahead = reflexWorld.tower.reflex(inputs, at: reflexWorld.now)
        if cold { coldReflex.append(clock.now - start) } else { reflex.append(clock.now - start) }
        precondition(mutes(ahead), "the reflex muted nothing")
        reflexWorld.carryOut(ahead + reflexWorld.tower.handle(inputs, at: reflexWorld.now))
        reflexWorld.now += .seconds(2)
        reflexWorld.server.stop(call)
        reflexWorld.carryOut(reflexWorld.tower.handle(reflexWorld.server.takeEvents().map(TowerInput.server), at: reflexWorld.now))
        reflexWorld.now += .seconds(5)
        reflexWorld.run([.tick])
    }
    // A declared call: an app's SetActive(true) as a voice call beside the music → its effects (the reply,
    // the music interrupted), then SetActive(false) between the trials. Timed twice: its whole run alone;
    // and its mutes decided ahead of the run (`ControlTower.reflex`), what the live agent puts on the socket
    // first, the run after it not timed.
    let app = AppClient(busName: ":1.900", processID: 900, name: "softphone")
    guard case .session(let path)? = world.app(app, .getSession) else { preconditionFailure("no session declared") }
    _ = world.app(app, .setCategory(session: path, category: "playAndRecord", mode: "voiceChat", options: []))
    func declaredCalls(ahead: Bool) -> [Duration] {
        var samples: [Duration] = []
        for token in 0..<2_000 {
            world.now += .seconds(10)
            world.run([.tick])
            let input = TowerInput.app(.call(token: UInt64(token) + (ahead ? 2_000_000 : 1_000_000), from: app,
                                             .setActive(session: path, active: true, options: [])))
            let start = clock.now
            let effects = ahead ? world.tower.reflex([input], at: world.now) : world.tower.handle([input], at: world.now)
            samples.append(clock.now - start)
            precondition(mutes(effects), ahead ? "the declared call's reflex muted nothing" : "the declared call muted nothing")
            world.carryOut(ahead ? effects + world.tower.handle([input], at: world.now) : effects)
            world.now += .seconds(2)
            _ = world.app(app, .setActive(session: path, active: false, options: []))
        }
        return samples
    }
    let declared = declaredCalls(ahead: false)
    let declaredReflex = declaredCalls(ahead: true)
    return [
        Row(measurement: "tower: a declared call's SetActive(true) → the mutes decided ahead (reflex)", server: "in memory", who: "ControlTower (core inside)",
            samples: declaredReflex, unit: .microseconds, note: "\(declaredReflex.count) calls beside music, warm: what the live agent sends before the run"),
        Row(measurement: "tower: a declared call's SetActive(true) → its effects", server: "in memory", who: "ControlTower (core inside)", samples: declared,
            unit: .microseconds, note: "\(declared.count) calls beside music, warm: the reply, the music interrupted"),
        Row(measurement: "tower: a call's stream appears → its effects", server: "in memory", who: "ControlTower (core inside)", samples: appear,
            unit: .microseconds, note: "\(appear.count) calls beside music, warm: classified, declared, the music interrupted"),
        Row(measurement: "tower: a call's stream appears → its effects, caches cold", server: "in memory", who: "ControlTower (core inside)", samples: coldAppear,
            unit: .microseconds, note: "\(coldAppear.count) calls, each after 32 MB written elsewhere (caches of up to 32 MB emptied, as after idling; \(evicted % 10) read back)"),
        Row(measurement: "tower: a call's stream appears → the mutes decided ahead (reflex)", server: "in memory", who: "ControlTower (core inside)",
            samples: reflex, unit: .microseconds, note: "\(reflex.count) calls beside music, warm: what the live agent sends before the batch's run"),
        Row(measurement: "tower: the same reflex, caches cold", server: "in memory", who: "ControlTower (core inside)", samples: coldReflex,
            unit: .microseconds, note: "\(coldReflex.count) calls, each after 32 MB written elsewhere"),
        Row(measurement: "tower: the call's stream goes → its effects", server: "in memory", who: "ControlTower (core inside)", samples: gone,
            unit: .microseconds, note: "the session ends (the music's grace period starts)"),
    ]
}

/// The session counts of the core's part (`--core-sessions 10,100`).
let coreSessions: [Int] = {
    let arguments = CommandLine.arguments
    guard let i = arguments.firstIndex(of: "--core-sessions"), i + 1 < arguments.count else { return [10, 100, 1_000, 10_000] }
    return arguments[i + 1].split(separator: ",").compactMap { Int($0) }
}()

func coreCost() -> [Row] {
    var rows: [Row] = []
    var previous: Double?
    for sessions in coreSessions {
        var machine = PolicyMachine()
        var t = Duration.zero
        _ = machine.handle(.portAppeared(Port(PortDescription(type: .builtInSpeaker, name: "speaker", uid: "speaker"), direction: .output)), at: t)
        for i in 0..<sessions {
            let id = SessionID("app\(i)")
            _ = machine.handle(.declare(SessionDeclaration(id, app: "\(i)", origin: .inferred,
                                                           configuration: SessionConfiguration(.playback, options: .mixWithOthers))), at: t)
            _ = machine.handle(.streamAppeared(StreamKey(.output, UInt32(i)), session: id, running: true, device: "speaker"), at: t)
        }
        let events = max(20, 200_000 / sessions)
        let clock = ContinuousClock()
        var samples: [Duration] = []
        for e in 0..<events {
            t += .milliseconds(1)
            let event: PolicyEvent =
                switch e % 4 {
                case 0: .declare(SessionDeclaration(SessionID("call"), app: "call", origin: .declared,
                                                    configuration: SessionConfiguration(.playAndRecord, mode: .voiceChat)))
                case 1: .activate(SessionID("call"))
                case 2: .deactivate(SessionID("call"), .notifyOthersOnDeactivation)
                default: .streamRunning(StreamKey(.output, UInt32(e % sessions)), e % 8 != 3)
                }
            let start = clock.now
            _ = machine.handle(event, at: t)
            samples.append(clock.now - start)
        }
        let median = Row.percentile(samples, 0.5)
        let perSession = median.seconds / Double(sessions)
        let growth = previous.map { String(format: "%.1fx the time for 10x the sessions", median.seconds / $0) } ?? ""
        previous = median.seconds
        rows.append(Row(measurement: "policy core: time per event", server: "-", who: "\(sessions) sessions", samples: samples,
                        unit: .microseconds, note: "\(String(format: "%.3f", perSession * 1e9)) ns per session; \(growth)"))
    }
    return rows
}

/// The agent doing nothing: CPU time over the interval (no polling: the target is zero) and memory.
func idle(_ kind: ServerKind, seconds: Int) async throws -> [Row] {
    try await withPrivateServer(kind) { server in
        let observer = try await server.connect()
        defer { observer.close() }
        let agent = try ChildProcess.spawn([agentBinary, "--session-bus", "none", "--system-bus", "none", "--server", server.address,
                                            "--state-dir", "\(server.directory)/agent"])
        try await observer.wait(for: "the agent") { s in s.clients.values.contains { $0.name == "audiosessiond" } ? true : nil }
        observer.close()
        try await Task.sleep(for: .seconds(1))
        let before = cpuSeconds(agent.pid)
        try await Task.sleep(for: .seconds(seconds))
        let cpu = cpuSeconds(agent.pid) - before
        let rss = residentKiB(agent.pid)
        let anonymous = residentKiB(agent.pid, field: "RssAnon:")
        let files = residentKiB(agent.pid, field: "RssFile:")
        agent.signal(SIGTERM)
        _ = await agent.wait()
        return [
            Row(measurement: "idle CPU over \(seconds) s", server: kind.description, who: "audiosessiond", value: String(format: "%.2f s", cpu),
                note: "target 0.00 s"),
            Row(measurement: "resident memory", server: kind.description, who: "audiosessiond", value: String(format: "%.1f MB", Double(rss) / 1024),
                note: "target under 20 MB; 7 devices, no streams; of which \(String(format: "%.1f", Double(files) / 1024)) MB are pages of the program and its libraries (shared, clean)"),
            Row(measurement: "private memory", server: kind.description, who: "audiosessiond", value: String(format: "%.1f MB", Double(anonymous) / 1024),
                note: "the agent's own memory (anonymous resident pages)"),
        ]
    }
}

func cpuSeconds(_ pid: pid_t) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the command name.
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func residentKiB(_ pid: pid_t, field: String = "VmRSS:") -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix(field) } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
}

// MARK: activity from sound (issue 19)

/// A screen reader's voice as speech-dispatcher plays it: a stream open from the start writing silence
/// (`audiosession-listen --voice`), which speaks from time to time. Ducking onset: from the voice's first
/// audible block (heard on its own stream, in 1 ms blocks) to the music lowered on the sink's monitor;
/// restore: from the voice's first silent block to the music back at its level (the target is the grace
/// period, 500 ms, plus the ramp up, 500 ms). Between utterances, the open silent voice ducks nothing.
func voiceDucking(_ kind: ServerKind, trials: Int) async throws -> [Row] {
    try await withPrivateServer(kind, devices: [.speaker]) { server in
        let observer = try await server.connect()
        defer { observer.close() }
        let stop = try await startReactor(.agent, on: server, observer: observer, duck: true)
        // The music and its ear, and the voice: two apps (an app's own voice ducks nothing of its own).
        let ear = try Ear(on: server, sink: "builtin_speaker")
        let path = "\(server.directory)/voice.txt"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let listener = try ChildProcess.spawn(["\(binDirectory)/audiosession-listen", "--server", server.address, "--sink", "builtin_speaker", "--voice-only"],
                                              stdout: fd)
        close(fd)
        defer { listener.signal(SIGTERM) }
        func voiceLines() -> [(ContinuousClock.Instant, Bool)] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
            return text.split(separator: "\n").compactMap { line in
                let parts = line.split(separator: " ")
                guard parts.count == 3, parts[0] == "voice", let us = Int64(parts[1]) else { return nil }
                return (MonotonicClock.instant(microseconds: us), parts[2] == "1")
            }
        }
        func voice(_ audible: Bool, since: ContinuousClock.Instant, timeout: Duration = .seconds(5)) async -> ContinuousClock.Instant? {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let hit = voiceLines().first(where: { $0.0 >= since && $0.1 == audible }) { return hit.0 }
                try? await Task.sleep(for: .milliseconds(1))
            }
            return nil
        }
        let pid = "\(listener.pid)"
        let voiceIndex = try await observer.wait(for: "the voice") { s in
            s.sinkInputs.values.first { $0.properties["application.process.id"] == pid && $0.properties["media.role"] == "a11y" }?.id
        }
        // The voice metered, and its first silent block taken: the music at its level for a second.
        try await observer.wait(for: "the voice metered", timeout: .seconds(10)) { s in
            s.sourceOutputs.values.contains { $0.properties[PulseClient.probeProperty] == PulseClient.meterPropertyValue } ? true : nil
        }
        var steadySince = ContinuousClock.now
        while ContinuousClock.now - steadySince < .seconds(1.5) {
            if ear.lines().last.map({ $0.1 < Ear.level * 0.97 }) ?? true { steadySince = .now }
            try await Task.sleep(for: .milliseconds(20))
        }
        @Sendable func music(_ s: Snapshot) -> AudioStream? { s.sinkInputs.values.first { $0.properties["media.role"] == "music" } }
        @Sendable func loudest(_ stream: AudioStream) -> Double { stream.volume.values.map(\.fraction).max() ?? 0 }
        var onsets: [Duration] = []
        var restores: [Duration] = []
        var unduckStarts: [Duration] = [], unduckEnds: [Duration] = []
        for trial in 0...trials {
            let start = ContinuousClock.now
            listener.signal(SIGUSR1)
            guard let spoke = await voice(true, since: start),
                  let lowered = await ear.first(since: spoke, timeout: .seconds(3), { $0 < Ear.level * 0.9 }) else {
                Bench.progress("utterance \(trial): the voice or the duck not heard\n" + ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").suffix(600))
                listener.signal(SIGUSR2)
                continue
            }
            try await Task.sleep(for: .milliseconds(300))
            let end = ContinuousClock.now
            listener.signal(SIGUSR2)
            guard let quiet = await voice(false, since: end) else {
                Bench.progress("utterance \(trial): the voice's end not heard\n" + ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").suffix(600))
                continue
            }
            // The agent's part, as the server reports it: the music's volume starts up (the grace
            // period over), then is back at its level (the ramp over). (Read every millisecond, as the
            // ear's file is: a harness, not a test.)
            let ducked = music(observer.snapshot).map(loudest) ?? 0
            var rising: ContinuousClock.Instant?
            var level: ContinuousClock.Instant?
            while ContinuousClock.now < quiet + .seconds(5), level == nil {
                let volume = music(observer.snapshot).map(loudest) ?? 0
                if rising == nil && volume > ducked + 0.001 { rising = .now }
                if volume >= 0.999 { level = .now }
                try await Task.sleep(for: .milliseconds(1))
            }
            guard let back = await ear.first(since: quiet, timeout: .seconds(5), { $0 >= Ear.level * 0.97 }) else {
                Bench.progress("utterance \(trial): the voice's end or the music's return not heard\n" + ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").suffix(600))
                continue
            }
            if trial > 0 {
                onsets.append(lowered >= spoke ? lowered - spoke : .zero)
                restores.append(back - quiet)
                if let rising { unduckStarts.append(rising - quiet) }
                if let level { unduckEnds.append(level - quiet) }
            }
            // Nothing left under way before the next utterance.
            try await Task.sleep(for: .milliseconds(300))
        }
        _ = voiceIndex
        // Between utterances: the voice open and silent for 3 s, the music as heard, and its volume as
        // the server reports it (a dip heard on the monitor with the volume untouched is the server's
        // glitch, not a duck: seen once in five runs on PipeWire 1.4, one block, the agent's log quiet).
        let idleFrom = ContinuousClock.now + .seconds(1)
        try await Task.sleep(for: .seconds(1))
        var lowered = 0
        var wasLowered = false
        var musicSeen = false
        while ContinuousClock.now < idleFrom + .seconds(3) {
            let playing = music(observer.snapshot)
            musicSeen = musicSeen || playing != nil
            let isLowered = playing.map { $0.volume.values.contains { $0.fraction < 0.9 } || $0.isMuted } ?? false
            if isLowered && !wasLowered { lowered += 1 }
            wasLowered = isLowered
            try await Task.sleep(for: .milliseconds(5))
        }
        let idleDucks = ear.lines().filter { $0.0 >= idleFrom && $0.1 < Ear.level * 0.9 }.count
        await ear.stop()
        await stop()
        return [
            Row(measurement: "ducking onset, as heard", server: kind.description, who: "audiosessiond", samples: onsets, unit: .milliseconds,
                note: "\(onsets.count)/\(trials) utterances; the open voice's first audible block → the sink's monitor hears the music lowered (target ≤ 100 ms)"),
            Row(measurement: "ducking restore, as heard", server: kind.description, who: "audiosessiond", samples: restores, unit: .milliseconds,
                note: "\(restores.count)/\(trials); the voice's first silent block → the music back at its level (target: grace 500 ms + ramp 500 ms)"),
            Row(measurement: "ducking restore, server report: start", server: kind.description, who: "audiosessiond", samples: unduckStarts, unit: .milliseconds,
                note: "\(unduckStarts.count)/\(trials); the voice's first silent block → the server reports the music's volume going up (the meter's silence, then the grace period: 500 ms)"),
            Row(measurement: "ducking restore, server report: end", server: kind.description, who: "audiosessiond", samples: unduckEnds, unit: .milliseconds,
                note: "\(unduckEnds.count)/\(trials); the voice's first silent block → the server reports the music back at its level (then the ramp: 500 ms)"),
            Row(measurement: "open silent voice: music lowered", server: kind.description, who: "audiosessiond", value: musicSeen ? "\(lowered) times" : "no music stream",
                note: "the music's volume lowered (as the server reports it) in 3 s between utterances, the voice open and silent (target 0)"),
            Row(measurement: "open silent voice: blocks heard low", server: kind.description, who: "audiosessiond", value: "\(idleDucks) blocks",
                note: "the sink's monitor hears the music below 90 % in those 3 s (a duck, or the server's own glitch when the row above says 0)"),
        ]
    }
}

/// CPU while nothing is heard: 10 streams of 5 apps open and silent (a screen reader's voices and
/// games in menus: duckers and players, so every one of them is metered), for `seconds`. The agent's
/// CPU and the server's (every process of it), with meters and, in the same run, with `--no-meters`.
func silentStreams(_ kind: ServerKind, seconds: Int, meters: Bool) async throws -> [Row] {
    try await withPrivateServer(kind, devices: [.speaker]) { server in
        let observer = try await server.connect()
        defer { observer.close() }
        let agent = try ChildProcess.spawn([agentBinary, "--session-bus", "none", "--system-bus", "none", "--server", server.address,
                                            "--state-dir", "\(server.directory)/agent"] + (meters ? [] : ["--no-meters"]))
        defer { agent.signal(SIGKILL) }
        try await observer.wait(for: "the agent") { s in s.clients.values.contains { $0.name == "audiosessiond" } ? true : nil }
        var streams: [ClientStream] = []
        for app in 0..<5 {
            for role in ["a11y", "music"] {
                streams.append(try ClientStream.start(on: server, applicationName: "Silent \(app)",
                                                      properties: ["media.role": role, "application.process.id": "\(70000 + app)"], sound: .silence))
            }
        }
        for stream in streams { _ = try await observer.wait(for: stream) }
        if meters {
            // (Five silent players started at once interrupt one another until their meters say they
            // are silent, one after another: on PipeWire 0.3 that has taken more than 10 s.)
            try await observer.wait(for: "10 meters", timeout: .seconds(30)) { s in
                s.sourceOutputs.values.filter { $0.properties[PulseClient.probeProperty] == PulseClient.meterPropertyValue }.count == 10 ? true : nil
            }
        }
        // Past every meter's first block and the grace period after it.
        try await Task.sleep(for: .seconds(5))
        let servers = server.processIDs()
        let agentBefore = cpuSeconds(agent.pid)
        let serverBefore = servers.map(cpuSeconds).reduce(0, +)
        try await Task.sleep(for: .seconds(seconds))
        let agentCPU = cpuSeconds(agent.pid) - agentBefore
        let serverCPU = servers.map(cpuSeconds).reduce(0, +) - serverBefore
        for stream in streams { stream.stop() }
        agent.signal(SIGTERM)
        _ = await agent.wait()
        let who = meters ? "audiosessiond" : "audiosessiond --no-meters"
        let percent = { (cpu: Double) in String(format: "%.2f %% (%.2f s)", cpu / Double(seconds) * 100, cpu) }
        return [
            Row(measurement: "10 silent streams, 5 apps: agent CPU over \(seconds) s", server: kind.description, who: who,
                value: percent(agentCPU), note: meters ? "of one core; 10 meters at 25 blocks/s (target ≤ 0.5 %)" : "of one core; nothing metered"),
            Row(measurement: "10 silent streams, 5 apps: server CPU over \(seconds) s", server: kind.description, who: who,
                value: percent(serverCPU), note: "\(kind == .pulseaudio ? "pulseaudio" : "pipewire, wireplumber, pipewire-pulse"); the meters' cost is the difference between the two rows"),
        ]
    }
}

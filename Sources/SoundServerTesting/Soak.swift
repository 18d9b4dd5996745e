import Foundation
public import PulseClient

/// A seeded, reproducible storm of what users and apps do, on a private server with the real agent
/// (SPEC.md 5.11, 5.12): players, videos and games start and stop; calls, a screen reader and a
/// recorder come and go; the user changes volumes and mutes by hand; the agent is killed with
/// `kill -9` and started again (at once, as systemd would); the sound server restarts. At the end,
/// with every call, reader and recorder gone:
///
/// - every player is as the user left it: at the volume and mute the user gave it by hand, or, if the
///   user never touched it, at a volume the user chose for a stream of its role (or 100 %) and muted
///   only if the user muted such a stream;
/// - with the agent stopped, a fresh stream of every role starts at a volume the user chose for its
///   role (or 100 %), muted only if the user muted a stream of that role.
///
/// The user's volumes (30, 50, 70, 100 %) are never a ducked one (they are 58.5 % of those), so any
/// volume of ours left behind, compounded or not, and any mute of ours, is seen. (Which of the user's
/// values a server remembers depends on how it saves a stream's volume and mute, together or apart:
/// the soak does not model that, only that nothing of ours remains.)
///
/// The sequence of actions is the seed's; how the servers interleave them is theirs, so a failure
/// names the seed and the actions that led to it.
public struct Soak: Sendable {
    public struct Configuration: Sendable {
        public var kind: ServerKind
        public var seed: UInt64
        public var duration: Duration
        public var agent: String
        public var policies: String
        public init(kind: ServerKind, seed: UInt64, duration: Duration, agent: String, policies: String) {
            self.kind = kind; self.seed = seed; self.duration = duration; self.agent = agent; self.policies = policies
        }
    }

    /// What went wrong, in words (empty: nothing), and what was done.
    public struct Report: Sendable {
        public var problems: [String] = []
        public var actions: [String] = []
        public var counts: [String: Int] = [:]
        /// Where the agent's log was kept (AUDIOSESSION_SOAK_KEEP_LOG, or a problem).
        public var keptLog: String?
        public var summary: String {
            "\(actions.count) actions (" + counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ") + ")"
        }
    }

    /// The policy files the soak's apps need, by file name: the recorder records; every player but
    /// Player A mixes (two players that do not mix interrupt each other, which is the policy, not a
    /// hold left behind: the end's check would not know which one to expect playing).
    public static let policies = [
        "recorder": "match:\n  app-id: [org.example.Recorder]\ncategory: record\n",
        "player-b": "match:\n  name: [Player B]\ncategory: playback\noptions: [mixWithOthers]\n",
        "movie": "match:\n  name: [Movie]\ncategory: playback\noptions: [mixWithOthers]\n",
        // (On every output: the agent's sink for the USB headset and the speaker, made and removed as
        // the headset comes and goes, the agent is killed and restarted.)
        "alarm": "match:\n  name: [Alarm]\ncategory: ambient\noutput: [everywhere]\n",
    ]

    /// Writes the soak's policy files into a folder (for the agent's --policies).
    public static func writePolicies(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (name, text) in policies { try text.write(toFile: "\(directory)/\(name).yaml", atomically: true, encoding: .utf8) }
    }

    let configuration: Configuration
    public init(_ configuration: Configuration) { self.configuration = configuration }

    /// One kind of app the storm starts (the in-memory soak of the control tower starts the same).
    public struct App: Sendable {
        public var name: String
        public var properties: [String: String]
        public var direction: Direction = .output
        /// Calls, the reader and the recorder: what makes the agent hold others.
        public var isCause: Bool
        public var role: String { properties["media.role"] ?? "none" }
    }

    public static let apps: [App] = [
        App(name: "Player A", properties: ["media.role": "music"], isCause: false),
        App(name: "Player B", properties: ["media.role": "music"], isCause: false),
        App(name: "Movie", properties: ["media.role": "video"], isCause: false),
        App(name: "Game", properties: ["media.role": "game"], isCause: false),
        App(name: "Alarm", properties: ["media.role": "alarm"], isCause: false),
        App(name: "Call", properties: ["media.role": "phone"], isCause: true),
        App(name: "Reader", properties: ["media.role": "a11y"], isCause: true),
        App(name: "Recorder", properties: ["application.id": "org.example.Recorder"], direction: .input, isCause: true),
    ]

    /// What the user left on one stream, where the user touched it.
    public struct Left: Equatable, Sendable, CustomStringConvertible {
        public var volume: Double?
        public var muted: Bool?
        public init(volume: Double? = nil, muted: Bool? = nil) { self.volume = volume; self.muted = muted }
        public var description: String {
            [volume.map { "\(Int(($0 * 100).rounded())) %" }, muted.map { $0 ? "muted" : "unmuted" }].compactMap { $0 }.joined(separator: " ")
        }
    }

    /// What the user ever chose for the streams of a role: a stream of it may start with any of that.
    public struct Chosen: Sendable, CustomStringConvertible {
        public var volumes: Set<Int> = [100]
        public var muted = false
        public init() {}
        public func allows(_ stream: AudioStream, _ own: Left) -> Bool {
            let volumeOK = own.volume.map { v in stream.volume.values.allSatisfy { abs($0.fraction - v) < 0.01 } }
                ?? stream.volume.values.allSatisfy { v in volumes.contains { abs(v.fraction - Double($0) / 100) < 0.01 } }
            let muteOK = own.muted.map { stream.isMuted == $0 } ?? (!stream.isMuted || muted)
            return volumeOK && muteOK
        }
        public var description: String { "one of \(volumes.sorted().map { "\($0) %" }.joined(separator: ", "))\(muted ? ", muted or not" : ", unmuted")" }
    }

    final class Live {
        let app: App
        let stream: ClientStream
        let started: ContinuousClock.Instant
        /// `Player A #3`: the app and the soak's count of its streams, in the actions and failures.
        let label: String
        var left: Left
        /// When the user last muted it (the second of the day, UTC), for `agentMuted(in:stream:near:)`.
        var mutedAt: Int?
        /// The server's index for it, once seen.
        var index: UInt32?
        init(app: App, stream: ClientStream, label: String, left: Left) {
            self.app = app; self.stream = stream; started = .now; self.label = label; self.left = left
        }
    }

    /// SplitMix64: small, seedable, the same sequence everywhere.
    public struct Random {
        var state: UInt64
        public init(seed: UInt64) { state = seed }
        public mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        public mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    }

    public func run() async throws -> Report {
        let kind = configuration.kind
        var report = Report()
        var random = Random(seed: configuration.seed)
        // (The server's watchdog stops it after maxSeconds: longer than the storm and its end, or a long
        // soak loses its server in the middle, as a 20-minute run did at 15.)
        let server = try await PrivateServer.start(kind, devices: [.speaker, .internalMic, .hdmi],
                                                   maxSeconds: Int(configuration.duration.components.seconds) + 600)
        defer { server.stop() }
        let observer = try await server.connect()
        defer { observer.close() }
        let state = server.directory + "/soak-state"
        let log = server.directory + "/agent.log"
        func startAgent() throws -> ChildProcess {
            let fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            defer { close(fd) }
            return try ChildProcess.spawn([configuration.agent, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", state, "--verbose",
                                           "--policies", configuration.policies, "--route-log", "\(state)/routes.jsonl"], stderr: fd)
        }
        func note(_ words: String) {
            // (With the time of day to the millisecond, to be read beside the agent's log.)
            var now = timeval()
            gettimeofday(&now, nil)
            var seconds = now.tv_sec
            var parts = tm()
            gmtime_r(&seconds, &parts)
            report.actions.append(words + String(format: " (%02d:%02d:%02d.%03d)", parts.tm_hour, parts.tm_min, parts.tm_sec, Int(now.tv_usec / 1000)))
            let kind = String(words.prefix { $0 != " " })
            report.counts[kind, default: 0] += 1
        }
        var agent = try startAgent()
        var live: [Live] = []
        /// What the user chose per role.
        var chosen: [String: Chosen] = [:]
        let end = ContinuousClock.now + configuration.duration
        var usbPlugged = false
        var started: [String: Int] = [:]

        func keepLog() -> String {
            // The whole story, kept where the server's folder (about to be removed) is not.
            let kept = NSTemporaryDirectory() + "audiosession-soak-\(kind.rawValue)-\(configuration.seed).log"
            try? FileManager.default.removeItem(atPath: kept)
            try? FileManager.default.copyItem(atPath: log, toPath: kept)
            return kept
        }
        do {
            while ContinuousClock.now < end {
                try await Task.sleep(for: .milliseconds(20 + random.below(280)))
                let roll = random.below(100)
                switch roll {
                case 0..<30 where live.count < 8:
                    let app = Self.apps[random.below(Self.apps.count)]
                    // One Player A at most: two players that do not mix interrupt each other (the policy).
                    if app.name == "Player A" && live.contains(where: { $0.app.name == "Player A" }) { continue }
                    let stream = try ClientStream.start(on: server, direction: app.direction, applicationName: app.name, properties: app.properties)
                    started[app.name, default: 0] += 1
                    let one = Live(app: app, stream: stream, label: "\(app.name) #\(started[app.name]!)", left: Left())
                    live.append(one)
                    note("start \(one.label)")
                case 0..<45 where !live.isEmpty:
                    let gone = live.remove(at: random.below(live.count))
                    gone.stream.stop()
                    note("stop \(gone.label)\(gone.index.map { " (out#\($0))" } ?? "")")
                case 45..<65:
                    // The user, by hand, on a player that is not brand new (a stream's first seconds are the
                    // server's memory's to act on, see AgentSettings.memoryActsWithin).
                    let players = live.filter { !$0.app.isCause && ContinuousClock.now - $0.started > .milliseconds(3500) }
                    guard !players.isEmpty else { continue }
                    let target = players[random.below(players.count)]
                    guard let current = target.stream.find(in: observer.snapshot) else { continue }
                    target.index = current.id
                    if random.chance(60) {
                        let volume = [0.3, 0.5, 0.7, 1.0][random.below(4)]
                        guard (try? await server.pactl("set-sink-input-volume", "\(current.id)", "\(Int(volume * 100))%")) != nil else { continue }
                        target.left.volume = volume
                        note("volume \(target.label) (out#\(current.id)) \(Int(volume * 100)) %")
                    } else {
                        // Only a change the server can show: muting a muted stream is no change at all.
                        let mute = !current.isMuted
                        let asked = Self.secondOfDay()
                        guard (try? await server.pactl("set-sink-input-mute", "\(current.id)", mute ? "1" : "0")) != nil else { continue }
                        target.left.muted = mute
                        target.mutedAt = mute ? asked : nil
                        note("mute \(target.label) (out#\(current.id)) \(mute)")
                    }
                    if let volume = target.left.volume { chosen[target.app.role, default: Chosen()].volumes.insert(Int((volume * 100).rounded())) }
                    if target.left.muted == true { chosen[target.app.role, default: Chosen()].muted = true }
                case 65..<72:
                    if usbPlugged { try await server.unplug(.usbHeadset) } else { try await server.plug(.usbHeadset) }
                    usbPlugged.toggle()
                    note("usb \(usbPlugged ? "plugged" : "unplugged")")
                case 72..<74:
                    agent.signal(SIGKILL)
                    _ = await agent.wait()
                    agent = try startAgent()
                    note("kill -9 the agent")
                    // Started again at once, as systemd would: the user does not act in the moment between.
                    try await settle(agent, server, observer, routeLog: "\(state)/routes.jsonl")
                case 74..<76:
                    try await server.restart()
                    for stream in live { stream.stream.stop() }
                    live = []
                    _ = try? await observer.wait(for: "the server back", timeout: .seconds(10)) { _ in observer.isConnected ? true : nil }
                    note("restart the server")
                    try await settle(agent, server, observer, routeLog: "\(state)/routes.jsonl")
                default:
                    continue
                }
            }
        } catch {
            // (Whether the agent had ended, before it is killed: a crash at its start looks like a wait
            // that timed out.)
            let ended = agent.exitStatusIfEnded()  // (reaped if it had ended: not signalled nor waited for again)
            let agentState = ended.map { "the agent had exited with \($0)" } ?? "the agent was running"
            let observerState = observer.isConnected ? "the observer connected" : "the observer NOT connected"
            for stream in live { stream.stream.stop() }
            if ended == nil {
                agent.signal(SIGKILL)
                _ = await agent.wait()
            }
            if error is CancellationError { throw error }
            // A wait that timed out in the storm: say it with the actions so far, the state of things, the
            // end of the agent's log and what the server thinks (CI keeps only what the test prints).
            let diagnosis = await server.diagnosis()
            // (The server's processes that died, in the first line: CI may show no more of a long message.)
            let dead = diagnosis.split(separator: "\n").filter { $0.hasSuffix(": NOT RUNNING") }.joined(separator: ", ")
            report.problems.append("during the storm: \(error); \(agentState), \(observerState)\(dead.isEmpty ? "" : ", " + dead); the agent's log: \(keepLog())\n"
                                   + "  its last lines:\n\(Self.lastLines(of: log))\n  the server:\n\(diagnosis)")
            return report
        }

        // Every cause ends; the agent lets go of everything; the players are as the user left them.
        for cause in live where cause.app.isCause { cause.stream.stop() }
        live.removeAll { $0.app.isCause }
        note("end: calls, reader and recorder stopped")
        for player in live {
            let (own, stream) = (player.left, player.stream)
            let expected = chosen[player.app.role] ?? Chosen()
            do {
                try await observer.wait(for: "\(player.label) as the user left it (\(own), else \(expected))", timeout: .seconds(10)) { s in
                    stream.find(in: s).flatMap { expected.allows($0, own) ? true : nil }
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // The user's mute and one of the agent's in the same moment: the server shows one change
                // (a mute of a muted stream is none), so the user's may have been no change at all, and
                // the agent's unmute after it is right (the soak's user acts on what its observer showed;
                // a mixer's user would have seen the agent's mute).
                if let at = player.mutedAt, let found = stream.find(in: observer.snapshot), !found.isMuted,
                   expected.allows(found, Left(volume: own.volume, muted: false)), Self.agentMuted(in: log, stream: "out#\(found.id)", near: at) {
                    note("the user's mute of \(player.label) met the agent's in the same moment: no change the server could show")
                    continue
                }
                let found = player.stream.find(in: observer.snapshot)
                let seen = found.map { "muted=\($0.isMuted) volume=\($0.volume)" } ?? "gone"
                let mine = report.actions.filter { $0.contains(player.label + " ") || $0.hasSuffix(player.label) }
                let said = found.map { Self.lines(of: log, mentioning: "out#\($0.id)") } ?? ""
                report.problems.append("\(player.label) (out#\(found.map { "\($0.id)" } ?? "?")): expected \(own.description.isEmpty ? "" : own.description + ", else ")\(expected), the server says \(seen); "
                                       + "its actions: \(mine.joined(separator: "; "))\n\(said)")
            }
        }
        for player in live { player.stream.stop() }
        agent.signal(SIGTERM)
        let status = await agent.wait()
        if status != 0 { report.problems.append("the agent exited with \(status) on SIGTERM") }
        // Its sinks for several outputs go with it.
        do {
            try await observer.wait(for: "no sink of the agent's left", timeout: .seconds(5)) { s in
                s.sinks.values.contains { $0.name.hasPrefix("audiosession.everywhere.") } ? nil : true
            }
        } catch {
            report.problems.append("the agent left a sink of its own: \(observer.snapshot.sinks.values.map(\.name).sorted())")
        }

        // With no agent running, a fresh stream of every role starts as the user left it.
        for app in Self.apps where !app.isCause && app.name != "Player B" {
            let expected = chosen[app.role] ?? Chosen()
            let fresh = try ClientStream.start(on: server, direction: app.direction, applicationName: "Fresh \(app.name)", properties: app.properties)
            do {
                try await observer.wait(for: "a fresh \(app.role) stream as the user left it (\(expected))", timeout: .seconds(5)) { s in
                    fresh.find(in: s).flatMap { $0.device != nil && expected.allows($0, Left()) ? true : nil }
                }
            } catch {
                let seen = fresh.find(in: observer.snapshot).map { "muted=\($0.isMuted) volume=\($0.volume)" } ?? "gone"
                report.problems.append("a fresh \(app.role) stream, no agent running: expected \(expected), the server says \(seen)")
            }
            fresh.stop()
        }
        if !report.problems.isEmpty { report.problems.append("the agent's log: \(keepLog())") }
        // (AUDIOSESSION_SOAK_KEEP_LOG: the log kept also when all went well, and where it is said.)
        else if ProcessInfo.processInfo.environment["AUDIOSESSION_SOAK_KEEP_LOG"] != nil { report.keptLog = keepLog() }
        return report
    }

    /// The second of the day now (UTC), as the agent's log says its times.
    static func secondOfDay() -> Int {
        var now = timeval()
        gettimeofday(&now, nil)
        return Int(now.tv_sec % 86_400)
    }

    /// Whether the agent's log says it muted the stream within a second of `second` (of the day, UTC;
    /// the log's times are to the second, in the agent's time zone with its offset) and unmuted it
    /// at that second or later.
    package static func agentMuted(in log: String, stream: String, near second: Int) -> Bool {
        // (2026-11-29T14:33:29+0100 ...: the time of day at 11..<19, its offset from UTC at 19..<24.)
        func secondOfDay(_ line: Substring) -> Int? {
            let time = line.dropFirst(11).prefix(8).split(separator: ":").compactMap { Int($0) }
            let offset = line.dropFirst(19).prefix(5)
            guard time.count == 3, offset.count == 5, let sign = offset.first, sign == "+" || sign == "-",
                  let hours = Int(offset.dropFirst().prefix(2)), let minutes = Int(offset.suffix(2)) else { return nil }
            let local = time[0] * 3600 + time[1] * 60 + time[2]
            let utc = local - (sign == "+" ? 1 : -1) * (hours * 3600 + minutes * 60)
            return (utc % 86_400 + 86_400) % 86_400
        }
        // (Seconds from `second` to `then`, -43,200 ..< 43,200: across midnight too.)
        func after(_ then: Int) -> Int { ((then - second) % 86_400 + 86_400 + 43_200) % 86_400 - 43_200 }
        var mutedThen = false
        for line in ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n") where line.contains("stream=\(stream) ") {
            guard let then = secondOfDay(line) else { continue }
            if line.hasSuffix("[PolicyAgent] mute") {
                mutedThen = abs(after(then)) <= 1
            } else if mutedThen, line.hasSuffix("[PolicyAgent] unmute"), after(then) >= 0 {
                return true
            }
        }
        return false
    }

    /// The last lines of the agent's log, without the per-event trace and the chatter.
    static func lastLines(of log: String, count: Int = 30) -> String {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
            .filter { !$0.contains("[PolicyAgent] event path") && !$0.hasPrefix("route-change") }
            .suffix(count).map { "    " + $0 }.joined(separator: "\n")
    }

    /// The agent's log lines about one stream (its decisions, what it saw), without the chatter.
    static func lines(of log: String, mentioning what: String) -> String {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
            .filter { $0.contains(what + " ") && !$0.hasPrefix("route-change") }
            .map { "    " + $0.split(separator: " ").dropFirst(3).joined(separator: " ") }.suffix(30).joined(separator: "\n")
    }

    /// Waits until the agent is connected and has handled everything the server said so far.
    func settle(_ agent: ChildProcess, _ server: PrivateServer, _ observer: PulseClient, routeLog: String) async throws {
        try await observer.waitForAgentClient(processID: agent.pid)
        try await server.settleAgent(routeLog: routeLog)
    }


}

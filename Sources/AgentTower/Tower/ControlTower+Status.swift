import AudioPolicy
import FoundationEssentials
import ServerModel

/// Every session as people ask about it ("why is Spotify silent?"): where it comes from, its state and
/// since when, what the agent holds on its streams and why; and the route with its last change.
public struct StatusReport: Codable, Sendable, Hashable {
    public struct SessionLine: Codable, Sendable, Hashable {
        public var session: String
        /// "declared" (the app, over D-Bus), "policy file" or "role default".
        public var origin: String
        /// The policy file, the role, or the app's bus name.
        public var source: String
        public var configuration: String
        /// "active", "inactive", "interrupted by <session>", "refused (<code>)".
        public var state: String
        /// How long it has been in that state, in seconds (nil: since before the agent knew).
        public var secondsInState: Double?
        /// What the agent holds on its streams: "out#12 muted", "out#3 ducked to 20 %".
        public var holds: [String]
        /// Why, in words: what interrupted or silences it.
        public var why: String?
        /// Its streams and whether each plays (SPEC.md section 1): "out#12 heard", "out#3 silent for 40 s",
        /// "in#4 recording", "out#7 corked".
        public var streams: [String]?
        /// A call inferred from its behaviour, in words: since when, the capture that shows it, and
        /// the classification it returns to.
        public var inferredCall: String?
        /// How long ago the inferred call began, in seconds.
        public var secondsInCall: Double?
        /// Its own route where it is not the default's, or where it prefers outputs (SPEC.md section 10):
        /// "out builtInSpeaker builtin_speaker (a public output)".
        public var route: String?
        /// Its preferred outputs, first connected wins: "usbAudio, builtInSpeaker".
        public var preferredOutputs: String?
    }
    public var sessions: [SessionLine]
    public var outputs: [String]
    public var inputs: [String]
    /// The last change of the default route: its reason and cause, and how long ago (seconds).
    public var lastRouteChange: String?
    public var secondsSinceRouteChange: Double?
    /// The sound server lost (it went away, or stopped answering), why, and that the agent is connecting
    /// again; nil while it serves.
    public var serverLost: String?
    /// How long ago it was lost, in seconds.
    public var secondsServerLost: Double?
    /// The session now playing, where the media keys go (nil: none), and its media players on the bus.
    public var nowPlaying: String?
    /// Its app's media players on the session bus; or, for a declared app, its session object (told
    /// `RemoteCommand`).
    public var nowPlayingPlayers: [String]?
    public var nowPlayingPath: String?
    /// The microphone is muted for every app.
    public var inputMuted: Bool?
    /// The apps whose microphone the user muted, by name.
    public var inputMutedApps: [String]?
    /// The devices connected, as the user's route choices are remembered against them, and the choices
    /// in force with them ("default output builtin_speaker", "category playback on usb_dac").
    public var deviceSet: String?
    public var routeChoices: [String]?
}

extension ControlTower {
    /// Notes when each session's state changed (called by the loop after a batch's effects are out, so
    /// the event path pays nothing for it).
    public mutating func noteStateTimes() {
        for (id, session) in core.state.sessions where stateSince[id]?.status != session.status {
            stateSince[id] = (session.status, now)
        }
        if stateSince.count > core.state.sessions.count {
            stateSince = stateSince.filter { core.state.sessions[$0.key] != nil }
        }
    }

    /// The report, as of `now`.
    public func statusReport() -> StatusReport {
        let sessions = core.state.sessions.values.sorted { $0.id < $1.id }.map { session -> StatusReport.SessionLine in
            let (origin, source) = describeOrigin(session.id)
            let state: String
            var why: String?
            switch session.status {
            case .active: state = "active"
            case .inactive: state = "inactive"
            case .interrupted(let by):
                state = "interrupted by \(by)"
                why = "interrupted by \(by) (\(describeOrigin(by).1)\(core.state.sessions[by]?.isCall == true ? ", a call" : ""))"
            case .refused(let code): state = "refused (\(code))"
            }
            let records = core.state.streams.values.filter { $0.session == session.id }.sorted { $0.key < $1.key }
            let holds = records.compactMap { record -> String? in
                if record.heldMute { return "\(record.key) muted" }
                if let duck = record.heldDuck { return "\(record.key) ducked to \(Int((duck * 100).rounded())) %" }
                return nil
            }
            if why == nil, !holds.isEmpty {
                // The core's own reasons (a recorder, silent mode, the screen lock, the microphone
                // denied, a player yet to show its pause, a ducker), for each held stream.
                let reasons = core.whyHeld(session: session.id)
                if !reasons.isEmpty { why = reasons.joined(separator: "; ") }
            }
            let since = stateSince[session.id].map { (now - $0.at) / .seconds(1) }
            var line = StatusReport.SessionLine(
                session: session.id.rawValue, origin: origin, source: source, configuration: "\(session.configuration)",
                state: state, secondsInState: since, holds: holds, why: why)
            line.streams = records.map(describeSound)
            let system = core.state.systemRoute
            let hasOutput = session.activeConfiguration.category.hasOutput, hasInput = session.activeConfiguration.category.hasInput
            let preferred = core.preferredOutputs(for: session)
            if !preferred.isEmpty || (hasOutput && session.route.outputs.first?.uid != system.outputs.first?.uid)
                || (hasInput && session.route.inputs.first?.uid != system.inputs.first?.uid) {
                func ports(_ list: [PortDescription]) -> String { list.isEmpty ? "none" : list.map { "\($0.type.name) \($0.uid)" }.joined(separator: ", ") }
                let publicCall = session.isCall && session.route.outputs.first.map { !$0.type.isPrivate } == true ? " (a public output)" : ""
                // (Several at once: through a sink of the agent's, once the server has made it.)
                let combined = core.combination(for: session).map { name in
                    let state = core.state.combinationPorts.contains(name) || !session.status.isActive ? ""
                        : failedCombinations.contains(name) ? ", which the server would not make" : ", not made yet"
                    return " (at once, through \(name)\(state))"
                } ?? ""
                line.route = [hasOutput ? "out \(ports(session.route.outputs))\(publicCall)\(combined)" : nil, hasInput ? "in \(ports(session.route.inputs))" : nil]
                    .compactMap { $0 }.joined(separator: "; ")
                if !preferred.isEmpty { line.preferredOutputs = preferred.map(\.description).joined(separator: ", ") }
            }
            if let call = session.inferredCall {
                let device = snapshot.stream(.input, call.capture.index).flatMap { snapshot.device(of: $0)?.name }
                line.inferredCall = "a call inferred from its behaviour: it records (\(call.capture)\(device.map { " from \($0)" } ?? "")) "
                    + "while it plays; back to \(call.classified) when either stops"
                line.secondsInCall = (now - call.since) / .seconds(1)
            }
            return line
        }
        let route = core.state.systemRoute
        var report = StatusReport(
            sessions: sessions, outputs: route.outputs.map { "\($0.type.name) \($0.uid) (\($0.name))" },
            inputs: route.inputs.map { "\($0.type.name) \($0.uid) (\($0.name))" },
            lastRouteChange: lastRouteChange.map { "\($0.change.reason.name): \($0.change.cause)" },
            secondsSinceRouteChange: lastRouteChange.map { (now - $0.at) / .seconds(1) })
        if let id = core.state.nowPlaying {
            report.nowPlaying = id.rawValue
            if let path = apps.pathOfSession[id] { report.nowPlayingPath = path } else { report.nowPlayingPlayers = playersOf(id) }
        }
        if core.state.inputMuted { report.inputMuted = true }
        if !core.state.inputMutedApps.isEmpty { report.inputMutedApps = core.state.inputMutedApps.sorted() }
        if let set = core.state.deviceSet {
            report.deviceSet = set.description
            let state = core.state
            report.routeChoices = [state.userChoice[.output].map { "default output \($0)" }, state.userChoice[.input].map { "default input \($0)" }]
                .compactMap { $0 } + state.userRoutes.sorted { $0.key < $1.key }.map { "\($0.key) on \($0.value)" }
        }
        if let lost = serverLost {
            report.serverLost = "\(lost.reason); connecting again, what is held is kept and enforced again when it serves"
            report.secondsServerLost = (now - lost.at) / .seconds(1)
        }
        return report
    }

    /// A stream and whether it plays, in words (SPEC.md section 1).
    func describeSound(_ record: StreamRecord) -> String {
        guard record.isRunning else { return "\(record.key) corked" }
        if record.key.direction == .input { return "\(record.key) recording" }
        let metered = record.meterAsked ? "" : " (not metered now)"
        switch record.sound {
        case .unknown: return "\(record.key) running, not heard yet\(record.meterAsked ? " (its meter's first block awaited)" : ""): it counts"
        case .meterFailed: return "\(record.key) running (its meter failed: it counts while it runs)"
        case .heard: return "\(record.key) heard\(metered)"
        case .quiet(let since): return "\(record.key) open and silent for \(Int(((now - since) / .seconds(1)).rounded())) s\(metered)"
        case .idle: return "\(record.key) open and silent for \(core.state.settings.callIdleAfter.components.seconds) s or more\(metered)"
        }
    }

    /// Where a session comes from, in words: its origin, and the policy file, role or bus name.
    func describeOrigin(_ id: SessionID) -> (String, String) {
        if let path = apps.pathOfSession[id], let declared = apps.declared(at: path) {
            return ("declared", "\(declared.path), bus name \(declared.client.busName)")
        }
        switch directory.classifications[id]?.source {
        case .policy(_, let source, let matched)?: return ("policy file", "\(source), matched \(matched)")
        case .roleDefault(let role)?: return ("role default", "role=\(role ?? "none")")
        case nil: return ("unknown", "-")
        }
    }
}

extension AudioPolicy.Category {
    /// Silenced by silent mode and the screen lock (SPEC.md 5.10).
    var isAmbientLike: Bool { self == .ambient || self == .soloAmbient }
}

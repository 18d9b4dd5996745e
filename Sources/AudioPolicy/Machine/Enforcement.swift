/// SPEC.md 5.2-5.4, 5.10, 5.11 and section 7 on the server: which streams must be silent or lowered
/// now, and the actions that bring what we hold there.
extension PolicyMachine {
    /// What every stream's holds depend on, gathered once per event so that deciding a stream is O(1)
    /// in the number of sessions (the core must stay linear: see the benchmark).
    struct HoldContext {
        /// Active recorders (5.3).
        var recorders: [SessionID] = []
        /// Active duckers with their duck levels (5.4).
        var duckers: [(id: SessionID, level: Double)] = []

        init(_ state: PolicyState) {
            for session in state.sessions.values where session.status.isActive {
                let c = session.activeConfiguration
                if c.category == .record { recorders.append(session.id) }
                if c.category.hasOutput && c.effectiveOptions.contains(.duckOthers) { duckers.append((session.id, session.duckLevel)) }
            }
            recorders.sort()
        }
    }

    /// What the holds need of a stream's session.
    struct HoldFacts {
        var status: SessionStatus
        var isCall: Bool
        var neverDucked: Bool
        var isDucker: Bool
        var silencedBySilentMode: Bool
        var microphoneAllowed: Bool
        var inputMuted: Bool
        /// The user muted its app's microphone, by this name.
        var mutedApp: String?
        var silencedUntilPaused: Bool

        init(_ session: Session, mutedApp: String?) {
            self.mutedApp = mutedApp
            let c = session.activeConfiguration
            status = session.status
            isCall = c.isCall
            neverDucked = isCall || c.mode == .measurement
            isDucker = session.status.isActive && c.effectiveOptions.contains(.duckOthers)
            silencedBySilentMode = session.configuration.category.isSilencedBySilentMode
            microphoneAllowed = session.microphoneAllowed
            inputMuted = session.inputMuted
            silencedUntilPaused = session.silencedUntilPaused != nil
        }
    }

    /// Why a stream must be muted now, in words; empty when it may play.
    func muteReasons(_ stream: StreamRecord, _ context: HoldContext) -> [String] {
        var reasons: [String] = []
        guard let session = state.sessions[stream.session] else { return [] }
        visitMuteReasons(stream, HoldFacts(session, mutedApp: mutedApp(session)), context) { reasons.append($0()); return true }
        return reasons
    }

    /// Why what is held on a session's streams is held, in words, in stream order, each reason once: the
    /// reasons of a mute, then who ducks it and how low; empty when nothing of ours is on them. (What
    /// `audiosessionctl status` says: the core's own rules, not a copy of them.)
    public func whyHeld(session id: SessionID) -> [String] {
        let context = HoldContext(state)
        var reasons: [String] = []
        for key in state.streams.values.filter({ $0.session == id }).map(\.key).sorted() {
            for reason in whyHeld(key, context) where !reasons.contains(reason) { reasons.append(reason) }
        }
        return reasons
    }

    /// Why what is held on one stream is held.
    private func whyHeld(_ key: StreamKey, _ context: HoldContext) -> [String] {
        guard let stream = state.streams[key], stream.heldMute || stream.heldDuck != nil else { return [] }
        var reasons: [String] = []
        if stream.heldMute { reasons += muteReasons(stream, context) }
        if let level = stream.heldDuck,
           let ducker = context.duckers.filter({ $0.id != stream.session }).min(by: { ($0.level, $0.id) < ($1.level, $1.id) }) {
            reasons.append("ducked by \(ducker.id) to \(Int((level * 100).rounded())) %")
        }
        return reasons
    }

    /// Whether a stream must be muted now (what `enforce` asks for every stream on every event: no words).
    func mustMute(_ stream: StreamRecord, _ session: HoldFacts, _ context: HoldContext) -> Bool {
        var found = false
        visitMuteReasons(stream, session, context) { _ in found = true; return false }
        return found
    }

    /// Calls `visit` with each reason (its words made only if asked) until it returns false.
    private func visitMuteReasons(_ stream: StreamRecord, _ session: HoldFacts, _ context: HoldContext,
                                  _ visit: (() -> String) -> Bool) {
        switch session.status {
        case .interrupted(let by): if !visit({ "interrupted by \(by)" }) { return }
        case .refused(let code): if !visit({ "activation refused (\(code))" }) { return }
        case .active, .inactive: break
        }
        if stream.key.direction == .output {
            // A recorder silences all other output while active, calls excepted (5.3).
            if !session.isCall, let recorder = context.recorders.first(where: { $0 != stream.session }) {
                if !visit({ "\(recorder) is recording" }) { return }
            }
            // Its headphones gone, its player paused: nothing out loud before the pause shows (5.8).
            if session.silencedUntilPaused {
                if !visit({ "its player has yet to show the pause (headphones gone)" }) { return }
            }
            // Silent mode and the screen lock silence ambient sounds (5.10).
            if session.silencedBySilentMode && (state.silentMode || state.screenLocked) {
                let silent = state.silentMode
                if !visit({ silent ? "silent mode" : "screen locked" }) { return }
            }
        } else {
            if state.inputMuted && !visit({ "the microphone is muted" }) { return }
            if session.inputMuted && !visit({ "its app muted its input" }) { return }
            if let app = session.mutedApp, !visit({ "the user muted \(app)'s microphone" }) { return }
            if !session.microphoneAllowed { _ = visit({ "microphone denied" }) }
        }
    }

    /// How low a stream must be now, if at all: the lowest duck level of the other active duckers (5.4).
    func duckLevel(_ stream: StreamRecord, _ session: HoldFacts, _ context: HoldContext) -> Double? {
        guard stream.key.direction == .output, !context.duckers.isEmpty else { return nil }
        // Calls are never ducked, nor measurement, nor a ducker while it ducks.
        if session.neverDucked || session.isDucker { return nil }
        var lowest: Double?
        for ducker in context.duckers where ducker.id != stream.session { lowest = min(lowest ?? ducker.level, ducker.level) }
        return lowest
    }

    /// Brings every stream to what it must be, undoing exactly what we hold once its reasons end, and
    /// leaving alone what the user took over (5.11).
    mutating func enforce(_ actions: inout [PolicyAction]) {
        let context = HoldContext(state)
        // One pass in any order (linear), then the few actions in stream order (stable output).
        var found: [(StreamKey, PolicyAction)] = []
        var changed: [StreamRecord] = []
        for stream in state.streams.values {
            var stream = stream
            let before = stream
            let key = stream.key
            // (A stream of no session is held by nothing.)
            let session = state.sessions[stream.session].map { HoldFacts($0, mutedApp: mutedApp($0)) }
            let mute = session.map { mustMute(stream, $0, context) } ?? false
            if !mute { stream.userOwnsMute = false }
            let wantMute = mute && !stream.userOwnsMute
            if wantMute != stream.heldMute {
                found.append((key, wantMute ? .mute(key) : .unmute(key)))
                stream.heldMute = wantMute
            }
            let level = session.flatMap { duckLevel(stream, $0, context) }
            if level == nil { stream.userOwnsVolume = false }
            let wantDuck = stream.userOwnsVolume ? nil : level
            if wantDuck != stream.heldDuck {
                if let wantDuck {
                    // Down to a new duck, or to a lower one; up (another ducker gone, a milder one left) as an unduck goes.
                    let up = stream.heldDuck.map { wantDuck > $0 } ?? false
                    found.append((key, .duck(key, level: wantDuck, ramp: up ? state.settings.duckRampUp : state.settings.duckRampDown)))
                } else {
                    found.append((key, .unduck(key, ramp: state.settings.duckRampUp)))
                }
                stream.heldDuck = wantDuck
            }
            if stream != before { changed.append(stream) }
        }
        for stream in changed { state.streams[stream.key] = stream }
        actions += found.enumerated().sorted { ($0.element.0, $0.offset) < ($1.element.0, $1.offset) }.map(\.element.1)
    }

    // MARK: the secondary-audio hint (5.9)

    /// True while a non-mixable session of another app is playing.
    public func secondaryAudioShouldBeSilencedHint(for id: SessionID) -> Bool {
        guard let session = state.sessions[id] else { return false }
        return state.sessions.values.contains {
            $0.app != session.app && $0.status.isActive && !$0.isMixable && $0.activeConfiguration.category.hasOutput
                && ($0.origin == .declared || hasRunningOutput($0.id))
        }
    }

    /// True while another app has playing output (running, and heard where that is metered).
    public func isOtherAudioPlaying(for id: SessionID) -> Bool {
        guard let session = state.sessions[id] else { return false }
        return state.streams.values.contains { stream in
            guard stream.key.direction == .output, let other = state.sessions[stream.session], other.app != session.app else { return false }
            return isPlaying(stream, other)
        }
    }

    func hasRunningOutput(_ id: SessionID) -> Bool {
        guard let session = state.sessions[id] else { return false }
        return state.streams.values.contains { $0.session == id && $0.key.direction == .output && isPlaying($0, session) }
    }

    /// Sessions that record (the category in force: one set while active waits for the next
    /// activation) hear inputMuteChanged when their input's mute changes (for every app, or their own),
    /// and a session that comes to record while it is muted hears it then; what it hears is what it reads.
    mutating func updateInputMuteSaid(_ actions: inout [PolicyAction]) {
        var changed: [(SessionID, Bool)] = []
        for session in state.sessions.values where session.origin == .declared && session.activeConfiguration.category.hasInput {
            let muted = isInputMuted(session)
            if muted != session.inputMuteSaid { changed.append((session.id, muted)) }
        }
        for (id, muted) in changed.sorted(by: { $0.0 < $1.0 }) {
            state.sessions[id]?.inputMuteSaid = muted
            actions.append(.notify(id, .inputMuteChanged(muted)))
        }
    }

    /// Whether the session's input is muted, as its app reads it (`InputMuted`) and, while it records,
    /// is told: the microphone is muted for every app, by its own mute, or by the user's mute of its app.
    public func isInputMuted(_ id: SessionID) -> Bool { state.sessions[id].map(isInputMuted) ?? false }

    func isInputMuted(_ session: Session) -> Bool { state.inputMuted || session.inputMuted || mutedApp(session) != nil }

    /// The name by which the user muted the session's app's microphone, if so (its names hold every
    /// name it goes by, the one its route choices know too).
    func mutedApp(_ session: Session) -> String? {
        guard !state.inputMutedApps.isEmpty else { return nil }
        return session.names.first { state.inputMutedApps.contains($0) }
    }

    /// What is now playing: the session that last started non-mixable playback and has not ended.
    /// `playing`: the sessions that play it now (those new among them started now).
    mutating func updateNowPlaying(_ playing: [SessionID], _ actions: inout [PolicyAction]) {
        // (Most events change nothing here: no set is built then.)
        let started = playing.filter { !state.playingNonMixable.contains($0) }
        if !started.isEmpty || playing.count != state.playingNonMixable.count { state.playingNonMixable = Set(playing) }
        // (Several at once, in one event: in the order of their names.)
        for id in started.sorted() {
            state.playStarts += 1
            state.startedPlaying[id] = state.playStarts
        }
        // (Chosen again only when one started, or the one now playing ended.)
        guard !started.isEmpty || state.nowPlaying.map({ state.startedPlaying[$0] == nil }) == true else { return }
        let latest = state.startedPlaying.max { $0.value < $1.value }?.key
        guard latest != state.nowPlaying else { return }
        state.nowPlaying = latest
        actions.append(.nowPlaying(latest))
    }

    /// Mixable sessions hear silenceSecondaryAudioHint begin/end when the hint changes.
    mutating func updateHints(_ actions: inout [PolicyAction]) {
        // The apps with a non-mixable session playing, gathered once (5.9): declared ones while
        // active, the others while a stream of theirs plays.
        func silences(_ s: Session) -> Bool { s.status.isActive && !s.isMixable && s.activeConfiguration.category.hasOutput }
        var silencers = Audience.Apps()
        // (And the sessions among them that play, for what is now playing: each once.)
        var playing: [SessionID] = []
        for stream in state.streams.values where stream.key.direction == .output && stream.isRunning {
            if let session = state.sessions[stream.session], session.origin != .declared, silences(session), isPlaying(stream, session) {
                silencers.insert(session.app)
                if session.activeConfiguration.category == .playback && !playing.contains(session.id) { playing.append(session.id) }
            }
        }
        for session in state.sessions.values where session.origin == .declared && silences(session) {
            silencers.insert(session.app)
            if session.activeConfiguration.category == .playback { playing.append(session.id) }
        }
        updateNowPlaying(playing, &actions)
        var changed: [(SessionID, Bool)] = []
        for session in state.sessions.values where session.configuration.isMixable {
            let hint = silencers.other(than: session.app)
            if hint != session.hintBegun { changed.append((session.id, hint)) }
        }
        for (id, hint) in changed.sorted(by: { $0.0 < $1.0 }) {
            state.sessions[id]?.hintBegun = hint
            actions.append(.notify(id, .silenceSecondaryAudioHint(hint ? .begin : .end)))
        }
    }
}

/// SPEC.md section 1: when an app that never heard of us plays, and when it is in a call.
///
/// Such an app's session is active while it plays: a stream of it runs (is uncorked) and is heard.
/// Real programs keep silent streams open for hours (speech-dispatcher between utterances, games in
/// menus, browsers after a tab stopped), so the streams whose sound decides anything (their session
/// would interrupt, duck or silence someone) are metered while they run, and count only while heard;
/// the others count while they run, as before. A metered stream counts until its meter's first block
/// (a player that starts plays at once), then while heard. A call's stream counts from its start (a
/// call must not wait for its first sound) until it has been silent for `callIdleAfter`.
///
/// An app that records from a microphone while it plays is in practice in a call (most call apps say
/// nothing of it in their streams): unless its policy says its calls are not inferred, its session is
/// a call (playAndRecord/voiceChat) while both last, and goes back to its own classification after.
extension PolicyMachine {
    // MARK: what counts

    /// The configuration that decides for a session now: the one in force while active, else the one
    /// its next activation takes.
    func deciding(_ session: Session) -> SessionConfiguration {
        session.status.isActive ? session.activeConfiguration : session.configuration
    }

    /// Whether a stream's sound decides whether its session plays: an output of an inferred session
    /// that would interrupt, duck or silence someone, or is a call. (A meter that failed is not asked
    /// again for that stream: it counts while it runs.)
    func wantsMeter(_ stream: StreamRecord, _ session: Session) -> Bool {
        guard state.settings.metersStreams, stream.key.direction == .output, stream.isRunning, session.origin == .inferred,
              stream.sound != .meterFailed else { return false }
        let c = deciding(session)
        let options = c.effectiveOptions
        return !c.isMixable || c.isCall || options.contains(.duckOthers) || options.contains(.interruptSpokenAudioAndMixWithOthers)
    }

    /// Whether the stream plays, for its session's activity.
    func isPlaying(_ stream: StreamRecord, _ session: Session) -> Bool {
        guard stream.isRunning else { return false }
        guard stream.key.direction == .output else { return true }
        switch stream.sound {
        case .unmetered, .meterFailed, .awaiting, .heard: return true
        case .idle: return false
        case .quiet(let since):
            let c = deciding(session)
            if c.isCall { return state.now < since + state.settings.callIdleAfter }
            // While a call is active, a non-mixable app that starts a stream would be refused anyway:
            // it is held silent from its start rather than heard over the call until its first sound.
            return !c.isMixable && !session.status.isActive && callActive(besides: session.id)
        }
    }

    /// Whether the session has a playing stream (SPEC.md section 1).
    public func isPlaying(_ id: SessionID) -> Bool {
        guard let session = state.sessions[id] else { return false }
        return state.streams.values.contains { $0.session == id && isPlaying($0, session) }
    }

    func callActive(besides id: SessionID) -> Bool {
        state.sessions.values.contains { $0.id != id && $0.status.isActive && $0.isCall }
    }

    // MARK: changes

    /// A stream of the session appeared, changed, was heard or went quiet, or went away; or the session's
    /// configuration changed. Meters are wanted or not, an inferred call begins or ends, and the
    /// session's activity follows.
    mutating func soundMayHaveChanged(_ id: SessionID, _ actions: inout [PolicyAction]) {
        guard state.sessions[id] != nil else { return }
        updateSounds(of: id)
        inferCall(id, &actions)
        // (A call begun or ended changes which of its streams are metered.)
        updateSounds(of: id)
        streamActivityChanged(id, &actions)
    }

    /// Brings each stream of the session to metered or not, as it should be now. A stream that starts
    /// being metered counts until its first block says otherwise.
    mutating func updateSounds(of id: SessionID) {
        guard let session = state.sessions[id] else { return }
        for (key, stream) in state.streams where stream.session == id {
            let wanted = wantsMeter(stream, session)
            guard wanted != stream.sound.isMetered else { continue }
            if stream.sound == .meterFailed && !stream.isRunning {
                // (Failed while it ran; tried again the next time it runs.)
                state.streams[key]?.sound = .unmetered
            } else if stream.sound != .meterFailed {
                state.streams[key]?.sound = wanted ? .awaiting : .unmetered
            }
        }
    }

    /// The shell meters exactly the streams whose sound counts: one action per change, in stream order.
    mutating func askMeters(_ actions: inout [PolicyAction]) {
        var changed: [StreamKey] = []
        for (key, stream) in state.streams where stream.sound.isMetered != stream.meterAsked { changed.append(key) }
        for key in changed.sorted() {
            let on = state.streams[key]!.sound.isMetered
            state.streams[key]?.meterAsked = on
            actions.append(.meter(key, on))
        }
    }

    /// The earliest instant a quiet stream of a call stops counting.
    var nextCallIdleDeadline: Duration? {
        var next: Duration?
        for stream in state.streams.values {
            guard case .quiet(let since) = stream.sound, stream.isRunning,
                  let session = state.sessions[stream.session], deciding(session).isCall else { continue }
            let at = since + state.settings.callIdleAfter
            next = min(next ?? at, at)
        }
        for session in state.sessions.values { if let at = session.inferredCall?.endsAt { next = min(next ?? at, at) } }
        return next
    }

    /// On a tick: quiet streams of calls that have been silent for `callIdleAfter` are idle now, and
    /// inferred calls whose grace ran out end. Returns the sessions to look at again.
    mutating func callStreamsGoneIdle() -> [SessionID] {
        var touched: Set<SessionID> = []
        for (key, stream) in state.streams {
            guard case .quiet(let since) = stream.sound, since + state.settings.callIdleAfter <= state.now,
                  let session = state.sessions[stream.session], deciding(session).isCall else { continue }
            state.streams[key]?.sound = .idle
            touched.insert(stream.session)
        }
        for session in state.sessions.values where session.inferredCall?.endsAt.map({ $0 <= state.now }) == true {
            touched.insert(session.id)
        }
        return touched.sorted()
    }

    // MARK: calls from behaviour

    /// Begins or ends the session's inferred call: it begins when the app records (a running capture)
    /// while it plays, and ends a grace period after either stops running.
    mutating func inferCall(_ id: SessionID, _ actions: inout [PolicyAction]) {
        guard var session = state.sessions[id], session.origin == .inferred else { return }
        let classified = session.inferredCall?.classified ?? session.configuration
        guard session.infersCalls, !classified.isCall else {
            if session.inferredCall != nil { endInferredCall(id, &actions) }
            return
        }
        var capture: StreamKey?
        var running = false, playing = false
        for stream in state.streams.values where stream.session == id && stream.isRunning {
            if stream.key.direction == .input {
                capture = min(capture ?? stream.key, stream.key)
            } else {
                running = true
                if isPlaying(stream, session) { playing = true }
            }
        }
        if var call = session.inferredCall {
            if capture != nil && running {
                call.endsAt = nil
            } else if call.endsAt == nil {
                call.endsAt = state.now + state.settings.gracePeriod
            } else if call.endsAt! <= state.now {
                return endInferredCall(id, &actions)
            }
            state.sessions[id]?.inferredCall = call
            return
        }
        guard let capture, playing else { return }
        session.inferredCall = InferredCall(classified: session.configuration, capture: capture, since: state.now)
        session.configuration = InferredCall.configuration
        let wasActive = session.status.isActive
        if session.status == .inactive || wasActive { session.activeConfiguration = InferredCall.configuration }
        state.sessions[id] = session
        if wasActive {
            configurationsChanged.insert(id)
            releaseInterrupted(by: id, &actions)
            interruptOthers(for: id, &actions)
        }
    }

    /// The app no longer records while it plays: its own classification is in force again, and the
    /// sessions its call interrupted that it would not interrupt now resume.
    mutating func endInferredCall(_ id: SessionID, _ actions: inout [PolicyAction]) {
        guard var session = state.sessions[id], let call = session.inferredCall else { return }
        session.inferredCall = nil
        session.configuration = call.classified
        let wasActive = session.status.isActive
        if session.status == .inactive || wasActive { session.activeConfiguration = call.classified }
        state.sessions[id] = session
        if wasActive {
            configurationsChanged.insert(id)
            releaseInterrupted(by: id, &actions)
            interruptOthers(for: id, &actions)
        }
    }
}

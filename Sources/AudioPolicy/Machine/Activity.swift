/// SPEC.md section 1: when an app that never heard of us plays, and when it is in a call.
///
/// Such an app's session is active while it plays: a stream of it runs (is uncorked) and is heard.
/// Real programs keep silent streams open for hours (speech-dispatcher between utterances, games in
/// menus, browsers after a tab stopped), so the streams whose sound would change someone else (their
/// session would interrupt, duck or silence another app that plays now) are metered while they run,
/// and count while heard. A stream counts until its meter says otherwise (a player that starts plays at
/// once); a call's stream counts from its start until it has been silent for `callIdleAfter`.
///
/// A meter runs only while it can change something: a capture is what desktops show as a microphone in
/// use (GNOME Shell's indicator counts every capture), so an app that plays alone is not metered, and
/// one that records (whose calls are inferred) is, for its sound says whether it is in a call. When
/// its meter stops, what it said stays known for a ducker or a call (a silent screen reader stays
/// silent: it will not duck the next player for a moment), and is forgotten for a player (it counts
/// again, as one that starts: of two players, the one that started last must win).
///
/// An app that records from a microphone while it plays is in practice in a call (most call apps say
/// nothing of it in their streams): unless its policy says its calls are not inferred, its session is
/// a call (playAndRecord/voiceChat) while both last, and goes back to its own classification after.
/// Its output is metered while it records, and the call begins when it is heard: Firefox opens a
/// silent output with the microphone, so a page that only records would otherwise be a call.
extension PolicyMachine {
    // MARK: what counts

    /// The configuration that decides for a session now: the one in force while active, else the one
    /// its next activation takes.
    func deciding(_ session: Session) -> SessionConfiguration {
        session.status.isActive ? session.activeConfiguration : session.configuration
    }

    /// Whether the stream plays, for its session's activity.
    func isPlaying(_ stream: StreamRecord, _ session: Session) -> Bool {
        guard stream.isRunning else { return false }
        guard stream.key.direction == .output else { return true }
        switch stream.sound {
        case .unknown, .meterFailed, .heard: return true
        case .idle: return false
        case .quiet(let since):
            let c = deciding(session)
            if c.isCall { return state.now < since + state.settings.callIdleAfter }
            // While a call is active, a non-mixable app with a silent stream would be refused anyway:
            // it is held silent rather than heard over the call until its meter hears it.
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

    // MARK: meters

    /// Which apps play now in ways another app's sound can change, gathered once per event: those
    /// with a non-mixable session playing (another non-mixable one or a call would interrupt them),
    /// those that would be ducked, and those in spoken audio.
    struct Audience {
        var nonMixable = Apps()
        var duckable = Apps()
        var spoken = Apps()
        /// The sessions with a running capture.
        var recording: Set<SessionID> = []

        /// Apps, as far as `other(than:)` needs them: the first one, and whether there is another. (A
        /// set of names hashed every app's name on every event: most of the core's time per event.)
        struct Apps {
            private var first: String?
            private var several = false

            mutating func insert(_ app: String) {
                if let first { several = several || first != app } else { first = app }
            }

            /// Someone other than `app` is among them.
            func other(than app: String) -> Bool { several || (first != nil && first != app) }
        }

        init(_ machine: PolicyMachine) {
            // (Each session as often as it has a running output: `insert` keeps an app once.)
            for stream in machine.state.streams.values where stream.isRunning {
                if stream.key.direction == .input {
                    recording.insert(stream.session)
                } else if let session = machine.state.sessions[stream.session] {
                    add(session, machine)
                }
            }
            for session in machine.state.sessions.values where session.origin == .declared && session.status.isActive {
                add(session, machine)
            }
        }

        private mutating func add(_ session: Session, _ machine: PolicyMachine) {
            let c = machine.deciding(session)
            guard c.category.hasOutput else { return }
            let options = c.effectiveOptions
            if !c.isMixable { nonMixable.insert(session.app) }
            if !c.isCall && c.mode != .measurement && !options.contains(.duckOthers) { duckable.insert(session.app) }
            if c.mode == .spokenAudio && !c.isCall { spoken.insert(session.app) }
        }
    }

    /// Whether a stream is to be metered now: an output of an inferred session that runs, whose sound
    /// would change another app that plays now, or would make its session a call (it records) (SPEC.md
    /// section 1).
    func wantsMeter(_ stream: StreamRecord, _ session: Session, _ audience: Audience) -> Bool {
        // (An interrupted session's sound changes nothing until its interruption ends.)
        guard state.settings.metersStreams, stream.key.direction == .output, stream.isRunning, session.origin == .inferred,
              stream.sound != .meterFailed, let since = stream.runningSince, state.now - since >= meterDelay(session),
              !session.status.isInterrupted
        else { return false }
        let c = deciding(session)
        // An app that records and whose calls are inferred: its sound says whether it is in a call
        // (browsers open a silent output with the microphone; a page that only records is no call).
        if session.infersCalls && audience.recording.contains(session.id) && (!c.isCall || session.inferredCall != nil) { return true }
        let options = c.effectiveOptions
        if !c.isMixable && audience.nonMixable.other(than: session.app) { return true }
        if options.contains(.duckOthers) && audience.duckable.other(than: session.app) { return true }
        if options.contains(.interruptSpokenAudioAndMixWithOthers) && audience.spoken.other(than: session.app) { return true }
        return false
    }

    /// The shell meters exactly the streams that should be now: one action per change, in stream order.
    /// A player whose meter stops counts again (as one that starts); a ducker or a call keeps what its
    /// meter said. The sessions whose counting changed are looked at again; true if that happened.
    /// (A capture's meter is its microphone's, for a muted call's speech: `speechMeterTargets`.)
    @discardableResult
    mutating func askMeters(_ actions: inout [PolicyAction]) -> Bool {
        // (Metering nothing, with no meter asked for: nothing to change, and no audience to gather.)
        if !state.settings.metersStreams && !state.settings.metersMutedSpeech && !state.streams.values.contains(where: \.meterAsked) { return false }
        let audience = Audience(self)
        let speech = speechMeterTargets()
        var changed: [StreamKey] = []
        for (key, stream) in state.streams {
            guard let session = state.sessions[stream.session] else { continue }
            let wanted = key.direction == .input ? speech.contains(key) : wantsMeter(stream, session, audience)
            if wanted != stream.meterAsked { changed.append(key) }
        }
        guard !changed.isEmpty else { return false }
        var forgotten: Set<SessionID> = []
        for key in changed.sorted() {
            guard var stream = state.streams[key] else { continue }
            stream.meterAsked.toggle()
            if !stream.meterAsked, key.direction == .output, let session = state.sessions[stream.session] {
                let c = deciding(session)
                if !c.isMixable && !c.isCall, stream.sound != .unknown {
                    stream.sound = .unknown
                    forgotten.insert(stream.session)
                }
            }
            state.streams[key] = stream
            actions.append(.meter(key, stream.meterAsked))
        }
        for id in forgotten.sorted() { soundMayHaveChanged(id, &actions) }
        return !forgotten.isEmpty
    }

    /// How long a stream of the session runs before it is metered (a call inferred from its sound was
    /// metered before it was one).
    func meterDelay(_ session: Session) -> Duration {
        deciding(session).isCall && session.inferredCall == nil ? state.settings.callMeterAfter : state.settings.meterAfter
    }

    /// The earliest instant a running stream becomes old enough to be metered (`meterAfter`,
    /// `callMeterAfter`).
    var nextMeterDeadline: Duration? {
        guard state.settings.metersStreams else { return nil }
        var next: Duration?
        for stream in state.streams.values where stream.key.direction == .output && stream.sound != .meterFailed {
            guard let since = stream.runningSince, let session = state.sessions[stream.session], session.origin == .inferred else { continue }
            let delay = meterDelay(session)
            guard state.now - since < delay else { continue }
            next = min(next ?? since + delay, since + delay)
        }
        return next
    }

    /// The earliest instant a quiet stream of a call stops counting, or an inferred call's grace ends.
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

    // MARK: changes

    /// A stream of the session appeared, changed, was heard or went quiet, or went away; or the session's
    /// configuration changed: an inferred call begins or ends, and the session's activity follows.
    /// `stoppedAt`: when the stream that changed was last heard, if that is what changed.
    mutating func soundMayHaveChanged(_ id: SessionID, _ actions: inout [PolicyAction], stoppedAt: Duration? = nil) {
        guard state.sessions[id] != nil else { return }
        inferCall(id, &actions)
        streamActivityChanged(id, &actions, stoppedAt: stoppedAt)
    }

    // MARK: calls from behaviour

    /// Begins or ends the session's inferred call: it begins when the app records (a running capture)
    /// while it is heard (its output's meter says so: a browser opens a silent output with the
    /// microphone, so a page that only records would otherwise be a call), and ends a grace period
    /// after the capture stops running or the output stops playing (a call's output counts until it
    /// has been silent for `callIdleAfter`).
    mutating func inferCall(_ id: SessionID, _ actions: inout [PolicyAction]) {
        guard var session = state.sessions[id], session.origin == .inferred else { return }
        let classified = session.inferredCall?.classified ?? session.configuration
        guard session.infersCalls, !classified.isCall else {
            if session.inferredCall != nil { endInferredCall(id, &actions) }
            return
        }
        var capture: StreamKey?
        // Heard: a call begins only on its meter's word (or with no meters at all), never on a stream
        // not heard yet; then it lasts while it plays as a call does (silent up to `callIdleAfter`).
        var playing = false, heard = false
        for stream in state.streams.values where stream.session == id && stream.isRunning {
            if stream.key.direction == .input {
                capture = min(capture ?? stream.key, stream.key)
            } else if isPlaying(stream, session) {
                playing = true
                // (A meter's word now, not one kept from an earlier meter: a web call's last sound
                // would make the same browser's next recording page a call.)
                switch stream.sound {
                case .heard: if stream.meterAsked { heard = true }
                case .meterFailed: heard = true
                case .unknown, .quiet, .idle: if !state.settings.metersStreams { heard = true }
                }
            }
        }
        if var call = session.inferredCall {
            if capture != nil && playing {
                call.endsAt = nil
            } else if call.endsAt == nil {
                call.endsAt = state.now + state.settings.gracePeriod
            } else if call.endsAt! <= state.now {
                return endInferredCall(id, &actions)
            }
            state.sessions[id]?.inferredCall = call
            return
        }
        guard let capture, heard else { return }
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

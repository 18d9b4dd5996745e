/// SPEC.md section 10: while a declared call's input is muted, someone speaking into its microphone is
/// told to it (`MutedSpeechActivity(started|ended)`): "you are speaking while muted", as ChromeOS and
/// Apple's input mute say it. The microphone its capture records from is metered only then (a meter
/// is one more capture: desktops show the microphone in use, which the call's own capture does anyway).
///
/// Speech, not a click: it starts once sound has lasted `mutedSpeechStartsAfter` with no silence as
/// long within it, and ends once silence has lasted `mutedSpeechEndsAfter` (pauses between words
/// and sentences are shorter). It ends too when the meter stops: the mute lifted, the call over or its
/// capture gone.
public enum MutedSpeech: Hashable, Sendable {
    case quiet
    /// Sound since `since`, silent since `silentSince` if it is now.
    case rising(since: Duration, silentSince: Duration?)
    /// Said started; silent since `silentSince` if it is now.
    case speaking(silentSince: Duration?)
}

extension PolicyMachine {
    /// The capture whose microphone is metered for each declared call muted now: its first capture
    /// (in key order) whose meter did not fail. (None, almost always: no dictionary is built then.)
    func speechMeterTargets() -> Set<StreamKey> {
        guard state.settings.metersMutedSpeech,
              state.sessions.values.contains(where: { isMetered(forSpeech: $0) }) else { return [] }
        var calls: Set<SessionID> = []
        for session in state.sessions.values where isMetered(forSpeech: session) { calls.insert(session.id) }
        var first: [SessionID: StreamKey] = [:]
        for stream in state.streams.values where stream.key.direction == .input && calls.contains(stream.session) && stream.sound != .meterFailed {
            if let key = first[stream.session], key < stream.key { continue }
            first[stream.session] = stream.key
        }
        return Set(first.values)
    }

    /// A declared call, active, allowed the microphone, whose input is muted (for every app, by itself,
    /// or by the user's mute of its app). (A call denied the microphone learns nothing of it.)
    func isMetered(forSpeech session: Session) -> Bool {
        session.origin == .declared && session.status.isActive && session.activeConfiguration.isCall && session.microphoneAllowed
            && isInputMuted(session)
    }

    /// The microphone's meter of a muted call said heard (true) or silent (since `silentFor`).
    mutating func heardSpeech(_ id: SessionID, _ heard: Bool, silentFor: Duration, _ actions: inout [PolicyAction]) {
        // A deadline that passed before the report (its tick not come yet) is taken first: the report
        // is about what came after it.
        advanceMutedSpeech(id, &actions)
        guard let session = state.sessions[id] else { return }
        let lastHeard = state.now - min(max(silentFor, .zero), state.settings.silenceSaidLate)
        let next: MutedSpeech
        switch (session.mutedSpeech, heard) {
        case (.quiet, true): next = .rising(since: state.now, silentSince: nil)
        case (.rising(let since, _), true): next = .rising(since: since, silentSince: nil)
        case (.rising(let since, nil), false): next = .rising(since: since, silentSince: lastHeard)
        case (.speaking, true): next = .speaking(silentSince: nil)
        case (.speaking(nil), false): next = .speaking(silentSince: lastHeard)
        case (.quiet, false), (.rising, false), (.speaking, false): return
        }
        state.sessions[id]?.mutedSpeech = next
        advanceMutedSpeech(id, &actions)
    }

    /// What a muted call's speech becomes now, its time run: speech begins, a gap voids a start, a
    /// silence long enough ends it (told to the session).
    mutating func advanceMutedSpeech(_ id: SessionID, _ actions: inout [PolicyAction]) {
        guard let session = state.sessions[id], let at = mutedSpeechDeadline(session.mutedSpeech), at <= state.now else { return }
        switch session.mutedSpeech {
        case .quiet:
            return
        case .rising(_, nil):
            state.sessions[id]?.mutedSpeech = .speaking(silentSince: nil)
            actions.append(.notify(id, .mutedSpeechActivity(started: true)))
        case .rising(_, _?):
            state.sessions[id]?.mutedSpeech = .quiet
        case .speaking:
            state.sessions[id]?.mutedSpeech = .quiet
            actions.append(.notify(id, .mutedSpeechActivity(started: false)))
        }
    }

    /// When the speech changes by time alone (nil: only a meter's word changes it).
    func mutedSpeechDeadline(_ speech: MutedSpeech) -> Duration? {
        switch speech {
        case .quiet: nil
        case .rising(let since, nil): since + state.settings.mutedSpeechStartsAfter
        case .rising(_, let silent?): silent + state.settings.mutedSpeechStartsAfter
        case .speaking(nil): nil
        case .speaking(let silent?): silent + state.settings.mutedSpeechEndsAfter
        }
    }

    /// After each event: speech runs its time, and ends (told, if it had begun) for a call whose
    /// microphone is metered no more.
    mutating func settleMutedSpeech(_ actions: inout [PolicyAction]) {
        // (Almost always none: no list is built then.)
        guard state.sessions.values.contains(where: { $0.mutedSpeech != .quiet }) else { return }
        let speaking = state.sessions.values.filter { $0.mutedSpeech != .quiet }.map(\.id)
        for id in speaking.sorted() {
            let metered = state.streams.values.contains { $0.session == id && $0.key.direction == .input && $0.meterAsked }
            if metered {
                advanceMutedSpeech(id, &actions)
                continue
            }
            if state.sessions[id]?.mutedSpeech.hasBegun == true { actions.append(.notify(id, .mutedSpeechActivity(started: false))) }
            state.sessions[id]?.mutedSpeech = .quiet
        }
    }

    /// The earliest instant a muted call's speech changes by time alone.
    var nextMutedSpeechDeadline: Duration? {
        var next: Duration?
        for session in state.sessions.values where session.mutedSpeech != .quiet {
            if let at = mutedSpeechDeadline(session.mutedSpeech) { next = min(next ?? at, at) }
        }
        return next
    }
}

extension MutedSpeech {
    /// Speech was told to have started (and not yet to have ended).
    public var hasBegun: Bool { if case .speaking = self { true } else { false } }
}

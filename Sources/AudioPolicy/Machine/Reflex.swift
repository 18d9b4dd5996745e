/// The first of a call's decisions, ahead of its run (issue 22): the interruption's mutes a session
/// brings the moment it plays (a new inferred session's first stream, a known one's stream starting, a
/// declared session's `SetActive(true)`), read off the state as it is, without the run.
extension PolicyMachine {
    /// A new inferred session of `configuration` (the caller knows it is new: the core has no session
    /// of its name), playing from its first stream, interrupts the active sessions `interrupts` says
    /// (5.1, 5.2), and its interruption mutes their streams: those mutes, as actions, with the streams'
    /// records noted as muted by us. Nothing when it would be refused (a call is active and it is
    /// neither mixable nor a call: 5.1; the sound server is gone), or interrupts no one. (The rules are
    /// `activate`'s and `interruptOthers`'; `ReflexTests` holds the two to the same result.)
    ///
    /// The shell carries these out on the new stream's first event and then hands the core that event
    /// as usual: the run that follows makes every decision of it, finds these mutes held already, and
    /// unmutes any it does not keep (a stream whose session turned out otherwise). Only mutes: a duck
    /// ramps, and a pause or a notification may wait for the run.
    public mutating func reflex(newSessionOf configuration: SessionConfiguration) -> [PolicyAction] {
        reflexMutes(configuration, besides: nil)
    }

    /// The same for a stream of an inferred session the core knows, not active, that starts running
    /// (pipewire-pulse shows a new stream corked, and starts it once WirePlumber has linked it): its
    /// session activates and interrupts. Nothing unless the stream would count as playing once running
    /// (a stream its meter found silent does not activate its session).
    public mutating func reflex(streamStarts key: StreamKey) -> [PolicyAction] {
        guard let stream = state.streams[key], !stream.isRunning, let session = state.sessions[stream.session], session.origin == .inferred,
              session.status == .inactive || session.status == .refused(.insufficientPriority) else { return [] }
        if key.direction == .output {
            switch stream.sound {
            case .unknown, .heard, .meterFailed: break
            case .quiet, .idle: return []
            }
        }
        return reflexMutes(session.configuration, besides: session.id)
    }

    /// The same for a session's activation (`SetActive(true)` of a declared session: what a declared
    /// call's mute waits on): the mutes of the interruption `activate` brings (a recorder's silencing
    /// of playback, 5.3, waits for the run). Nothing where it would fail or change nothing: no such
    /// session, active already, or a category with input and no microphone.
    public mutating func reflex(activating id: SessionID) -> [PolicyAction] {
        guard let session = state.sessions[id], !session.status.isActive, !lacksInput(session) else { return [] }
        return reflexMutes(session.configuration, besides: id)
    }

    private mutating func reflexMutes(_ configuration: SessionConfiguration, besides own: SessionID?) -> [PolicyAction] {
        guard state.mediaServicesAvailable else { return [] }
        if !configuration.isMixable && !configuration.isCall, state.sessions.values.contains(where: { $0.status.isActive && $0.isCall }) {
            return []
        }
        // (Arrays, not sets: a handful of active sessions; this is on the path a call waits on.)
        var victims: [SessionID] = []
        for session in state.sessions.values where session.id != own && session.status.isActive && Self.interrupts(configuration, session) {
            victims.append(session.id)
        }
        guard !victims.isEmpty else { return [] }
        var muted: [StreamKey] = []
        for stream in state.streams.values where !stream.heldMute && !stream.userOwnsMute && victims.contains(stream.session) {
            muted.append(stream.key)
        }
        muted.sort()
        for key in muted { state.streams[key]?.heldMute = true }
        return muted.map { .mute($0) }
    }
}

/// Whether an interruption begins or ends. Raw values are Apple's.
public enum InterruptionType: UInt, Hashable, Sendable, Codable {
    case ended = 0
    case began = 1
}

/// Options of an ended interruption. Raw values are Apple's.
public struct InterruptionOptions: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// The session may resume playing.
    public static let shouldResume = InterruptionOptions(rawValue: 1)
}

/// Why an interruption began. Raw values are Apple's.
public enum InterruptionReason: UInt, Hashable, Sendable, Codable {
    /// Another session was activated.
    case `default` = 0
    case appWasSuspended = 1
    case builtInMicMuted = 2
    /// The route the session used went away.
    case routeDisconnected = 4
}

/// silenceSecondaryAudioHint: whether a non-mixable session of another app starts or stops playing.
/// Raw values are Apple's.
public enum SilenceSecondaryAudioHintType: UInt, Hashable, Sendable, Codable {
    case end = 0
    case begin = 1
}

/// Options of `setActive(false, ...)`.
public struct SetActiveOptions: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// Tell the sessions this one interrupted that they may resume (SPEC.md 5.6).
    public static let notifyOthersOnDeactivation = SetActiveOptions(rawValue: 1)
}

/// What a session is told (SPEC.md section 5, Notifications).
public enum SessionNotification: Hashable, Sendable {
    case interruption(type: InterruptionType, options: InterruptionOptions, reason: InterruptionReason)
    case routeChange(reason: RouteChangeReason, previousRoute: RouteDescription)
    case silenceSecondaryAudioHint(SilenceSecondaryAudioHintType)
    case mediaServicesWereLost
    case mediaServicesWereReset
    /// Its input is muted (for every app, or by its own `SetInputMuted`), or no longer: said to sessions
    /// that record, before the mute is carried out.
    case inputMuteChanged(Bool)
    /// While its input is muted, someone began (true) or stopped speaking into its microphone
    /// (SPEC.md section 10).
    case mutedSpeechActivity(started: Bool)
    /// A media key (or `audiosessionctl play-pause` ...) for the session now playing: "play", "pause",
    /// "play-pause", "stop", "next", "previous".
    case remoteCommand(String)
}

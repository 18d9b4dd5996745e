/// What the desktop's session does that sound follows (logind on the system bus).
public enum DesktopEvent: Sendable, Hashable {
    /// The machine is about to sleep (PrepareForSleep(true)).
    case sleeping
    /// It woke (PrepareForSleep(false)).
    case woke
    /// The session's screen lock (its LockedHint).
    case screenLocked(Bool)
    /// No logind to follow (no system bus, or no session of ours known to it).
    case unavailable(reason: String)
}

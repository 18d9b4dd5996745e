public import AudioPolicy
public import ServerModel

/// Every duration the agent's shell waits on, in one place, with the policy core's own (grace period,
/// ramps, Bluetooth delays) inside. Nothing in the shell reads a clock or sleeps: its machines keep
/// deadlines as state, computed from these, and one timer wakes them (`AgentTimer`).
public struct AgentSettings: Hashable, Sendable {
    /// The policy core's settings (SPEC.md's defaults).
    public var policy = PolicySettings()
    /// Volume ramps (SPEC.md 5.4) go in steps this far apart.
    public var rampStep: Duration = .milliseconds(25)
    /// A new stream's first seconds: the server's memory may still act on it (PulseAudio as the stream is
    /// created, WirePlumber a moment after it appears). A mute or volume of ours that a stream takes on
    /// then is the server's memory of our hold, not the user's choice.
    public var memoryActsWithin: Duration = .seconds(3)
    /// After the server's memory of an app or role has been put back, a stream that appears may still
    /// have been given our trace (it was created before the put-back landed): corrected this long.
    public var putBackSettles: Duration = .seconds(5)
    /// A default device we asked for that the server has not shown by then (its default not moved at
    /// all) is asked for again, then after twice as long each time, up to `defaultAttempts` requests (2,
    /// 4, 8, 16 s: WirePlumber under load has ignored a new device for longer than a few seconds).
    public var defaultShowsWithin: Duration = .seconds(2)
    public var defaultAttempts = 5
    /// After we move a stream, the server may link it elsewhere for a moment before it reaches the device
    /// (WirePlumber 0.5 linked a stream moved to the speaker to the default, then to nothing, then to the
    /// speaker, within milliseconds): a move of it this soon after ours is not the user's.
    public var moveSettles: Duration = .seconds(2)
    /// A move of a stream we placed, by someone else, away from a device still there, is the user's once
    /// the device is still there this long after: a server rescuing a device's streams moves them
    /// before it removes the device, and the removal may come a batch later.
    public var rescueSettles: Duration = .milliseconds(500)
    /// A volume of ours the server shows after the user's (sent before the agent saw the user's change,
    /// a ramp's step) is followed by the user's again, if ours was sent this little before the user's
    /// change was seen, and shown this little after it: commands land within milliseconds, and a
    /// volume sent longer ago, never shown, landed before the user's (a server shows the last of two
    /// changes it carried out before it was asked).
    public var lateEchoesWithin: Duration = .milliseconds(250)
    /// After the mutes a new stream brings, decided ahead of its batch's run (`ControlTower.reflex`),
    /// are on the socket, the agent leaves the CPU to the server and the apps this long before it runs
    /// the batch (zero: at once). On two cores the run, at once, held the mute back by ~0.3 ms; the
    /// run's other decisions (a player's pause, a notification, a move) lose nothing by this wait.
    public var runAfterAhead: Duration = .milliseconds(1)
    /// A command that failed on a stream that is still there is sent again after this, a few times.
    public var commandRetry: Duration = .milliseconds(200)
    public var commandAttempts = 3
    /// A D-Bus connection (session bus: players; system bus: logind) that could not be made, or was
    /// lost, is tried again after the lower bound, then twice as long each time up to the upper.
    public var busRetry: ClosedRange<Duration> = .seconds(1) ... .seconds(30)
    /// A media player asked for its process and status when it appears on the bus: answered within this,
    /// or told with its status unknown (one slow player holds up no other) and asked again apart, for
    /// `playerLateAnswer` at most.
    public var playerAnswer: Duration = .seconds(1)
    public var playerLateAnswer: Duration = .seconds(10)
    /// A sandboxed app's record permission asked of the desktop portal's store: answered within this,
    /// or the agent's own store decides (a hung portal holds up that app's call this long, no other's).
    public var portalAnswer: Duration = .seconds(1)
    /// A sound server that leaves a command of ours unanswered this long is taken as lost and connected
    /// to again (a fresh snapshot, what is held enforced again, the memory put back): a stalled server
    /// is not waited on for libpulse's 30 s a command, and a hold is never given up for it.
    public var serverAnswerWithin: Duration = .seconds(10)
    /// How long stopping waits for the server to confirm that everything held was undone (its memory of
    /// apps and roles aside: `stopTimeoutForMemory`).
    public var stopTimeout: Duration = .seconds(3)
    /// How long stopping waits for the server's memory of apps and roles to be put back: through streams
    /// of ours on PipeWire, which right after a restart of pipewire-pulse can wait 3 s to be linked and
    /// fail. Left undone, the journal keeps it for the next run, and until then every new stream of that
    /// app or role starts with our duck. (The service's TimeoutStopSec leaves room for it.)
    public var stopTimeoutForMemory: Duration = .seconds(10)
    /// How the streams whose sound decides are metered (SPEC.md section 1): threshold and rate.
    public var meter = MeterSettings()
    /// How a muted call's microphone is metered for speech (SPEC.md section 10): a block is speech from
    /// -40 dBFS (a microphone's own noise stays below; a voice at a desk peaks far above).
    public var speechMeter = MeterSettings(threshold: 0.01)

    public init(policy: PolicySettings = PolicySettings()) { self.policy = policy }
}

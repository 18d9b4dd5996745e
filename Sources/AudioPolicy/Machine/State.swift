public import ServerModel

/// Names a session. The shell makes them: `app:<pid>:<classification>` for apps that do not use the
/// library, the app's own id for those that do.
public struct SessionID: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    /// The name's hash, worked out once (with this process's seed, as every hash is): the core looks
    /// sessions up many times per event, and hashing the name each time was a tenth of its time.
    private let hash: Int

    public init(rawValue: String) {
        self.rawValue = rawValue
        hash = rawValue.hashValue
    }
    public init(_ rawValue: String) { self.init(rawValue: rawValue) }
    public static func == (a: SessionID, b: SessionID) -> Bool { a.hash == b.hash && a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(hash) }
    public init(from decoder: any Decoder) throws { self.init(rawValue: try decoder.singleValueContainer().decode(String.self)) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public static func < (a: SessionID, b: SessionID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { rawValue }
}

/// Names a stream on the server: playback (output) or capture (input), and its index.
public struct StreamKey: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The server's direction: one `Direction` everywhere.
    public typealias Direction = ServerModel.Direction
    public var direction: Direction
    public var index: UInt32
    public init(_ direction: Direction, _ index: UInt32) { self.direction = direction; self.index = index }
    public static func < (a: StreamKey, b: StreamKey) -> Bool {
        (a.direction.rawValue, a.index) < (b.direction.rawValue, b.index)
    }
    public var description: String { "\(direction == .output ? "out" : "in")#\(index)" }
}

/// Where a session came from.
public enum SessionOrigin: String, Hashable, Sendable, Codable {
    /// An app that uses the AudioSession library and declares its session itself.
    case declared
    /// Any other app: a policy file or the role defaults classify its streams; the session is active
    /// while it plays: a stream of it runs and is heard (SPEC.md section 1).
    case inferred
}

/// Where a session stands in arbitration.
public enum SessionStatus: Hashable, Sendable {
    case inactive
    case active
    /// Interrupted by another session (SPEC.md 5.2, 5.5); that session's end may resume it.
    case interrupted(by: SessionID)
    /// Its activation was refused; its streams stay silent until it activates.
    case refused(SessionError.Code)

    public var isActive: Bool { self == .active }
    public var isInterrupted: Bool { if case .interrupted = self { true } else { false } }
}

/// One application's declared intent for audio (SPEC.md section 1), and where it stands.
///
/// A value, kept in one box that a change copies first when another value shares it (copy on write):
/// the core reads every session several times per event, and copying all these fields, strings and
/// routes among them, was a third of its time; now a copy is one reference.
public struct Session: Hashable, Sendable, CustomReflectable {
    /// Rule for `@unchecked Sendable`: a box is changed only through `unique()`, which copies it first
    /// unless this value holds the only reference; a box that two values share (and so that another
    /// thread may read) is never changed.
    private final class Storage: @unchecked Sendable {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }
    private struct Fields: Hashable {
        let id: SessionID
        var app: String
        var origin: SessionOrigin
        var configuration: SessionConfiguration
        var activeConfiguration: SessionConfiguration
        var status: SessionStatus = .inactive
        var notifiesOthersOnDeactivation: Bool
        var pausedByUser: Bool = false
        var duckLevel: Double
        var microphoneAllowed: Bool
        var overridesToSpeaker: Bool = false
        var preferredInput: String? = nil
        var preferredOutputs: [OutputPreference] = []
        var appName: String? = nil
        var preferredDataSources: [String: String] = [:]
        var route: RouteDescription = .none
        var hintBegun: Bool = false
        var deactivatesAt: Duration? = nil
        var silencedUntilPaused: Duration? = nil
        var resumeAwaitedUntil: Duration? = nil
        var infersCalls: Bool = false
        var inferredCall: InferredCall? = nil
        var inputMuted: Bool = false
        var inputMuteSaid: Bool = false
        var mutedSpeech: MutedSpeech = .quiet
        var names: [String] = []
    }
    private var storage: Storage

    init(id: SessionID, app: String, origin: SessionOrigin, configuration: SessionConfiguration, activeConfiguration: SessionConfiguration, notifiesOthersOnDeactivation: Bool, duckLevel: Double, microphoneAllowed: Bool) {
        storage = Storage(Fields(id: id, app: app, origin: origin, configuration: configuration, activeConfiguration: activeConfiguration, notifiesOthersOnDeactivation: notifiesOthersOnDeactivation, duckLevel: duckLevel, microphoneAllowed: microphoneAllowed))
    }

    /// Printed and dumped as its fields (a test's failure shows them), not as its box.
    public var customMirror: Mirror { Mirror(self, children: Mirror(reflecting: storage.fields).children, displayStyle: .struct) }

    /// The box, copied first if another value shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        return storage
    }

    // (The fields compared even when the box is the same: a NaN duck level is unequal to itself, as it was.)
    public static func == (a: Session, b: Session) -> Bool { a.storage.fields == b.storage.fields }
    public func hash(into hasher: inout Hasher) { hasher.combine(storage.fields) }

    public var id: SessionID { storage.fields.id }
    /// The app (process) the session belongs to; sessions of one app never count as "other audio".
    public var app: String {
        get { storage.fields.app }
        set { unique().fields.app = newValue }
    }
    public var origin: SessionOrigin {
        get { storage.fields.origin }
        set { unique().fields.origin = newValue }
    }
    /// The configuration as last set. While inactive, a change waits here for the next activation.
    public var configuration: SessionConfiguration {
        get { storage.fields.configuration }
        set { unique().fields.configuration = newValue }
    }
    /// The configuration in force (copied from `configuration` on activation, or at once while active).
    public var activeConfiguration: SessionConfiguration {
        get { storage.fields.activeConfiguration }
        set { unique().fields.activeConfiguration = newValue }
    }
    public var status: SessionStatus {
        get { storage.fields.status }
        set { unique().fields.status = newValue }
    }
    /// For inferred sessions: ending tells the sessions it interrupted to resume (desktop default).
    public var notifiesOthersOnDeactivation: Bool {
        get { storage.fields.notifiesOthersOnDeactivation }
        set { unique().fields.notifiesOthersOnDeactivation = newValue }
    }
    /// The user paused the player during an interruption (SPEC.md 5.7).
    public var pausedByUser: Bool {
        get { storage.fields.pausedByUser }
        set { unique().fields.pausedByUser = newValue }
    }
    /// How low this session ducks others while it is active, as an amplitude (SPEC.md 5.4).
    public var duckLevel: Double {
        get { storage.fields.duckLevel }
        set { unique().fields.duckLevel = newValue }
    }
    /// Record permission: denied sessions record silence (SPEC.md section 7).
    public var microphoneAllowed: Bool {
        get { storage.fields.microphoneAllowed }
        set { unique().fields.microphoneAllowed = newValue }
    }
    /// The name the user's route choices for one app know it by (`RouteScope.app`).
    public var appName: String? {
        get { storage.fields.appName }
        set { unique().fields.appName = newValue }
    }
    /// Where its sound would rather go, first present wins (its policy file's `output:`, SPEC.md 10).
    public var preferredOutputs: [OutputPreference] {
        get { storage.fields.preferredOutputs }
        set { unique().fields.preferredOutputs = newValue }
    }
    /// Its app muted its own input (`SetInputMuted`): its capture streams are muted.
    public var inputMuted: Bool {
        get { storage.fields.inputMuted }
        set { unique().fields.inputMuted = newValue }
    }
    /// What a session that records was last told of its input's mute (`inputMuteChanged`).
    public internal(set) var inputMuteSaid: Bool {
        get { storage.fields.inputMuteSaid }
        set { unique().fields.inputMuteSaid = newValue }
    }
    /// Every name the user may call its app by (`SessionDeclaration.names`).
    public var names: [String] {
        get { storage.fields.names }
        set { unique().fields.names = newValue }
    }
    /// Whether someone speaks into its microphone while it is a muted call (SPEC.md section 10).
    public internal(set) var mutedSpeech: MutedSpeech {
        get { storage.fields.mutedSpeech }
        set { unique().fields.mutedSpeech = newValue }
    }
    /// `overrideOutputAudioPort(.speaker)` in force.
    public var overridesToSpeaker: Bool {
        get { storage.fields.overridesToSpeaker }
        set { unique().fields.overridesToSpeaker = newValue }
    }
    /// `setPreferredInput`: the uid of the wanted input port.
    public var preferredInput: String? {
        get { storage.fields.preferredInput }
        set { unique().fields.preferredInput = newValue }
    }
    /// `setPreferredDataSource`: the data source wanted on an input port, by port uid.
    public var preferredDataSources: [String: String] {
        get { storage.fields.preferredDataSources }
        set { unique().fields.preferredDataSources = newValue }
    }
    /// The route the session uses (or would use, while inactive).
    public var route: RouteDescription {
        get { storage.fields.route }
        set { unique().fields.route = newValue }
    }
    /// Whether a silenceSecondaryAudioHint `begin` was sent last (mixable sessions only).
    public var hintBegun: Bool {
        get { storage.fields.hintBegun }
        set { unique().fields.hintBegun = newValue }
    }
    /// For inferred sessions: when it counts as inactive if no stream plays again (the grace period).
    public var deactivatesAt: Duration? {
        get { storage.fields.deactivatesAt }
        set { unique().fields.deactivatesAt = newValue }
    }
    /// Its player was paused because private listening ended (SPEC.md 5.8) and has not shown the pause:
    /// its output is silent until it does, or until this instant (one that never pauses is heard again).
    public var silencedUntilPaused: Duration? {
        get { storage.fields.silencedUntilPaused }
        set { unique().fields.silencedUntilPaused = newValue }
    }
    /// An app whose player we played again at its interruption's end, not playing yet: the sessions it
    /// had interrupted wait on it until this instant (played again at once, they would sound together
    /// with it a moment and be paused again once it plays). Past it, still not playing, they play again.
    public var resumeAwaitedUntil: Duration? {
        get { storage.fields.resumeAwaitedUntil }
        set { unique().fields.resumeAwaitedUntil = newValue }
    }
    /// For inferred sessions: whether recording from a microphone while playing makes it a call
    /// (SPEC.md section 1; a policy file's `infer-calls`).
    public var infersCalls: Bool {
        get { storage.fields.infersCalls }
        set { unique().fields.infersCalls = newValue }
    }
    /// For inferred sessions: the call its behaviour shows (it records while it plays), if any. While
    /// it lasts the session's configuration is a call's, and `classified` keeps its own.
    public var inferredCall: InferredCall? {
        get { storage.fields.inferredCall }
        set { unique().fields.inferredCall = newValue }
    }

    /// A call by the configuration in force (a new category waits for the next activation).
    public var isCall: Bool { activeConfiguration.isCall }
    public var isMixable: Bool { activeConfiguration.isMixable }
}

/// A call inferred from an app's behaviour (SPEC.md section 1): it records from a microphone while it
/// plays, with no session of its own declared.
public struct InferredCall: Hashable, Sendable {
    /// The configuration its classification gave it, back in force when the call ends.
    public var classified: SessionConfiguration
    /// The capture stream that showed it, and since when.
    public var capture: StreamKey
    public var since: Duration
    /// When it ends if the app does not record while it plays again (the grace period, as for a stream).
    public var endsAt: Duration?

    /// What an inferred call is: playAndRecord in voiceChat.
    public static let configuration = SessionConfiguration(.playAndRecord, mode: .voiceChat)
}

/// Whether a stream is heard, as far as the policy core knows (SPEC.md section 1). Streams whose session
/// would interrupt, duck or silence someone (or is a call) are metered while they run and someone else
/// plays whom their sound would change: real programs keep silent streams open for hours, and such a
/// stream must activate nothing. (Only then: a meter is a capture, and desktops show a microphone in use
/// while any capture runs.)
public enum StreamSound: Hashable, Sendable {
    /// Not heard yet since it started running (or since its meter stopped, for a player): it counts,
    /// as a stream that starts playing would (but begins no inferred call: that takes a meter's word). (A meter's first block can take a while: PulseAudio
    /// renders up to two seconds ahead, and a meter hears a stream only as the server renders it.)
    case unknown
    /// Its meter's last block was audible.
    case heard
    /// Silent since then (its meter's first silent block after it was heard, or its first block).
    case quiet(since: Duration)
    /// Silent for `callIdleAfter` or longer: not even a call's stream counts any more.
    case idle
    /// Its meter could not be had: it counts while it runs, and is not metered again until it stops
    /// and runs again.
    case meterFailed
}

/// What the machine knows of a stream, and what it holds on it.
public struct StreamRecord: Hashable, Sendable {
    public let key: StreamKey
    public var session: SessionID
    /// Uncorked: the app is playing or recording (heard or not).
    public var isRunning: Bool
    /// Whether it is heard, as its meter last said.
    public var sound: StreamSound = .unknown
    /// The shell was asked to meter it (`.meter(key, true)` sent, `false` not since).
    public var meterAsked = false
    /// Since when it runs (nil: corked).
    public var runningSince: Duration?
    /// The uid of the device it is connected to, if known.
    public var device: String?
    /// We moved it off the default device: the server no longer moves it with the default (PulseAudio
    /// keeps it on the device it was moved to, PipeWire on its target), so it is ours to move back.
    public var pinned = false
    /// The user moved it off the device we had moved it to (a mixer): it stays where the user put it
    /// (SPEC.md section 10: the user's choice wins over a rule), for its life.
    public var userOwnsDevice = false
    /// Pinned, and moved: who moved it is told at the end of the shell's batch (`.streamMoveJudged`);
    /// until then it is not moved.
    public var moveBeingJudged = false
    /// Muted by us (and so to be unmuted by us).
    public var heldMute = false
    /// Ducked by us to this amplitude factor.
    public var heldDuck: Double?
    /// The user changed the mute while we held it: the user wins until the reason ends (SPEC.md 5.11).
    public var userOwnsMute = false
    /// The user changed the volume while we ducked it.
    public var userOwnsVolume = false
}

/// A device the routes may use.
public struct Port: Hashable, Sendable {
    public var description: PortDescription
    public var direction: StreamKey.Direction
    /// For a Bluetooth device: its card and the profiles it offers, for the hands-free switch.
    public var bluetooth: BluetoothCard?
    /// What the device runs at (rate, channels, latency, volume), when the server says.
    public var format: DeviceFormat?
    /// The sound server's own role-based policy links streams of some roles here (WirePlumber 0.5's
    /// role sinks, `policy.role-based.priority`): a stream on it is where that policy put it, and is
    /// not moved (the two policies would fight over it).
    public var isServerRoleTarget: Bool
    public var uid: String { description.uid }
    public var type: PortType { description.type }

    public init(_ description: PortDescription, direction: StreamKey.Direction, bluetooth: BluetoothCard? = nil,
                format: DeviceFormat? = nil, isServerRoleTarget: Bool = false) {
        self.description = description; self.direction = direction; self.bluetooth = bluetooth; self.format = format
        self.isServerRoleTarget = isServerRoleTarget
    }
}

/// A Bluetooth headset's card: its high-quality and hands-free profiles and which is active.
public struct BluetoothCard: Hashable, Sendable {
    public var card: String
    public var a2dpProfile: String
    public var hfpProfile: String?
    public var activeProfile: String
    public init(card: String, a2dpProfile: String, hfpProfile: String?, activeProfile: String) {
        self.card = card; self.a2dpProfile = a2dpProfile; self.hfpProfile = hfpProfile; self.activeProfile = activeProfile
    }
}

/// Tunable values, with SPEC.md's defaults.
public struct PolicySettings: Hashable, Sendable {
    /// How long an inferred session stays active after its last stream stops playing (stops, or is
    /// heard no more) (SPEC.md section 1).
    public var gracePeriod: Duration = .milliseconds(500)
    /// A meter says a stream went silent up to a read late (PipeWire delivers two or three blocks a
    /// read: ~112 ms apart on pipewire-pulse 0.3), and says how long it has been silent already; the
    /// grace period counts from then, taking this much at most (a meter's word never ends a grace
    /// period at once).
    public var silenceSaidLate: Duration = .milliseconds(200)
    /// A call's stream counts from its start (a call must not wait for its first sound), and stops
    /// counting once it has been silent this long: an app idling with an open call stream interrupts
    /// no one for good (SPEC.md section 1). A real call's far end is rarely digital silence this long.
    public var callIdleAfter: Duration = .seconds(60)
    /// Meter the streams whose sound decides (SPEC.md section 1); off, every stream counts while it
    /// runs, heard or not (`audiosessiond --no-meters`).
    public var metersStreams = true
    /// A stream is metered once it has run this long: a new stream counts until its meter's first block
    /// anyway, and opening a meter at once put the server's work on it beside a call's mute (the mute
    /// was reported later: 2.9 against 1.8 ms on PipeWire 1.4); short sounds are never metered at all.
    public var meterAfter: Duration = .milliseconds(200)
    /// A call's stream is metered once it has run this long (a call inferred from its sound was metered
    /// before it was one, and stays so): its sound matters only for `callIdleAfter`,
    /// and meters opened and closed around every call kept WirePlumber 0.4 busy (its policy looks at
    /// the whole graph again at each new or gone node): the next call's stream was linked later.
    public var callMeterAfter: Duration = .seconds(10)
    /// Meter a declared call's microphone while its input is muted, and tell it of speech (SPEC.md
    /// section 10; `audiosessiond --no-meters` turns it off with the rest).
    public var metersMutedSpeech = true
    /// Speech while muted begins once sound has lasted this long with no silence as long within it
    /// (a click, a cough or a door is shorter; a word is about this long).
    public var mutedSpeechStartsAfter: Duration = .milliseconds(300)
    /// And ends once silence has lasted this long (the pauses of speech are shorter).
    public var mutedSpeechEndsAfter: Duration = .milliseconds(1500)
    /// A player paused because its headphones went away is muted until it says it paused (its sound
    /// would go on out loud meanwhile), this long at most: one that never pauses is heard again.
    public var pauseShowsWithin: Duration = .seconds(3)
    /// An app played again at its interruption's end is waited for this long by those it had
    /// interrupted before they play again themselves (a player answers and starts within this).
    public var resumeAwaited: Duration = .seconds(3)
    /// A change of the default device this soon after a device came or went (or a card switched profile)
    /// is the server choosing again by itself, not the user.
    public var deviceChurnSettles: Duration = .milliseconds(1500)
    /// Duck level when a session sets none: -14 dB, 0.2 amplitude (SPEC.md 5.4).
    public var duckLevel: Double = 0.2
    public var duckRampDown: Duration = .milliseconds(150)
    public var duckRampUp: Duration = .milliseconds(500)
    /// A sink that carries a session's sound to several outputs at once stays this long once no one
    /// plays through it: an alarm or a ringtone that sounds again soon plays through it at once.
    public var combinationLingers: Duration = .seconds(30)
    /// Wait before switching a Bluetooth headset to hands-free, and back (SPEC.md section 6).
    public var bluetoothSwitchDelay: Duration = .milliseconds(500)
    public var bluetoothRestoreDelay: Duration = .seconds(2)
    /// A Bluetooth port gone while its card stays waits this long at most for the card to show why.
    public var bluetoothParking: Duration = .seconds(1)
    /// A card's ports coming and going this soon after a profile switch belong to the switch.
    public var bluetoothSwitchWindow: Duration = .seconds(5)
    /// Devices that come or go this soon after waking belong to the wake-up (`wakeFromSleep`, SPEC.md 6):
    /// USB devices are enumerated again and monitors announce themselves within seconds of a resume.
    public var wakeWindow: Duration = .seconds(5)
    public init() {}
}

/// Everything the policy core knows. Pure data: the machine changes it only through `handle`.
public struct PolicyState: Hashable, Sendable {
    public var sessions: [SessionID: Session] = [:]
    public var streams: [StreamKey: StreamRecord] = [:]
    public var ports: [String: Port] = [:]
    /// Port uids in the order they appeared, oldest first: the "last in wins" history stack.
    public var arrivals: [String] = []
    /// Display-audio ports that appeared by themselves and may not take the route (SPEC.md 6).
    public var guardedPorts: Set<String> = []
    /// The device the user chose explicitly, per direction.
    public var userChoice: [StreamKey.Direction: String] = [:]
    /// The outputs the user chose per category or app (`audiosessionctl route --category|--app`), with
    /// the devices connected now (SPEC.md section 10).
    public var userRoutes: [RouteScope: String] = [:]
    /// The preferred outputs per category and per app the user configured (`outputs.yaml`).
    public var outputRoutes = OutputRoutes()
    /// The user's choices per set of devices, kept across runs: they come back when their set does.
    public var rememberedRoutes = RememberedRoutes()
    /// The devices connected, as the choices are remembered against them (nil until a connection's
    /// devices are all listed: the sets on the way are no set the user saw).
    public var deviceSet: DeviceSet?
    public var devicesListed = false
    /// The agent stops: the streams it moved went back to the default, and none is moved again.
    public var stopping = false
    /// When a device last went, or a Bluetooth card's ports came or it switched profile (see
    /// `deviceChurnSettles`): a change of the default then is the server choosing again by itself.
    public var lastDeviceChurn: Duration?
    /// Ports that appeared within `deviceChurnSettles` of now, and when: a default the server moves to
    /// one of them then is its own choice (a new device's priority, PulseAudio's switch-on-connect); a
    /// move to a device that was there already is the user's, however soon after the plug it comes.
    public var recentArrivals: [String: Duration] = [:]
    public var silentMode = false
    /// The microphone is muted for every app (every capture stream that is not a sink's monitor).
    public var inputMuted = false
    /// The apps whose microphone the user muted, by name (`audiosessionctl mic mute APP`), at most
    /// `PolicyState.inputMutedAppsLimit`.
    public var inputMutedApps: Set<String> = []
    public static let inputMutedAppsLimit = 64
    /// The session now playing (SPEC.md 10): the one that last started non-mixable playback (category
    /// playback) and has not ended; an interrupted or paused one stays (the keys resume it).
    public internal(set) var nowPlaying: SessionID?
    /// The sessions playing non-mixable playback now, and, for each that has not ended, the order in
    /// which it last started to (what `nowPlaying` is chosen from: the highest).
    public internal(set) var playingNonMixable: Set<SessionID> = []
    public internal(set) var startedPlaying: [SessionID: Int] = [:]
    public internal(set) var playStarts = 0
    public var screenLocked = false
    public var asleep = false
    /// When the machine last woke from suspend.
    public var wokeAt: Duration?
    public var mediaServicesAvailable = true
    /// The default devices as last set: the route of everything that is not routed otherwise.
    public var systemRoute = RouteDescription.none
    /// Bluetooth cards the machine switched to hands-free, and pending switches.
    public var bluetoothSwitches: [String: BluetoothSwitch] = [:]
    /// Bluetooth cards whose ports are coming or going (absent: nothing under way).
    public var cards: [String: CardPhase] = [:]
    /// Bluetooth ports gone while their card has not shown why (a profile switch or the device leaving),
    /// and since when: the routes that used them change once it has, in one change (A2DP to hands-free,
    /// not A2DP to the speaker and then to hands-free).
    public var departed: [String: DepartedPort] = [:]
    /// The sinks of the agent's own that carry a session's sound to several outputs at once
    /// (`OutputPreference.everywhere`), by name: asked for, and (`unusedSince`) no longer used.
    public var combinations: [String: Combination] = [:]
    /// Combinations found on the server that are no one's (a predecessor's, left by a kill -9), asked
    /// to go: not asked twice.
    public var strayCombinations: Set<String> = []
    /// The ports that are such sinks (a combination's name), found or made.
    public var combinationPorts: Set<String> = []

    public var now: Duration = .zero
    public var settings = PolicySettings()
    public init() {}
}

/// A sink of the agent's own carrying a session's sound to several outputs (`CombinedOutputs`).
public struct Combination: Hashable, Sendable {
    /// Since when no active session plays through it (nil: one does): it goes `combinationLingers` later.
    public var unusedSince: Duration?
    /// Asked for (or found), and not gone since: asked once per appearance (a server that cannot make
    /// it is not asked again and again); one that goes while needed is asked again.
    public var made = false
    /// The outputs it was asked for with (none known for one found on the server).
    public var outputs: [String] = []
}

/// A Bluetooth port gone while its card stays, keeping its place in the routes a moment.
public struct DepartedPort: Hashable, Sendable {
    public var port: Port
    public var since: Duration
}

/// What a Bluetooth card's ports are doing, as far as the routes are concerned (SPEC.md section 6).
public enum CardPhase: Hashable, Sendable {
    /// Some of its ports went away while the card stayed: it is switching profile (the new profile's
    /// ports follow) or the device is leaving (the card goes next). The routes wait until the card
    /// shows which, `bluetoothParking` at most per port (then it counts as a switch: to "off", say).
    case portsLeft(since: Duration)
    /// Switching profile (ours, or anyone's the card showed): its ports going and coming until
    /// `bluetoothSwitchWindow` has passed belong to the switch.
    case switching(since: Duration)
    /// The card went away: its ports going now are the device leaving.
    case gone(since: Duration)

    var since: Duration {
        switch self {
        case .portsLeft(let since), .switching(let since), .gone(let since): since
        }
    }
}

/// A Bluetooth card's profile switch, pending or done.
public struct BluetoothSwitch: Hashable, Sendable {
    public var card: String
    /// The profile to switch to, and when.
    public var target: String
    public var at: Duration
    /// The profile to go back to afterwards.
    public var original: String
    public var done: Bool
}

/// Everything that happens to the policy core (DESIGN.md's event list). The shell turns server,
/// D-Bus and library messages into these.
public enum PolicyEvent: Hashable, Sendable {
    /// A session appears: an app declared it (library), or the shell classified a new app's stream.
    case declare(SessionDeclaration)
    /// `setCategory(_:mode:options:)`.
    case setCategory(SessionID, SessionConfiguration)
    /// `setActive(true)`.
    case activate(SessionID)
    /// `setActive(false, options:)`.
    case deactivate(SessionID, SetActiveOptions)
    /// The app is gone.
    case remove(SessionID)

    /// A stream, in a session. `pinned`: the shell knows it off the default devices by a move of ours (a
    /// predecessor's, its journal says; or one the server gave it, sending a new stream of an app or
    /// role where it remembers our move of another): it no longer follows the default, as one this
    /// core moved. (Told again for a stream the core has: set, never cleared by this.)
    case streamAppeared(StreamKey, session: SessionID, running: Bool, device: String?, pinned: Bool = false)
    /// Corked or uncorked.
    case streamRunning(StreamKey, Bool)
    /// A metered stream's meter: audible (true) or silent (false) since its last report; silent, for
    /// this long already when said (the grace period counts from the stream's last sound; taken up to
    /// `PolicySettings.silenceSaidLate`).
    case streamHeard(StreamKey, Bool, silentFor: Duration = .zero)
    /// A stream's meter could not be had (or was lost for good): it counts while it runs.
    case meterFailed(StreamKey)
    case streamMoved(StreamKey, device: String?)
    /// A stream's move, judged once the batch it came in is through: `byUser`, it went elsewhere than we
    /// asked, while the device it was on is still there, and not just after our own move (the server
    /// moves a stream we pinned off its device when the device goes, and WirePlumber 0.5 relinks one
    /// through other devices for a moment after our move: `moveSettles`). `toDefault`: where it went
    /// is the server's default device (which may be one the core does not route to: a filter's sink).
    case streamMoveJudged(StreamKey, to: String?, byUser: Bool, toDefault: Bool = false)
    case streamGone(StreamKey)
    /// The user (not us) changed a stream's mute or volume.
    case userChangedStream(StreamKey, mute: Bool, volume: Bool)
    /// The shell could not carry out a mute or volume hold on a stream that is still there (the server
    /// refused it, again and again): nothing is held there, as if the user had taken it over.
    case holdFailed(StreamKey, mute: Bool, volume: Bool)
    /// The player was paused or played by the user's hand (MPRIS), not by us.
    case userPaused(SessionID)
    case userPlayed(SessionID)
    /// The shell sent the pause a `.pausePlayer(_, why: .privateListeningEnded)` asked for to the session's
    /// players, and they have yet to show it: its output is silenced until they do (`.pauseShown`), for
    /// `pauseShowsWithin` at most (SPEC.md 5.8).
    case pauseOnItsWay(SessionID)
    /// Every player that pause went to has shown it (paused, stopped, gone, or refused it).
    case pauseShown(SessionID)
    /// A `.resumePlayer` played nothing (no player of the app on the bus, none paused by us, or the user's
    /// own): those waiting on the session (`resumeAwaitedUntil`) wait no more.
    case nothingResumed(SessionID)

    case portAppeared(Port)
    /// A sink of ours for several outputs (`CombinedOutputs`) is there (made, or found), and whether a
    /// stream plays on it now (one found with none goes at once; with one, once what comes with it,
    /// the streams of a listing, is known). It goes as a port (`portGone`).
    case combinationAppeared(String, inUse: Bool)
    case portChanged(Port)
    /// A port went away. A Bluetooth port whose card stays waits for the card to show why (see `CardPhase`).
    case portGone(String)
    /// A card's active profile changed (anyone's switch, ours included).
    case cardProfileChanged(String)
    /// A card went away (a Bluetooth device disconnected, a USB card unplugged).
    case cardGone(String)
    /// A card a previous run of the agent switched to hands-free (from `original`) and could not switch
    /// back (it was killed): it goes back once no session needs hands-free, as if this run had switched it.
    case bluetoothSwitchAdopted(card: String, current: String, original: String)
    /// The user picked a device by hand (pavucontrol, the desktop's sound settings).
    case userSelectedPort(String)
    /// The user chose an output for every session of a category or for one app (nil: the choice is
    /// dropped), with the devices connected now: remembered against them.
    case setUserRoute(RouteScope, String?)
    /// The choices the user made per set of devices, as the last run kept them.
    case routesRemembered(RememberedRoutes)
    /// The user's preferred outputs per category and per app, as configured (at the start, and again
    /// on a reload).
    case outputRoutes(OutputRoutes)
    /// The server's default device of a direction changed to this port, not at our request (the shell
    /// knows its own requests coming back). `previousStillThere`: the device it replaced is still
    /// connected. The core tells the user's choice from the server falling back by itself (a device on
    /// its way out, a card switching profile: soon after a device came or went).
    case defaultDeviceChanged(StreamKey.Direction, to: String, previousStillThere: Bool)
    /// The devices a connection found are all announced: they were there already, none came or went (a
    /// user's choice right after the agent starts is the user's). The shell announces the server's
    /// current default devices last (the last port of each direction is where sound goes already).
    case devicesListed
    /// `overrideOutputAudioPort(.speaker)` (true) or `.none` (false).
    case overrideOutput(SessionID, toSpeaker: Bool)
    /// `setPreferredInput`: a port uid, or nil for no preference.
    case setPreferredInput(SessionID, String?)
    /// `setPreferredDataSource` on an input port: which of the device's own sources (its ALSA port,
    /// e.g. "Internal Microphone" or "Headset Microphone") to use; nil for no preference.
    case setPreferredDataSource(SessionID, port: String, dataSource: String?)
    /// `setRecordPermission`: granted or denied.
    case setMicrophone(SessionID, allowed: Bool)
    /// The microphone muted for every app (`InputMuted` on the agent's object), or no longer.
    case inputMuted(Bool)
    /// A declared app's own input mute (`SetInputMuted` on its session).
    case setInputMuted(SessionID, Bool)
    /// The user muted one app's microphone (`audiosessionctl mic mute APP`), or no longer: its sessions'
    /// captures, those started later too, by any of its names (`Session.names`).
    case appInputMuted(String, Bool)

    case silentMode(Bool)
    case screenLocked(Bool)
    case sleep
    case wake
    /// The sound server went away / came back.
    case mediaServicesLost
    case mediaServicesReset
    /// The agent stops: streams it moved off the default go back to it (which makes the server forget
    /// where they were moved: PulseAudio's preferred device, WirePlumber's remembered target).
    case stopping
    /// Time passed (the shell sends it at the instants the machine asked for with `.wakeUp`).
    case tick
}

/// A session as the shell or the library declares it.
public struct SessionDeclaration: Hashable, Sendable {
    public var id: SessionID
    public var app: String
    public var origin: SessionOrigin
    public var configuration: SessionConfiguration
    public var notifiesOthersOnDeactivation: Bool
    public var duckLevel: Double?
    public var microphoneAllowed: Bool
    /// Inferred sessions: recording from a microphone while playing makes it a call (SPEC.md section 1).
    public var infersCalls: Bool
    /// Where its sound would rather go, first present wins (SPEC.md section 10).
    public var preferredOutputs: [OutputPreference]
    /// The name the user's route choices for one app know it by: its policy file's name, else its
    /// program's (`audiosessionctl route --app NAME`).
    public var appName: String?
    /// Every name the user may call its app by (`audiosessionctl mic mute APP`): its app id, its
    /// program's file name, the name it goes by, its policy file's name. For an app that declared its
    /// session these come from the bus daemon, the sandbox and /proc (the name: its command name, as
    /// `ps` and the session's id show it: `python3` for `python3.11`); for one that did not, from what
    /// its streams say of themselves (`application.name` ...), which an app may change: a name to find
    /// it by, not a proof of who it is.
    public var names: [String] = []

    /// The names, each once, in this order; none empty.
    public static func names(appID: String?, binary: String?, name: String?, policy: String?) -> [String] {
        var names: [String] = []
        for name in [appID, binary, name, policy] { if let name, !name.isEmpty, !names.contains(name) { names.append(name) } }
        return names
    }

    public init(
        _ id: SessionID, app: String, origin: SessionOrigin, configuration: SessionConfiguration,
        notifiesOthersOnDeactivation: Bool = true, duckLevel: Double? = nil, microphoneAllowed: Bool = true,
        infersCalls: Bool = false, preferredOutputs: [OutputPreference] = [], appName: String? = nil
    ) {
        self.appName = appName
        self.id = id; self.app = app; self.origin = origin; self.configuration = configuration
        self.notifiesOthersOnDeactivation = notifiesOthersOnDeactivation; self.duckLevel = duckLevel
        self.microphoneAllowed = microphoneAllowed; self.infersCalls = infersCalls; self.preferredOutputs = preferredOutputs
    }
}

/// What the core asks the shell to do (DESIGN.md's action list).
public enum PolicyAction: Hashable, Sendable {
    case mute(StreamKey)
    case unmute(StreamKey)
    /// Ramp the stream's volume to `level` times the user's volume.
    case duck(StreamKey, level: Double, ramp: Duration)
    /// Ramp it back to the user's volume.
    case unduck(StreamKey, ramp: Duration)
    /// What was held on the stream (its mute, its duck) is the user's now, or the server would not take
    /// it (SPEC.md 5.11): nothing of it is held any more, and nothing is to be undone.
    case letGo(StreamKey, mute: Bool, volume: Bool)
    /// Meter the stream (true: its sound decides whether its session plays; reported back with
    /// `.streamHeard`), or stop metering it.
    case meter(StreamKey, Bool)
    case moveStream(StreamKey, toDevice: String)
    /// Make a sink of our own named `name` that carries what plays on it to each of `outputs` (a session
    /// that plays on several at once); its arrival is a port like any other (`CombinedOutputs`).
    case makeCombination(name: String, outputs: [String])
    /// Remove that sink (its streams fall back to the default).
    case removeCombination(name: String)
    case setDefaultDevice(StreamKey.Direction, String)
    /// `from`: the profile the card leaves and goes back to afterwards (a switch to hands-free for a call);
    /// nil for the way back. (The shell journals a switch away before it, for a successor after a crash.)
    case setCardProfile(card: String, profile: String, from: String? = nil)
    /// Select a device's own port (a data source of an input).
    case setActivePort(device: String, port: String)
    /// Pause or play the app's player (MPRIS) where one matches. A pause for an interruption is undone
    /// by `resumePlayer` when it ends; one because private listening ended is never undone (plugging
    /// the headphones back starts nothing).
    /// `by`: the session whose activation interrupted it (for an interruption).
    case pausePlayer(SessionID, why: PauseReason = .interruption, by: SessionID? = nil)
    case resumePlayer(SessionID)
    case notify(SessionID, SessionNotification)
    /// The answer to `.activate`, `.deactivate` or `.setCategory`: nil for success.
    case reply(SessionID, SessionError?)
    case logRouteChange(RouteChange)
    /// Send `.tick` at this instant (the earliest pending deadline).
    case wakeUp(at: Duration)
    /// An inferred session with no stream left and nothing to do is over: the core forgot it (the shell
    /// forgets what it kept for it; a stream of its app later is a new session).
    case sessionEnded(SessionID)
    /// The session now playing changed (nil: none): where the media keys' commands go (SPEC.md 10).
    case nowPlaying(SessionID?)
    /// The user's route choices per set of devices changed: keep them for the next run.
    case keepRoutes(RememberedRoutes)
}

/// Why a player is paused.
public enum PauseReason: String, Hashable, Sendable {
    case interruption
    /// The headphones or headset it played on went away.
    case privateListeningEnded
}

/// One route change, for the route-change log (SPEC.md section 6).
public struct RouteChange: Hashable, Sendable {
    public var reason: RouteChangeReason
    public var previousRoute: RouteDescription
    public var route: RouteDescription
    /// The event that caused it, in words.
    public var cause: String
    /// The sessions whose route this was ("system" changes also move every session that follows the default).
    public var sessions: [SessionID]
    /// True for the default devices (the route of everything not routed otherwise).
    public var isSystemRoute: Bool
}

extension PolicyEvent {
    var isDeclaration: Bool {
        if case .declare = self { true } else { false }
    }

    /// Whether the devices connected may have changed (or are all listed now).
    var changesDeviceSet: Bool {
        switch self {
        case .portAppeared, .portGone, .cardGone, .devicesListed: true
        default: false
        }
    }

    /// Whether what a session is told of its input's mute may change (its category in force, or a mute).
    var mayChangeInputMute: Bool {
        switch self {
        case .declare, .setCategory, .activate, .inputMuted, .setInputMuted, .appInputMuted: true
        default: false
        }
    }

    /// The session the event names, if it names one.
    public var session: SessionID? {
        switch self {
        case .declare(let d): d.id
        case .setCategory(let id, _), .activate(let id), .deactivate(let id, _), .remove(let id), .userPaused(let id),
             .userPlayed(let id), .pauseOnItsWay(let id), .pauseShown(let id), .nothingResumed(let id), .overrideOutput(let id, _), .setPreferredInput(let id, _), .setMicrophone(let id, _),
             .setPreferredDataSource(let id, _, _), .setInputMuted(let id, _):
            id
        default: nil
        }
    }
}

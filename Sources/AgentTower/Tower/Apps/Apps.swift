public import AudioPolicy

/// An app on the session bus, as the bus daemon's credentials say, never as the app says itself.
public struct AppClient: Sendable, Hashable {
    /// Its unique name on the bus (":1.42").
    public var busName: String
    public var processID: Int?
    public var userID: Int?
    /// A sandboxed app's id (Flatpak), read from its process's /.flatpak-info.
    public var appID: String?
    /// Its command name (/proc/PID/comm), for the session's name.
    public var name: String
    /// Its program's file name (/proc/PID/exe), for the policy files' `match.binary`.
    public var binary: String?
    /// What the user decided about it recording, as the permission store said when it first called
    /// (nil: nothing yet): a denied app records silence from its session's start, asked or not.
    public var recordDecision: Bool?

    public init(busName: String, processID: Int?, userID: Int? = nil, appID: String? = nil, name: String, binary: String? = nil,
                recordDecision: Bool? = nil) {
        self.busName = busName; self.processID = processID; self.userID = userID; self.appID = appID; self.name = name
        self.binary = binary; self.recordDecision = recordDecision
    }

    /// The caller in a log line: its name and process.
    var said: String { "\(name)[\(processID.map(String.init) ?? "?")]" }
}

/// What an app asks of its session (org.audiosession.Agent1 and org.audiosession.Session1 on the
/// session bus). Sessions are named by their object path: the D-Bus side checks nothing but the
/// syntax of the arguments; whose session it is, is decided here.
public enum AppRequest: Sendable, Hashable {
    /// `GetSession`: the caller's session, made on the first call.
    case getSession
    case setCategory(session: String, category: String, mode: String, options: [String])
    case setActive(session: String, active: Bool, options: [String])
    /// The session's properties (`Get`, `GetAll`).
    case properties(session: String)
    /// `OverrideOutputAudioPort`: "none" or "speaker".
    case overrideOutput(session: String, port: String)
    /// `SetPreferredInput`: an input port's uid ("" for none).
    case setPreferredInput(session: String, uid: String)
    /// `SetPreferredDataSource`: a data source's id on one of the inputs ("" for none).
    case setPreferredDataSource(session: String, id: String)
    case setPreferredSampleRate(session: String, hertz: Double)
    case setPreferredIOBufferDuration(session: String, seconds: Double)
    /// `RequestRecordPermission`, with what the user decided for the app (the permission store; nil:
    /// nothing yet).
    case requestRecordPermission(session: String, decided: Bool?)
    /// The agent's `SilentMode` (SPEC.md 5.10): read (nil, with the agent's other properties), or set.
    case silentMode(Bool?)
    /// The agent's `InputMuted` set: the microphone muted for every app, or no longer (SPEC.md 10.2).
    case inputMuted(Bool)
    /// `SetAppInputMuted(sb)`: the user mutes one app's microphone (by its app id, program or policy
    /// name), or no longer (SPEC.md section 10).
    case appInputMuted(app: String, muted: Bool)
    /// `SetInputMuted`: the app's own input muted, or no longer.
    case setInputMuted(session: String, muted: Bool)
    /// `RemoteCommand` on the agent's object: a media key for what is now playing ("play-pause" ...);
    /// also the MPRIS player the agent owns (`org.mpris.MediaPlayer2.audiosession`): its Play, Pause ...
    case remoteCommand(String)
    /// That player's properties (`Get`, `GetAll`).
    case nowPlayingProperties
    /// `SetNowPlayingInfo(a{sv})`: what the app plays, for the agent's MPRIS player while it is now playing.
    case setNowPlayingInfo(session: String, NowPlayingInfo)
    /// `Status`: every session and the route, for `audiosessionctl status`.
    case status
    /// `SetRoute(ss)`: the user's output for a scope (`default`, `default-input`, `category:NAME`,
    /// `app:NAME`), a device's name ("" drops a category's or an app's choice): remembered with the
    /// devices connected (SPEC.md section 10).
    case setRoute(scope: String, device: String)
}

/// What the session bus tells the tower about apps.
public enum AppEvent: Sendable, Hashable {
    /// A call, with the number its answer is sent back under.
    case call(token: UInt64, from: AppClient, AppRequest)
    /// The app left the bus (its connection closed, or it crashed).
    case gone(busName: String)
    /// The API is offered on this bus: its name is ours.
    case served(busName: String)
    /// The API cannot be offered on this bus (its name is another's).
    case unavailable(reason: String)
}

/// The answer to an app's call.
public enum AppReply: Sendable, Hashable {
    case session(path: String)
    case done
    case properties(AppSessionProperties)
    /// `RequestRecordPermission`'s answer.
    case permission(Bool)
    /// `Status`'s answer: the report as JSON.
    case status(String)
    /// The agent object's properties: silent mode, the microphone's mute, and the caller's own sessions.
    case agentProperties(silentMode: Bool, inputMuted: Bool, sessions: [String], inputMutedApps: [String] = [])
    /// The apps whose microphone the user muted, by name (`SetAppInputMuted`'s answer).
    case inputMutedApps([String])
    /// Where a remote command went, in words.
    case remoteCommandSent(String)
    /// What a route choice did, in words.
    case routeSet(String)
    /// What the agent's MPRIS player shows: what is now playing.
    case nowPlaying(NowPlayingProperties, position: Duration? = nil)
    /// An error of the audio-session model (org.audiosession.Error.<Code>).
    case failed(SessionError)
    /// Not the caller's session (org.freedesktop.DBus.Error.AccessDenied).
    case refused(String)
}

/// What the agent's MPRIS player (`org.mpris.MediaPlayer2.audiosession`) shows: the session now
/// playing and its status, mirrored from its app's player (or a declared app's activity).
public struct NowPlayingProperties: Sendable, Hashable {
    /// The session now playing (nil: none).
    public var session: String?
    public var status: PlaybackStatus
    /// What it plays, as its player or its app says.
    public var info: NowPlayingInfo
    public init(session: String?, status: PlaybackStatus, info: NowPlayingInfo = NowPlayingInfo()) {
        self.session = session; self.status = status; self.info = info
    }
}

/// A declared session as its app sees it (Session1's properties).
public struct AppSessionProperties: Sendable, Hashable {
    public var category: String
    public var mode: String
    public var options: [String]
    public var isActive: Bool
    public var isOtherAudioPlaying: Bool
    public var secondaryAudioShouldBeSilencedHint: Bool
    public var route: RouteDescription
    public var availableInputs: [PortDescription]
    /// What the route's devices run at (the preferences asked for beside them).
    public var hardware: HardwareValues?
    /// "undetermined", "denied" or "granted".
    public var recordPermission: String
    /// Its input is muted: for every app, or by its own `SetInputMuted`.
    public var inputMuted: Bool
}

/// The apps that declared their session on the bus: a pure record. One session per bus connection;
/// an app's streams (its process and its children, or its Flatpak app id) belong to it.
package struct Apps: Sendable, Hashable {
    struct Declared: Sendable, Hashable {
        var client: AppClient
        var session: SessionID
        var path: String
        /// In the order declared.
        var number: Int
        /// `SetPreferredSampleRate`, `SetPreferredIOBufferDuration`.
        var preferences = HardwarePreferences()
        /// What the user decided when the app last asked (nil: nothing, or not asked).
        var recordPermission: Bool?
        /// What it said it plays (`SetNowPlayingInfo`), and when (the tower's clock).
        var nowPlayingInfo = NowPlayingInfo()
        var nowPlayingSaidAt: Duration = .zero
    }

    private(set) var byBusName: [String: Declared] = [:]
    private var busNameOfPath: [String: String] = [:]
    private(set) var pathOfSession: [SessionID: String] = [:]
    private var next = 1

    static let pathPrefix = SessionWords.sessionPathPrefix
    /// One session per bus connection, and at most this many connections' sessions per process.
    static let sessionsPerProcess = 16

    /// The caller's session: made now (`new`) or found.
    mutating func session(of client: AppClient) -> (Declared, new: Bool) {
        if let known = byBusName[client.busName] { return (known, false) }
        let number = next
        next += 1
        let owner = client.processID.map(String.init) ?? client.busName
        // (A sandboxed app by its app id: its command is the same "python3" or "bwrap" as many others'.)
        var id = SessionID("\(client.appID ?? client.name)[\(owner)]:declared")
        if pathOfSession[id] != nil { id = SessionID("\(id.rawValue)#\(number)") }
        let declared = Declared(client: client, session: id, path: "\(Self.pathPrefix)\(number)", number: number)
        byBusName[client.busName] = declared
        busNameOfPath[declared.path] = client.busName
        pathOfSession[id] = declared.path
        return (declared, true)
    }

    /// The session at `path` if it is the caller's; otherwise nil, with why not in words.
    func own(_ path: String, by client: AppClient) -> (Declared?, why: String) {
        guard let owner = busNameOfPath[path], let declared = byBusName[owner] else {
            return (nil, "no session \(Self.quoted(path))")
        }
        guard owner == client.busName else { return (nil, "\(path) is another app's session") }
        return (declared, "")
    }

    /// What an app sent, fit for a message or a log line: escaped, and not longer than a line.
    package static func quoted(_ text: String) -> String { "'\(Escape.forDisplay(String(text.prefix(80))))'" }

    mutating func decided(_ allowed: Bool?, for busName: String) { byBusName[busName]?.recordPermission = allowed }

    mutating func say(_ info: NowPlayingInfo, for busName: String, at now: Duration) {
        byBusName[busName]?.nowPlayingInfo = info
        byBusName[busName]?.nowPlayingSaidAt = now
    }

    /// The declared session whose object is at `path`.
    func declared(at path: String) -> Declared? { busNameOfPath[path].flatMap { byBusName[$0] } }
    func busName(at path: String) -> String? { busNameOfPath[path] }

    mutating func prefer(_ change: (inout HardwarePreferences) -> Void, for busName: String) {
        if var declared = byBusName[busName] {
            change(&declared.preferences)
            byBusName[busName] = declared
        }
    }

    /// The caller's sessions (one per connection: none or one).
    func paths(of client: AppClient) -> [String] { byBusName[client.busName].map { [$0.path] } ?? [] }

    /// The app left the bus: its session, to be removed.
    mutating func gone(_ busName: String) -> Declared? {
        guard let declared = byBusName.removeValue(forKey: busName) else { return nil }
        busNameOfPath[declared.path] = nil
        pathOfSession[declared.session] = nil
        return declared
    }

    /// The declared session a stream of this process (or Flatpak app) belongs to: the nearest declaring
    /// process up the tree (a few generations), else the app id.
    func session(ofProcess pid: Int?, appID: String?, parent: (Int) -> Int?) -> SessionID? {
        guard !byBusName.isEmpty else { return nil }
        var byProcess: [Int: SessionID] = [:]
        var byApp: [String: SessionID] = [:]
        // (Several connections of one process: the first declared wins, for every stream of it.)
        for declared in byBusName.values.sorted(by: { $0.number < $1.number }) {
            if let p = declared.client.processID, byProcess[p] == nil { byProcess[p] = declared.session }
            if let a = declared.client.appID, byApp[a] == nil { byApp[a] = declared.session }
        }
        var current = pid
        var generations = 0
        while let p = current, p > 1, generations <= Players.generations {
            if let id = byProcess[p] { return id }
            current = parent(p)
            generations += 1
        }
        return appID.flatMap { byApp[$0] }
    }

    /// Parses what an app sent; a word not in SPEC.md's vocabulary is a bad parameter, named.
    static func configuration(category: String, mode: String, options: [String]) -> Result<SessionConfiguration, SessionError> {
        SessionWords.configuration(category: category, mode: mode, options: options).mapError(refusal)
    }

    static func setActiveOptions(_ names: [String]) -> Result<SetActiveOptions, SessionError> {
        SessionWords.setActiveOptions(names).mapError(refusal)
    }

    /// The word an app sent that is not one, named (escaped), with the words accepted.
    static func refusal(_ unknown: SessionWords.UnknownWord) -> SessionError {
        switch unknown {
        case .category(let word):
            SessionError(.badParam, "unknown category \(quoted(word)) (accepted: \(Category.allCases.map(\.rawValue).joined(separator: ", ")))")
        case .mode(let word):
            SessionError(.badParam, "unknown mode \(quoted(word)) (accepted: \(Mode.allCases.map(\.rawValue).joined(separator: ", ")))")
        case .option(let word):
            SessionError(.badParam, "unknown option \(quoted(word)) (accepted: \(CategoryOptions.named.map(\.name).joined(separator: ", ")))")
        case .setActiveOption(let word):
            SessionError(.badParam, "unknown option \(quoted(word)) (accepted: notifyOthersOnDeactivation)")
        }
    }
}

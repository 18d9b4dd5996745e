public import AudioPolicy
public import Logging
public import ServerModel

/// What the agent's loop hands the control tower (one batch at a time, in the order they came).
public enum TowerInput: Sendable {
    /// Something happened on the sound server.
    case server(PulseEvent)
    /// A command sent earlier was answered.
    case answered(CommandID, Result<ServerAnswer, PulseError>)
    /// The timer fired: time to act on the deadlines that are due.
    case tick
    /// The policy files as read (at the start, and again on SIGHUP).
    case policies(PolicySet)
    /// What a previous run left in the journal (read once, before the first connection).
    case recovered(JournalLeftovers)
    /// Whether the journal can be written.
    case journal(JournalHealth)
    /// Undo everything and stop (SIGTERM, SIGINT).
    case stop
    /// Media players on the session bus (MPRIS).
    case players(PlayerEvent)
    /// The desktop session: sleep and wake, the screen lock (logind).
    case desktop(DesktopEvent)
    /// A command to a player was answered (`error`: why it failed).
    case playerAnswered(name: String, PlayerCommand, error: String?)
    /// Apps that declare their own session on the session bus.
    case app(AppEvent)
    /// A meter's report (a playback stream's, or a capture's microphone's): heard, silent, or failed.
    case sound(SoundReport)
    /// What the user set that outlives the agent, as the state directory has it (once, at the start),
    /// and what was wrong with the file, if anything.
    case kept(KeptSettings, problem: String?)
}

extension TowerInput {
    /// A client appeared or changed (the events a stream's reflex looks past: a new app's client news
    /// comes just before its stream's info).
    var isClientNews: Bool { if case .server(let event) = self { event.isClientNews } else { false } }
}

/// A command sent to the server, to match its answer.
public struct CommandID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public var description: String { "#\(rawValue)" }
}

/// Whether the journal's last write went through; `failing` names why not (a full disk, a read-only
/// folder): the agent works on, but a `kill -9` would leave what it holds unknown to its successor.
public enum JournalHealth: Hashable, Sendable {
    case writable
    case failing(String)

    /// In words, as the agent's client on the server says it (`ControlTower.journalProperty`, read by
    /// `audiosessionctl status`): "writable", or "failing: why".
    public var words: String {
        switch self {
        case .writable: "writable"
        case .failing(let reason): "failing: \(reason)"
        }
    }

    /// From those words; nil for words that are neither.
    public init?(words: String) {
        if words == "writable" { self = .writable } else if words.hasPrefix("failing: ") {
            self = .failing(String(words.dropFirst("failing: ".count)))
        } else { return nil }
    }
}

/// Whether apps reach the agent on the session bus (`org.audiosession.Agent1` ours, or why not).
public enum AppsReach: Hashable, Sendable {
    case served
    case notServed(String)

    /// In words, as the agent's client on the server says it (`ControlTower.appsProperty`): "served", or
    /// "not served: why".
    public var words: String {
        switch self {
        case .served: "served"
        case .notServed(let reason): "not served: \(reason)"
        }
    }

    /// From those words; nil for words that are neither.
    public init?(words: String) {
        if words == "served" { self = .served } else if words.hasPrefix("not served: ") {
            self = .notServed(String(words.dropFirst("not served: ".count)))
        } else { return nil }
    }
}

/// One log line the tower asks for: a value, compared by what it says (its level, message and
/// metadata). Its words are made only when it is written (after the commands before it have gone
/// out) or compared, never for a line the log drops: building them is the dear part.
public struct LogLine: Sendable, Equatable, CustomStringConvertible {
    public let level: Logger.Level
    let words: @Sendable () -> (String, Logger.Metadata)

    init(_ level: Logger.Level, _ words: @escaping @Sendable () -> (String, Logger.Metadata)) {
        self.level = level
        self.words = words
    }

    /// What it says: the message and its metadata.
    public var said: (message: String, metadata: Logger.Metadata) { words() }

    public static func == (a: LogLine, b: LogLine) -> Bool {
        let (x, y) = (a.said, b.said)
        return a.level == b.level && x.message == y.message && x.metadata == y.metadata
    }

    public var description: String {
        let (message, metadata) = said
        return "\(level) \(message)" + metadata.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
    }
}

/// What the control tower asks the loop to do, in this order. Data: a test compares them.
public enum TowerEffect: Sendable, Equatable {
    /// Send a command to the server without waiting; its answer comes back as `.answered`.
    case send(CommandID, ServerCommand)
    /// Record a change of what is held (before the command that makes it: write-ahead).
    case journal(JournalChange)
    /// Append a route change to the route-change log.
    case routeLog(RouteChange)
    /// A log line (formatted only when it is written, after the commands before it have gone out).
    case log(LogLine)
    /// Pause or play a media player (MPRIS), by its name on the session bus; the answer comes back as
    /// `.playerAnswered`.
    case player(name: String, PlayerCommand)
    /// The answer to an app's call (`AppEvent.call`), under its token.
    case appReply(token: UInt64, AppReply)
    /// Tell a declared session's app (a signal on its session object).
    case appSignal(path: String, SessionNotification)
    /// Start (true) or stop metering a playback stream, or the microphone a capture stream records
    /// from (the speech of a muted call, SPEC.md section 10); its reports come back
    /// as `.sound`.
    case meter(StreamReference, Bool)
    /// What the user set that outlives the agent changed: keep it (`TowerInput.kept` at the next start).
    case keep(KeptSettings)
    /// A media key for a player (the user's command, through the agent: what it answers decides nothing,
    /// a refusal is only said).
    case remote(name: String, PlayerCommand)
    /// What the agent's MPRIS player shows changed (PropertiesChanged on the bus).
    case nowPlayingChanged(NowPlayingProperties)
    /// The player now playing jumped to this position (its `Seeked`): said by the agent's player too.
    case nowPlayingSeeked(Duration)
    /// Everything is undone: the loop may end.
    case finished
}

/// What a command was sent for, so that its answer (or failure) goes back to the machine that sent it.
enum Purpose: Hashable, Sendable {
    /// A mute or volume of a stream we hold (`Holds`).
    case stream(StreamKey)
    /// A read of the server's memory before the first hold of an app or role.
    case memoryRead(String)
    /// Putting the server's memory of an app or role back.
    case memoryPutBack(String)
    /// A step of taking the server's own policy modules over, or giving them back.
    case module(ModuleTakeover.Step)
    /// A Bluetooth card's profile (hands-free for a call, or back).
    case cardProfile(card: String, profile: String)
    /// Anything else: a failure is logged with these words.
    case other(String)
    /// The load of a sink of ours for several outputs (`CombinedOutputs`), by its name.
    case combination(String)

    var isMemoryPutBack: Bool { if case .memoryPutBack = self { true } else { false } }
}

/// Where the tower's machines put their commands, journal changes and log lines. The order of the
/// effects is the order they are carried out in: the journal before the command it records, the
/// commands before the log lines that explain them.
struct Outbox {
    var effects: [TowerEffect] = []
    /// Commands sent and not answered yet, with what they were for.
    var pending: [CommandID: Purpose] = [:]
    private var next: UInt64 = 1

    @discardableResult
    mutating func send(_ command: ServerCommand, for purpose: Purpose) -> CommandID {
        let id = CommandID(rawValue: next)
        next += 1
        pending[id] = purpose
        effects.append(.send(id, command))
        return id
    }

    mutating func journal(_ change: JournalChange) { effects.append(.journal(change)) }

    mutating func keep(_ settings: KeptSettings) { effects.append(.keep(settings)) }

    mutating func player(_ commands: [(String, PlayerCommand)]) {
        for (name, command) in commands { effects.append(.player(name: name, command)) }
    }

    mutating func log(_ level: Logger.Level, _ line: @escaping @Sendable () -> (String, Logger.Metadata)) {
        effects.append(.log(LogLine(level, line)))
    }

    /// Takes the effects gathered so far.
    mutating func take() -> [TowerEffect] {
        defer { effects = [] }
        return effects
    }
}

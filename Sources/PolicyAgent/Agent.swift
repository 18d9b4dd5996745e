public import AudioPolicy
import DBus
import FoundationEssentials
import Glibc
public import Logging
public import PulseClient
import Synchronization

/// What `audiosessiond` needs to know.
public struct AgentConfiguration: Sendable {
    /// The sound server; nil for the user's.
    public var server: String?
    /// Policy directories, highest precedence first.
    public var policyLayers: [String]
    /// The route-change log (JSON lines), if any.
    public var routeLog: String?
    /// Where the journal of held changes (and the lock that keeps a second agent out) lives; nil for none.
    public var stateDirectory: String?
    /// Unload PulseAudio's own policy modules that would fight the agent (and load them again on exit).
    public var takeOverServerModules: Bool
    public var settings: AgentSettings
    /// Where media players are found (MPRIS): none (players are then muted, never paused), the session
    /// bus of the environment, or one at an address.
    public var sessionBus: BusChoice = .none
    /// Where logind is followed (sleep, the screen lock): none, the system bus of the environment, or
    /// one at an address.
    public var systemBus: BusChoice = .none

    public enum BusChoice: Sendable, Hashable {
        case none
        case environment
        case address(String)
    }

    public init(server: String? = nil, policyLayers: [String], routeLog: String? = nil, stateDirectory: String? = nil,
                takeOverServerModules: Bool = true, settings: AgentSettings = AgentSettings(), sessionBus: BusChoice = .none, systemBus: BusChoice = .none) {
        self.server = server; self.policyLayers = policyLayers; self.routeLog = routeLog
        self.stateDirectory = stateDirectory; self.takeOverServerModules = takeOverServerModules; self.settings = settings
        self.sessionBus = sessionBus
        self.systemBus = systemBus
    }
}

/// What the agent can be asked from outside (signals, tests).
public enum AgentRequest: Sendable {
    /// Read the policy files again (SIGHUP).
    case reload
    /// Undo everything and stop (SIGTERM, SIGINT).
    case stop
}

/// The sound server as the agent uses it: events as they happen, commands sent without waiting.
public protocol SoundServer: AnyObject, Sendable {
    /// Events in groups: those that go together (a new app's client news and its stream's info) in one
    /// call, in order, for one batch.
    func forwardEventGroups(_ deliver: @escaping @Sendable ([PulseEvent]) -> Void)
    func send(_ command: ServerCommand, whenDone: @escaping @Sendable (Result<ServerAnswer, PulseError>) -> Void)
    /// Meters a playback stream, or the microphone of a capture stream (true), or stops (false); the
    /// reports go to `forwardSound`'s receiver.
    func meter(_ stream: StreamReference, _ on: Bool, settings: MeterSettings)
    func forwardSound(_ deliver: @escaping @Sendable (SoundReport) -> Void)
    /// Tracing: told of each stream's subscription event as it comes, before its info (and its event).
    func stampSubscriptions(_ stamp: @escaping @Sendable (StreamReference) -> Void)
    func close()
    /// Where the server is, as the connection resolved it (nil: unknown, as for a server in memory):
    /// agents lock the server by it.
    var connectedAddress: String? { get }
}

extension SoundServer {
    public var connectedAddress: String? { nil }
    public func stampSubscriptions(_ stamp: @escaping @Sendable (StreamReference) -> Void) {}
}

extension PulseClient: SoundServer {}

/// The session agent: a loop between sources (the sound server, signals, the timer, the answers to its
/// commands) and executors (the sound server, the journal, the route log, the log). Every decision is
/// the control tower's; the loop only carries effects out and brings answers back.
///
/// It runs on libpulse's thread (its executor is the `PulseLoop` its client connects on): a server
/// event is decided on and the commands it calls for are on the socket with no thread in between.
public actor Agent {
    let loop: PulseLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    let configuration: AgentConfiguration
    let logger: Logger
    let inbox = Inbox<TowerInput>()
    let time: any AgentTime
    let connect: @Sendable (AgentConfiguration) async throws -> any SoundServer
    let loader: PolicyLoader
    var tower: ControlTower
    /// The tower as of the last batch whose effects are all carried out (its commands sent, its route
    /// log and log lines written): what the agent shows to tests and tools. The loop gives its thread
    /// back between the sends and the writes, and a look at the live tower then saw a route whose
    /// change was not in the route log yet. (Looks that waited for the batch instead could not time
    /// out, and whole suite runs stalled with them: see the closing note of 2026-11-26.)
    /// Made at the first look after a batch, not at each batch's end (issue 22): a copy kept then made
    /// the next batch copy every table it changed (the snapshot's streams with their properties, the
    /// core's sessions, the holds) on the event path, for looks that on a desktop come seldom. A look
    /// inside a batch (while its commands go out) sees the last copy made, of a batch carried out.
    var published: ControlTower {
        if publishedIsStale && !inBatch {
            publishedCopy = tower
            publishedIsStale = false
        }
        return publishedCopy
    }
    private var publishedCopy: ControlTower
    /// A batch ended since the copy was made.
    private var publishedIsStale = false
    /// The loop is inside a batch: between the tower's decision and the end of its effects.
    private var inBatch = false
    private var heapTrimming = HeapTrimming()
    var watchers: [Int: AsyncStream<Void>.Continuation] = [:]
    var nextWatcher = 0

    /// An agent on the user's sound server (or `configuration.server`), on the system's clock.
    public init(configuration: AgentConfiguration, logger: Logger) {
        let loop = PulseLoop(name: "audiosessiond")
        self.init(configuration: configuration, logger: logger, clock: ContinuousClock(), loop: loop) { configuration in
            try await PulseClient.connect(.init(server: configuration.server, applicationName: "audiosessiond",
                                                applicationID: nil, clientProperties: [Self.clientProperty: Self.applicationID],
                                                answerWithin: configuration.settings.serverAnswerWithin), on: loop)
        }
    }

    /// An agent on any sound server and clock (tests: an in-memory server, a manual clock).
    public init<C: Clock>(configuration: AgentConfiguration, logger: Logger, clock: C, loop: PulseLoop = PulseLoop(name: "audiosessiond"),
                          connect: @escaping @Sendable (AgentConfiguration) async throws -> any SoundServer)
    where C.Duration == Duration {
        self.loop = loop
        self.configuration = configuration
        self.logger = logger
        self.connect = connect
        loader = PolicyLoader(layers: configuration.policyLayers)
        tower = ControlTower(settings: configuration.settings, takeOverServerModules: configuration.takeOverServerModules,
                             ownProcessID: "\(getpid())", parentProcess: Self.parentProcess)
        publishedCopy = tower
        let inbox = self.inbox
        time = AgentTimer(clock: clock) { inbox.push(.tick) }
    }

    /// Asks the agent (from signal handlers, tests).
    public nonisolated func send(_ request: AgentRequest) {
        switch request {
        case .stop: inbox.push(.stop)
        case .reload: inbox.push(.policies(loader.load()))
        }
    }

    /// Connects, then handles what comes until everything is undone after `.stop`.
    public func run() async throws {
        let (state, unusable) = try openStateDirectory()
        let lock = try acquireInstanceLock(in: state)
        defer { withExtendedLifetime(lock) {} }
        let out = Executors(configuration, stateDirectory: state, unusable: unusable, inbox: inbox, logger: logger,
                            sleep: { [time] in await time.sleep(for: $0) })
        let closeBuses = out.closing
        defer { closeBuses() }
        // (What the agent's client says of the apps until the session bus answers.)
        tower.appsReach = .notServed(out.sessionBus == nil ? "the agent runs with no session bus (--session-bus none)"
                                                             : "the session bus has not answered yet")
        // What the policy files and the journal say is told before the server answers (or does not).
        let (kept, problem) = KeptSettingsFile.read(in: state)
        out.tell(out.perform(tower.handle([.recovered(out.journal.leftovers()), .kept(kept, problem: problem), .policies(loader.load())],
                                          at: time.now())))
        publishedIsStale = true
        // The event path's trace (`PathTrace`): at the debug level, or alone with AUDIOSESSION_PATH_TRACE=1
        // (the path measured without the verbose log's own work around it).
        let tracing = logger.logLevel <= .debug || ProcessInfo.processInfo.environment["AUDIOSESSION_PATH_TRACE"] == "1"
        let connected = try await connect(configuration)
        out.server = connected
        defer { connected.close() }
        // (Tracing: when the server told of a stream's event, before its info came: `info_us`.)
        let words = tracing ? SubscriptionStamps() : nil
        if let words { connected.stampSubscriptions { [time] stream in words.note(stream, at: time.now()) } }
        connected.forwardEventGroups { [inbox] events in
            // (Tracing: each stream event's word taken; the group's first, as the batch's.)
            var received: Duration?
            if let words { for event in events { if let at = words.take(event), received == nil { received = at } } }
            inbox.push(contentsOf: events.map(TowerInput.server), received: received)
        }
        connected.forwardSound { [inbox] report in inbox.push(.sound(report)) }
        var checked = false
        if tracing {
            inbox.stampArrivals { [time] in time.now() }
            out.stamp = { [time] in time.now() }
            out.appBus.stampCalls { [time] in time.now() }
        }
        // Ready (systemd's Type=notify) once the server's state is known and enforced and the session
        // bus has had its first answer: the apps' name taken (or refused), or no bus to be had.
        var readiness = Readiness(waitsForSessionBus: out.sessionBus != nil)
        // (Also when a batch throws: the timer's wake-up is taken back.)
        defer { time.cancel() }
        // The loop is the task's preferred executor as well as the actor's: a continuation resumed on
        // libpulse's thread resumes there, with no trip through the shared pool.
        try await withTaskExecutorPreference(loop) {
            while !tower.isFinished {
                let batch = await inbox.next()
                inBatch = true
                defer { inBatch = false }  // (also a batch left by a throw)
                if !checked, batch.firstConnected != nil {
                    checked = true
                    try await lockServer(connected, out)
                }
                // (The trace's stamps: the clock read only while tracing.)
                func stamp() -> Duration { tracing ? time.now() : .zero }
                let taken = time.now()
                // A call's first event (a new stream, a stream starting, SetActive(true)): the mutes it brings,
                // decided ahead of its run, go on the socket first
                // (libpulse writes them when this job gives its thread back, at the loop's next turn).
                let ahead = tower.reflex(batch, at: taken)
                var path = (decided: Duration.zero, performed: Duration.zero, journal: Duration.zero, sent: Duration.zero)
                var told: [TowerEffect] = []
                if !ahead.isEmpty {
                    path.decided = stamp()
                    told = out.perform(ahead)
                    (path.performed, path.journal) = (stamp(), out.journalTime)
                    await loop.nextTurn()
                    path.sent = stamp()
                    if configuration.settings.runAfterAhead > .zero { await loop.pause(for: configuration.settings.runAfterAhead) }
                }
                let effects = tower.handle(batch, at: taken)
                let decided = stamp()
                told += out.perform(effects)
                let performed = stamp()
                // The apps' answers and signals, the players' commands, the route log and the log lines wait
                // for the commands to be on the socket: libpulse writes them when this job gives its thread
                // back (writing two log lines first put a call's mute ~0.6 ms later). Back at the loop's
                // next turn, not through the shared pool.
                let sends = effects.contains(where: \.isSend)
                let waitsForSocket = (!told.isEmpty || tracing) && sends
                if waitsForSocket { await loop.nextTurn() }
                let sent = stamp()
                if ahead.isEmpty { path = (decided, performed, out.journalTime, sent) }
                out.tell(told)
                // (A batch that sent a command is traced.)
                let traced = waitsForSocket || !ahead.isEmpty
                if tracing, traced, let arrived = inbox.lastArrival {
                    // (The first commands' path: those decided ahead, if any.)
                    PathTrace(received: inbox.lastReceived, arrived: arrived, taken: taken, decided: path.decided, performed: path.performed,
                              journal: path.journal, sent: path.sent, told: stamp(), ahead: !ahead.isEmpty, between: words?.takeBetween())
                        .log(logger, batch: batch, sends: (ahead + effects).count(where: \.isSend))
                }
                finish(batch, &readiness, out.journal, written: waitsForSocket || !sends)
                if let words {
                    // (Tracing: the loop's own work on the batch, its pause after a reflex aside.)
                    let paused = ahead.isEmpty ? .zero : configuration.settings.runAfterAhead
                    words.loopWorked(time.now() - taken - paused)
                    if !traced { _ = words.takeBetween() }
                }
            }
        }
        for watcher in watchers.values { watcher.finish() }
    }

    /// The state directory, opened once for the lock, the journal and the record permissions. One that
    /// is not safe (a link planted there, another user's directory, one others may write) stops the agent
    /// before it touches anything; one that cannot be used (a read-only or full file system) is said, and
    /// the agent runs on with a journal that says it cannot be written.
    private func openStateDirectory() throws -> (StateDirectory?, unusable: String?) {
        guard let path = configuration.stateDirectory else { return (nil, nil) }
        do { return (try StateDirectory.open(path), nil) } catch {
            if error.kind == .unsafe { throw AgentError.stateDirectory(error.description) }
            logger.warning("the state directory cannot be used", metadata: ["reason": "\(error.description)"])
            return (nil, error.description)
        }
    }

    /// One agent per state directory. A directory that cannot hold the lock (read-only, say) is said
    /// and the agent runs on: the lock on the session bus still keeps a second agent off this server,
    /// and the journal will say it cannot be written.
    private func acquireInstanceLock(in directory: StateDirectory?) throws -> InstanceLock? {
        guard let directory else { return nil }
        do { return try InstanceLock.acquire(in: directory) } catch AgentError.noLock(let why) {
            logger.warning("no lock in the state directory", metadata: ["reason": "\(why)"])
            return nil
        }
    }

    /// After a batch: the tower is published for looks from outside, systemd is told of readiness and
    /// stopping, the heaps trimmed when it is time (`HeapTrimming`; `written`: the batch's commands are on
    /// the socket), the journal is compacted when it has grown, and the timer set for the next deadline.
    private func finish(_ batch: [TowerInput], _ readiness: inout Readiness, _ journal: Journal, written: Bool) {
        tower.noteStateTimes()
        publishedIsStale = true
        if let ready = readiness.take(batch) { ServiceNotify.send(["READY=1", "STATUS=\(ready)"]) }
        if batch.contains(where: \.isStop) { ServiceNotify.send(["STOPPING=1"]) }
        if heapTrimming.after(inputs: batch.count, connection: batch.contains(where: \.isConnection), idle: inbox.isEmpty, written: written) {
            Heap.trim()
        }
        if let health = journal.compactIfGrown() { inbox.push(.journal(health)) }
        time.schedule(tower.nextDeadline)
        for watcher in watchers.values { watcher.yield() }
    }

    /// One agent per server (`ServerLock`): the server's name on the session bus, taken before anything
    /// of the server is touched. With no session bus the state directory's lock is the only one.
    private func lockServer(_ server: any SoundServer, _ out: Executors) async throws {
        guard let address = server.connectedAddress else { return }
        guard let bus = await out.sessionBus?.firstConnection() else {
            logger.info("without a session bus only the state directory's lock keeps a second agent off this server")
            return
        }
        do { try await out.serverLock.take(forServer: address, on: bus) } catch let error as DBusError {
            logger.warning("the session bus did not answer: only the state directory's lock keeps a second agent off this server",
                           metadata: ["error": "\(error)"])
        }
    }

    /// A process's parent, from /proc (nil when it is gone or not ours to read).
    static let parentProcess: @Sendable (Int) -> Int? = { pid in
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // "pid (comm) state ppid ...": the command may hold spaces and parentheses, so after the last ")".
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? Int(fields[1]) : nil
    }

    /// What every agent's client says it is, in `clientProperty`.
    public static let applicationID = "org.audiosession.agent"
    /// The property of the agent's client on the server that says it is one (`audiosessionctl status`
    /// finds agents by it). Not `application.id`: pipewire-pulse gives a client's properties to its
    /// streams, and WirePlumber remembers a stream by its application.id before its name, so the
    /// agent's memory probes for an app remembered by name were remembered under the agent's id (issue
    /// 20 case 7b: a stream muted by us, gone, and its app remembered muted for good).
    public static let clientProperty = "audiosession.agent"

    /// The agents' clients on the server (ours among them), in the order the server numbered them.
    public static func agentClients(in snapshot: Snapshot) -> [Client] {
        snapshot.clients.values.filter { $0.properties[clientProperty] == applicationID }.sorted { $0.id < $1.id }
    }

    // MARK: for the CLI and tests

    /// Yields now and after every batch the agent has handled: tests and tools wait on it for the
    /// agent's state to reach what they expect, instead of sleeping.
    public func watch() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = nextWatcher
        nextWatcher += 1
        watchers[id] = continuation
        continuation.yield()
        continuation.onTermination = { _ in Task { await self.unwatch(id) } }
        return stream
    }

    func unwatch(_ id: Int) { watchers[id] = nil }

    public var state: PolicyState { published.state }
    public var policies: [AppPolicy] { published.policies }
    public var policyErrors: [PolicyFileError] { published.policyErrors }
    public var classifications: [SessionID: Classification] { published.classifications }
    public var journalHealth: JournalHealth { published.journalHealth }
    public var playerStatuses: [String: PlaybackStatus?] { published.playerStatuses }
    public var playerBusConnected: Bool { published.playerBusConnected }
    public var playerBusAbsences: Int { published.playerBusAbsences }
    public var screenLockKnown: Bool { published.screenLockKnown }
    /// The server's default output as the agent last saw it.
    public var defaultSinkSeen: String? { published.snapshot.server?.defaultSinkName }
    /// What `audiosessionctl status` shows, as of the last finished batch.
    public func statusReport() -> StatusReport { published.statusReport() }
}

extension [TowerInput] {
    var firstConnected: Snapshot? {
        for input in self { if case .server(.connected(let snapshot)) = input { return snapshot } }
        return nil
    }
}

/// Reads the policy files; a file that has gone bad keeps its last good version. A reload reads again
/// only the files that changed (`PolicyFileCache`), and indexes the set (`PolicySet`) here, off the
/// agent's loop.
final class PolicyLoader: Sendable {
    let layers: [String]
    private let lastGood = Mutex<(policies: [AppPolicy], cache: PolicyFileCache, outputs: [String: OutputRoutes])>(([], PolicyFileCache(), [:]))

    init(layers: [String]) { self.layers = layers }

    func load() -> PolicySet {
        lastGood.withLock { last in
            let (loaded, errors) = PolicyFiles.load(layers: layers, cache: &last.cache)
            // On reload the last good set stays in force for the files that are now bad.
            last.policies = PolicyFiles.keepingLastGood(previous: last.policies, loaded: loaded, errors: errors)
            let (outputs, outputErrors) = OutputRoutesFile.load(paths: OutputRoutesFile.paths(layers: layers), lastGood: &last.outputs)
            return PolicySet(policies: last.policies, errors: errors + outputErrors, outputs: outputs)
        }
    }
}

public import AudioPolicy
import Logging
public import PulseClient

/// "The device is an airport; apps are planes; the system is the control tower" (SPEC.md 5): every
/// decision of the agent, as one pure machine. It takes the server's events, the answers to its
/// commands, the policy files, the journal a predecessor left and the time, and returns effects
/// (commands, journal changes, route-log entries, log lines) for the loop to carry out. No I/O, no
/// clock of its own: `nextDeadline` says when it next needs time.
///
/// Inside, each piece keeps its own state: the server as the events told it (`snapshot`), which stream
/// belongs to which session (`SessionDirectory`), the policy core (`PolicyMachine`, with each Bluetooth
/// card's ports on their way out), what we hold and what the server remembers (`Holds`), the default
/// devices (`DefaultDevices`), and the server's own policy modules (`ModuleTakeover`).
public struct ControlTower: Sendable {
    public let settings: AgentSettings
    public private(set) var core: PolicyMachine
    /// The server as its events have told it.
    public private(set) var snapshot = Snapshot()
    var directory = SessionDirectory()
    var holds: Holds
    var defaults = DefaultDevices()
    var modules: ModuleTakeover
    /// The media players on the session bus, and the pauses we sent them.
    var players = Players()
    /// The apps that declared their session on the session bus.
    var apps = Apps()
    /// Sessions whose players were sent a pause because private listening ended (headphones gone), and
    /// those players: once all have shown it, the core hears so (it keeps the session silent meanwhile,
    /// SPEC.md 5.8).
    var pausesOnTheirWay: [SessionID: Set<String>] = [:]
    /// When each session's state last changed (`noteStateTimes`), for the status report.
    var stateSince: [SessionID: (status: SessionStatus, at: Duration)] = [:]
    /// The last change of a route, and when.
    var lastRouteChange: (change: RouteChange, at: Duration)?
    /// That logind cannot be followed was said (once, until it can).
    var logindAbsenceSaid = false
    /// The server links streams by role itself (WirePlumber's role sinks seen; said once a run).
    var serverLinksByRole = false
    /// The screen lock as the desktop (logind or a screen saver) last told it; nil until it has.
    var screenLock: Bool?
    public var screenLockKnown: Bool { screenLock != nil }
    /// A process's parent (from /proc in the agent; a table in tests), to match a player to the streams
    /// its children play.
    let parentProcess: @Sendable (Int) -> Int?
    var outbox = Outbox()
    public private(set) var now: Duration = .zero
    /// Where the tower is in its life (one value: see `LifeCycle`).
    public private(set) var life = LifeCycle.starting(stopBy: nil)
    /// What a previous run left, until the first connection takes it over.
    var leftovers: Journal.Leftovers?
    /// Interruptions the core asked to pause a player for when none was on the bus yet (the agent just
    /// started, its listing of the bus still under way): carried out when the app's player appears
    /// playing; dropped when the core says the interruption ended (or resumes the session), or removes it.
    var pausesAwaitingPlayer: [SessionID: SessionID?] = [:]
    /// What was held when the connection was lost (see `server(_:)`).
    var heldAcrossLoss: [Journal.Entry]?
    /// When the server was lost, and why (nil while connected): `status` says it.
    public internal(set) var serverLost: (at: Duration, reason: String)?
    /// Bluetooth cards the journal says are switched away (card: the profile to go back to). One leaves
    /// only once the server has confirmed the switch back (or the card is gone): a switch back that
    /// failed is tried again at stop, and stays in the journal for the next run if it fails again.
    var journaledSwitches: [String: String] = [:]
    public private(set) var journalHealth: JournalHealth = .writable
    /// Whether apps can reach the agent on the session bus (said in `appsProperty`).
    public internal(set) var appsReach = AppsReach.notServed("no session bus")
    public private(set) var policyErrors: [PolicyFileError] = []
    /// The streams of a connection are being announced (see `connected`).
    var announcingAll = false

    /// Our own process: the streams we open to write the server's memory (`PulseClient.probeProperty`) are
    /// ours, not an app's, and are left out of everything.
    let ownProcessID: String?

    public init(settings: AgentSettings = AgentSettings(), takeOverServerModules: Bool = true,
                ownProcessID: String? = nil, parentProcess: @escaping @Sendable (Int) -> Int? = { _ in nil }) {
        self.settings = settings
        self.ownProcessID = ownProcessID
        self.parentProcess = parentProcess
        core = PolicyMachine(settings: settings.policy)
        holds = Holds(settings: settings)
        modules = ModuleTakeover(enabled: takeOverServerModules)
    }

    public var policies: [AppPolicy] { directory.policies }
    /// The media players on the session bus as last told, by name.
    public var playerStatuses: [String: PlaybackStatus?] { players.players.mapValues(\.status) }
    public var playerBusConnected: Bool { players.busAvailable }
    /// How many times the session bus was found absent (tried and failed, or lost).
    public var playerBusAbsences: Int { players.absencesTold }
    public var classifications: [SessionID: Classification] { directory.classifications }

    /// The earliest instant the tower needs a `.tick`.
    public var nextDeadline: Duration? {
        switch life {
        // (Stopping, only the stop's own deadline is served: any other would wake the timer again and
        // again for nothing. Asked to stop before the server answered: the wait for it ends then.)
        case .starting(let stopBy?), .stopping(let stopBy, _): stopBy
        case .finished: nil
        case .starting(nil), .running: [core.nextDeadline, holds.nextDeadline].compactMap { $0 }.min()
        }
    }

    // MARK: handling

    /// Handles one batch of inputs (everything that came since the last batch), in order.
    public mutating func handle(_ inputs: [TowerInput], at now: Duration) -> [TowerEffect] {
        self.now = max(self.now, now)
        let skipped = Self.createdAndGone(inputs)
        for (i, input) in inputs.enumerated() {
            // Our own probe streams are nobody's: not even in the snapshot.
            if case .server(let event) = input, let stream = event.stream, isOurProbe(stream) { continue }
            if case .server(let event) = input, skipped.contains(i) {
                snapshot.apply(event)
                continue
            }
            handle(input)
        }
        for fact in defaults.notOurs(in: snapshot, &outbox) { coreEvent(fact) }
        finishIfDone()
        return outbox.take()
    }

    /// The media players of a session's app: by the processes of its streams, then by its name.
    func playersOf(_ session: SessionID) -> [String] {
        guard players.busAvailable else { return [] }
        var processIDs: Set<Int> = []
        var appIDs: Set<String> = []
        var names: Set<String> = []
        for (key, id) in directory.sessions where id == session {
            guard let stream = snapshot.stream(key.direction, key.index) else { continue }
            let app = snapshot.identity(of: stream)
            if let pid = app.processID { processIDs.insert(pid) }
            if let appID = app.appID { appIDs.insert(appID) }
            names.formUnion([app.binary, app.name].compactMap { $0 })
        }
        return players.matching(processIDs: processIDs, appIDs: appIDs, names: names, parent: parentProcess)
    }

    /// Carries out a pause the core asked for before the player was on the bus (see `pausesAwaitingPlayer`).
    mutating func pauseLatePlayer(_ name: String) {
        for (id, cause) in pausesAwaitingPlayer.sorted(by: { $0.key < $1.key }) {
            guard playersOf(id).contains(name) else { continue }
            // (One player for both, as a browser's tabs share one: pausing it would pause the interrupter.)
            if let cause, playersOf(cause).contains(name) {
                pausesAwaitingPlayer[id] = nil
                continue
            }
            let commands = players.pause([name], for: id, why: .interruption, by: cause, &outbox)
            pausesAwaitingPlayer[id] = nil
            guard !commands.isEmpty else { continue }
            outbox.log(.info) { ("a player came on the bus after its app was interrupted: paused now", ["player": "\(name)", "session": "\(id)"]) }
            outbox.player(commands)
        }
    }

    /// One of the streams we open to write the server's memory.
    func isOurProbe(_ stream: AudioStream) -> Bool {
        stream.properties[PulseClient.probeProperty] != nil && ownProcessID != nil && stream.properties["application.process.id"] == ownProcessID
    }

    /// A stream created and gone within one batch needs no decision (a burst of short sounds, a storm
    /// of clients): the indices of its events, to be applied to the snapshot only.
    static func createdAndGone(_ inputs: [TowerInput]) -> Set<Int> {
        var added: [StreamKey: [Int]] = [:]
        var skipped: Set<Int> = []
        for (i, input) in inputs.enumerated() {
            guard case .server(let event) = input, let stream = event.stream else { continue }
            let key = StreamKey(stream)
            switch event {
            case .added: added[key] = [i]
            case .changed: added[key]?.append(i)
            case .removed:
                if let events = added.removeValue(forKey: key) { skipped.formUnion(events + [i]) }
            default: break
            }
        }
        return skipped
    }

    mutating func handle(_ input: TowerInput) {
        // Finished: the loop ends; what still came in its last batch changes nothing.
        guard life != .finished else { return }
        switch input {
        case .server(var event):
            if case .connected(var found) = event {
                found.sinkInputs = found.sinkInputs.filter { !isOurProbe($0.value) }
                found.sourceOutputs = found.sourceOutputs.filter { !isOurProbe($0.value) }
                event = .connected(found)
            }
            snapshot.apply(event)
            // Stopping: everything is being given back; nothing is decided any more (but the first
            // connection, which brings what a predecessor left to give back too).
            if isStopping, case .connected = event {} else if isStopping { return }
            server(event)
        case .answered(let id, let result):
            answered(id, result)
        case .tick:
            tick()
        case .policies(let set):
            directory.index = set.index
            policyErrors = set.errors
            for error in set.errors { outbox.log(.error) { ("policy file skipped", ["error": "\(error)"]) } }
            let count = set.policies.count, errors = set.errors.count
            outbox.log(.info) { ("policies loaded", ["count": "\(count)", "errors": "\(errors)"]) }
            // Streams are classified again; a changed classification is a changed session.
            if case .running = life {
                for stream in snapshot.streams(.output) + snapshot.streams(.input) { announce(stream) }
            }
        case .recovered(let left):
            for line in left.skipped { outbox.log(.warning) { ("journal line skipped", ["line": "\(line)"]) } }
            if left.skippedCount > left.skipped.count {
                let more = left.skippedCount - left.skipped.count
                outbox.log(.warning) { ("more journal lines skipped", ["count": "\(more)"]) }
            }
            if let why = left.movedAside { outbox.log(.warning) { ("the journal was corrupt", ["reason": "\(why)"]) } }
            if let problem = left.problem { outbox.log(.error) { ("the journal cannot be read", ["reason": "\(problem)"]) } }
            if !left.isEmpty { leftovers = left }
        case .journal(let health):
            journalHealth = health
            switch health {
            case .writable:
                outbox.log(.notice) { ("the journal can be written again", [:]) }
                outbox.send(.updateClientProperties([Self.journalProperty: health.words]), for: .other("say the journal works"))
            case .failing(let reason):
                outbox.log(.warning) { ("the journal cannot be written: after a crash, what the agent holds would be left held", ["reason": "\(reason)"]) }
                outbox.send(.updateClientProperties([Self.journalProperty: health.words]), for: .other("say the journal fails"))
            }
        case .stop:
            beginStop()
        case .players(let event):
            if case .busGone(let reason) = event { tellAppsReach(.notServed(reason)) }
            let statusBefore: PlaybackStatus?? = event.playerName.map { players.players[$0]?.status }
            for told in players.apply(event, &outbox) { coreEvent(told) }
            releasePausedPlayers()
            // A player that comes on the bus playing (or says it plays for the first time) for an app whose
            // interruption found none to pause: paused now, for that interruption.
            // (A player the user plays again, whose status was known, is the user's hand: not paused.)
            if let name = event.playerName, players.players[name]?.status == .playing, (statusBefore ?? nil) == nil {
                pauseLatePlayer(name)
            }
        case .playerAnswered(let name, let command, let error?):
            players.refused(command, by: name)
            outbox.log(.warning) { ("a player did not take the command", ["player": "\(name)", "command": "\(command.rawValue)", "error": "\(error)"]) }
            releasePausedPlayers()
        case .playerAnswered:
            break
        case .desktop(let event):
            desktop(event)
        case .app(let event):
            app(event)
        case .sound(let report):
            sound(report)
        }
    }

    /// A meter's report on a playback stream (SPEC.md section 1: a stream counts while it is heard).
    mutating func sound(_ report: SoundReport) {
        let key = StreamKey(.output, report.stream)
        guard !isStopping, directory.session(of: key) != nil else { return }
        switch report {
        case .heard:
            outbox.log(.debug) { ("heard", ["stream": "\(key)"]) }
            coreEvent(.streamHeard(key, true))
        case .silent:
            outbox.log(.debug) { ("silent", ["stream": "\(key)"]) }
            coreEvent(.streamHeard(key, false))
        case .failed(_, let reason):
            outbox.log(.warning) { ("a stream cannot be metered: it counts while it runs, silent or not", ["stream": "\(key)", "reason": "\(reason)"]) }
            coreEvent(.meterFailed(key))
        }
    }

    /// The desktop session (logind, the screen saver): sleep and wake, the screen lock.
    mutating func desktop(_ event: DesktopEvent) {
        if case .unavailable = event {} else { logindAbsenceSaid = false }
        switch event {
        case .sleeping:
            outbox.log(.info) { ("the machine goes to sleep", [:]) }
            coreEvent(.sleep)
        case .woke:
            outbox.log(.info) { ("the machine woke", [:]) }
            coreEvent(.wake)
        case .screenLocked(let locked):
            defer { screenLock = locked }
            guard locked != screenLock ?? false else { break }
            outbox.log(.info) { (locked ? "the screen is locked: ambient sound is silenced" : "the screen is unlocked", [:]) }
            coreEvent(.screenLocked(locked))
        case .unavailable(let reason):
            // (Said once until logind is back: the system bus is tried again and again.)
            guard !logindAbsenceSaid else { break }
            logindAbsenceSaid = true
            outbox.log(.notice) { ("no logind: sleep and the screen lock are not followed", ["reason": "\(reason)"]) }
        }
    }

    // MARK: the server's events

    /// One event, applied to the snapshot already. (A change carries the entity as it was; what else a
    /// judgement of it reads, cards and clients, one event of a device or stream does not change: so no
    /// copy of the snapshot before it is kept, which would copy a whole dictionary per event.)
    mutating func server(_ event: PulseEvent) {
        switch event {
        case .connected(let snapshot):
            connected(snapshot)
        case .disconnected(let reason):
            outbox.log(.warning) { ("sound server lost", ["reason": "\(reason)"]) }
            serverLost = (now, reason)
            // What is held is kept, to be taken over on the streams still there when the connection comes
            // back (a stalled server's): their mute and volume are ours, not the user's.
            let held = holds.heldEntries
            if !held.isEmpty { heldAcrossLoss = held }
            directory.serverLost()
            holds.serverLost()
            defaults.serverLost()
            coreEvent(.mediaServicesLost)
        case .added(let entity):
            switch entity {
            case .sink(let d), .source(let d):
                guard !d.isMonitor else { return }
                coreEvent(.portAppeared(snapshot.port(of: d)))
            case .sinkInput(let s), .sourceOutput(let s):
                announce(s, new: true)
            default: break
            }
        case .changed(let oldEntity, let new):
            switch (oldEntity, new) {
            case (.sink(let a), .sink(let b)), (.source(let a), .source(let b)):
                guard !b.isMonitor else { return }
                let (pa, pb) = (snapshot.port(of: a), snapshot.port(of: b))
                if pa != pb || a.activePort != b.activePort || a.sampleSpec != b.sampleSpec { coreEvent(.portChanged(pb)) }
            case (.card(let a), .card(let b)):
                if a.activeProfile != b.activeProfile {
                        coreEvent(.cardProfileChanged(b.name))
                }
                for device in snapshot.routableDevices where device.card == b.id { coreEvent(.portChanged(snapshot.port(of: device))) }
            case (.sinkInput(let a), .sinkInput(let b)), (.sourceOutput(let a), .sourceOutput(let b)):
                streamChanged(from: a, to: b)
            case (.server(let a), .server(let b)):
                defaults.serverChanged(from: a, to: b, in: snapshot, &outbox)
            default: break
            }
        case .removed(let entity):
            switch entity {
            case .sink(let d), .source(let d):
                guard !d.isMonitor else { return }
                coreEvent(.portGone(d.name))
            case .card(let c):
                coreEvent(.cardGone(c.name))
            case .sinkInput(let s), .sourceOutput(let s):
                let key = StreamKey(s)
                directory.remove(key)
                coreEvent(.streamGone(key))
                holds.gone(key, at: now, &outbox)
            default: break
            }
        case .other:
            break
        }
    }

    mutating func connected(_ snapshot: Snapshot) {
        holds.ways = MemoryWays.of(snapshot.server)
        if connectedBefore {
            outbox.log(.notice) { ("sound server back: re-applying decisions", [:]) }
            coreEvent(.mediaServicesReset)
        }
        // (A stop asked before this first connection is carried out at its end.)
        let stopAsked: Bool
        switch life {
        case .starting(let stopBy): stopAsked = stopBy != nil; life = .running
        case .running: stopAsked = false
        case .stopping: stopAsked = true  // back during the stop: everything is given back again
        case .finished: preconditionFailure("the tower was handed a connection after it finished")
        }
        let left = leftovers
        leftovers = nil
        modules.connected(snapshot, leftovers: left?.modules ?? [], &outbox)
        if let left {
            let streams = left.streams.count, remembered = left.remembered.count
            outbox.log(.notice) { ("taking over what a previous run left", ["streams": "\(streams)", "remembered entries": "\(remembered)"]) }
            holds.adopt(left.streams, remembered: left.remembered, in: snapshot, at: now, &outbox)
            journaledSwitches.merge(left.cards) { _, theirs in theirs }
        }
        if let held = heldAcrossLoss {
            heldAcrossLoss = nil
            holds.adopt(held, remembered: [:], in: snapshot, at: now, from: "the lost connection", &outbox)
        }
        serverLost = nil
        holds.reconnected(at: now, &outbox)
        // Ports in index order, the current defaults last: the agent starting changes no route.
        let current = [snapshot.server?.defaultSinkName, snapshot.server?.defaultSourceName]
        let devices = snapshot.routableDevices.sorted {
            (current.contains($0.name) ? 1 : 0, $0.id) < (current.contains($1.name) ? 1 : 0, $1.id)
        }
        defaults.startCollecting()
        for device in devices { coreEvent(.portAppeared(snapshot.port(of: device)), logRoutes: false) }
        coreEvent(.devicesListed)
        defaults.sendCollected(current: snapshot.server, &outbox)
        // Every stream is announced before any is held or let go: the core decides on the whole picture
        // (a recorder announced after a player would otherwise let the player go, then hold it again).
        announcingAll = true
        for stream in snapshot.streams(.output) + snapshot.streams(.input) { announce(stream) }
        announcingAll = false
        for key in holds.streams.keys.sorted() { reconcile(key) }
        adoptLeftoverSwitches(left?.cards ?? [:])
        outbox.send(.updateClientProperties([Self.journalProperty: journalHealth.words, Self.appsProperty: appsReach.words]),
                    for: .other("say how the journal is and whether apps reach the agent"))
        if stopAsked { beginStop() }
    }

    /// The property of our client that says how the journal is (`audiosessionctl status` reads it).
    public static let journalProperty = "audiosession.journal"
    /// The property of our client that says whether apps reach the agent on the session bus
    /// (`org.audiosession.Agent1` ours: "served"; else "not served: why").
    public static let appsProperty = "audiosession.apps"

    /// Classifies a stream, declares its session if it is new, and tells the core. `new`: it was just
    /// created (not found there at a connection, nor classified again).
    mutating func announce(_ stream: AudioStream, new: Bool = false) {
        let key = StreamKey(stream)
        // Capturing what a sink plays (its monitor: a screen recorder, a level meter, a visualiser) is
        // not recording from a microphone: no session of the core, nothing silenced, nothing muted.
        if snapshot.isMonitorCapture(stream) {
            if directory.remove(key) {
                coreEvent(.streamGone(key))
                holds.letGoOf(key, at: now, &outbox)
            }
            return
        }
        // The server's own plumbing is nobody's session: the apps behind it are held on their own streams.
        if snapshot.isServerPlumbing(stream) {
            if snapshot.isServerRoleLoopback(stream) { sayServerRolePolicy(stream.properties["node.name"] ?? "?") }
            if directory.remove(key) {
                coreEvent(.streamGone(key))
                holds.letGoOf(key, at: now, &outbox)
            }
            return
        }
        _ = holds.observe(stream, at: now, new: new, &outbox)
        if let held = holds.streams[key] {
            outbox.log(.debug) { ("stream", ["stream": "\(key)", "muted": "\(stream.isMuted)", "volume": "\(stream.volume)",
                                            "device": "\(stream.device.map(String.init) ?? "none")", "corked": "\(stream.isCorked)",
                                            "memory": "\(held.memoryKey ?? "none")",
                                            "inherited": "\(held.correctMute ? "mute " : "")\(held.natural.map { "volume \($0)" } ?? "")"]) }
        }
        let placement = directory.place(stream, in: snapshot, declared: declaredSession(of: stream), parent: parentProcess)
        if let declaration = placement.declare, let classification = placement.classification {
            let id = placement.session
            outbox.log(.info) { ("session", ["session": "\(id)", "configuration": "\(classification.configuration)",
                                             "why": "\(classification.explanation)"]) }
            coreEvent(.declare(declaration))
        }
        coreEvent(.streamAppeared(key, session: placement.session, running: !stream.isCorked, device: snapshot.device(of: stream)?.name))
        reconcile(key)
    }

    mutating func streamChanged(from old: AudioStream, to new: AudioStream) {
        let key = StreamKey(new)
        guard directory.session(of: key) != nil, snapshot.identity(of: old) == snapshot.identity(of: new),
              !snapshot.isMonitorCapture(new) else { return announce(new) }
        let change = holds.observe(new, at: now, &outbox)
        if old.volume != new.volume || old.isMuted != new.isMuted || old.device != new.device, let held = holds.streams[key] {
            outbox.log(.trace) { ("stream changed", ["stream": "\(key)", "muted": "\(new.isMuted)", "volume": "\(new.volume)",
                                                    "device": "\(new.device.map(String.init) ?? "none")",
                                                    "inherited": "\(held.correctMute ? "mute " : "")\(held.natural.map { "volume \($0)" } ?? "")"]) }
        }
        if old.isCorked != new.isCorked { coreEvent(.streamRunning(key, !new.isCorked)) }
        if old.device != new.device { coreEvent(.streamMoved(key, device: snapshot.device(of: new)?.name)) }
        if change.any {
            outbox.log(.info) { ("the user changed a managed stream: the user wins", ["stream": "\(key)"]) }
            coreEvent(.userChangedStream(key, mute: change.mute, volume: change.volume))
        }
        reconcile(key)
    }

    /// Brings what we hold on a stream to what the core wants of it now (not while a connection's
    /// streams are being announced: all of them are reconciled once the core has heard of every one).
    mutating func reconcile(_ key: StreamKey) {
        guard !announcingAll else { return }
        holds.reconcile(key, at: now, &outbox)
    }

    /// Tells the core of the sessions whose players have all shown the pause sent when their headphones
    /// went away (or left, or refused it).
    mutating func releasePausedPlayers() {
        guard !isStopping else { return }  // (the stop lets go of everything itself)
        for (id, names) in pausesOnTheirWay.sorted(by: { $0.key < $1.key })
        where !names.contains(where: { players.players[$0]?.pauseOnItsWay == .privateListeningEnded }) {
            pausesOnTheirWay[id] = nil
            coreEvent(.pauseShown(id))
        }
    }

    // MARK: time, answers

    mutating func tick() {
        guard !isStopping else { return }  // only the stop's own deadline (finishIfDone)
        if let due = core.nextDeadline, due <= now { coreEvent(.tick) }
        holds.tick(at: now, &outbox)
        releasePausedPlayers()
    }

    mutating func answered(_ id: CommandID, _ result: Result<ServerAnswer, PulseError>) {
        guard let purpose = outbox.pending.removeValue(forKey: id) else { return }
        switch purpose {
        case .stream(let key):
            switch result {
            case .success: holds.succeeded(key)
            case .failure(let error):
                life.stopFailed()
                guard snapshot.stream(key.direction, key.index) != nil else {
                    outbox.log(.debug) { ("a command on a stream that went away failed", ["stream": "\(key)", "error": "\(error)"]) }
                    break
                }
                if let given = holds.failed(key, error, at: now, &outbox) { coreEvent(.holdFailed(key, mute: given.mute, volume: given.volume)) }
            }
        case .memoryRead(let name):
            holds.memoryRead(name, result, at: now, &outbox)
        case .memoryPutBack(let name):
            if case .failure = result { life.stopFailed() }
            holds.memoryPutBack(name, result, at: now, &outbox)
        case .module(let step):
            if case .failure = result { life.stopFailed() }
            modules.answered(step, result, &outbox)
        case .cardProfile(let card, let profile):
            switch result {
            case .success:
                if journaledSwitches[card] == profile { switchedBack(card) }
            case .failure(let error):
                life.stopFailed()
                outbox.log(.warning) { ("could not set the profile of a card", ["card": "\(card)", "profile": "\(profile)", "error": "\(error)"]) }
            }
        case .other(let what):
            if case .failure(let error) = result {
                outbox.log(.warning) { ("\(what) failed", ["error": "\(error)"]) }
            }
        }
    }

    // MARK: the core and its decisions

    /// Hands the core an event and carries out its decisions: what the server must do first, then the
    /// route log and the log lines. Returns the decisions (an app's call reads its answer there).
    @discardableResult
    mutating func coreEvent(_ event: PolicyEvent, logRoutes: Bool = true) -> [PolicyAction] {
        switch event {
        case .portAppeared(let p), .portChanged(let p):
            outbox.log(.trace) { ("core event", ["event": "\(event.name) \(p.uid) \(p.type.name)"]) }
            if p.isServerRoleTarget { sayServerRolePolicy(p.uid) }
        case .portGone(let uid), .cardGone(let uid), .cardProfileChanged(let uid):
            outbox.log(.trace) { ("core event", ["event": "\(event.name) \(uid)"]) }
        default: break
        }
        let actions = core.handle(event, at: now)
        var touched: [StreamKey] = []
        var meters: [TowerEffect] = []
        /// What the core must hear of how its actions were carried out (after them).
        var facts: [PolicyEvent] = []
        for action in actions {
            switch action {
            case .mute, .unmute, .duck, .unduck, .letGo:
                if let key = holds.want(action) { touched.append(key) }
            case .moveStream(let key, let device):
                guard snapshot.device(named: device, key.direction) != nil else { continue }
                // (On a device the server does not list, a role sink of its own policy: left there. Where
                // the server links by role, a stream not linked yet is left to it too: moved now, it
                // would be pinned to our device before the server could link it to its role sink.)
                if let stream = snapshot.stream(key.direction, key.index),
                   snapshot.isOnAnUnlistedDevice(stream) || (serverLinksByRole && stream.device == nil) { continue }
                outbox.send(.moveStream(StreamReference(key.direction, key.index), toDevice: device), for: .other("move \(key)"))
                outbox.log(.info) { ("move", ["stream": "\(key)", "device": "\(device)"]) }
            case .meter(let key, let on):
                // (After the commands of this event: a meter is no reason to delay a call's mute.)
                guard key.direction == .output, !on || snapshot.stream(.output, key.index) != nil else { continue }
                meters.append(.meter(key.index, on))
            case .setDefaultDevice(let direction, let name):
                defaults.want(name, direction, &outbox)
            case .setCardProfile(let card, let profile, let original):
                // Journaled first, so that a successor switches the card back after a kill -9.
                if let original {
                    outbox.journal(.switched(card: card, from: original))
                    journaledSwitches[card] = original
                }
                // Back: the journal forgets the switch once the server confirms it (or the card is gone).
                if !setProfile(profile, ofCard: card) { switchedBack(card) }
            case .setActivePort(let device, let port):
                guard snapshot.source(named: device) != nil else { continue }
                outbox.send(.setActivePort(device: device, .input, port: port), for: .other("select \(port) on \(device)"))
                outbox.log(.info) { ("data source", ["device": "\(device)", "port": "\(port)"]) }
            case .pausePlayer(let id, let why, let cause):
                // Muting stays the guarantee of silence (SPEC.md 5.8): a player without MPRIS is muted only.
                // (Who interrupted it, for the log line: a call, a screen reader's voice pausing spoken audio ...)
                let commands = players.pause(playersOf(id), for: id, why: why, by: cause, &outbox)
                if commands.isEmpty { outbox.log(.info) { (action.verb, ["session": "\(id)", "player": "none playing on the session bus: muted only"]) } }
                if commands.isEmpty, why == .interruption { pausesAwaitingPlayer[id] = .some(cause) }
                outbox.player(commands)
                // Headphones gone: the core keeps it silent until the pause shows.
                if why == .privateListeningEnded, !commands.isEmpty {
                    pausesOnTheirWay[id] = Set(commands.map(\.0))
                    facts.append(.pauseOnItsWay(id))
                }
            case .resumePlayer(let id):
                pausesAwaitingPlayer[id] = nil
                let commands = players.resume(for: id, &outbox)
                if commands.isEmpty { outbox.log(.info) { (action.verb, ["session": "\(id)"]) } }
                outbox.player(commands)
            case .notify(let id, let notification):
                // (Its interruption over, with or without a resume: no pause is awaited for it any more.)
                if case .interruption(type: .ended, _, _) = notification { pausesAwaitingPlayer[id] = nil }
                outbox.log(.debug) { ("notify", ["session": "\(id)", "notification": "\(notification)"]) }
                if let path = apps.pathOfSession[id] { outbox.effects.append(.appSignal(path: path, notification)) }
            case .reply(let id, let error):
                if let error { outbox.log(.warning) { ("refused", ["session": "\(id)", "error": "\(error)"]) } }
            case .wakeUp:
                break
            case .sessionEnded(let id):
                directory.forget(id)
                pausesOnTheirWay[id] = nil
                pausesAwaitingPlayer[id] = nil
            case .logRouteChange(let change):
                // The devices found at start are where sound already goes: no route changed.
                if logRoutes { outbox.effects.append(.routeLog(change)) }
                if change.isSystemRoute { lastRouteChange = (change, now) }
            }
        }
        for key in touched {
            reconcile(key)
            let session = directory.session(of: key)?.rawValue ?? "?"
            if let verb = actions.first(where: { $0.stream == key })?.verb {
                outbox.log(.info) { (verb, ["stream": "\(key)", "session": "\(session)"]) }
            }
        }
        outbox.effects += meters
        for fact in facts { coreEvent(fact) }
        return actions
    }

    /// Says once that the server runs a role-based policy of its own (WirePlumber's role sinks), and
    /// that the agent leaves streams where that policy links them.
    mutating func sayServerRolePolicy(_ what: String) {
        guard !serverLinksByRole else { return }
        serverLinksByRole = true
        outbox.log(.notice) { ("the server links streams by role itself (WirePlumber's role-based policy): streams on its role sinks are left where it puts them", ["seen": "\(what)"]) }
    }

    /// Sets a card's profile; false if the card is not there.
    @discardableResult
    mutating func setProfile(_ profile: String, ofCard name: String) -> Bool {
        guard snapshot.card(named: name) != nil else { return false }
        outbox.send(.setCardProfile(card: name, profile: profile), for: .cardProfile(card: name, profile: profile))
        outbox.log(.info) { ("card profile", ["card": "\(name)", "profile": "\(profile)"]) }
        return true
    }

    /// The card is back in its own profile (or gone): the journal forgets the switch.
    mutating func switchedBack(_ card: String) {
        guard journaledSwitches.removeValue(forKey: card) != nil else { return }
        outbox.journal(.switchedBack(card: card))
    }

    /// Bluetooth cards a previous run switched to hands-free and could not switch back: the core takes
    /// them as its own switches, which go back once no session needs hands-free.
    mutating func adoptLeftoverSwitches(_ switches: [String: String]) {
        for (name, original) in switches.sorted(by: { $0.key < $1.key }) {
            guard let card = snapshot.card(named: name), let current = snapshot.bluetoothCard(card)?.activeProfile ?? card.activeProfile,
                  current != original
            else {
                switchedBack(name)
                continue
            }
            outbox.log(.notice) { ("a previous run left a Bluetooth card switched", ["card": "\(name)", "profile": "\(current)", "back to": "\(original)"]) }
            coreEvent(.bluetoothSwitchAdopted(card: name, current: current, original: original))
        }
    }

    // MARK: stopping

    /// Undo everything: cards back, holds released at once, the server's memory and modules put back;
    /// the loop ends once the server has answered (or `stopTimeout` has passed).
    /// Stopping, and connected: only answers are waited for (and after it finished, nothing).
    var isStopping: Bool {
        switch life {
        case .stopping, .finished: true
        case .starting, .running: false
        }
    }

    /// Connected at least once (a later connection is the server coming back).
    public var connectedBefore: Bool { if case .starting = life { false } else { true } }

    public var isFinished: Bool { life == .finished }

    mutating func beginStop() {
        switch life {
        case .starting(let stopBy):
            // The first connection comes with what to undo: it is waited for until then.
            life = .starting(stopBy: stopBy ?? now + settings.stopTimeout)
            finishIfDone()
            return
        case .running: life = .stopping(until: now + settings.stopTimeout, failures: 0)
        case .stopping: break  // (asked again, or connected again while stopping: given back again)
        case .finished: return
        }
        // Every card in a profile of ours: the journal holds each until the server confirmed its switch
        // back (the core's, a predecessor's not adopted yet, one the server refused).
        for (name, original) in journaledSwitches.sorted(by: { $0.key < $1.key }) where !setProfile(original, ofCard: name) { switchedBack(name) }
        pausesOnTheirWay = [:]
        holds.releaseEverything(at: now, &outbox)
        modules.giveBack(&outbox)
        finishIfDone()
    }

    mutating func finishIfDone() {
        switch life {
        case .starting(let stopBy?) where now >= stopBy:
            // What a predecessor left was never taken over: it stays for the next run.
            outbox.log(.warning) { ("stopped before the sound server answered: the journal keeps what it holds for the next run", [:]) }
        case .stopping(let until, let failures):
            // Every command answered: a client that leaves right after sending may lose what it sent.
            let waiting = !outbox.pending.isEmpty
            guard !waiting || now >= until else { return }
            if failures == 0 && !waiting {
                outbox.journal(.clear)
                outbox.log(.notice) { ("stopped; nothing left held", [:]) }
            } else {
                outbox.log(.warning) { ("stopped; the server did not confirm everything undone: the journal keeps it for the next run", [:]) }
            }
        case .starting, .running, .finished:
            return
        }
        life = .finished
        outbox.effects.append(.finished)
    }

    // MARK: for the CLI and tests

    public var state: PolicyState { core.state }
}

extension PulseEvent {
    /// The stream the event is about, if any.
    var stream: AudioStream? {
        switch entity {
        case .sinkInput(let s), .sourceOutput(let s): s
        default: nil
        }
    }
}

extension Snapshot {
    func device(named name: String, _ direction: Direction) -> Device? {
        direction == .output ? sink(named: name) : source(named: name)
    }
}

extension PolicyAction {
    /// The stream a mute, unmute, duck or unduck is about.
    var stream: StreamKey? {
        switch self {
        case .mute(let key), .unmute(let key), .duck(let key, _, _), .unduck(let key, _), .letGo(let key, _, _): key
        default: nil
        }
    }

    var verb: String {
        switch self {
        case .mute: "mute"
        case .unmute: "unmute"
        case .duck(_, let level, _): "duck to \(level)"
        case .unduck: "unduck"
        case .letGo: "let go"
        case .pausePlayer: "pause player"
        case .resumePlayer: "resume player"
        default: "\(self)"
        }
    }
}

extension PolicyEvent {
    /// The event's kind in a word, for the trace log.
    var name: String { String("\(self)".prefix { $0 != "(" }) }
}

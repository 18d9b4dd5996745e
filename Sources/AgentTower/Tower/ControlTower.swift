public import AudioPolicy
import Logging
public import ServerModel

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
    public internal(set) var core: PolicyMachine
    /// The server as its events have told it.
    public internal(set) var snapshot = Snapshot()
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
    /// Streams moved in this batch, with the device each was on first: judged once the batch is through
    /// (a device's removal in it is known then).
    var movedInBatch: [StreamKey: String?] = [:]
    /// Moves that look like the user's, judged once the device the stream left is still there
    /// `rescueSettles` later (gone by then: the server's rescue).
    var movesAwaitingJudgement: [StreamKey: (to: String, from: String, at: Duration)] = [:]
    /// The device each stream was last seen on, at a batch's end (a stream in transit, on none for a
    /// moment, is judged from where it was before).
    var lastDeviceOf: [StreamKey: String] = [:]
    /// Where we last asked each stream to go, and when.
    var askedMoves: [StreamKey: (device: String, at: Duration)] = [:]
    /// The sinks for several outputs the server would not make (for status; at most 16 names).
    var failedCombinations: Set<String> = []
    /// The modules of the sinks for several outputs the server made for us, by name (at most 16).
    var madeCombinations: [String: UInt32] = [:]

    /// A sink for several outputs not made: said by status (bounded).
    mutating func combinationFailed(_ name: String) {
        if failedCombinations.count >= 16 { failedCombinations.removeAll() }
        failedCombinations.insert(name)
    }
    /// The screen lock as the desktop (logind or a screen saver) last told it; nil until it has.
    var screenLock: Bool?
    public var screenLockKnown: Bool { screenLock != nil }
    /// A process's parent (from /proc in the agent; a table in tests), to match a player to the streams
    /// its children play.
    let parentProcess: @Sendable (Int) -> Int?
    var outbox = Outbox()
    public internal(set) var now: Duration = .zero
    /// Where the tower is in its life (one value: see `LifeCycle`).
    public internal(set) var life = LifeCycle.starting(stopBy: nil)
    /// What a previous run left, until the first connection takes it over.
    var leftovers: JournalLeftovers?
    /// Interruptions the core asked to pause a player for when none was playing on the bus (the agent
    /// just started, its listing of the bus still under way; or the player says "Playing" after its
    /// audio started): carried out when the app's player appears playing or says it plays; dropped
    /// when the core says the interruption ended (or resumes the session), or removes it. (Not for a
    /// session that joined our pause of its player for another session.)
    var pausesAwaitingPlayer: [SessionID: SessionID?] = [:]
    /// What the agent's MPRIS player was last said to show, and whether it may show something else now.
    var nowPlayingTold = NowPlayingProperties(session: nil, status: .stopped)
    var nowPlayingMayHaveChanged = false
    /// What was held when the connection was lost (see `server(_:)`).
    var heldAcrossLoss: [JournalEntry]?
    /// When the server was lost, and why (nil while connected): `status` says it.
    public internal(set) var serverLost: (at: Duration, reason: String)?
    /// Bluetooth cards the journal says are switched away (card: the profile to go back to). One leaves
    /// only once the server has confirmed the switch back (or the card is gone): a switch back that
    /// failed is tried again at stop, and stays in the journal for the next run if it fails again.
    var journaledSwitches: [String: String] = [:]
    public private(set) var journalHealth: JournalHealth = .writable
    /// Whether apps can reach the agent on the session bus (said in `appsProperty`).
    public package(set) var appsReach = AppsReach.notServed("no session bus")
    public private(set) var policyErrors: [PolicyFileError] = []
    /// The streams of a connection are being announced (see `connected`).
    var announcingAll = false

    /// Our own process: the streams we open to write the server's memory (`ProbeProperty.key`) are
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
        // (Stopping, only the stop's own deadlines are served: any other would wake the timer again and
        // again for nothing. Asked to stop before the server answered: the wait for it ends then.)
        case .starting(let stopBy?): stopBy
        case .stopping(let until, let memoryUntil, _): until > now ? until : memoryUntil
        case .finished: nil
        case .starting(nil), .running:
            [core.nextDeadline, holds.nextDeadline, defaults.nextDeadline, movesAwaitingJudgement.values.map(\.at).min()].compactMap { $0 }.min()
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
        let moved = movedInBatch
        movedInBatch = [:]
        for (key, from) in moved.sorted(by: { $0.key < $1.key }) {
            guard let stream = snapshot.stream(key.direction, key.index) else { continue }
            let to = snapshot.device(of: stream)?.name
            let asked = askedMoves[key]
            let left = from ?? lastDeviceOf[key]
            if let to { lastDeviceOf[key] = to }
            movesAwaitingJudgement[key] = nil
            let byUser = to != nil && to != asked?.device && asked.map { now - $0.at >= settings.moveSettles } ?? true
                && left.map { f in f != to && snapshot.routableDevices.contains { $0.name == f } } == true
            if byUser, let to, let left {
                // (Judged a moment later: a device the server rescues its streams from goes after them.)
                movesAwaitingJudgement[key] = (to, left, now + settings.rescueSettles)
            } else {
                coreEvent(.streamMoveJudged(key, to: to, byUser: false))
            }
        }
        judgeAwaitedMoves()
        tellNowPlayingIfChanged()
        finishIfDone()
        return outbox.take()
    }

    /// The moves awaiting judgement whose time has come, or whose device went (the server's rescue):
    /// judged. A stream gone, or moved on meanwhile (judged anew), is not.
    /// `now`: every one judged at once, as things stand (the stop, which must not take the user's move
    /// for ours).
    mutating func judgeAwaitedMoves(now judgeAll: Bool = false) {
        for (key, move) in movesAwaitingJudgement.sorted(by: { $0.key < $1.key }) {
            guard let stream = snapshot.stream(key.direction, key.index) else {
                movesAwaitingJudgement[key] = nil
                continue
            }
            guard snapshot.device(of: stream)?.name == move.to else {
                // Moved on without a move of its own to judge (its app's identity changed with it, say):
                // not the user's, and the core judges it no more.
                movesAwaitingJudgement[key] = nil
                coreEvent(.streamMoveJudged(key, to: snapshot.device(of: stream)?.name, byUser: false))
                continue
            }
            let rescued = !snapshot.routableDevices.contains { $0.name == move.from }
            guard rescued || judgeAll || now >= move.at else { continue }
            movesAwaitingJudgement[key] = nil
            if !rescued { movedByUser(key, to: move.to, from: move.from) }
            coreEvent(.streamMoveJudged(key, to: move.to, byUser: !rescued, toDefault: move.to == snapshot.server?.defaultDeviceName(key.direction)))
        }
    }

    /// A move judged the user's: said, and the holds told (where the server sends the stream's app or
    /// role is the user's now; a move to the default makes it forget).
    mutating func movedByUser(_ key: StreamKey, to device: String, from: String) {
        outbox.log(.info) { ("a stream moved by someone else", ["stream": "\(key)", "from": "\(from)", "to": "\(device)"]) }
        let serverDefault = snapshot.server?.defaultDeviceName(key.direction)
        holds.movedByUser(key, to: device == serverDefault ? nil : device, at: now, &outbox)
    }

    /// One of the streams we open to write the server's memory.
    func isOurProbe(_ stream: AudioStream) -> Bool {
        stream.properties[ProbeProperty.key] != nil && ownProcessID != nil && stream.properties["application.process.id"] == ownProcessID
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
            for error in set.errors {
                // (outputs.yaml keeps its last good version; a bad policy file is skipped, its last good kept.)
                let what = error.file.hasSuffix("/outputs.yaml") ? "preferred outputs file not read (its last good version holds)" : "policy file skipped"
                outbox.log(.error) { (what, ["error": "\(error)"]) }
            }
            let count = set.policies.count, errors = set.errors.count
            outbox.log(.info) { ("policies loaded", ["count": "\(count)", "errors": "\(errors)"]) }
            if set.outputs != core.state.outputRoutes {
                let (categories, apps) = (set.outputs.categories.count, set.outputs.apps.count)
                outbox.log(.info) { ("preferred outputs configured", ["categories": "\(categories)", "apps": "\(apps)"]) }
                coreEvent(.outputRoutes(set.outputs))
            }
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
        case .kept(let kept, let problem):
            if let problem { outbox.log(.error) { ("what the user set is not all read back; what could be read holds", ["problem": "\(problem)"]) } }
            if kept.inputMuted { setInputMuted(true, askedBy: nil) }
            if kept.silentMode { setSilentMode(true, askedBy: nil) }
            if !kept.routes.sets.isEmpty { coreEvent(.routesRemembered(kept.routes)) }
        case .stop:
            // (Asked again while stopping, a second Ctrl-C: the stop under way goes on as it is.)
            if case .stopping = life { break }
            beginStop()
        case .players(let event):
            nowPlayingMayHaveChanged = true
            if case .busGone(let reason) = event { tellAppsReach(.notServed(reason)) }
            let before = event.playerName.flatMap { players.players[$0] }
            for told in players.apply(event, at: now, &outbox) { coreEvent(told) }
            sayPlayerSeek(event)
            releasePausedPlayers()
            // A player that comes on the bus playing, or says it plays, for an app whose interruption found
            // none playing to pause: paused now, for that interruption (mpv says "Playing" after its audio
            // starts: a player started during a call is paused whichever comes first). A player we
            // paused that the user plays again is the user's hand: not paused.
            if let name = event.playerName, players.players[name]?.status == .playing,
               before?.status != .playing, (before?.hold ?? Players.Hold.none) == .none {
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

    mutating func tick() {
        guard !isStopping else { return }  // only the stop's own deadline (finishIfDone)
        if let due = core.nextDeadline, due <= now { coreEvent(.tick) }
        judgeAwaitedMoves()
        holds.tick(at: now, &outbox)
        defaults.tick(in: snapshot, settings: settings, at: now, &outbox)
        releasePausedPlayers()
    }

    // MARK: for the CLI and tests

    public var state: PolicyState { core.state }
}

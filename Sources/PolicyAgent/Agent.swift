public import AudioPolicy
import FoundationEssentials
import Glibc
public import Logging
public import PulseClient

/// What `audiosessiond` needs to know.
public struct AgentConfiguration: Sendable {
    /// The sound server; nil for the user's.
    public var server: String?
    /// Policy directories, highest precedence first.
    public var policyLayers: [String]
    /// The route-change log (JSON lines), if any.
    public var routeLog: String?
    /// Where the journal of held changes lives; nil for none.
    public var stateDirectory: String?
    /// Unload PulseAudio's own policy modules that would fight the agent (and load them again on exit).
    public var takeOverServerModules: Bool

    public init(server: String? = nil, policyLayers: [String], routeLog: String? = nil, stateDirectory: String? = nil,
                takeOverServerModules: Bool = true) {
        self.server = server; self.policyLayers = policyLayers; self.routeLog = routeLog
        self.stateDirectory = stateDirectory; self.takeOverServerModules = takeOverServerModules
    }
}

/// What the agent's loop handles, one at a time.
public enum AgentInput: Sendable {
    /// An event of the sound server, with its snapshot as it is with the event.
    case server(PulseEvent, Snapshot)
    case tick
    /// Read the policy files again (SIGHUP).
    case reload
    /// Undo everything and stop (SIGTERM, SIGINT).
    case stop
    /// The server's default device changed, not at our request: judged after the events already
    /// queued, so that a device's removal arriving in the same batch is known. `previousThere`: the
    /// previous default still existed when the change came (a device of the same name may come back
    /// meanwhile: PipeWire re-creates a Bluetooth node under its old name in a profile switch).
    case defaultChanged(Direction, previous: String?, previousThere: Bool, new: String)
    /// Time to judge the Bluetooth ports parked on their way out (see `parkRemoval`).
    case parkedRemovalsDue
}

/// The session agent: watches every stream and device on the sound server, gives each app its
/// session (policy files, role defaults), runs the policy core and carries out its decisions.
public actor Agent {
    let configuration: AgentConfiguration
    let logger: Logger
    let inputs = AsyncStream.makeStream(of: AgentInput.self, bufferingPolicy: .unbounded)
    var machine = PolicyMachine()
    let epoch = ContinuousClock.now
    var client: PulseClient?
    var routeLog: RouteLogWriter
    let journal: Journal
    public private(set) var policies: [AppPolicy] = []
    public private(set) var policyErrors: [PolicyFileError] = []
    /// The session each stream was given, and the classification behind it.
    var streamSessions: [StreamKey: SessionID] = [:]
    public private(set) var classifications: [SessionID: Classification] = [:]
    var connectedBefore = false
    /// The server is pipewire-pulse (known at each connection).
    var isPipeWire = false
    /// The default devices we asked for recently, to tell the user's choices from ours when the
    /// server's change events come back.
    var ourDefaults: [Direction: [String]] = [:]
    /// While the first snapshot is announced, default-device decisions are collected and sent once at
    /// the end: the agent starting moves nothing unless its rules say the route is elsewhere.
    var announcing = false
    var wantedDefaults: [Direction: String] = [:]
    /// Bluetooth cards a previous run switched (journal), with their own profiles, until adopted.
    var leftoverSwitches: [String: String] = [:]
    /// Bluetooth sinks and sources gone whose card has not yet shown why (see `parkRemoval`), with the
    /// card and when.
    var parkedRemovals: [String: (card: UInt32, since: ContinuousClock.Instant)] = [:]
    /// When a sink or source last came or went, or a card changed profile: the server re-chooses its
    /// default devices by itself then (WirePlumber does so more than once while a Bluetooth card
    /// switches), which is not the user choosing.
    var lastDeviceChurn: ContinuousClock.Instant?
    var timer: Task<Void, Never>?
    /// What the agent knows and holds of each stream (Enforcer.swift).
    var tracked: [StreamKey: TrackedStream] = [:]
    /// The server's remembered entries as they were before we touched a stream of that app or role.
    var restoreSnapshots: [String: StreamRestoreEntry?] = [:]
    /// Reads of those entries sent and not yet answered (Enforcer.swift).
    /// The answer is nil if the read failed (the entry as it was is then unknown, and nothing is put back).
    var restoreReads: [String: Task<StreamRestoreEntry??, Never>] = [:]
    /// Entries we put back recently, with whether they were muted (see undoInheritedMute).
    var recentlyPutBack: [String: PutBack] = [:]

    var unloadedModules: [(name: String, argument: String)] = []
    /// Modules the agent replaced with a copy under other arguments while it runs: put back on exit.
    var replacedModules: [(name: String, argument: String, replacement: UInt32)] = []
    var watchers: [Int: AsyncStream<Void>.Continuation] = [:]
    var nextWatcher = 0

    /// Yields now and after every input the agent has handled: tests and tools wait on it for the
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

    public init(configuration: AgentConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        routeLog = RouteLogWriter(path: configuration.routeLog)
        journal = Journal(directory: configuration.stateDirectory)
    }

    /// Feeds the agent's loop (from signal handlers, tests).
    public nonisolated func send(_ input: AgentInput) { inputs.continuation.yield(input) }

    var now: Duration { ContinuousClock.now - epoch }

    // MARK: running

    /// Connects, then handles events until `.stop`; then undoes everything it holds.
    public func run() async throws {
        loadPolicies()
        let client = try await PulseClient.connect(.init(
            server: configuration.server, applicationName: "audiosessiond", applicationID: "org.audiosession.agent"))
        self.client = client
        // Straight from libpulse's thread into the agent's queue: no task in between.
        client.forwardEvents { [inputs] event, snapshot in inputs.continuation.yield(.server(event, snapshot)) }
        loop: for await input in inputs.stream {
            switch input {
            case .server(let event, let snapshot): await handleServer(event, snapshot)
            case .tick:
                await handle(.tick)
                await retireIdleSessions()
            case .reload: await reload()
            case .defaultChanged(let direction, let previous, let previousThere, let new):
                await defaultChanged(direction, previous: previousThere ? previous : nil, new: new)
            case .parkedRemovalsDue:
                for (name, parked) in parkedRemovals.sorted(by: { $0.key < $1.key })
                where ContinuousClock.now - parked.since >= Self.parkingTime {
                    await releaseParked(name, inProfileSwitch: client.snapshot.cards[parked.card] != nil)
                }
            case .stop: break loop
            }
            journal.compactIfGrown()
            for watcher in watchers.values { watcher.yield() }
        }
        for watcher in watchers.values { watcher.finish() }
        await shutdown()
        client.close()
    }

    func loadPolicies() {
        let (loaded, errors) = PolicyFiles.load(layers: configuration.policyLayers)
        for error in errors { logger.error("policy file skipped", metadata: ["error": "\(error)"]) }
        policyErrors = errors
        // On reload the last good set stays in force for the files that are now bad.
        policies = PolicyFiles.keepingLastGood(previous: policies, loaded: loaded, errors: errors)
        logger.info("policies loaded", metadata: ["count": "\(policies.count)", "errors": "\(errors.count)"])
    }

    func reload() async {
        loadPolicies()
        guard let snapshot = client?.snapshot else { return }
        // Streams are classified again; a changed classification is a changed session.
        for stream in snapshot.streams(.output) + snapshot.streams(.input) {
            await announce(stream, in: snapshot)
        }
    }

    // MARK: server events

    func handleServer(_ event: PulseEvent, _ snapshot: Snapshot) async {
        switch event {
        case .connected(let snapshot):
            isPipeWire = snapshot.server?.isPipeWire == true
            if connectedBefore {
                logger.notice("sound server back: re-applying decisions")
                await handle(.mediaServicesReset)
            }
            connectedBefore = true
            await takeOverServerModules(snapshot)
            await undoLeftovers(snapshot)
            await putBackAfterReconnection()
            // Ports in index order, the current defaults last: the agent starting changes no route.
            let defaults = [snapshot.server?.defaultSinkName, snapshot.server?.defaultSourceName]
            let devices = snapshot.routableDevices.sorted { (defaults.contains($0.name) ? 1 : 0, $0.id) < (defaults.contains($1.name) ? 1 : 0, $1.id) }
            announcing = true
            wantedDefaults = [:]
            for device in devices { await handle(.portAppeared(snapshot.port(of: device))) }
            announcing = false
            // Sent even where the server already uses the device: PulseAudio then holds it as the configured
            // default, and no longer picks a newly arrived device by its own priorities (a Bluetooth
            // card's new sink in a profile switch, say) before the agent has decided.
            for (direction, name) in wantedDefaults.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                let current = direction == .output ? snapshot.server?.defaultSinkName : snapshot.server?.defaultSourceName
                await setDefault(name, direction, changes: name != current)
            }
            for stream in snapshot.streams(.output) + snapshot.streams(.input) { await announce(stream, in: snapshot) }
            await adoptLeftoverSwitches(snapshot)

        case .disconnected(let reason):
            logger.warning("sound server lost", metadata: ["reason": "\(reason)"])
            parkedRemovals = [:]
            streamSessions = [:]
            forgetAllStreams()
            await handle(.mediaServicesLost)

        case .added(let entity):
            switch entity {
            case .sink(let d), .source(let d):
                if !d.isMonitor { lastDeviceChurn = .now }
                if let card = d.card { await releaseParked(ofCard: card, inProfileSwitch: true) }
                if !d.isMonitor { await handle(.portAppeared(snapshot.port(of: d))) }
            case .sinkInput(let s), .sourceOutput(let s):
                await announce(s, in: snapshot)
            default: break
            }

        case .changed(let old, let new):
            switch (old, new) {
            case (.sink(let a), .sink(let b)), (.source(let a), .source(let b)):
                guard !b.isMonitor else { return }
                let (pa, pb) = (snapshot.port(of: a), snapshot.port(of: b))
                if pa != pb || a.activePort != b.activePort || a.sampleSpec != b.sampleSpec {
                    await handle(.portChanged(pb))
                }
            case (.card(let a), .card(let b)):
                if a.activeProfile != b.activeProfile {
                    lastDeviceChurn = .now
                    await releaseParked(ofCard: b.id, inProfileSwitch: true)
                }
                for device in snapshot.routableDevices where device.card == new.index {
                    await handle(.portChanged(snapshot.port(of: device)))
                }
            case (.sinkInput(let a), .sinkInput(let b)), (.sourceOutput(let a), .sourceOutput(let b)):
                await streamChanged(from: a, to: b, in: snapshot)
            case (.server(let a), .server(let b)):
                for (direction, old, new) in [(Direction.output, a.defaultSinkName, b.defaultSinkName),
                                              (.input, a.defaultSourceName, b.defaultSourceName)] {
                    guard let name = new, name != old else { continue }
                    logger.debug("the server's default changed", metadata: [
                        "direction": "\(direction)", "from": "\(old ?? "none")", "to": "\(name)",
                        "ours": "\(ourDefaults[direction] ?? [])"])
                    if let ours = ourDefaults[direction], let i = ours.firstIndex(of: name) {
                        ourDefaults[direction] = Array(ours[(i + 1)...])  // our own request coming back
                    } else {
                        let there = old.map { o in snapshot.routableDevices.contains { $0.name == o } } ?? false
                        inputs.continuation.yield(.defaultChanged(direction, previous: old, previousThere: there, new: name))
                    }
                }
            default: break
            }

        case .removed(let entity):
            switch entity {
            case .sink(let d), .source(let d):
                guard !d.isMonitor else { return }
                lastDeviceChurn = .now
                if let card = d.card, snapshot.cards[card] != nil, snapshot.bluetoothCard(of: d) != nil {
                    parkRemoval(d.name, card: card)
                } else {
                    await handle(.portGone(d.name))
                }
            case .card(let c):
                await releaseParked(ofCard: c.id, inProfileSwitch: false)
            case .sinkInput(let s), .sourceOutput(let s):
                let key = StreamKey(s)
                streamSessions[key] = nil
                await handle(.streamGone(key))
                await trackedStreamGone(key)
                await retireIdleSessions()
            default: break
            }

        case .other:
            break
        }
    }

    // MARK: Bluetooth ports on their way out

    /// A Bluetooth sink or source went away while its card is still there: either the card is switching
    /// profile (by us, by WirePlumber's own autoswitch, by the user's mixer) and the new profile's ports
    /// follow, or the device is leaving and the card goes next. Which one decides the route change's
    /// reason (and whether a player pauses because private listening ended), so the port is parked until
    /// the card shows it: the card goes (leaving), or shows another profile or a new port (a switch),
    /// or a second passes (a switch if the card is still there, to "off" say).
    func parkRemoval(_ name: String, card: UInt32) {
        parkedRemovals[name] = (card, .now)
        let inputs = self.inputs
        Task {
            try? await Task.sleep(for: Self.parkingTime)
            inputs.continuation.yield(.parkedRemovalsDue)
        }
    }

    static let parkingTime = Duration.seconds(1)

    func releaseParked(ofCard card: UInt32, inProfileSwitch: Bool) async {
        for (name, parked) in parkedRemovals.sorted(by: { $0.key < $1.key }) where parked.card == card {
            await releaseParked(name, inProfileSwitch: inProfileSwitch)
        }
    }

    func releaseParked(_ name: String, inProfileSwitch: Bool) async {
        guard parkedRemovals.removeValue(forKey: name) != nil else { return }
        await handle(inProfileSwitch ? .portGoneInProfileSwitch(name) : .portGone(name))
    }

    /// A default device we did not set: the user's choice if the previous default is still there (and
    /// was when the change came: `previous` is nil otherwise) and no device came or went just before;
    /// the server's own choice (WirePlumber's, when the default device went away or devices change)
    /// otherwise, and the agent's route stands.
    func defaultChanged(_ direction: Direction, previous: String?, new: String) async {
        guard let snapshot = client?.snapshot, snapshot.routableDevices.contains(where: { $0.name == new }) else { return }
        let current = direction == .output ? snapshot.server?.defaultSinkName : snapshot.server?.defaultSourceName
        guard current == new else { return }  // superseded meanwhile
        let settled = lastDeviceChurn.map { ContinuousClock.now - $0 > .milliseconds(1500) } ?? true
        if let previous, settled, snapshot.routableDevices.contains(where: { $0.name == previous }) {
            logger.info("the user chose a default device", metadata: ["device": "\(new)"])
            await handle(.userSelectedPort(new))
        } else {
            // The server fell back by itself; where the route goes is the agent's decision.
            let wanted = direction == .output ? machine.state.systemRoute.outputs.first?.uid : machine.state.systemRoute.inputs.first?.uid
            if let wanted, wanted != new { await setDefault(wanted, direction) }
        }
    }

    /// Classifies a stream, declares its session if it is new, and tells the core.
    func announce(_ stream: AudioStream, in snapshot: Snapshot) async {
        let key = StreamKey(stream)
        // Capturing what a sink plays (its monitor: a screen recorder, a level meter, a visualiser) is
        // not recording from a microphone: no session of the core, nothing silenced, nothing muted.
        if snapshot.isMonitorCapture(stream) {
            if streamSessions.removeValue(forKey: key) != nil {
                await handle(.streamGone(key))
                await trackedStreamGone(key)
            }
            return
        }
        let app = snapshot.identity(of: stream)
        let classification = Classifier.classify(app, policies: policies)
        let owner = app.processID.map(String.init) ?? "client\(stream.client ?? 0)"
        let label: String =
            switch classification.source {
            case .policy(let name, _, _): name
            case .roleDefault(let role): "role=\(role ?? "none")"
            }
        let id = SessionID("\(app.binary ?? app.name ?? "app")[\(owner)]:\(label)")
        if classifications[id] != classification || machine.state.sessions[id] == nil {
            classifications[id] = classification
            logger.info("session", metadata: [
                "session": "\(id)", "configuration": "\(classification.configuration)",
                "why": "\(classification.explanation)",
            ])
            await handle(.declare(SessionDeclaration(
                id, app: owner, origin: .inferred, configuration: classification.configuration,
                duckLevel: classification.duckLevel, microphoneAllowed: classification.microphoneAllowed)))
        }
        streamSessions[key] = id
        track(stream)
        await handle(.streamAppeared(key, session: id, running: !stream.isCorked,
                                     device: snapshot.device(of: stream)?.name))
        await undoInheritedMute(stream)
        _ = await correctInheritedVolume(stream)
    }

    func streamChanged(from old: AudioStream, to new: AudioStream, in snapshot: Snapshot) async {
        let key = StreamKey(new)
        guard streamSessions[key] != nil else { return await announce(new, in: snapshot) }
        if snapshot.identity(of: old) != snapshot.identity(of: new) { return await announce(new, in: snapshot) }
        if snapshot.isMonitorCapture(new) { return await announce(new, in: snapshot) }
        if old.isCorked != new.isCorked { await handle(.streamRunning(key, !new.isCorked)) }
        if old.device != new.device { await handle(.streamMoved(key, device: snapshot.device(of: new)?.name)) }
        if new.isMuted && !old.isMuted { await undoInheritedMute(new) }
        // The server's memory acting on a young stream (WirePlumber: a moment after it appears) is not
        // the user: see correctInheritedVolume.
        let inherited = new.volume != old.volume ? await correctInheritedVolume(new) : false
        let (mute, volume) = inherited ? (false, false) : userChange(new)
        track(new)
        if old.device == nil, new.device != nil { await runPendingDuck(key) }
        if mute || volume {
            logger.info("the user changed a managed stream: the user wins", metadata: ["stream": "\(key)"])
            userTookOver(key, mute: mute, volume: volume)
            await handle(.userChangedStream(key, mute: mute, volume: volume))
        }
    }

    /// Inferred sessions with no stream left and nothing to do are forgotten.
    func retireIdleSessions() async {
        let state = machine.state
        // Gathered once: this runs after every stream removal and tick, so it must stay linear.
        let withStreams = Set(state.streams.values.map(\.session))
        let interrupters = Set(state.sessions.values.compactMap { s -> SessionID? in
            if case .interrupted(let by) = s.status { return by }
            return nil
        })
        for (id, session) in state.sessions where session.origin == .inferred && session.status == .inactive
            && session.deactivatesAt == nil && !withStreams.contains(id) && !interrupters.contains(id) {
            await handle(.remove(id))
            classifications[id] = nil
        }
    }

    // MARK: the core and its decisions

    func handle(_ event: PolicyEvent) async {
        let actions = machine.handle(event, at: now)
        // The route-change log first: it is written before the agent awaits the server (an actor
        // can be asked for its state while it waits), so what the state says is already logged.
        for action in actions { if case .logRouteChange = action { await carryOut(action) } }
        for action in actions where action.touchesServer { await carryOut(action) }
        for action in actions where !action.touchesServer { if case .logRouteChange = action {} else { await carryOut(action) } }
    }

    func carryOut(_ action: PolicyAction) async {
        guard let client else { return }
        switch action {
        case .mute(let key), .unmute(let key), .duck(let key, _, _), .unduck(let key, _):
            await enforce(action)
            let session = streamSessions[key].map(\.rawValue) ?? "?"
            logger.info("\(action.verb)", metadata: ["stream": "\(key)", "session": "\(session)"])
        case .moveStream(let key, let device):
            logger.info("move", metadata: ["stream": "\(key)", "device": "\(device)"])
            guard let target = (key.direction == .output ? client.snapshot.sink(named: device) : client.snapshot.source(named: device)) else { return }
            await attempt("move \(key)") { try await client.move(streamIndex: key.index, direction: key.pulseDirection, toDevice: target.id) }
        case .setDefaultDevice(let direction, let name):
            let d: Direction = direction == .output ? .output : .input
            if announcing { wantedDefaults[d] = name } else { await setDefault(name, d) }
        case .setCardProfile(let card, let profile):
            // Journaled first, so that a successor switches the card back after a kill -9.
            if let done = machine.state.bluetoothSwitches[card], done.done, done.target == profile, done.target != done.original {
                journal.switched(card, from: done.original)
            }
            let there = await setProfile(profile, ofCard: card)
            if !there || machine.state.bluetoothSwitches[card] == nil { journal.switchedBack(card) }
        case .setActivePort(let device, let port):
            logger.info("data source", metadata: ["device": "\(device)", "port": "\(port)"])
            guard let source = client.snapshot.source(named: device) else { return }
            await attempt("select \(port) on \(device)") { try await client.setActivePort(port, deviceIndex: source.id, direction: .input) }
        case .pausePlayer(let id), .resumePlayer(let id):
            // MPRIS comes with the D-Bus layer; muting is the guarantee of silence meanwhile (SPEC.md 5.8).
            logger.info("\(action.verb)", metadata: ["session": "\(id)"])
        case .notify(let id, let notification):
            logger.debug("notify", metadata: ["session": "\(id)", "notification": "\(notification)"])
        case .reply(let id, let error?):
            logger.warning("refused", metadata: ["session": "\(id)", "error": "\(error)"])
        case .reply:
            break
        case .logRouteChange(let change):
            // The devices found at start are where sound already goes: no route changed.
            if !announcing { routeLog.write(RouteLogEntry(change, at: Date())) }
        case .wakeUp(let at):
            timer?.cancel()
            let delay = at - now
            timer = Task { [inputs] in
                try? await Task.sleep(for: max(delay, .zero))
                if !Task.isCancelled { inputs.continuation.yield(.tick) }
            }
        }
    }

    /// Sets a card's profile; false if the card is not there.
    @discardableResult
    func setProfile(_ profile: String, ofCard name: String) async -> Bool {
        guard let client, let index = client.snapshot.card(named: name)?.id else { return false }
        logger.info("card profile", metadata: ["card": "\(name)", "profile": "\(profile)"])
        await attempt("set profile of \(name)") { try await client.setCardProfile(profile, cardIndex: index) }
        return true
    }

    /// Sets a default device; `changes` false when the server uses it already (no change event comes back).
    func setDefault(_ name: String, _ direction: Direction, changes: Bool = true) async {
        guard let client else { return }
        logger.info("default device", metadata: ["direction": "\(direction)", "device": "\(name)"])
        if changes {
            ourDefaults[direction, default: []].append(name)
            ourDefaults[direction] = ourDefaults[direction]!.suffix(8)
        }
        await attempt("set default \(name)") { try await client.setDefault(deviceName: name, direction: direction) }
    }

    func attempt(_ what: String, _ body: () async throws -> Void) async {
        do { try await body() } catch { logger.warning("\(what) failed", metadata: ["error": "\(error)"]) }
    }

    // MARK: the server's own policy modules

    /// PulseAudio's role-cork, role-ducking and switch-on-connect would cork, duck and switch on their
    /// own: the agent takes over, and puts them back when it stops. module-bluetooth-policy's
    /// `auto_switch` would switch a headset to hands-free for any recording with the phone role, and
    /// back, on its own schedule: while the agent runs the module is loaded again with `auto_switch=0`
    /// (its other duties stay), and with its own arguments once the agent stops. module-switch-on-port-
    /// available only selects the port a jack brings on its own card: the agent sees that as the
    /// device's new port and routes by it, so the two cooperate. (pipewire-pulse has none of these;
    /// WirePlumber honours the default devices the agent sets, as the user's configured choice.)
    func takeOverServerModules(_ snapshot: Snapshot) async {
        guard configuration.takeOverServerModules, let client else { return }
        // After a server restart, copies we loaded into the old server are gone with it.
        replacedModules.removeAll { snapshot.modules[$0.replacement]?.name != $0.name }
        for module in snapshot.modules.values.sorted(by: { $0.id < $1.id }) {
            switch module.name {
            case "module-role-cork", "module-role-ducking", "module-switch-on-connect":
                // Journaled before it is unloaded: killed in between, the next agent finds the module
                // still loaded (and takes it over itself) rather than gone with no record of it.
                journal.tookOver(module.name, argument: module.argument)
                do {
                    try await client.unloadModule(module.id)
                    if !unloadedModules.contains(where: { $0 == (module.name, module.argument) }) {
                        unloadedModules.append((module.name, module.argument))
                    }
                    logger.notice("took over from the server's module", metadata: ["module": "\(module.name)"])
                } catch {
                    logger.warning("could not unload \(module.name)", metadata: ["error": "\(error)"])
                }
            case "module-bluetooth-policy":
                let argument = Self.argument(module.argument, setting: "auto_switch", to: "0")
                guard argument != module.argument, !replacedModules.contains(where: { $0.replacement == module.id }) else { continue }
                journal.tookOver(module.name, argument: module.argument)
                do {
                    try await client.unloadModule(module.id)
                } catch {
                    logger.warning("could not unload \(module.name)", metadata: ["error": "\(error)"])
                    continue
                }
                do {
                    let index = try await client.loadModule(module.name, arguments: argument)
                    replacedModules.append((module.name, module.argument, index))
                    logger.notice("took over the server's Bluetooth profile switching", metadata: ["module": "\(module.name)", "arguments": "\(argument)"])
                } catch {
                    unloadedModules.append((module.name, module.argument))
                    logger.warning("could not load \(module.name) again", metadata: ["error": "\(error)"])
                }
            default:
                break
            }
        }
    }

    /// A module argument string with one `key=value` set (added if absent).
    static func argument(_ argument: String, setting key: String, to value: String) -> String {
        var parts = argument.split(separator: " ").map(String.init)
        if let i = parts.firstIndex(where: { $0.hasPrefix("\(key)=") }) { parts[i] = "\(key)=\(value)" } else { parts.append("\(key)=\(value)") }
        return parts.joined(separator: " ")
    }

    // MARK: leaving no trace

    /// A previous agent died holding streams: undo what it left (SPEC.md 5.12).
    func undoLeftovers(_ snapshot: Snapshot) async {
        let leftovers = journal.leftovers()
        guard !leftovers.isEmpty else { return }
        logger.notice("undoing what a previous run left", metadata: [
            "streams": "\(leftovers.streams.count)", "remembered entries": "\(leftovers.remembered.count)"])
        await undo(leftovers.streams, in: snapshot)
        // Cards it switched to hands-free: adopted once the devices and streams are known (a call may
        // still need the card), then switched back when nothing does.
        leftoverSwitches = leftovers.cards
        // Modules the previous run took over and could not put back: this run puts them back when it
        // stops (it holds them meanwhile, as it would have taken them over itself).
        for module in leftovers.modules {
            if module.module == "module-bluetooth-policy",
               let copy = snapshot.modules.values.first(where: { $0.name == module.module && $0.argument != module.argument }),
               !replacedModules.contains(where: { $0.replacement == copy.id }) {
                replacedModules.append((module.module, module.argument, copy.id))
            } else if !snapshot.modules.values.contains(where: { $0.name == module.module }),
                      !unloadedModules.contains(where: { $0 == (module.module, module.argument) }) {
                unloadedModules.append((module.module, module.argument))
            }
        }
        // The server's memory as it was before the previous run touched it, unless this run holds that
        // app or role already (then it is put back when this run lets go).
        for (restoreKey, entry) in leftovers.remembered.sorted(by: { $0.key < $1.key })
        where restoreSnapshots[restoreKey] == nil && restoreReads[restoreKey] == nil {
            restoreSnapshots[restoreKey] = .some(entry)
            await putBackRestoreEntry(restoreKey)
        }
        journal.clear()
        for module in unloadedModules { journal.tookOver(module.name, argument: module.argument) }
        for module in replacedModules { journal.tookOver(module.name, argument: module.argument) }
    }

    /// Bluetooth cards a previous run switched to hands-free and could not switch back: the core takes
    /// them as its own switches, which go back once no session needs hands-free.
    func adoptLeftoverSwitches(_ snapshot: Snapshot) async {
        defer { leftoverSwitches = [:] }
        for (name, original) in leftoverSwitches.sorted(by: { $0.key < $1.key }) {
            guard let card = snapshot.card(named: name), let current = snapshot.bluetoothCard(card)?.activeProfile ?? card.activeProfile
            else { continue }
            guard current != original else { continue }
            logger.notice("a previous run left a Bluetooth card switched", metadata: [
                "card": "\(name)", "profile": "\(current)", "back to": "\(original)"])
            journal.switched(name, from: original)
            await handle(.bluetoothSwitchAdopted(card: name, current: current, original: original))
        }
    }

    /// On stop: undo everything held, switch cards back, put back the server's modules.
    func shutdown() async {
        timer?.cancel()
        // Stopped before the first connection was handled (a stop right after the start): what a
        // previous run left is still to be undone, or clearing the journal below would lose it.
        if !connectedBefore, let client, client.isConnected {
            await undoLeftovers(client.snapshot)
        }
        for away in machine.state.bluetoothSwitches.values.filter(\.isAway).sorted(by: { $0.card < $1.card }) {
            await setProfile(away.original, ofCard: away.card)
        }
        // Left by a previous run and not adopted yet (a stop right after the start).
        for (name, original) in leftoverSwitches.sorted(by: { $0.key < $1.key }) { await setProfile(original, ofCard: name) }
        await releaseAll()
        journal.clear()
        if let client {
            for module in replacedModules {
                try? await client.unloadModule(module.replacement)
                _ = try? await client.loadModule(module.name, arguments: module.argument)
            }
            for module in unloadedModules {
                _ = try? await client.loadModule(module.name, arguments: module.argument)
            }
        }
        logger.notice("stopped; nothing left held")
    }

    // MARK: for the CLI and tests

    public var state: PolicyState { machine.state }
}

extension PolicyAction {
    /// Mute, volume, moves, defaults, profiles, ports: what the server must do, before the log lines.
    var touchesServer: Bool {
        switch self {
        case .mute, .unmute, .duck, .unduck, .moveStream, .setDefaultDevice, .setCardProfile, .setActivePort: true
        default: false
        }
    }

    var verb: String {
        switch self {
        case .mute: "mute"
        case .unmute: "unmute"
        case .duck(_, let level, _): "duck to \(level)"
        case .unduck: "unduck"
        case .pausePlayer: "pause player"
        case .resumePlayer: "resume player"
        default: "\(self)"
        }
    }
}

/// The policy core: `(state, event) -> (state, [action])`, with every rule of SPEC.md sections 5 and
/// 6. Pure: no I/O, no clock; time comes with each event.
///
/// Every event runs in two steps. First the event's own transition (activation, interruption,
/// a device coming or going). Then everything derived is recomputed from the whole state, the way
/// PulseAudio's policy modules do: routes and their reasons, which streams must be muted or ducked and
/// why, the secondary-audio hints, the timers. What is held on a stream is recorded, so that each
/// hold is undone exactly when its last reason ends.
public struct PolicyMachine: Sendable {
    public internal(set) var state: PolicyState
    /// Sessions whose route inputs changed in this event (configuration in force, override, preference).
    var configurationsChanged: Set<SessionID> = []
    /// Idle sessions are being ended (their removals are events of their own, which end none themselves:
    /// one level deep, however many there are).
    var endingIdleSessions = false

    public init(settings: PolicySettings = PolicySettings()) {
        state = PolicyState()
        state.settings = settings
    }

    /// The earliest instant the machine wants a `.tick`: every deadline a tick acts on, a past one too
    /// (a deadline that passed while other events came first is still owed its tick), and none a tick
    /// leaves in place, so that a tick at or after this instant always moves it on.
    public var nextDeadline: Duration? {
        var next: Duration?
        func consider(_ at: Duration) { next = min(next ?? at, at) }
        for session in state.sessions.values {
            if let at = session.deactivatesAt { consider(at) }
            if let at = session.silencedUntilPaused { consider(at) }
            if let at = session.resumeAwaitedUntil { consider(at) }
        }
        if let at = nextCallIdleDeadline { consider(at) }
        if let at = nextMeterDeadline { consider(at) }
        if let at = nextMutedSpeechDeadline { consider(at) }
        for pending in state.bluetoothSwitches.values where !pending.done { consider(pending.at) }
        for departed in state.departed.values { consider(departed.since + state.settings.bluetoothParking) }
        for combination in state.combinations.values { if let since = combination.unusedSince { consider(since + state.settings.combinationLingers) } }
        // A card's phase ends once its departed ports are decided (their own deadlines come first).
        let parked = Set(state.departed.values.compactMap { $0.port.bluetooth?.card })
        for (card, phase) in state.cards where !parked.contains(card) { consider(cardDecidedAt(phase)) }
        return next
    }

    public mutating func handle(_ event: PolicyEvent, at now: Duration) -> [PolicyAction] {
        state.now = max(state.now, now)
        let deadlineBefore = nextDeadline
        var actions: [PolicyAction] = []
        var cause = apply(event, &actions)
        settle(after: event, cause: &cause, deadlineBefore: deadlineBefore, inputMuteMayChange: event.mayChangeInputMute, &actions)
        return actions
    }

    /// A new app's first stream and the inferred session it makes (`declaration`), in one run: what
    /// `handle` of the declaration and then of `stream` (a `.streamAppeared` in that session) would do,
    /// in the same order, but for the work between them that the stream's run does again (metering,
    /// enforcement, hints: nothing of them changes with a session that has no stream yet). The
    /// declaration's route is computed as its own run would (its first, while not active, no change),
    /// so the route log is the same. The shell's path from a new app's stream to the mute it brings
    /// runs the core once, not twice (issue 22).
    public mutating func handle(declaring declaration: SessionDeclaration, then stream: PolicyEvent, at now: Duration) -> [PolicyAction] {
        guard case .streamAppeared(let key, let session, _, _, _) = stream, session == declaration.id, declaration.origin == .inferred,
              state.sessions[session] == nil, state.streams[key] == nil else {
            return handle(.declare(declaration), at: now) + handle(stream, at: now)
        }
        state.now = max(state.now, now)
        let deadlineBefore = nextDeadline
        var actions: [PolicyAction] = []
        let declare = PolicyEvent.declare(declaration)
        let declared = apply(declare, &actions)
        recomputeRoutes(after: declare, cause: declared, &actions)
        var cause = apply(stream, &actions)
        settle(after: stream, cause: &cause, deadlineBefore: deadlineBefore, inputMuteMayChange: true, &actions)
        return actions
    }

    /// What follows from an event once applied: meters, speech while muted, the set of devices, the
    /// routes, data sources, what sessions are told, enforcement, hints, the next deadline, and the
    /// inferred sessions left with nothing ended.
    private mutating func settle(after event: PolicyEvent, cause: inout RouteCause, deadlineBefore: Duration?,
                                 inputMuteMayChange: Bool, _ actions: inout [PolicyAction]) {
        let now = state.now
        // Which streams are metered follows from the event; a player whose meter stops counts again,
        // which may change who plays (and so, rarely, who should be metered: a second look settles it).
        for _ in 0..<3 { guard askMeters(&actions) else { break } }
        settleMutedSpeech(&actions)
        // The devices connected changed: the user's choices for that set come back, or none hold.
        // (Also at the tick that decides a Bluetooth port parked in a profile switch is gone for good.)
        if !cause.deferred, event.changesDeviceSet || (event == .tick && cause.reason != nil) { noteDeviceSet(&cause, &actions) }
        // Devices that come and go while suspending or just after waking belong to the wake-up.
        if cause.reason == .newDeviceAvailable || cause.reason == .oldDeviceUnavailable,
           state.asleep || state.wokeAt.map({ state.now - $0 <= state.settings.wakeWindow }) == true {
            cause.reason = .wakeFromSleep
        }
        recomputeRoutes(after: event, cause: cause, &actions)
        selectDataSources(&actions)
        // Told before its capture is muted: a call app can say so on its screen as the mute comes.
        if inputMuteMayChange { updateInputMuteSaid(&actions) }
        enforce(&actions)
        updateHints(&actions)
        if let deadline = nextDeadline, deadline != deadlineBefore || event == .tick { actions.append(.wakeUp(at: deadline)) }
        // Inferred sessions left with nothing (their streams gone, their grace run out, their
        // interruption over) are over. (Not at a declaration: an inferred one's stream comes next.)
        if !event.isDeclaration && !endingIdleSessions {
            endingIdleSessions = true
            defer { endingIdleSessions = false }
            // (Looked for again after each: one that ends may end the wait of another.)
            while let id = idleSessions().first {
                actions += handle(.remove(id), at: now)
                actions.append(.sessionEnded(id))
            }
        }
    }

    /// Routes depend on devices, choices and the configurations in force: most stream events change
    /// none of them, and skipping the recomputation keeps the core cheap per event. A Bluetooth port
    /// that went away waits for its card to say why before the routes change.
    private mutating func recomputeRoutes(after event: PolicyEvent, cause: RouteCause, _ actions: inout [PolicyAction]) {
        if cause.deferred {
            // (nothing moves yet)
        } else if routesMayHaveChanged(event) || (event == .tick && cause.reason != nil) {
            recomputeRoutes(cause: cause, only: nil, &actions)
        } else if let session = event.session, sessionRouteMayHaveChanged(event) {
            recomputeRoutes(cause: cause, only: configurationsChanged.union([session]), &actions)
        } else if !configurationsChanged.isEmpty {
            recomputeRoutes(cause: cause, only: configurationsChanged, &actions)
        } else {
            // Activations still decide stream moves and the Bluetooth hands-free switch.
            moveStreams(&actions)
            planBluetoothSwitches()
        }
        configurationsChanged = []
    }

    /// Inferred sessions with no stream left and nothing to do (inactive, no grace running). Linear:
    /// this runs after every stream's removal and every tick.
    func idleSessions() -> [SessionID] {
        let candidates = state.sessions.values.filter { $0.origin == .inferred && $0.status == .inactive && $0.deactivatesAt == nil }
        guard !candidates.isEmpty else { return [] }
        let withStreams = Set(state.streams.values.map(\.session))
        return candidates.filter { !withStreams.contains($0.id) }.map(\.id).sorted()
    }

    // MARK: the event's own transition

    /// Applies the event; returns the route-change reason it would give and its description.
    mutating func apply(_ event: PolicyEvent, _ actions: inout [PolicyAction]) -> RouteCause {
        switch event {
        case .declare(let d):
            do {
                try d.configuration.validate()
            } catch {
                actions.append(.reply(d.id, error))
                return .none
            }
            if var existing = state.sessions[d.id] {
                // Declared again (a reclassification): like setCategory, an active or interrupted
                // session keeps the configuration in force until its next activation. During an
                // inferred call, the classification waits for the call's end.
                existing.infersCalls = existing.origin == .inferred && d.infersCalls
                existing.preferredOutputs = d.preferredOutputs
                existing.appName = d.appName
                existing.names = d.names
                if existing.inferredCall != nil {
                    existing.inferredCall?.classified = d.configuration
                } else {
                    existing.configuration = d.configuration
                    if existing.status == .inactive { existing.activeConfiguration = d.configuration }
                }
                state.sessions[d.id] = existing
            } else {
                var session = Session(
                    id: d.id, app: d.app, origin: d.origin, configuration: d.configuration,
                    activeConfiguration: d.configuration, notifiesOthersOnDeactivation: d.notifiesOthersOnDeactivation,
                    duckLevel: d.duckLevel ?? state.settings.duckLevel, microphoneAllowed: d.microphoneAllowed)
                session.infersCalls = d.origin == .inferred && d.infersCalls
                session.preferredOutputs = d.preferredOutputs
                session.appName = d.appName
                session.names = d.names
                state.sessions[d.id] = session
            }
            // (Classified again: what counts of its streams, and whether it is in a call, may change.)
            soundMayHaveChanged(d.id, &actions)
            actions.append(.reply(d.id, nil))
            return RouteCause(.categoryChange, "session \(d.id) declared as \(d.configuration)")

        case .setCategory(let id, let configuration):
            guard var session = state.sessions[id] else {
                actions.append(.reply(id, SessionError(.badParam, "no session \(id)")))
                return .none
            }
            do { try configuration.validate() } catch {
                actions.append(.reply(id, error))
                return .none
            }
            if session.inferredCall != nil {
                // (An inferred call keeps a call's configuration while it lasts; this one waits for its end.)
                session.inferredCall?.classified = configuration
                state.sessions[id] = session
                soundMayHaveChanged(id, &actions)
                actions.append(.reply(id, nil))
                return .none
            }
            session.configuration = configuration
            // Inactive: takes effect on activation. Active: at once, and arbitration runs again.
            let wasActive = session.status.isActive
            if wasActive { session.activeConfiguration = configuration }
            state.sessions[id] = session
            actions.append(.reply(id, nil))
            if wasActive {
                releaseInterrupted(by: id, &actions)
                interruptOthers(for: id, &actions)
            }
            soundMayHaveChanged(id, &actions)
            return RouteCause(.categoryChange, "\(id) set its category to \(configuration)")

        case .activate(let id):
            let error = activate(id, &actions)
            actions.append(.reply(id, error))
            return RouteCause(.categoryChange, "\(id) activated")

        case .deactivate(let id, let options):
            guard let session = state.sessions[id] else {
                actions.append(.reply(id, SessionError(.badParam, "no session \(id)")))
                return .none
            }
            if session.origin == .declared && session.status.isActive
                && state.streams.values.contains(where: { $0.session == id && $0.isRunning }) {
                actions.append(.reply(id, SessionError(.isBusy, "\(id) still has running streams")))
                return .none
            }
            deactivate(id, notify: options.contains(.notifyOthersOnDeactivation), &actions)
            actions.append(.reply(id, nil))
            return RouteCause(.categoryChange, "\(id) deactivated")

        case .remove(let id):
            guard state.sessions[id] != nil else { return .none }
            deactivate(id, notify: state.sessions[id]!.notifiesOthersOnDeactivation, &actions)
            state.sessions[id] = nil
            state.startedPlaying[id] = nil
            state.playingNonMixable.remove(id)
            for (key, stream) in state.streams.sorted(by: { $0.key < $1.key }) where stream.session == id {
                state.streams[key] = nil
                if stream.meterAsked { actions.append(.meter(key, false)) }
                // (A stream the session leaves behind, a declared app's gone from the bus, is nobody's hold.)
                if stream.heldMute { actions.append(.unmute(key)) }
                if stream.heldDuck != nil { actions.append(.unduck(key, ramp: state.settings.duckRampUp)) }
            }
            return RouteCause(.unknown, "\(id) went away")

        case .streamAppeared(let key, let session, let running, let device, let pinned):
            guard state.sessions[session] != nil else { return .none }
            // Announced again (after a resynchronisation, say): what we hold on it stays held.
            var record = state.streams[key] ?? StreamRecord(key: key, session: session, isRunning: running, device: device)
            if pinned { record.pinned = true }
            let previousSession = record.session
            record.session = session
            if running && record.runningSince == nil { record.runningSince = state.now }
            if !running { record.runningSince = nil }
            record.isRunning = running
            record.device = device
            state.streams[key] = record
            if previousSession != session { soundMayHaveChanged(previousSession, &actions) }
            soundMayHaveChanged(session, &actions)
            return .none

        case .streamRunning(let key, let running):
            guard var stream = state.streams[key] else { return .none }
            // Playing again: not heard yet, and it counts until its meter says otherwise (a failed meter
            // is tried again).
            if running && !stream.isRunning { stream.sound = .unknown }
            stream.runningSince = running ? (stream.runningSince ?? state.now) : nil
            stream.isRunning = running
            state.streams[key] = stream
            soundMayHaveChanged(stream.session, &actions)
            return .none

        case .streamHeard(let key, let heard, let silentFor):
            // (A report that comes after the meter was given up is late: nothing to change.)
            guard var stream = state.streams[key], stream.meterAsked else { return .none }
            // A capture's meter listens to the microphone of a muted call.
            if key.direction == .input {
                heardSpeech(stream.session, heard, silentFor: silentFor, &actions)
                return .none
            }
            var since: Duration?
            switch (heard, stream.sound) {
            case (true, _): stream.sound = .heard
            case (false, .heard), (false, .unknown):
                let lastHeard = state.now - min(max(silentFor, .zero), state.settings.silenceSaidLate)
                since = lastHeard
                stream.sound = .quiet(since: lastHeard)
            case (false, _): return .none
            }
            state.streams[key] = stream
            soundMayHaveChanged(stream.session, &actions, stoppedAt: since)
            return .none

        case .meterFailed(let key):
            guard var stream = state.streams[key] else { return .none }
            stream.sound = .meterFailed
            stream.meterAsked = false
            state.streams[key] = stream
            soundMayHaveChanged(stream.session, &actions)
            return .none

        case .streamMoved(let key, let device):
            guard let stream = state.streams[key], stream.device != device else { return .none }
            state.streams[key]?.device = device
            if stream.pinned { state.streams[key]?.moveBeingJudged = true }
            return .none

        case .streamMoveJudged(let key, let device, let byUser, let toDefault):
            guard let stream = state.streams[key] else { return .none }
            // (On no device: in transit, the next report judges where it lands.)
            state.streams[key]?.moveBeingJudged = device == nil
            // A stream we had pinned, or one that followed the default, moved by the user's hand: it stays
            // where the user put it. One that follows the default to where the server's default went, or
            // that the user moved to the default, follows it (the server moves those itself).
            if byUser, let device, stream.device == device {
                // (To the default where its session would go anyway: it follows the default again.)
                let followsAgain = toDefault && !stream.pinned && state.sessions[stream.session].map { session in
                    combination(for: session) == nil && (key.direction == .output
                        ? session.route.outputs.first?.uid == state.systemRoute.outputs.first?.uid
                        : session.route.inputs.first?.uid == state.systemRoute.inputs.first?.uid)
                } == true
                state.streams[key]?.pinned = false
                state.streams[key]?.userOwnsDevice = !followsAgain
            }
            return .none

        case .streamGone(let key):
            guard let stream = state.streams.removeValue(forKey: key) else { return .none }
            if stream.meterAsked { actions.append(.meter(key, false)) }
            soundMayHaveChanged(stream.session, &actions)
            return .none

        case .userChangedStream(let key, let mute, let volume), .holdFailed(let key, let mute, let volume):
            // Never fight the user (SPEC.md 5.11): what the user set wins until the reason ends.
            guard var stream = state.streams[key] else { return .none }
            let mute = mute && stream.heldMute, volume = volume && stream.heldDuck != nil
            if mute { stream.heldMute = false; stream.userOwnsMute = true }
            if volume { stream.heldDuck = nil; stream.userOwnsVolume = true }
            state.streams[key] = stream
            if mute || volume { actions.append(.letGo(key, mute: mute, volume: volume)) }
            // (The user unmuting its output ends the wait for its player's pause too: 5.11. A volume the
            // user sets, or the microphone's mute, is no answer to that silence.)
            if case .userChangedStream = event, mute, key.direction == .output { state.sessions[stream.session]?.silencedUntilPaused = nil }
            return .none

        case .userPaused(let id):
            if case .interrupted = state.sessions[id]?.status { state.sessions[id]?.pausedByUser = true }
            return .none

        case .userPlayed(let id):
            state.sessions[id]?.pausedByUser = false
            return .none

        case .pauseOnItsWay(let id):
            guard state.sessions[id] != nil else { return .none }
            state.sessions[id]?.silencedUntilPaused = state.now + state.settings.pauseShowsWithin
            // A new reason the user has not answered: a mute of the stream the user took over for another
            // (silent mode, a recorder) does not keep this one from holding it.
            for (key, stream) in state.streams where stream.session == id && key.direction == .output && stream.userOwnsMute {
                state.streams[key]?.userOwnsMute = false
            }
            return .none

        case .pauseShown(let id):
            state.sessions[id]?.silencedUntilPaused = nil
            return .none

        case .nothingResumed(let id):
            guard state.sessions[id]?.resumeAwaitedUntil != nil else { return .none }
            endResumeWait(id, &actions)
            return .none

        case .combinationAppeared(let name, let inUse):
            // A sink of our own for several outputs: no device of the user's (no arrival, no churn, no
            // choice taken away); its sessions' streams are moved onto it. One found that is no one's
            // (a predecessor's, left by a kill -9) is taken as one that lingered its time: it goes now,
            // or, with a stream on it, at the next tick, unless that stream's session needs it.
            state.combinationPorts.insert(name)
            // (Made as the agent stops, asked just before: it goes with the agent.)
            if state.stopping, !state.strayCombinations.contains(name) {
                state.strayCombinations.insert(name)
                actions.append(.removeCombination(name: name))
                return .none
            }
            if state.combinations[name] == nil {
                let since = state.now - state.settings.combinationLingers + (inUse ? .nanoseconds(1) : .zero)
                state.combinations[name] = Combination(unusedSince: since, made: true)
            }
            return .none

        case .portAppeared(let port) where CombinedOutputs.isCombination(port.uid):
            return apply(.combinationAppeared(port.uid, inUse: true), &actions)

        case .portAppeared(let port):
            // (A Bluetooth card's ports come and go in a profile switch, while the server picks again.)
            if port.bluetooth != nil { state.lastDeviceChurn = state.now }
            state.recentArrivals = state.recentArrivals.filter { state.now - $0.value <= state.settings.deviceChurnSettles }
            state.recentArrivals[port.uid] = state.now
            state.ports[port.uid] = port
            state.arrivals.removeAll { $0 == port.uid }
            state.arrivals.append(port.uid)
            // The display-audio guard: a monitor waking up announces HDMI/DisplayPort by itself.
            if port.type.isDisplayAudio && state.userChoice[port.direction] != port.uid {
                state.guardedPorts.insert(port.uid)
                return RouteCause(.newDeviceAvailable, "\(port.type.name) \(port.uid) appeared; the display-audio guard "
                    + "keeps the route until it is chosen", guardedPort: port.uid)
            }
            if let card = port.bluetooth?.card, let phase = state.cards[card], phase.isSwitchOrParked {
                // Its ports went away, and a new one comes: the card switched profile. The routes move
                // from the departed ports of that direction to the new one in one change (the other
                // direction's follow, or are decided on their own after the parking time).
                dropDeparted(ofCard: card, port.direction)
                if case .portsLeft(let since) = phase { state.cards[card] = .switching(since: since) }
                return RouteCause(.categoryChange, "\(port.uid) appeared after the profile switch of \(card)")
            }
            // Last in wins: a device plugged in after the user's choice takes over from it.
            state.userChoice[port.direction] = nil
            return RouteCause(.newDeviceAvailable, "\(port.type.name) \(port.uid) appeared")

        case .portChanged(let port) where CombinedOutputs.isCombination(port.uid):
            return .none

        case .portChanged(let port):
            state.ports[port.uid] = port
            return RouteCause(.routeConfigurationChange, "\(port.uid) changed")

        case .portGone(let uid) where CombinedOutputs.isCombination(uid):
            state.ports[uid] = nil
            state.combinationPorts.remove(uid)
            state.strayCombinations.remove(uid)
            state.combinations[uid]?.made = false
            return .none

        case .portGone(let uid):
            state.lastDeviceChurn = state.now
            let gone = state.ports.removeValue(forKey: uid)
            if let gone, let card = gone.bluetooth?.card, state.cards[card]?.isGone != true {
                // A profile switch (ours, WirePlumber's autoswitch, the user's mixer) or the device
                // leaving: the card shows which next (new ports, or it goes). Until then nothing moves:
                // the port keeps its place in the routes (its arrival, the user's choice of it).
                state.departed[uid] = DepartedPort(port: gone, since: state.now)
                if state.cards[card] == nil { state.cards[card] = .portsLeft(since: state.now) }
                return RouteCause(nil, "\(uid) went away", deferred: true)
            }
            forget(uid)
            return RouteCause(.oldDeviceUnavailable, "\(gone?.type.name ?? "device") \(uid) went away")

        case .cardProfileChanged(let card):
            state.lastDeviceChurn = state.now
            guard state.cards[card]?.isGone != true else { return .none }
            switch state.cards[card] {
            case .switching?: break
            case .portsLeft(let since)?: state.cards[card] = .switching(since: since)
            default:
                // A card the routes use (a port of it is known) switched: its ports follow.
                guard state.ports.values.contains(where: { $0.bluetooth?.card == card }) else { return .none }
                state.cards[card] = .switching(since: state.now)
            }
            return RouteCause(nil, "\(card) switched profile", deferred: true)

        case .cardGone(let card):
            let left = dropDeparted(ofCard: card)
            state.bluetoothSwitches[card] = nil
            state.cards[card] = .gone(since: state.now)
            guard !left.isEmpty else { return RouteCause(nil, "\(card) went away", deferred: true) }
            return RouteCause(.oldDeviceUnavailable, left.map { "\($0.type.name) \($0.uid)" }.joined(separator: ", ") + " went away")

        case .bluetoothSwitchAdopted(let card, let current, let original):
            guard current != original, state.bluetoothSwitches[card] == nil else { return .none }
            state.bluetoothSwitches[card] = BluetoothSwitch(card: card, target: current, at: state.now, original: original, done: true)
            return RouteCause(.categoryChange, "\(card) was switched to \(current) by a previous run")

        case .defaultDeviceChanged(let direction, let uid, let previousStillThere):
            // A sink of our own picked as the default in a mixer is no choice to remember: the default
            // goes back to where it was (everything would play on every output).
            if CombinedOutputs.isCombination(uid) {
                if let back = direction == .output ? state.systemRoute.outputs.first?.uid : nil { actions.append(.setDefaultDevice(direction, back)) }
                return .none
            }
            guard let port = state.ports[uid], port.direction == direction else { return .none }
            let settles = state.settings.deviceChurnSettles
            let settled = state.lastDeviceChurn.map { state.now - $0 > settles } ?? true
            let justArrived = state.recentArrivals[uid].map { state.now - $0 <= settles } ?? false
            if previousStillThere && settled && !justArrived { return apply(.userSelectedPort(uid), &actions) }
            // The server fell back by itself: where the route goes stays ours. (A device of the route on its
            // way out, a Bluetooth port in a profile switch, is left to the fallback until it is decided.)
            let route = direction == .output ? state.systemRoute.outputs : state.systemRoute.inputs
            if let wanted = route.first?.uid, wanted != uid, state.ports[wanted] != nil { actions.append(.setDefaultDevice(direction, wanted)) }
            return .none

        case .devicesListed:
            state.lastDeviceChurn = nil
            state.recentArrivals = [:]
            state.deviceSet = nil
            state.devicesListed = true
            // The server's current defaults come last in a listing (where sound goes already): one that is
            // display audio is no monitor announcing itself, and is not guarded (the agent's start moves
            // no sound off a TV the user had it on; before, it went to the next device at once).
            for direction in [StreamKey.Direction.output, .input] {
                if let last = state.arrivals.last(where: { state.ports[$0]?.direction == direction }) { state.guardedPorts.remove(last) }
            }
            return RouteCause(nil, "the devices listed")

        case .userSelectedPort(let uid):
            guard let port = state.ports[uid] else { return .none }
            state.userChoice[port.direction] = uid
            state.guardedPorts.remove(uid)
            // The chosen port becomes the most recent one.
            state.arrivals.removeAll { $0 == uid }
            state.arrivals.append(uid)
            rememberChoices(&actions)
            return RouteCause(.override, "the user chose \(uid)")

        case .setUserRoute(let scope, let uid):
            if let uid {
                guard let port = state.ports[uid], port.direction == .output else { return .none }
                state.guardedPorts.remove(uid)
            }
            guard state.userRoutes[scope] != uid else { return .none }
            // (Bounded: a choice for one more app beyond the limit is not kept; the tower refuses it first.)
            if uid != nil, state.userRoutes[scope] == nil, state.userRoutes.count >= RouteChoices.scopedLimit { return .none }
            state.userRoutes[scope] = uid
            rememberChoices(&actions)
            return RouteCause(.override, uid.map { "the user chose \($0) for \(scope)" } ?? "the user dropped the choice for \(scope)")

        case .outputRoutes(let routes):
            guard routes != state.outputRoutes else { return .none }
            state.outputRoutes = routes
            return RouteCause(.categoryChange, "the preferred outputs configured changed")

        case .routesRemembered(let remembered):
            state.rememberedRoutes = remembered
            return .none

        case .overrideOutput(let id, let toSpeaker):
            state.sessions[id]?.overridesToSpeaker = toSpeaker
            return RouteCause(.override, "\(id) overrode its output to \(toSpeaker ? "the speaker" : "none")")

        case .setPreferredInput(let id, let uid):
            state.sessions[id]?.preferredInput = uid
            return RouteCause(.override, "\(id) prefers input \(uid ?? "none")")

        case .setPreferredDataSource(let id, let port, let dataSource):
            state.sessions[id]?.preferredDataSources[port] = dataSource
            return .none

        case .setMicrophone(let id, let allowed):
            state.sessions[id]?.microphoneAllowed = allowed
            return .none

        case .inputMuted(let on):
            state.inputMuted = on
            return .none

        case .appInputMuted(let app, let on):
            if on, state.inputMutedApps.count < PolicyState.inputMutedAppsLimit { state.inputMutedApps.insert(app) }
            if !on { state.inputMutedApps.remove(app) }
            // A new reason the user has not answered: a capture of the app the user unmuted in a mixer
            // while another mute held it is muted by this one.
            if on {
                for (key, stream) in state.streams where key.direction == .input && stream.userOwnsMute {
                    if let session = state.sessions[stream.session], mutedApp(session) == app { state.streams[key]?.userOwnsMute = false }
                }
            }
            return .none

        case .setInputMuted(let id, let on):
            state.sessions[id]?.inputMuted = on
            return .none

        case .silentMode(let on):
            state.silentMode = on
            return .none

        case .screenLocked(let on):
            state.screenLocked = on
            return .none

        case .sleep:
            state.asleep = true
            return .none

        case .wake:
            state.asleep = false
            state.wokeAt = state.now
            return RouteCause(.wakeFromSleep, "woke from sleep")

        case .mediaServicesLost:
            state.mediaServicesAvailable = false
            // The server is gone, and with it every stream and device: nothing is held any more.
            state.streams = [:]
            state.ports = [:]
            state.arrivals = []
            state.guardedPorts = []
            state.bluetoothSwitches = [:]
            state.cards = [:]
            state.departed = [:]
            state.devicesListed = false
            state.deviceSet = nil
            state.userRoutes = [:]
            // Our sinks for several outputs went with it (or will be found again in the listing).
            state.combinationPorts = []
            state.strayCombinations = []
            for name in state.combinations.keys { state.combinations[name]?.made = false }
            // An inferred session lived by its streams: with them gone, it is as if they stopped. Within
            // the grace period the app may come back with new streams and keep its place (a call goes on);
            // after it, the session ends and whom it interrupted may resume.
            for id in state.sessions.keys.sorted() { streamActivityChanged(id, &actions) }
            for id in state.sessions.keys.sorted() { actions.append(.notify(id, .mediaServicesWereLost)) }
            return RouteCause(.unknown, "the sound server went away")

        case .mediaServicesReset:
            state.mediaServicesAvailable = true
            // The new server knows none of our decisions: set the default devices again. Streams are
            // held again as the shell announces them.
            state.systemRoute = .none
            for id in state.sessions.keys.sorted() { actions.append(.notify(id, .mediaServicesWereReset)) }
            return RouteCause(.unknown, "the sound server came back")

        case .stopping:
            state.stopping = true
            // (Also one on the default already, the default having come to it: the move to the default
            // is what makes PipeWire forget it. PulseAudio ignores a move to the device a stream is on;
            // the shell puts the memory back all the same.)
            for key in state.streams.keys.sorted() where state.streams[key]!.pinned {
                let device = key.direction == .output ? state.systemRoute.outputs.first?.uid : state.systemRoute.inputs.first?.uid
                state.streams[key]?.pinned = false
                guard let device else { continue }
                actions.append(.moveStream(key, toDevice: device))
                state.streams[key]?.device = device
            }
            // The sinks that played to several outputs at once go (their streams moved back first; one
            // asked to go already is not asked again).
            for name in state.combinationPorts.sorted() where !state.strayCombinations.contains(name) {
                state.strayCombinations.insert(name)
                actions.append(.removeCombination(name: name))
            }
            state.combinations = [:]
            return .none

        case .tick:
            // A player that never showed its pause: heard again.
            for (id, session) in state.sessions where session.silencedUntilPaused.map({ $0 <= state.now }) == true {
                state.sessions[id]?.silencedUntilPaused = nil
            }
            // An app played again that did not play: those it had interrupted wait no more. (Each deadline
            // looked at again: one ending may start another's wait.)
            for id in state.sessions.values.filter({ $0.resumeAwaitedUntil.map { $0 <= state.now } == true }).map(\.id).sorted() {
                guard let at = state.sessions[id]?.resumeAwaitedUntil, at <= state.now else { continue }
                endResumeWait(id, &actions)
            }
            let due = state.sessions.values.filter { $0.deactivatesAt.map { $0 <= state.now } ?? false }.map(\.id)
            for id in due.sorted() {
                guard let at = state.sessions[id]?.deactivatesAt, at <= state.now else { continue }
                state.sessions[id]?.deactivatesAt = nil
                endInferredSession(id, &actions)
            }
            // (After the sessions whose grace ran out have ended: an inferred call that ends with its
            // session gives it back its own classification inactive, holding no one.)
            for id in callStreamsGoneIdle() { soundMayHaveChanged(id, &actions) }
            let decided = decideCards()
            let switched = advanceBluetoothSwitches(&actions)
            return decided.reason != nil ? decided : switched
        }
    }

    // MARK: arbitration (SPEC.md 5.1-5.6)

    /// Activates a session, interrupting whom it must; returns the error if it may not.
    mutating func activate(_ id: SessionID, _ actions: inout [PolicyAction]) -> SessionError? {
        guard var session = state.sessions[id] else { return SessionError(.badParam, "no session \(id)") }
        guard state.mediaServicesAvailable else {
            return SessionError(.mediaServicesFailed, "the sound server is not running")
        }
        if session.status.isActive { return nil }
        let configuration = session.configuration
        if lacksInput(session) {
            return SessionError(.resourceNotAvailable, "no input device for category \(configuration.category)")
        }
        // Calls always win (5.1): only another call may take over from a call.
        if !configuration.isMixable && !configuration.isCall,
           let call = state.sessions.values.filter({ $0.id != id && $0.status.isActive && $0.isCall }).map(\.id).min() {
            // (An interrupted session stays as it is: it waits for its interrupter, and what that one
            // interrupted waits on it in turn. Refused, it waited for nothing, and a session it had
            // interrupted was left muted for good.)
            if case .interrupted = session.status {} else {
                session.status = session.origin == .inferred ? .interrupted(by: call) : .refused(.insufficientPriority)
                session.resumeAwaitedUntil = nil
                session.pausedByUser = false
                state.sessions[id] = session
                // An app that never heard of us cannot be refused: it plays, held silent, and its player
                // is paused as the call's others were (an agent started during a call finds the call's
                // stream and the player's in any order: PipeWire's indexes say nothing of which came first).
                if session.origin == .inferred { actions.append(.pausePlayer(id, by: call)) }
            }
            return SessionError(.insufficientPriority, "a call (\(call)) is active")
        }
        if session.activeConfiguration != configuration { configurationsChanged.insert(id) }
        session.activeConfiguration = configuration
        session.status = .active
        session.deactivatesAt = nil
        session.resumeAwaitedUntil = nil
        state.sessions[id] = session
        interruptOthers(for: id, &actions)
        return nil
    }

    /// A declared session whose category records, with no microphone to record from: not activated.
    func lacksInput(_ session: Session) -> Bool {
        session.configuration.category.hasInput && session.origin == .declared
            && !state.ports.values.contains(where: { $0.direction == .input && $0.type != .virtual })
    }

    /// Interrupts what an active session's configuration interrupts: every other active non-mixable
    /// session if it is non-mixable (5.2); spoken audio if it has interruptSpokenAudioAndMixWithOthers (5.5).
    mutating func interruptOthers(for id: SessionID, _ actions: inout [PolicyAction]) {
        guard let session = state.sessions[id], session.status.isActive else { return }
        let configuration = session.activeConfiguration
        // Filter first, then sort the few: per-event cost stays linear in the number of sessions.
        let victims = state.sessions.values.filter { $0.id != id && $0.status.isActive && Self.interrupts(configuration, $0) }
        for other in victims.sorted(by: { $0.id < $1.id }) {
            state.sessions[other.id]?.status = .interrupted(by: id)
            state.sessions[other.id]?.pausedByUser = false
            actions.append(.notify(other.id, .interruption(type: .began, options: [], reason: .default)))
            if other.origin == .inferred { actions.append(.pausePlayer(other.id, by: id)) }
        }
    }

    /// The wait on a session played again is over (its deadline, or nothing was played): unless it plays
    /// (or waits in turn), those it had interrupted end their interruption, or, where a session that
    /// started meanwhile would interrupt them (a call, another player), wait on that one instead: they
    /// are not played only to be paused again, nor take over from a player the user started meanwhile.
    mutating func endResumeWait(_ id: SessionID, _ actions: inout [PolicyAction]) {
        guard let session = state.sessions[id] else { return }
        state.sessions[id]?.resumeAwaitedUntil = nil
        guard !session.status.isActive, !session.status.isInterrupted else { return }
        for waiter in sessions(interruptedBy: id) {
            let heir = state.sessions.values.filter { $0.id != waiter.id && $0.status.isActive && Self.interrupts($0.activeConfiguration, waiter) }
                .map(\.id).min()
            if let heir { state.sessions[waiter.id]?.status = .interrupted(by: heir) } else {
                resumeAfterInterruption(waiter.id, notify: session.notifiesOthersOnDeactivation, &actions)
            }
        }
    }

    /// Does a session of this configuration, activating, interrupt the other?
    static func interrupts(_ configuration: SessionConfiguration, _ other: Session) -> Bool {
        if !configuration.isMixable {
            // A call is interrupted only by another call (5.1); mixable sessions never (5.2).
            return !other.isMixable && (!other.isCall || configuration.isCall)
        }
        if configuration.effectiveOptions.contains(.interruptSpokenAudioAndMixWithOthers) {
            return other.activeConfiguration.mode == .spokenAudio && !other.isCall
        }
        return false
    }

    /// An active session's configuration changed: sessions it interrupted that it would not interrupt
    /// now (a call it interrupted as a call, say) end their interruption, as if it had deactivated.
    mutating func releaseInterrupted(by id: SessionID, _ actions: inout [PolicyAction]) {
        guard let session = state.sessions[id] else { return }
        for other in sessions(interruptedBy: id) {
            guard !Self.interrupts(session.activeConfiguration, other) else { continue }
            resumeAfterInterruption(other.id, notify: true, &actions)
        }
    }

    /// Ends one session's interruption: `ended` (with shouldResume unless the user paused it), and an
    /// app without the library plays again.
    mutating func resumeAfterInterruption(_ id: SessionID, notify: Bool, _ actions: inout [PolicyAction]) {
        guard let other = state.sessions[id] else { return }
        let resume = notify && !other.pausedByUser
        actions.append(.notify(id, .interruption(type: .ended, options: resume ? .shouldResume : [], reason: .default)))
        state.sessions[id]?.status = .inactive
        state.sessions[id]?.pausedByUser = false
        if other.origin == .inferred {
            if resume { actions.append(.resumePlayer(id)) }
            if isPlaying(id) {
                if let error = activate(id, &actions), error.code != .insufficientPriority {
                    state.sessions[id]?.status = .refused(error.code)
                }
            }
        }
        // Not playing again (an app whose streams ended while it waited, a library app that has yet to
        // activate): it holds nobody any more, so the sessions it had interrupted end their interruption
        // too, as if it had deactivated. Otherwise the first of a chain of players stays muted for good.
        guard state.sessions[id]?.status.isActive != true else { return }
        let waiting = sessions(interruptedBy: id)
        // Its player played again: they wait for it to play (a while at most: the tick), rather than
        // sound with it a moment and be paused again.
        if resume && other.origin == .inferred && !waiting.isEmpty && state.sessions[id]?.status == .inactive {
            state.sessions[id]?.resumeAwaitedUntil = state.now + state.settings.resumeAwaited
            return
        }
        for waiter in waiting { resumeAfterInterruption(waiter.id, notify: other.notifiesOthersOnDeactivation, &actions) }
    }

    /// Deactivates a session; the sessions it interrupted hear `ended`, with shouldResume when it
    /// notifies others (5.6) and the user did not pause them meanwhile (5.7).
    mutating func deactivate(_ id: SessionID, notify: Bool, _ actions: inout [PolicyAction]) {
        guard let session = state.sessions[id] else { return }
        state.sessions[id]?.status = .inactive
        state.sessions[id]?.deactivatesAt = nil
        state.sessions[id]?.resumeAwaitedUntil = nil
        guard session.status.isActive else {
            // An interrupted session gives up while sessions it had interrupted still wait on it: they
            // now wait on the one that interrupted it, or end their interruption if there is none.
            let heir: SessionID? = if case .interrupted(let by) = session.status, state.sessions[by]?.status.isActive == true { by } else { nil }
            for other in sessions(interruptedBy: id) {
                if let heir { state.sessions[other.id]?.status = .interrupted(by: heir) } else {
                    resumeAfterInterruption(other.id, notify: notify, &actions)
                }
            }
            return
        }
        for other in sessions(interruptedBy: id) {
            resumeAfterInterruption(other.id, notify: notify, &actions)
        }
        // Sessions refused because of a call may try again once no call is active.
        if session.isCall && !state.sessions.values.contains(where: { $0.status.isActive && $0.isCall }) {
            for other in state.sessions.values.filter({ $0.status == .refused(.insufficientPriority) }).sorted(by: { $0.id < $1.id }) {
                state.sessions[other.id]?.status = .inactive
                if other.origin == .inferred && isPlaying(other.id) { _ = activate(other.id, &actions) }
            }
        }
    }

    /// The sessions waiting on `id`'s interruption, in id order (filtered first, then the few sorted).
    func sessions(interruptedBy id: SessionID) -> [Session] {
        state.sessions.values.filter { $0.status == .interrupted(by: id) }.sorted { $0.id < $1.id }
    }

    /// Events that can change every session's route: devices, the user's choices, waking, the server.
    func routesMayHaveChanged(_ event: PolicyEvent) -> Bool {
        switch event {
        case .portAppeared, .portChanged, .portGone, .cardGone, .bluetoothSwitchAdopted, .userSelectedPort, .defaultDeviceChanged, .wake,
             .mediaServicesLost, .mediaServicesReset, .setUserRoute, .devicesListed, .outputRoutes:
            true
        case .tick:
            // Bluetooth switches happen on ticks (the ports follow with events of their own).
            !state.bluetoothSwitches.isEmpty
        default:
            false
        }
    }

    /// Events that can change the route of the session they name.
    func sessionRouteMayHaveChanged(_ event: PolicyEvent) -> Bool {
        switch event {
        case .declare, .setCategory, .activate, .deactivate, .remove, .overrideOutput, .setPreferredInput: true
        default: false
        }
    }

    /// When a card's phase is over: its switch window closes, its going is forgotten.
    func cardDecidedAt(_ phase: CardPhase) -> Duration { phase.since + state.settings.bluetoothSwitchWindow }

    /// A port is gone for good: nothing refers to it any more.
    mutating func forget(_ uid: String) {
        state.arrivals.removeAll { $0 == uid }
        state.guardedPorts.remove(uid)
        state.recentArrivals[uid] = nil
        for (direction, chosen) in state.userChoice where chosen == uid { state.userChoice[direction] = nil }
        for (id, session) in state.sessions where session.preferredInput == uid { state.sessions[id]?.preferredInput = nil }
    }

    /// The card has shown why its ports went: they are gone for good (unless one came back under its
    /// name). All of them, or those of one direction.
    @discardableResult
    mutating func dropDeparted(ofCard card: String, _ direction: StreamKey.Direction? = nil) -> [Port] {
        let left = state.departed.values.map(\.port).filter {
            $0.bluetooth?.card == card && (direction == nil || $0.direction == direction)
        }.sorted { $0.uid < $1.uid }
        for port in left {
            state.departed[port.uid] = nil
            if state.ports[port.uid] == nil { forget(port.uid) }
        }
        return left
    }

    /// On a tick: departed ports whose parking time is up went away in a profile switch (the card
    /// stayed, and no port of a new profile came for them: a switch to "off", say); the routes that
    /// used them change now. Cards whose phase is over go back to steady.
    mutating func decideCards() -> RouteCause {
        var switched: [String] = []
        for (uid, departed) in state.departed.sorted(by: { $0.key < $1.key })
        where departed.since + state.settings.bluetoothParking <= state.now {
            state.departed[uid] = nil
            if state.ports[uid] == nil { forget(uid) }
            switched.append("\(uid) went away in the profile switch of \(departed.port.bluetooth?.card ?? "its card")")
        }
        for (card, phase) in state.cards where cardDecidedAt(phase) <= state.now
            && !state.departed.values.contains(where: { $0.port.bluetooth?.card == card }) {
            state.cards[card] = nil
        }
        return switched.isEmpty ? .none : RouteCause(.categoryChange, switched.joined(separator: "; "))
    }

    /// For inferred sessions, playing streams are the activation (SPEC.md section 1): the first one
    /// activates the session, and the last one to stop starts the grace period (from its last sound,
    /// `stoppedAt`, when its meter said it went silent; from now when it stopped or went away).
    mutating func streamActivityChanged(_ id: SessionID, _ actions: inout [PolicyAction], stoppedAt: Duration? = nil) {
        guard let session = state.sessions[id], session.origin == .inferred else { return }
        if isPlaying(id) {
            state.sessions[id]?.deactivatesAt = nil
            if session.status == .inactive || session.status == .refused(.insufficientPriority) {
                _ = activate(id, &actions)
            }
        } else if session.status.isActive {
            // (From the moment the last stream stopped playing: a later look changes nothing.)
            if session.deactivatesAt == nil { state.sessions[id]?.deactivatesAt = (stoppedAt ?? state.now) + state.settings.gracePeriod }
        } else if !state.streams.values.contains(where: { $0.session == id }), case .refused = session.status {
            state.sessions[id]?.status = .inactive
        }
    }

    /// The grace period ended with no stream running.
    mutating func endInferredSession(_ id: SessionID, _ actions: inout [PolicyAction]) {
        guard let session = state.sessions[id], !isPlaying(id) else { return }
        deactivate(id, notify: session.notifiesOthersOnDeactivation, &actions)
    }
}

/// What caused a recomputation, as a route-change reason and words for the log.
struct RouteCause {
    var reason: RouteChangeReason?
    var text: String
    /// A display-audio port the guard kept from taking the route: logged even though nothing moved.
    var guardedPort: String?
    /// Nothing moves yet: a Bluetooth port went away and its card has not shown why (the server falls
    /// back by itself meanwhile; setting the default devices then would move every stream that
    /// follows the default to another device, and persist that choice).
    var deferred = false
    /// Logged even if no route moves (the user's choices for a set of devices came back and kept it).
    var logged = false
    init(_ reason: RouteChangeReason?, _ text: String, guardedPort: String? = nil, deferred: Bool = false) {
        self.reason = reason; self.text = text; self.guardedPort = guardedPort; self.deferred = deferred
    }
    static let none = RouteCause(nil, "")
}

extension CardPhase {
    /// A switch under way, or ports gone while the card stays.
    var isSwitchOrParked: Bool {
        switch self {
        case .portsLeft, .switching: true
        case .gone: false
        }
    }
    var isGone: Bool { if case .gone = self { true } else { false } }
}

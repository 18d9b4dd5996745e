import AudioPolicy
import Logging
import ServerModel

/// The sound server's events and the answers to our commands: the snapshot kept, streams placed in
/// their sessions, what is held on them brought to what the core wants.
extension ControlTower {
    /// A meter's report on a playback stream (SPEC.md section 1: a stream counts while it is heard), or
    /// on the microphone a muted call's capture records from (section 10: speech while muted).
    mutating func sound(_ report: SoundReport) {
        let key = StreamKey(report.direction, report.stream)
        guard !isStopping, directory.session(of: key) != nil else { return }
        switch report {
        case .heard:
            outbox.log(.debug) { ("heard", ["stream": "\(key)"]) }
            coreEvent(.streamHeard(key, true))
        case .silent(_, let silentFor, _):
            outbox.log(.debug) { ("silent", ["stream": "\(key)", "for": "\(silentFor)"]) }
            coreEvent(.streamHeard(key, false, silentFor: silentFor))
        case .failed(_, let reason, _):
            let what = key.direction == .output ? "a stream cannot be metered: it counts while it runs, silent or not"
                                                : "a muted call's microphone cannot be metered: speech while muted is not told"
            outbox.log(.warning) { (what, ["stream": "\(key)", "reason": "\(reason)"]) }
            coreEvent(.meterFailed(key))
        }
    }

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
            askedMoves = [:]
            movedInBatch = [:]
            movesAwaitingJudgement = [:]
            lastDeviceOf = [:]
            holds.serverLost()
            defaults.serverLost()
            coreEvent(.mediaServicesLost)
        case .added(let entity):
            switch entity {
            case .sink(let d), .source(let d):
                // (A sink named as ours for several outputs is ours once its module shows it so.)
                guard !d.isMonitor, !snapshot.isImpostorCombination(d) else { return }
                coreEvent(deviceAppeared(d))
            case .module(let m) where m.isOurCombineSink(named: nil):
                // PulseAudio tells of a module after the sink it made.
                for d in snapshot.devices(.output) where d.ownerModule == m.id && CombinedOutputs.isCombination(d.name) && !snapshot.isImpostorCombination(d) {
                    coreEvent(deviceAppeared(d))
                }
            case .sinkInput(let s), .sourceOutput(let s):
                announce(s, new: true)
            default: break
            }
        case .changed(let oldEntity, let new):
            switch (oldEntity, new) {
            case (.sink(let a), .sink(let b)), (.source(let a), .source(let b)):
                // (Our sinks for several outputs, and others of their names, are no ports of the core's.)
                guard !b.isMonitor, !CombinedOutputs.isCombination(b.name) else { return }
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
                if CombinedOutputs.isCombination(d.name) {
                    // (Only ours going is ours gone: not another sink of its name, and not while ours is there.)
                    guard !snapshot.isImpostorCombination(d), snapshot.ourCombination(named: d.name) == nil else { return }
                    madeCombinations[d.name] = nil
                }
                coreEvent(.portGone(d.name))
            case .card(let c):
                coreEvent(.cardGone(c.name))
            case .sinkInput(let s), .sourceOutput(let s):
                let key = StreamKey(s)
                // A move awaiting judgement, from a device still there: the user's (the stream's end
                // does not make it ours).
                if let move = movesAwaitingJudgement.removeValue(forKey: key), snapshot.routableDevices.contains(where: { $0.name == move.from }) {
                    movedByUser(key, to: move.to, from: move.from)
                }
                directory.remove(key)
                askedMoves[key] = nil
                lastDeviceOf[key] = nil
                coreEvent(.streamGone(key))
                holds.gone(key, at: now, &outbox)
            default: break
            }
        case .other:
            break
        }
    }

    /// The core's event for a device that is there: a port, or a sink of ours for several outputs (and
    /// whether a stream plays on it).
    func deviceAppeared(_ device: Device) -> PolicyEvent {
        guard device.direction == .output, CombinedOutputs.isCombination(device.name) else { return .portAppeared(snapshot.port(of: device)) }
        return .combinationAppeared(device.name, inUse: snapshot.sinkInputs.values.contains { $0.device == device.id })
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
            holds.adopt(left.streams, remembered: left.remembered, traces: left.traces, userVolumes: left.userVolumes, ramps: left.ramps, in: snapshot, at: now, &outbox)
            journaledSwitches.merge(left.cards) { _, theirs in theirs }
        }
        if let held = heldAcrossLoss {
            heldAcrossLoss = nil
            holds.adopt(held, remembered: [:], in: snapshot, at: now, from: "the lost connection", &outbox)
        }
        serverLost = nil
        holds.reconnected(at: now, &outbox)
        // Ports in index order, the current defaults last: the agent starting changes no route by its
        // rules (the user's choices remembered for these devices come back once they are all listed).
        let current = [snapshot.server?.defaultSinkName, snapshot.server?.defaultSourceName]
        let devices = snapshot.routableDevices.sorted {
            (current.contains($0.name) ? 1 : 0, $0.id) < (current.contains($1.name) ? 1 : 0, $1.id)
        }
        defaults.startCollecting()
        for device in devices { coreEvent(deviceAppeared(device), logRoutes: false) }
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
                                            "inherited": "\(held.inheritedWords)"]) }
        }
        let placement = directory.place(stream, in: snapshot, declared: declaredSession(of: stream), parent: parentProcess)
        if new { _ = inheritsOurMove(stream) }
        let appeared = PolicyEvent.streamAppeared(key, session: placement.session, running: !stream.isCorked,
                                                  device: snapshot.device(of: stream)?.name, pinned: holds.streams[key]?.moved == true)
        if let declaration = placement.declare, let classification = placement.classification {
            let id = placement.session
            outbox.log(.info) { ("session", ["session": "\(id)", "configuration": "\(classification.configuration)",
                                             "why": "\(classification.explanation)"]) }
            coreEvent(declaring: declaration, then: appeared)
        } else {
            coreEvent(appeared)
        }
        reconcile(key)
    }

    /// A new stream the server sent where it remembered our move of its app or role (`Holds.inheritedMove`):
    /// on a device that is not the server's default.
    mutating func inheritsOurMove(_ stream: AudioStream) -> Bool {
        guard let device = snapshot.device(of: stream)?.name else { return false }
        return holds.inheritedMove(StreamKey(stream), on: device, at: now, &outbox)
    }

    mutating func streamChanged(from old: AudioStream, to new: AudioStream) {
        let key = StreamKey(new)
        guard directory.session(of: key) != nil, snapshot.identity(of: old) == snapshot.identity(of: new),
              !snapshot.isMonitorCapture(new) else { return announce(new) }
        let change = holds.observe(new, at: now, &outbox)
        if old.volume != new.volume || old.isMuted != new.isMuted || old.device != new.device, let held = holds.streams[key] {
            outbox.log(.trace) { ("stream changed", ["stream": "\(key)", "muted": "\(new.isMuted)", "volume": "\(new.volume)",
                                                    "device": "\(new.device.map(String.init) ?? "none")",
                                                    "inherited": "\(held.inheritedWords)"]) }
        }
        if old.isCorked != new.isCorked && key.direction == .output { playerStream(new, key, runs: !new.isCorked) }
        if old.isCorked != new.isCorked { coreEvent(.streamRunning(key, !new.isCorked)) }
        if old.device != new.device {
            let to = snapshot.device(of: new)?.name
            // Linked at last (pipewire-pulse shows a new stream on no device until WirePlumber links
            // it), where the server remembered our move of its app or role: pinned, as ours.
            if old.device == nil, inheritsOurMove(new), let session = directory.session(of: key) {
                coreEvent(.streamAppeared(key, session: session, running: !new.isCorked, device: to, pinned: true))
            }
            coreEvent(.streamMoved(key, device: to))
            if movedInBatch[key] == nil { movedInBatch[key] = .some(snapshot.device(of: old)?.name) }
        }
        if change.any {
            outbox.log(.info) { ("the user changed a managed stream: the user wins", ["stream": "\(key)"]) }
            coreEvent(.userChangedStream(key, mute: change.mute, volume: change.volume))
        }
        reconcile(key)
    }

    /// A stream of an app whose player we paused stops or starts running: one that stopped after our
    /// pause and runs again is the user's hand on the player (see `Players.streamRanAgain`). Matched
    /// by process or app id only (a name says nothing of which instance played), and only for the
    /// sessions the player is paused for.
    mutating func playerStream(_ stream: AudioStream, _ key: StreamKey, runs: Bool) {
        guard players.busAvailable, players.anyPausedForAnInterruption, let session = directory.session(of: key) else { return }
        let app = snapshot.identity(of: stream)
        let names = players.matching(processIDs: Set([app.processID].compactMap { $0 }), appIDs: Set([app.appID].compactMap { $0 }),
                                     names: [], parent: parentProcess)
        for name in names {
            if runs {
                for event in players.streamRanAgain(name, key, &outbox) { coreEvent(event) }
            } else {
                players.streamCorked(name, key, session: session)
            }
        }
    }

    /// Brings what we hold on a stream to what the core wants of it now (not while a connection's
    /// streams are being announced: all of them are reconciled once the core has heard of every one).
    mutating func reconcile(_ key: StreamKey) {
        guard !announcingAll else { return }
        holds.reconcile(key, at: now, &outbox)
    }

    mutating func answered(_ id: CommandID, _ result: Result<ServerAnswer, PulseError>) {
        guard let purpose = outbox.pending.removeValue(forKey: id) else { return }
        switch purpose {
        case .stream(let key):
            switch result {
            case .success: holds.succeeded(key)
            case .failure(let error):
                // (A stream gone has nothing of ours left to undo: no failure of the stop.)
                guard snapshot.stream(key.direction, key.index) != nil else {
                    outbox.log(.debug) { ("a command on a stream that went away failed", ["stream": "\(key)", "error": "\(error)"]) }
                    break
                }
                life.stopFailed()
                if let given = holds.failed(key, error, at: now, &outbox) { coreEvent(.holdFailed(key, mute: given.mute, volume: given.volume)) }
            }
        case .memoryRead(let name):
            holds.memoryRead(name, result, at: now, &outbox)
        case .memoryPutBack(let name):
            // (Not counted as the stop's failure: stopping, a failed put-back is tried again at once,
            // and what is left is known from the memory itself, `memoryLeftChanged`.)
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
        case .combination(let name):
            switch result {
            case .success(let answer):
                failedCombinations.remove(name)
                guard case .index(let module) = answer else { break }
                if madeCombinations.count >= 16 { madeCombinations.removeAll() }
                madeCombinations[name] = module
                // Made as the agent stops (the server answers before it tells of the sink): it goes with it.
                if case .stopping = life { outbox.send(.unloadModule(module), for: .other("remove \(name)")) }
            case .failure(let error):
                combinationFailed(name)
                outbox.log(.warning) { ("the server did not make a sink for several outputs", ["name": "\(name)", "error": "\(error)"]) }
            }
        }
    }
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

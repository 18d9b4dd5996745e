import AudioPolicy
import Logging
import ServerModel

/// The core's decisions, carried out: every action of the policy core goes to the machine that does it.
extension ControlTower {
    /// Hands the core an event and carries out its decisions: what the server must do first, then the
    /// route log and the log lines. Returns the decisions (an app's call reads its answer there).
    @discardableResult
    mutating func coreEvent(_ event: PolicyEvent, logRoutes: Bool = true) -> [PolicyAction] {
        coreEvent(event, logRoutes: logRoutes) { $0.handle(event, at: $1) }
    }

    /// A new app's first stream and the inferred session it makes, handed to the core in one run
    /// (`PolicyMachine.handle(declaring:then:at:)`): the path from that stream to the mute it may
    /// bring runs the core once.
    mutating func coreEvent(declaring declaration: SessionDeclaration, then stream: PolicyEvent) {
        coreEvent(stream, logRoutes: true) { $0.handle(declaring: declaration, then: stream, at: $1) }
    }

    @discardableResult
    private mutating func coreEvent(_ event: PolicyEvent, logRoutes: Bool,
                                    _ run: (inout PolicyMachine, Duration) -> [PolicyAction]) -> [PolicyAction] {
        switch event {
        case .portAppeared(let p), .portChanged(let p):
            outbox.log(.trace) { ("core event", ["event": "\(event.name) \(p.uid) \(p.type.name)"]) }
            if p.isServerRoleTarget { sayServerRolePolicy(p.uid) }
        case .portGone(let uid), .cardGone(let uid), .cardProfileChanged(let uid):
            outbox.log(.trace) { ("core event", ["event": "\(event.name) \(uid)"]) }
        default: break
        }
        let playingBefore = core.state.playingNonMixable
        let actions = run(&core, now)
        // (What the agent's MPRIS player shows may change with what plays, or with the now playing
        // session's own state.)
        if core.state.nowPlaying != nil, playingBefore != core.state.playingNonMixable || event.session == core.state.nowPlaying {
            nowPlayingMayHaveChanged = true
        }
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
                // (Onto a sink of ours for several outputs only where no other sink has its name: a move
                // goes by name, and another program's sink of that name would take the stream.)
                if CombinedOutputs.isCombination(device),
                   snapshot.devices(.output).filter({ $0.name == device }).count != 1 || snapshot.ourCombination(named: device) == nil {
                    outbox.log(.warning) { ("not moved onto a sink for several outputs: another sink has its name", ["stream": "\(key)", "sink": "\(device)"]) }
                    continue
                }
                // (On a device the server does not list, a role sink of its own policy: left there. Where
                // the server links by role, a stream not linked yet is left to it too: moved now, it
                // would be pinned to our device before the server could link it to its role sink.)
                if let stream = snapshot.stream(key.direction, key.index),
                   snapshot.isOnAnUnlistedDevice(stream) || (serverLinksByRole && stream.device == nil) { continue }
                // The server remembers the move for the stream's app or role: ours until put back (`Holds.moving`).
                // Off the default unless it surely is the server's when the move comes (a default request
                // of ours not shown yet makes it unsure).
                let offDefault = !defaults.isSurelyDefault(device, key.direction, current: snapshot.server)
                if offDefault { holds.moving(key, offDefault: true, to: device, at: now, &outbox) }
                outbox.send(.moveStream(StreamReference(key.direction, key.index), toDevice: device), for: .other("move \(key)"))
                if !offDefault { holds.moving(key, offDefault: false, to: device, at: now, &outbox) }
                askedMoves[key] = (device, now)
                outbox.log(.info) { ("move", ["stream": "\(key)", "device": "\(device)"]) }
            case .makeCombination(let name, let outputs):
                // (Device names go into the module's arguments: only plain ones, never a space or a quote.)
                guard ([name] + outputs).allSatisfy(Self.isPlainDeviceName) else {
                    combinationFailed(name)
                    outbox.log(.warning) { ("no sink for several outputs: a device's name is no plain name", ["outputs": "\(outputs.joined(separator: ","))"]) }
                    continue
                }
                // (A sink of that name there already, not ours: another would only be a second of the name.)
                guard snapshot.sink(named: name) == nil else {
                    combinationFailed(name)
                    outbox.log(.warning) { ("no sink for several outputs: another sink has its name", ["name": "\(name)"]) }
                    continue
                }
                failedCombinations.remove(name)
                outbox.send(.loadModule(name: Module.combineSink, arguments: Module.combineSinkArguments(name: name, outputs: outputs)),
                            for: .combination(name))
                outbox.log(.info) { ("sink for several outputs", ["name": "\(name)", "outputs": "\(outputs.joined(separator: ", "))"]) }
            case .removeCombination(let name):
                // Ours by its module (another program's sink of that name is left), or, not told of yet,
                // by the answer to our load.
                guard let module = snapshot.ourCombination(named: name)?.ownerModule ?? madeCombinations[name] else {
                    outbox.log(.info) { ("no sink of ours for several outputs to remove", ["name": "\(name)"]) }
                    continue
                }
                madeCombinations[name] = nil
                outbox.send(.unloadModule(module), for: .other("remove \(name)"))
                outbox.log(.info) { ("sink for several outputs removed", ["name": "\(name)"]) }
            case .meter(let key, let on):
                // (After the commands of this event: a meter is no reason to delay a call's mute.)
                guard !on || snapshot.stream(key.direction, key.index) != nil else { continue }
                meters.append(.meter(StreamReference(key.direction, key.index), on))
            case .setDefaultDevice(let direction, let name):
                defaults.want(name, direction, current: snapshot.server, settings: settings, at: now, &outbox)
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
                // (One player for both, as a browser's tabs share one: pausing it would pause the interrupter.)
                let theirs = cause.map { Set(playersOf($0, byName: false)) } ?? []
                let candidates = playersOf(id).filter { !theirs.contains($0) }
                let commands = players.pause(candidates, for: id, why: why, by: cause, at: now, playAnswersWithin: settings.policy.resumeAwaited, &outbox)
                // (A player already paused by us for another session holds this one paused too: no
                // pause awaits a player then, and the user's play of it later stays the user's.)
                let joined = candidates.contains { players.isPaused($0, for: id) }
                if commands.isEmpty, !joined { outbox.log(.info) { (action.verb, ["session": "\(id)", "player": "none playing on the session bus: muted only"]) } }
                if commands.isEmpty, !joined, why == .interruption { pausesAwaitingPlayer[id] = .some(cause) }
                outbox.player(commands)
                // Headphones gone: the core keeps it silent until the pause shows.
                if why == .privateListeningEnded, !commands.isEmpty {
                    pausesOnTheirWay[id] = Set(commands.map(\.0))
                    facts.append(.pauseOnItsWay(id))
                }
            case .resumePlayer(let id):
                pausesAwaitingPlayer[id] = nil
                let commands = players.resume(for: id, at: now, &outbox)
                if commands.isEmpty {
                    outbox.log(.info) { (action.verb, ["session": "\(id)"]) }
                    // (Nothing played: what waits on it in the core need not.)
                    facts.append(.nothingResumed(id))
                }
                outbox.player(commands)
            case .notify(let id, let notification):
                // (Its interruption over, with or without a resume: no pause is awaited for it any more.)
                if case .interruption(type: .ended, _, _) = notification { pausesAwaitingPlayer[id] = nil }
                outbox.log(.debug) { ("notify", ["session": "\(id)", "notification": "\(notification)"]) }
                // (Said once per start: "why did my call app say I was talking while muted?")
                if case .mutedSpeechActivity(started: true) = notification {
                    outbox.log(.info) { ("speaking while muted", ["session": "\(id)"]) }
                }
                if let path = apps.pathOfSession[id] { outbox.effects.append(.appSignal(path: path, notification)) }
            case .reply(let id, let error):
                if let error { outbox.log(.warning) { ("refused", ["session": "\(id)", "error": "\(error)"]) } }
            case .wakeUp:
                break
            case .sessionEnded(let id):
                directory.forget(id)
                pausesOnTheirWay[id] = nil
                pausesAwaitingPlayer[id] = nil
            case .nowPlaying(let id):
                nowPlayingMayHaveChanged = true
                // (Where the media keys go: said, for "why did play-pause go there?")
                outbox.log(.info) { ("now playing", ["session": id.map { "\($0)" } ?? "none"]) }
            case .keepRoutes:
                outbox.keep(keptSettings)
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
}

extension ControlTower {
    /// A device name that may go into a module's arguments as it is: letters, digits and `._:-`.
    static func isPlainDeviceName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255
            && name.utf8.allSatisfy { $0.isASCIIAlnum || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "-") }
    }
}

private extension UInt8 {
    var isASCIIAlnum: Bool { (48...57).contains(self) || (65...90).contains(self) || (97...122).contains(self) }
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

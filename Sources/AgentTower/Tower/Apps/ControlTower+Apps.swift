import AudioPolicy
import FoundationEssentials
import ServerModel
import Logging

/// Apps that declare their own session (org.audiosession.Agent1 on the session bus): their calls
/// become the core's events, the core's answers their replies, its notifications their signals.
extension ControlTower {
    mutating func app(_ event: AppEvent) {
        switch event {
        case .call(let token, let client, let request):
            let reply = isStopping ? .failed(SessionError(.mediaServicesFailed, "the agent is stopping")) : answer(request, from: client)
            outbox.effects.append(.appReply(token: token, reply))
        case .served(let name):
            outbox.log(.info) { ("apps declare their sessions on the session bus", ["name": "\(name)"]) }
            tellAppsReach(.served)
        case .unavailable(let reason):
            outbox.log(.warning) { ("apps cannot declare sessions on this bus", ["reason": "\(reason)"]) }
            tellAppsReach(.notServed(reason))
        case .gone(let busName):
            guard let declared = apps.gone(busName) else { return }
            let id = declared.session
            outbox.log(.info) { ("the app left the bus: its session ends", ["session": "\(id)"]) }
            // Deactivated as a desktop app that quits is, whether its streams are gone yet or not: those
            // it interrupted may resume (the declaration's notifiesOthersOnDeactivation). Its streams (if
            // any are left) go back to what the policy files say; what is held on them is brought there
            // once they are placed (not let go first and held again: no blip).
            let left = streams(of: id)
            announcingAll = true
            coreEvent(.remove(id))
            for stream in left { announce(stream) }
            announcingAll = false
            for key in left.map(StreamKey.init) { reconcile(key) }
        }
    }

    /// Says on our client on the server whether apps reach the agent (`audiosessionctl status` reads it;
    /// said again at each connection).
    mutating func tellAppsReach(_ reach: AppsReach) {
        guard reach != appsReach else { return }
        appsReach = reach
        guard snapshot.server != nil else { return }
        outbox.send(.updateClientProperties([Self.appsProperty: reach.words]), for: .other("say whether apps reach the agent"))
    }

    /// The answer to one call; the core hears of it first.
    mutating func answer(_ request: AppRequest, from client: AppClient) -> AppReply {
        switch request {
        case .getSession:
            if case let (policy, .deny)? = declaring(of: client) {
                return .refused("\(policy.source) does not let \(Apps.quoted(client.name)) declare its own session: the policy file speaks for it")
            }
            if let pid = client.processID, apps.byBusName[client.busName] == nil,
               apps.byBusName.values.filter({ $0.client.processID == pid }).count >= Apps.sessionsPerProcess {
                return .failed(SessionError(.resourceNotAvailable,
                                            "process \(pid) has \(Apps.sessionsPerProcess) sessions already, the most one process may have"))
            }
            let (declared, new) = apps.session(of: client)
            if new {
                let id = declared.session
                outbox.log(.info) { ("session declared by its app", ["session": "\(id)", "path": "\(declared.path)", "bus name": "\(client.busName)"]) }
                // AVAudioSession's default: soloAmbient, inactive. What the app says on deactivation
                // is its own (setActive's options); when it leaves the bus, the others may resume.
                // (Its policy file, if one matches it, names it and says where its sound would rather go.)
                let policy = declaring(of: client)?.0
                var declaration = SessionDeclaration(id, app: client.processID.map(String.init) ?? client.busName, origin: .declared,
                                                     configuration: SessionConfiguration(.soloAmbient), notifiesOthersOnDeactivation: true,
                                                     preferredOutputs: policy?.preferredOutputs ?? [],
                                                     appName: policy?.name ?? client.appID ?? client.binary ?? client.name)
                declaration.names = SessionDeclaration.names(appID: client.appID, binary: client.binary, name: client.name, policy: policy?.name)
                coreEvent(.declare(declaration))
                // What the user already decided about it recording holds before it asks.
                if let decided = client.recordDecision { applyRecordDecision(decided, to: declared.session, of: client) }
                // What the app already plays joins its session.
                for stream in snapshot.streams(.output) + snapshot.streams(.input) where directory.session(of: StreamKey(stream)) != nil {
                    if declaredSession(of: stream) == id { announce(stream) }
                }
            }
            return .session(path: declared.path)
        case .setCategory(let path, let category, let mode, let options):
            return withOwn(path, client) { tower, declared in
                switch Apps.configuration(category: category, mode: mode, options: options) {
                case .failure(let error): return .failed(error)
                case .success(let configuration):
                    if configuration.isCall, case let (policy, .noCalls)? = tower.declaring(of: client) {
                        return .failed(SessionError(.incompatibleCategory, "\(policy.source) does not let \(Apps.quoted(client.name)) declare a call"))
                    }
                    return tower.reply(to: .setCategory(declared.session, configuration))
                }
            }
        case .setActive(let path, let active, let options):
            return withOwn(path, client) { tower, declared in
                // (The options are checked either way; as with Apple's, they mean something only on
                // deactivation.)
                switch Apps.setActiveOptions(options) {
                case .failure(let error): return .failed(error)
                case .success(let set): return tower.reply(to: active ? .activate(declared.session) : .deactivate(declared.session, set))
                }
            }
        case .silentMode(let wanted):
            if let wanted {
                // (A Flatpak app may declare its own session; the desktop's silent mode is the user's.)
                guard client.appID == nil else { return .refused("a sandboxed app cannot set the silent mode") }
                setSilentMode(wanted, askedBy: client.said)
            }
            return .agentProperties(silentMode: core.state.silentMode, inputMuted: core.state.inputMuted, sessions: apps.paths(of: client),
                                    inputMutedApps: core.state.inputMutedApps.sorted())
        case .inputMuted(let wanted):
            // (Nor mute or unmute every app's microphone: its own input is SetInputMuted.)
            guard client.appID == nil else { return .refused("a sandboxed app cannot mute every app's microphone") }
            setInputMuted(wanted, askedBy: client.said)
            return .done
        case .appInputMuted(let app, let muted):
            return setAppInputMuted(app, muted, from: client)
        case .remoteCommand(let word):
            return remoteCommand(word, from: client)
        case .setRoute(let scope, let device):
            return setRoute(scope, device, from: client)
        case .nowPlayingProperties:
            return .nowPlaying(nowPlayingProperties, position: nowPlayingPosition)
        case .setNowPlayingInfo(let path, let info):
            return withOwn(path, client) { tower, declared in
                // (Where it is, said far from where it would be by now: a seek, said by the agent's player.)
                let expected = tower.core.state.nowPlaying == declared.session ? tower.nowPlayingPosition : nil
                tower.apps.say(info, for: client.busName, at: tower.now)
                if let expected, let elapsed = info.elapsed {
                    let jump = Duration.microseconds(elapsed) - expected
                    if jump > .seconds(1) || jump < .seconds(-1) { tower.outbox.effects.append(.nowPlayingSeeked(.microseconds(elapsed))) }
                }
                tower.nowPlayingMayHaveChanged = true
                return .done
            }
        case .setInputMuted(let path, let muted):
            return withOwn(path, client) { tower, declared in
                tower.coreEvent(.setInputMuted(declared.session, muted))
                return .done
            }
        case .status:
            // (Every app's sessions: not for a sandboxed app.)
            guard client.appID == nil else { return .refused("a sandboxed app cannot read every app's sessions") }
            let json = (try? JSONEncoder().encode(statusReport())).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            return .status(json)
        case .overrideOutput(let path, let port):
            return withOwn(path, client) { tower, declared in
                guard port == "none" || port == "speaker" else {
                    return .failed(SessionError(.badParam, "unknown port override \(Apps.quoted(port)) (accepted: none, speaker)"))
                }
                tower.coreEvent(.overrideOutput(declared.session, toSpeaker: port == "speaker"))
                return .done
            }
        case .setPreferredInput(let path, let uid):
            return withOwn(path, client) { tower, declared in
                let inputs = tower.availableInputs
                guard uid.isEmpty || inputs.contains(where: { $0.uid == uid }) else {
                    return .failed(SessionError(.badParam, "no input \(Apps.quoted(uid)) (available: \(inputs.map(\.uid).joined(separator: ", ")))"))
                }
                tower.coreEvent(.setPreferredInput(declared.session, uid.isEmpty ? nil : uid))
                return .done
            }
        case .setPreferredDataSource(let path, let id):
            return withOwn(path, client) { tower, declared in
                let inputs = tower.availableInputs
                if id.isEmpty {
                    for port in inputs { tower.coreEvent(.setPreferredDataSource(declared.session, port: port.uid, dataSource: nil)) }
                    return .done
                }
                guard let port = inputs.first(where: { $0.dataSources.contains { $0.id == id } }) else {
                    let known = inputs.flatMap { $0.dataSources.map(\.id) }
                    return .failed(SessionError(.badParam, "no data source \(Apps.quoted(id)) on any input (available: \(known.joined(separator: ", ")))"))
                }
                tower.coreEvent(.setPreferredDataSource(declared.session, port: port.uid, dataSource: id))
                return .done
            }
        case .setPreferredSampleRate(let path, let hertz):
            return withOwn(path, client) { tower, declared in
                guard hertz.isFinite, hertz == 0 || (8_000...768_000).contains(hertz) else {
                    return .failed(SessionError(.badParam, "a sample rate of \(hertz) Hz is not one (0 for none, else 8000 to 768000)"))
                }
                tower.apps.prefer({ $0.sampleRate = hertz == 0 ? nil : hertz }, for: client.busName)
                return .done
            }
        case .setPreferredIOBufferDuration(let path, let seconds):
            return withOwn(path, client) { tower, declared in
                guard seconds.isFinite, seconds == 0 || (0.0005...1).contains(seconds) else {
                    return .failed(SessionError(.badParam, "an I/O buffer of \(seconds) s is not one (0 for none, else 0.0005 to 1)"))
                }
                tower.apps.prefer({ $0.ioBufferDuration = seconds == 0 ? nil : seconds }, for: client.busName)
                return .done
            }
        case .requestRecordPermission(let path, let decided):
            return withOwn(path, client) { tower, declared in
                .permission(tower.applyRecordDecision(decided, to: declared.session, of: client))
            }
        case .properties(let path):
            return withOwn(path, client) { tower, declared in
                guard let session = tower.core.state.sessions[declared.session] else {
                    return .failed(SessionError(.unspecified, "the session is gone"))
                }
                // (The core answers what others play: it decides who plays.)
                return .properties(AppSessionProperties(
                    category: session.configuration.category.rawValue, mode: session.configuration.mode.rawValue,
                    options: session.configuration.options.names, isActive: session.status.isActive,
                    isOtherAudioPlaying: tower.core.isOtherAudioPlaying(for: session.id),
                    secondaryAudioShouldBeSilencedHint: tower.core.secondaryAudioShouldBeSilencedHint(for: session.id),
                    route: session.route, availableInputs: tower.availableInputs,
                    hardware: tower.core.hardwareValues(for: declared.session, preferences: tower.apps.byBusName[client.busName]?.preferences ?? HardwarePreferences()),
                    recordPermission: tower.apps.byBusName[client.busName]?.recordPermission.map { $0 ? "granted" : "denied" } ?? "undetermined",
                    inputMuted: tower.core.isInputMuted(session.id)))
            }
        }
    }

    /// The user mutes one app's microphone, or no longer (`audiosessionctl mic mute APP`): its name
    /// checked here, the mute decided by the core (every session of that app, later ones too).
    mutating func setAppInputMuted(_ app: String, _ muted: Bool, from client: AppClient) -> AppReply {
        guard client.appID == nil else { return .refused("a sandboxed app cannot mute other apps' microphone") }
        guard Escape.isAppName(app) else {
            return .failed(SessionError(.badParam, "\(Apps.quoted(String(app.prefix(80)))) is not an app name (printable, no spaces, at most 255 bytes)"))
        }
        let muting = muted && !core.state.inputMutedApps.contains(app)
        if muting, core.state.inputMutedApps.count >= PolicyState.inputMutedAppsLimit {
            return .failed(SessionError(.resourceNotAvailable, "\(PolicyState.inputMutedAppsLimit) apps' microphones muted already: unmute one first"))
        }
        if muting || (!muted && core.state.inputMutedApps.contains(app)) {
            outbox.log(.notice) { (muted ? "an app's microphone muted" : "an app's microphone unmuted", ["app": "\(app)", "asked by": "\(client.said)"]) }
            coreEvent(.appInputMuted(app, muted))
        }
        return .inputMutedApps(core.state.inputMutedApps.sorted())
    }

    /// The user's route choice (`audiosessionctl route`): checked here, decided and remembered by the core.
    mutating func setRoute(_ scopeWord: String, _ device: String, from client: AppClient) -> AppReply {
        guard client.appID == nil else { return .refused("a sandboxed app cannot choose where other apps' sound goes") }
        let direction: StreamKey.Direction? = scopeWord == "default" ? .output : scopeWord == "default-input" ? .input : nil
        let scope = RouteScope(word: scopeWord)
        guard direction != nil || scope != nil else {
            return .failed(SessionError(.badParam, "no route scope \(Apps.quoted(scopeWord)) (accepted: default, default-input, category:NAME, app:NAME)"))
        }
        guard device.utf8.count <= 512 else { return .failed(SessionError(.badParam, "a device name of \(device.utf8.count) bytes")) }
        let wanted = direction ?? .output
        let known = core.state.ports.values.filter { $0.direction == wanted && $0.type != .virtual }.map(\.uid).sorted()
        if device.isEmpty {
            guard let scope else { return .failed(SessionError(.badParam, "the default device is chosen, not dropped: name a device")) }
            coreEvent(.setUserRoute(scope, nil))
            outbox.log(.info) { ("route choice dropped", ["scope": "\(scope)", "asked by": "\(client.said)"]) }
            return .routeSet("\(scope): no choice of the user's; the usual rules apply")
        }
        guard known.contains(device) else {
            return .failed(SessionError(.badParam, "no \(wanted) device \(Apps.quoted(device)) (connected: \(known.joined(separator: ", ")))"))
        }
        if let scope, core.state.userRoutes[scope] == nil, core.state.userRoutes.count >= RouteChoices.scopedLimit {
            return .failed(SessionError(.resourceNotAvailable, "\(RouteChoices.scopedLimit) choices per category or app with these devices already: drop one first (--clear)"))
        }
        outbox.log(.info) { ("route chosen", ["scope": "\(scopeWord)", "device": "\(device)", "asked by": "\(client.said)"]) }
        if let scope { coreEvent(.setUserRoute(scope, device)) } else { coreEvent(.userSelectedPort(device)) }
        let set = core.state.deviceSet.map { " (remembered with \($0))" } ?? ""
        return .routeSet("\(scope.map { "\($0)" } ?? (wanted == .output ? "default output" : "default input")) on \(device)\(set)")
    }

    /// A media key's command goes to the session now playing (the core's choice): a declared app is told
    /// (`RemoteCommand`), another app's media players (MPRIS) are sent it.
    mutating func remoteCommand(_ word: String, from client: AppClient) -> AppReply {
        guard let command = PlayerCommand(word: word) else {
            let words = PlayerCommand.allCases.map(\.word).joined(separator: ", ")
            return .failed(SessionError(.badParam, "no remote command \(Apps.quoted(word)) (accepted: \(words))"))
        }
        guard client.appID == nil else { return .refused("a sandboxed app cannot send the media keys to other apps") }
        guard let id = core.state.nowPlaying else {
            return .failed(SessionError(.unspecified, "nothing is playing, nor was since its app started: no app to send \(word) to"))
        }
        if let path = apps.pathOfSession[id] {
            outbox.effects.append(.appSignal(path: path, .remoteCommand(word)))
            outbox.log(.info) { ("a remote command sent to what is now playing", ["command": "\(word)", "session": "\(id)", "path": "\(path)"]) }
            return .remoteCommandSent("\(id) (told RemoteCommand on \(path))")
        }
        let all = playersOf(id)
        guard !all.isEmpty else {
            return .failed(SessionError(.unspecified, "\(id) is now playing, and no media player of its app is on the session bus"))
        }
        // A pause or a stop to every player of the app; the rest to one: the one that plays (an app with
        // a player per tab would otherwise start the others, or skip on all of them).
        let names = command == .pause || command == .stop ? all : [all.first { players.players[$0]?.status == .playing } ?? all[0]]
        for name in names { outbox.effects.append(.remote(name: name, command)) }
        outbox.log(.info) { ("a remote command sent to what is now playing", ["command": "\(word)", "session": "\(id)", "players": "\(names.joined(separator: ", "))"]) }
        return .remoteCommandSent("\(id) (its player \(names.joined(separator: ", ")))")
    }

    /// What the agent's MPRIS player shows: the session now playing, and its status as its app's player
    /// says it (a declared app's: playing while active), else as its streams play.
    var nowPlayingProperties: NowPlayingProperties {
        guard let id = core.state.nowPlaying, let session = core.state.sessions[id] else { return NowPlayingProperties(session: nil, status: .stopped) }
        var status = core.state.playingNonMixable.contains(id) ? PlaybackStatus.playing : .paused
        var info = NowPlayingInfo()
        if let path = apps.pathOfSession[id] {
            info = apps.declared(at: path)?.nowPlayingInfo ?? info
            // (Where it is is its Position, read apart: not what it shows, which would change every update.)
            info.elapsed = nil
        } else if let (_, player) = shownPlayer(of: id) {
            // Its player's status and what it says it plays.
            status = player.status ?? status
            info = player.metadata
        }
        return NowPlayingProperties(session: id.rawValue, status: session.status == .inactive && status == .playing ? .paused : status, info: info)
    }

    /// Where the player now playing is in what it plays (nil: not known): as its player said, or a
    /// declared app (`NowPlayingInfo.elapsed`), moved on since while it plays.
    var nowPlayingPosition: Duration? {
        guard let id = core.state.nowPlaying else { return nil }
        if let path = apps.pathOfSession[id] {
            guard let declared = apps.declared(at: path), let elapsed = declared.nowPlayingInfo.elapsed else { return nil }
            let moved = nowPlayingProperties.status == .playing ? max(.zero, now - declared.nowPlayingSaidAt) : .zero
            return .microseconds(elapsed) + moved
        }
        return shownPlayer(of: id)?.player.position(at: now)
    }

    /// The player the agent's MPRIS player mirrors for a session: its app's player that plays, else its first.
    func shownPlayer(of id: SessionID) -> (name: String, player: Players.Player)? {
        let found = playersOf(id).compactMap { name in players.players[name].map { (name: name, player: $0) } }
        return found.first(where: { $0.player.status == .playing }) ?? found.first
    }

    /// The declared app now playing: where it got to (moved on since it said so, if it was playing) is
    /// kept as said now.
    mutating func keepDeclaredPosition(movedSince: Bool) {
        guard let id = core.state.nowPlaying, let path = apps.pathOfSession[id], let declared = apps.declared(at: path),
              let elapsed = declared.nowPlayingInfo.elapsed, let busName = apps.busName(at: path) else { return }
        var info = declared.nowPlayingInfo
        let moved = movedSince ? max(.zero, now - declared.nowPlayingSaidAt) : .zero
        info.elapsed = min(NowPlayingInfo.elapsedLimit, elapsed &+ NowPlayingInfo.microseconds(moved))
        apps.say(info, for: busName, at: now)
    }

    /// A seek of the player the agent's MPRIS player mirrors is said by the agent's player too (`Seeked`).
    mutating func sayPlayerSeek(_ event: PlayerEvent) {
        guard case .positionSaid(let name, _, seeked: true) = event, let id = core.state.nowPlaying,
              let shown = shownPlayer(of: id), shown.name == name, let position = shown.player.position(at: now) else { return }
        outbox.effects.append(.nowPlayingSeeked(position))
    }

    /// Tells the agent's MPRIS player's watchers what it shows, when that changed (looked at only after
    /// what may change it: what is now playing, a player's status, a player coming or going).
    mutating func tellNowPlayingIfChanged() {
        guard nowPlayingMayHaveChanged else { return }
        nowPlayingMayHaveChanged = false
        let shown = nowPlayingProperties
        // A declared app's position stops or starts moving with its status: where it got to is kept.
        if nowPlayingTold.session == shown.session, nowPlayingTold.status != shown.status {
            keepDeclaredPosition(movedSince: nowPlayingTold.status == .playing)
        }
        guard shown != nowPlayingTold else { return }
        nowPlayingTold = shown
        outbox.effects.append(.nowPlayingChanged(shown))
    }

    /// What the user set that outlives the agent, as it is now.
    var keptSettings: KeptSettings {
        KeptSettings(inputMuted: core.state.inputMuted, silentMode: core.state.silentMode, routes: core.state.rememberedRoutes)
    }

    /// Silent mode on or off, as a user asked (`askedBy`), or as the last run left it (nil): said, and
    /// kept for the next run.
    mutating func setSilentMode(_ on: Bool, askedBy: String?) {
        setKept(.silentMode(on), changes: on != core.state.silentMode, askedBy: askedBy, level: .info,
                asked: on ? "silent mode on: ambient sound is silenced" : "silent mode off",
                kept: "silent mode stays on, as the user left it")
    }

    /// The microphone muted for every app, or no longer, as `setSilentMode` goes.
    mutating func setInputMuted(_ on: Bool, askedBy: String?) {
        setKept(.inputMuted(on), changes: on != core.state.inputMuted, askedBy: askedBy, level: .notice,
                asked: on ? "the microphone muted for every app" : "the microphone unmuted",
                kept: "the microphone stays muted for every app, as the user left it")
    }

    /// A setting that outlives the agent changes: the core hears it; a user's change is said with who
    /// asked (`asked`) and kept, the last run's coming back is said (`kept`).
    private mutating func setKept(_ event: PolicyEvent, changes: Bool, askedBy: String?, level: Logger.Level, asked: String, kept: String) {
        guard changes else { return }
        if let askedBy {
            outbox.log(level) { (asked, ["asked by": "\(askedBy)"]) }
        } else {
            outbox.log(.notice) { (kept, [:]) }
        }
        coreEvent(event)
        if askedBy != nil { outbox.keep(keptSettings) }
    }

    /// The user's decision about an app recording, in force: undetermined is allowed, as desktop apps
    /// are; denied records silence (its capture muted, as a policy file's `microphone: deny`). Returns
    /// whether it may record.
    @discardableResult
    mutating func applyRecordDecision(_ decided: Bool?, to id: SessionID, of client: AppClient) -> Bool {
        apps.decided(decided, for: client.busName)
        let allowed = decided ?? true
        outbox.log(.info) { ("record permission", ["session": "\(id)", "allowed": "\(allowed)", "decided": "\(decided.map { "\($0)" } ?? "not yet")"]) }
        coreEvent(.setMicrophone(id, allowed: allowed))
        return allowed
    }

    /// What the app's policy file (if one matches it: by app id, its program's file name, its command
    /// name) lets it declare.
    func declaring(of client: AppClient) -> (AppPolicy, AppPolicy.Declaring)? {
        let identity = AppIdentity(binary: client.binary ?? client.name, name: client.name, appID: client.appID, role: nil, processID: client.processID)
        guard case .policy(let name, _, _) = Classifier.classify(identity, index: directory.index).source,
              let policy = directory.index.policies.first(where: { $0.name == name }) else { return nil }
        return (policy, policy.declaring)
    }

    /// Runs `body` on the caller's own session; another's, or none, is refused.
    private mutating func withOwn(_ path: String, _ client: AppClient, _ body: (inout ControlTower, Apps.Declared) -> AppReply) -> AppReply {
        let (declared, why) = apps.own(path, by: client)
        guard let declared else {
            outbox.log(.notice) { ("an app's call refused", ["bus name": "\(client.busName)", "why": "\(why)"]) }
            return .refused(why)
        }
        return body(&self, declared)
    }

    /// The core's answer to an activation, deactivation or category.
    private mutating func reply(to event: PolicyEvent) -> AppReply {
        for case .reply(_, let error?) in coreEvent(event) { return .failed(error) }
        return .done
    }

    /// The declared session a stream belongs to, if any: by its process (or a parent of it), then its
    /// Flatpak app id. These are the app's own word: no server vouches for a PulseAudio-protocol
    /// client's process (pipewire-pulse's `pipewire.sec.pid` is its own), so a stream claiming another
    /// app's process joins that app's session (README, "Who an app is").
    func declaredSession(of stream: AudioStream) -> SessionID? {
        guard !apps.byBusName.isEmpty else { return nil }
        let app = snapshot.identity(of: stream)
        return apps.session(ofProcess: app.processID, appID: app.appID, parent: parentProcess)
    }

    /// The inputs an app may prefer: every input port but virtual ones, in uid order.
    var availableInputs: [PortDescription] {
        core.state.ports.values.filter { $0.direction == .input && $0.type != .virtual }.map(\.description).sorted { $0.uid < $1.uid }
    }

    /// The streams a session holds now.
    func streams(of session: SessionID) -> [AudioStream] {
        directory.sessions.filter { $0.value == session }.keys.sorted().compactMap { snapshot.stream($0.direction, $0.index) }
    }
}

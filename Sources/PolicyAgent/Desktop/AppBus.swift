import AudioPolicy
import AudioSessionWire
import DBus
import FoundationEssentials
import Glibc
import Synchronization

/// The agent's API for apps on the session bus: `org.audiosession.Agent1` at `/org/audiosession/Agent1`,
/// and one `org.audiosession.Session1` object per declared session. Here only the wire: arguments are
/// checked for their types, the caller is named by the bus daemon's credentials, and each caller's calls
/// go to the control tower in the order they came: a known caller's call that needs nothing asked
/// elsewhere straight from the bus thread, the others through a lane of the caller's own (one app's slow
/// identification or portal look holds up no other app's calls); the tower decides, and its answers and
/// notifications come back through `reply` and `signal`.
final class AppBus: Sendable {
    static let busName = Wire.busName
    static let agentPath = Wire.agentPath
    static let agentInterface = Wire.agentInterface
    static let sessionInterface = Wire.sessionInterface
    static let properties = "org.freedesktop.DBus.Properties"
    /// How many of one app's calls may wait in its lane or for the tower's answer at once (more are
    /// refused before any work is done for them).
    static let callsInFlight = 64
    static let introspectable = "org.freedesktop.DBus.Introspectable"
    /// The MPRIS player the agent owns: the media keys for what is now playing, and its status.
    static let playerName = "org.mpris.MediaPlayer2.audiosession"
    static let playerPath = "/org/mpris/MediaPlayer2"
    static let mprisRoot = "org.mpris.MediaPlayer2"
    static let mprisPlayer = "org.mpris.MediaPlayer2.Player"

    /// How an answer is put on the wire.
    enum Shape: Sendable {
        case plain
        case sessionPath
        case property(String)
        case allProperties
        /// The MPRIS player's properties of one interface: all of them, or one.
        case mpris(interface: String, property: String?)
        /// An answer with no values (the MPRIS player's commands).
        case noValues
    }

    /// Where the user's record-permission decisions are kept (`RecordPermissions`), if anywhere.
    let stateDirectory: StateDirectory?
    /// How long the desktop portal's store may take to answer (`AgentSettings.portalAnswer`).
    let portalAnswer: Duration

    init(stateDirectory: StateDirectory? = nil, portalAnswer: Duration = .seconds(1)) {
        self.stateDirectory = stateDirectory
        self.portalAnswer = portalAnswer
    }

    /// One caller's calls not yet handed to the tower, taken one at a time in the order they came. A
    /// lane is closed when it is empty (a new one opens with the caller's next call) and when its caller
    /// leaves (what it still holds is answered Disconnected).
    private struct Lane {
        /// Which lane this is: a lane's task touches its own lane only, not a later one of the caller.
        let number: UInt64
        let calls: AsyncStream<DBusIncomingCall>.Continuation
        /// Its calls not handed to the tower yet, the one being prepared among them.
        var queued: Int
    }

    private struct State {
        var bus: DBusConnection?
        var queue: DBusCallQueue?
        var waiting: [UInt64: (DBusIncomingCall, Shape)] = [:]
        var nextToken: UInt64 = 1
        /// Callers seen on this connection, with who they are, and their session objects; callers being
        /// identified; and those of them that left meanwhile (a unique name is never given again on a
        /// bus, and only names we know of are kept).
        var clients: [String: AppClient] = [:]
        var identifying: Set<String> = []
        var left: Set<String> = []
        var exported: [String: String] = [:]
        var lanes: [String: Lane] = [:]
        var nextLane: UInt64 = 1

        /// Whether `number` is still `sender`'s lane on the connection of `queue`.
        func isCurrent(_ number: UInt64, of sender: String, on queue: DBusCallQueue) -> Bool {
            self.queue === queue && lanes[sender]?.number == number
        }

        /// One of the lane's calls is done with (handed to the tower or answered): an empty lane closes.
        mutating func done(_ number: UInt64, of sender: String, on queue: DBusCallQueue) {
            guard isCurrent(number, of: sender, on: queue), var lane = lanes[sender] else { return }
            lane.queued -= 1
            if lane.queued > 0 { lanes[sender] = lane; return }
            lanes[sender] = nil
            lane.calls.finish()
        }
    }
    private let state = Mutex(State())
    /// Tracing the event path (`stampCalls`): the time now, read on the bus thread as a call is taken. (A
    /// lock of its own, held for nothing else: the stamp is read before the call waits for the state's.)
    private let callStamp = Mutex<(@Sendable () -> Duration)?>(nil)

    /// Serves on a new connection to the session bus (at start, or after the bus came back: the apps of
    /// the last one are gone with it).
    /// `deliverCall`: an app's call for the tower, with when the bus thread took it (when tracing).
    func serve(_ bus: DBusConnection, _ deliver: @escaping @Sendable (TowerInput) -> Void,
               call deliverCall: @escaping @Sendable (TowerInput, Duration?) -> Void) {
        // Each call is sorted on the bus thread as it is read: handed to the tower from there when it can
        // be (`dispatch`), else put in its caller's lane.
        let queue = DBusCallQueue(stamp: { [weak self] in
            guard let now = self?.callStamp.withLock({ $0 }) else { return nil }
            return now()
        }, handler: { [weak self, weak bus] incoming, queue in
            guard let self, let bus else {
                incoming.reply(.error(name: "org.freedesktop.DBus.Error.Disconnected", message: "the agent is stopping"))
                return
            }
            dispatch(incoming, from: queue, on: bus, deliverCall)
        })
        let (oldQueue, unanswered) = state.withLock { state -> (DBusCallQueue?, [DBusIncomingCall]) in
            // (Told under the lock, as every input of this class: the tower hears of an app's calls and
            // of its departure in the order they were decided here.)
            for name in state.clients.keys.sorted() { deliver(.app(.gone(busName: name))) }
            for lane in state.lanes.values { lane.calls.finish() }
            let previous = (state.queue, state.waiting.values.map(\.0))
            state = State(bus: bus, queue: queue, nextToken: state.nextToken, nextLane: state.nextLane)
            return previous
        }
        oldQueue?.finish()
        for incoming in unanswered { incoming.reply(.error(name: "org.freedesktop.DBus.Error.Disconnected", message: "the agent's bus connection was replaced")) }
        let departures = bus.signals(matching: "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged'")
        bus.export(Self.agentPath, into: queue)
        bus.export(Self.playerPath, into: queue)
        // The MPRIS player for what is now playing: queued for, as the agent's own name (an agent that
        // has not let go yet: the daemon gives it to us when it leaves).
        Task { _ = try? await bus.requestName(Self.playerName, queue: true) }
        // The name is queued for when another connection has it (an app squatting it, an agent that has
        // not let go yet): the daemon gives it to us when that one leaves, and says so with NameAcquired
        // (subscribed first, so that a hand-over between the two is not missed).
        let acquired = bus.signals(matching: "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameAcquired',arg0='\(Self.busName)'")
        Task {
            do {
                if try await bus.requestName(Self.busName, queue: true) == .owned {
                    deliver(.app(.served(busName: Self.busName)))
                    return
                }
                let owner = await ServerLock.owner(of: Self.busName, on: bus)
                deliver(.app(.unavailable(reason: "\(Self.busName) is owned by \(owner): queued for it, taken when it leaves")))
                for await _ in acquired {
                    deliver(.app(.served(busName: Self.busName)))
                    return
                }
            } catch {
                deliver(.app(.unavailable(reason: "\(Self.busName) not taken: \(error)")))
            }
        }
        Task {
            for await signal in departures {
                guard signal.body.count == 3, let name = signal.body[0].string, name.hasPrefix(":"),
                      signal.body[2].string?.isEmpty == true else { continue }
                let path: String? = state.withLock { state in
                    guard state.queue === queue else { return nil }
                    state.lanes.removeValue(forKey: name)?.calls.finish()
                    if state.identifying.contains(name) { state.left.insert(name) }
                    guard state.clients.removeValue(forKey: name) != nil else { return nil }
                    deliver(.app(.gone(busName: name)))
                    return state.exported.removeValue(forKey: name)
                }
                if let path { bus.unexport(path) }
            }
        }
    }

    /// From now on, each call is stamped with `now` as the bus thread takes it (the event path's trace).
    func stampCalls(with now: @escaping @Sendable () -> Duration) { callStamp.withLock { $0 = now } }

    /// Serves no more (the agent stops): the calls not taken yet and the lanes end.
    func close() {
        let (queue, lanes) = state.withLock { state in
            defer { state.lanes = [:] }
            return (state.queue, state.lanes.values.map(\.calls))
        }
        queue?.finish()
        for lane in lanes { lane.finish() }
    }

    /// On the bus thread, as the call is read: a call of a caller known already, with none of its calls
    /// before it still in its lane, that needs nothing asked elsewhere (all but `GetSession` and
    /// `RequestRecordPermission`, which ask the portal or the store) is handed to the tower at once, with
    /// no hop to another thread (an app's `SetActive` is a call's mute). Any other goes into its caller's
    /// lane (a new lane, and the task that empties it, for a new caller), or is refused at once when that
    /// caller already has `callsInFlight` calls queued or unanswered.
    private func dispatch(_ incoming: DBusIncomingCall, from queue: DBusCallQueue, on bus: DBusConnection,
                          _ deliver: @escaping @Sendable (TowerInput, Duration?) -> Void) {
        let sender = incoming.call.sender
        if case .success(let parsed) = Self.request(incoming.call), Self.needsNothingElse(parsed.0) {
            let handed: Bool = state.withLock { state in
                guard state.queue === queue, state.lanes[sender] == nil, let client = state.clients[sender],
                      state.waiting.values.lazy.filter({ $0.0.call.sender == sender }).count < Self.callsInFlight else { return false }
                let token = state.nextToken
                state.nextToken += 1
                state.waiting[token] = (incoming, parsed.1)
                deliver(.app(.call(token: token, from: client, parsed.0)), incoming.received)
                return true
            }
            if handed { return }
        }
        enum Placed { case queued, opened(UInt64, AsyncStream<DBusIncomingCall>), tooMany, gone }
        let placed: Placed = state.withLock { state in
            guard state.queue === queue else { return .gone }
            let unanswered = state.waiting.values.lazy.filter { $0.0.call.sender == sender }.count
            if var lane = state.lanes[sender] {
                guard lane.queued + unanswered < Self.callsInFlight else { return .tooMany }
                lane.queued += 1
                state.lanes[sender] = lane
                lane.calls.yield(incoming)
                return .queued
            }
            guard unanswered < Self.callsInFlight else { return .tooMany }
            let (calls, continuation) = AsyncStream.makeStream(of: DBusIncomingCall.self, bufferingPolicy: .unbounded)
            continuation.yield(incoming)
            let number = state.nextLane
            state.nextLane += 1
            state.lanes[sender] = Lane(number: number, calls: continuation, queued: 1)
            return .opened(number, calls)
        }
        switch placed {
        case .queued: break
        case .opened(let number, let calls):
            Task {
                for await call in calls {
                    // (A call handed to the tower is done with as it is handed over: it is then counted
                    // among the unanswered, not twice.)
                    if await !take(call, lane: number, from: queue, on: bus, deliver) {
                        state.withLock { $0.done(number, of: sender, on: queue) }
                    }
                }
            }
        case .tooMany:
            incoming.reply(.error(name: "org.freedesktop.DBus.Error.LimitsExceeded",
                                  message: "more than \(Self.callsInFlight) calls not answered yet: wait for the answers"))
        case .gone:
            incoming.reply(.error(name: "org.freedesktop.DBus.Error.Disconnected", message: "the agent's bus connection was replaced"))
        }
    }

    /// Whether a request is handed to the tower as it is: no portal or store asked first.
    private static func needsNothingElse(_ request: AppRequest) -> Bool {
        switch request {
        case .getSession, .requestRecordPermission: false
        default: true
        }
    }

    /// One call of a caller's lane, in order: checked, its caller named, and handed to the tower (true),
    /// or answered here (false: it needs no decision, or is wrong, or its caller has left).
    private func take(_ incoming: DBusIncomingCall, lane: UInt64, from queue: DBusCallQueue, on bus: DBusConnection,
                      _ deliver: @Sendable (TowerInput, Duration?) -> Void) async -> Bool {
        let call = incoming.call
        guard state.withLock({ $0.isCurrent(lane, of: call.sender, on: queue) }) else {
            incoming.reply(.error(name: "org.freedesktop.DBus.Error.Disconnected", message: "the caller has left"))
            return false
        }
        if call.interface == Self.introspectable, call.member == "Introspect" {
            incoming.reply(.values([.string(call.path == Self.agentPath ? Self.agentXML : call.path == Self.playerPath ? Self.playerXML : Self.sessionXML)]))
            return false
        }
        var parsed: (AppRequest, Shape)
        switch Self.request(call) {
        case .failure(let error):
            incoming.reply(error.reply)
            return false
        case .success(let request): parsed = request
        }
        let identified = await identify(call.sender, on: bus, queue)
        guard case .success(var client) = identified else {
            let why = if case .failure(let error) = identified { error.why } else { "" }
            incoming.reply(.error(name: "org.freedesktop.DBus.Error.AccessDenied", message: "the caller could not be identified: \(why)"))
            return false
        }
        // What the user decided about it recording, for the session GetSession makes (asked only then:
        // for a Flatpak app it is a round trip to the desktop portal).
        if case .getSession = parsed.0 { client.recordDecision = await decision(for: client, on: bus) }
        if case .requestRecordPermission(let path, _) = parsed.0 {
            parsed.0 = .requestRecordPermission(session: path, decided: await decision(for: client, on: bus))
        }
        // (Bounded work per app: its lane already refused what is beyond `callsInFlight`.)
        let taken: Bool = state.withLock { state in
            // (A caller that left while this call was prepared is no longer among the clients: the
            // tower, told of its departure already, hears nothing more of it.)
            guard state.isCurrent(lane, of: call.sender, on: queue), state.clients[call.sender] != nil else { return false }
            let token = state.nextToken
            state.nextToken += 1
            state.waiting[token] = (incoming, parsed.1)
            state.done(lane, of: call.sender, on: queue)
            deliver(.app(.call(token: token, from: client, parsed.0)), incoming.received)
            return true
        }
        if !taken { incoming.reply(.error(name: "org.freedesktop.DBus.Error.Disconnected", message: "the caller has left")) }
        return taken
    }

    /// What the user decided about the app recording: for a Flatpak app the desktop portal's permission
    /// store (table `devices`, id `microphone`) where one runs, else the agent's own store.
    private func decision(for client: AppClient, on bus: DBusConnection) async -> Bool? {
        if let appID = client.appID,
           let table = try? await bus.call("org.freedesktop.impl.portal.PermissionStore", "/org/freedesktop/impl/portal/PermissionStore",
                                           "org.freedesktop.impl.portal.PermissionStore", "Lookup",
                                           [.string("devices"), .string("microphone")], timeout: portalAnswer).first?.stringDictionary,
           let answer = table[appID]?.array?.first?.string {
            if answer == "yes" { return true }
            if answer == "no" { return false }
        }
        return RecordPermissions.read(in: stateDirectory).decisions[client.storeName]
    }

    /// Why a caller could not be told.
    struct Unidentified: Error {
        let why: String
    }

    /// Who is calling, from the bus daemon and its process (asked once per caller), or why it cannot
    /// be told: then its calls are refused (`CallerProcess` fails closed).
    private func identify(_ sender: String, on bus: DBusConnection, _ queue: DBusCallQueue) async -> Result<AppClient, Unidentified> {
        enum Known { case client(AppClient), unknown, replaced }
        let known: Known = state.withLock { state in
            guard state.queue === queue else { return .replaced }
            if let known = state.clients[sender] { return .client(known) }
            state.identifying.insert(sender)
            return .unknown
        }
        switch known {
        case .client(let client): return .success(client)
        case .replaced: return .failure(Unidentified(why: "the agent's bus connection was replaced"))
        case .unknown: break
        }
        defer {
            state.withLock { state in
                if state.queue === queue { _ = state.identifying.remove(sender) }
            }
        }
        guard let pid = try? await bus.callDaemon("GetConnectionUnixProcessID", [.string(sender)], timeout: .seconds(2)).first?.integer else {
            return .failure(Unidentified(why: "the bus does not say its process"))
        }
        let uid = try? await bus.callDaemon("GetConnectionUnixUser", [.string(sender)], timeout: .seconds(2)).first?.integer
        let process: CallerProcess
        switch CallerProcess.inspect(Int(pid)) {
        case .success(let found): process = found
        case .failure(let error): return .failure(Unidentified(why: error.description))
        }
        let client = AppClient(busName: sender, processID: Int(pid), userID: uid.map { Int($0) },
                               appID: process.appID, name: process.name, binary: process.binary)
        state.withLock { state in
            if state.queue === queue, !state.left.contains(sender) { state.clients[sender] = client }
        }
        return .success(client)
    }

    /// The tower's answer to the call under `token`.
    func reply(_ token: UInt64, _ reply: AppReply) {
        let taken: (DBusIncomingCall, Shape, DBusConnection?, DBusCallQueue?)? = state.withLock { state in
            guard let (incoming, shape) = state.waiting.removeValue(forKey: token) else { return nil }
            var export: DBusCallQueue?
            if case .session(let path) = reply, state.exported[incoming.call.sender] == nil, state.clients[incoming.call.sender] != nil {
                state.exported[incoming.call.sender] = path
                export = state.queue
            }
            return (incoming, shape, state.bus, export)
        }
        guard let (incoming, shape, bus, export) = taken else { return }
        // (Exported before the reply goes: the bus thread takes both in order, so the app's next call
        // finds its object.)
        if case .session(let path) = reply, let export { bus?.export(path, into: export) }
        incoming.reply(Self.wire(reply, shape))
    }

    /// Tells those who watch the agent's MPRIS player that what is now playing jumped (`Seeked`, in µs).
    func nowPlayingSeeked(_ position: Duration) {
        guard let bus = state.withLock({ $0.bus }) else { return }
        bus.emit(Self.playerPath, Self.mprisPlayer, "Seeked", [.int64(NowPlayingInfo.microseconds(position))])
    }

    /// Tells those who watch the agent's MPRIS player what it shows now.
    func nowPlayingChanged(_ shown: NowPlayingProperties) {
        guard let bus = state.withLock({ $0.bus }) else { return }
        // (Position is not said with PropertiesChanged, as MPRIS asks.)
        bus.emit(Self.playerPath, Self.properties, "PropertiesChanged", [
            .string(Self.mprisPlayer), Self.dictionary(Self.playerProperties(shown).filter { $0.key != "Position" }), .array(elementSignature: "s", []),
        ])
    }

    /// Tells a declared session's app.
    func signal(_ path: String, _ notification: SessionNotification) {
        guard let bus = state.withLock({ $0.bus }) else { return }
        let (member, values) = Wire.signal(notification)
        bus.emit(path, Self.sessionInterface, member, values)
    }

    // MARK: the wire

    /// A call as the tower's request, or the D-Bus error that says what was wrong with it.
    static func request(_ call: DBusMethodCall) -> Result<(AppRequest, Shape), WireError> {
        let args = call.arguments
        func bad(_ signature: String) -> Result<(AppRequest, Shape), WireError> {
            .failure(WireError(.error(name: "org.freedesktop.DBus.Error.InvalidArgs",
                                      message: "\(call.member) takes (\(signature)), not (\(args.map(\.signature).joined()))")))
        }
        if call.path == playerPath { return mprisRequest(call, bad) }
        switch (call.path == agentPath, call.interface, call.member) {
        case (true, agentInterface, "GetSession"):
            return args.isEmpty ? .success((.getSession, .sessionPath)) : bad("")
        case (true, agentInterface, "Status"):
            return args.isEmpty ? .success((.status, .plain)) : bad("")
        case (true, agentInterface, "RemoteCommand"):
            guard args.count == 1, case .string(let command) = args[0] else { return bad("s") }
            return .success((.remoteCommand(command), .plain))
        case (true, agentInterface, "SetAppInputMuted"):
            guard args.count == 2, case .string(let app) = args[0], case .bool(let muted) = args[1] else { return bad("sb") }
            return .success((.appInputMuted(app: app, muted: muted), .plain))
        case (true, agentInterface, "SetRoute"):
            guard args.count == 2, case .string(let scope) = args[0], case .string(let device) = args[1] else { return bad("ss") }
            return .success((.setRoute(scope: scope, device: device), .plain))
        case (true, properties, "GetAll"):
            guard args.count == 1, let interface = args[0].string else { return bad("s") }
            guard interface == agentInterface else { return .failure(WireError(unknownInterface(interface))) }
            return .success((.silentMode(nil), .allProperties))
        case (true, properties, "Get"):
            guard args.count == 2, let interface = args[0].string, let name = args[1].string else { return bad("ss") }
            guard interface == agentInterface else { return .failure(WireError(unknownInterface(interface))) }
            guard ["SilentMode", "InputMuted", "InputMutedApps", "Sessions"].contains(name) else {
                return .failure(WireError(.error(name: "org.freedesktop.DBus.Error.UnknownProperty", message: "no property \(Apps.quoted(name))")))
            }
            return .success((.silentMode(nil), .property(name)))
        case (true, properties, "Set"):
            guard args.count == 3, let interface = args[0].string, let name = args[1].string else { return bad("ssv") }
            guard interface == agentInterface else { return .failure(WireError(unknownInterface(interface))) }
            guard name == "SilentMode" || name == "InputMuted" else {
                return .failure(WireError(.error(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "\(Apps.quoted(name)) cannot be set")))
            }
            guard case .variant(.bool(let on)) = args[2] else {
                return .failure(WireError(.error(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "\(name) is a boolean (b)")))
            }
            return .success((name == "SilentMode" ? .silentMode(on) : .inputMuted(on), .plain))
        case (false, sessionInterface, "SetCategory"):
            guard args.count == 3, let category = args[0].string, case .string = args[0], case .string = args[1],
                  let mode = args[1].string, let options = strings(args[2]) else { return bad("ssas") }
            return .success((.setCategory(session: call.path, category: category, mode: mode, options: options), .plain))
        case (false, sessionInterface, "SetActive"):
            guard args.count == 2, let active = args[0].bool, let options = strings(args[1]) else { return bad("bas") }
            return .success((.setActive(session: call.path, active: active, options: options), .plain))
        case (false, sessionInterface, "OverrideOutputAudioPort"):
            guard args.count == 1, case .string(let port) = args[0] else { return bad("s") }
            return .success((.overrideOutput(session: call.path, port: port), .plain))
        case (false, sessionInterface, "SetPreferredInput"):
            guard args.count == 1, case .string(let uid) = args[0] else { return bad("s") }
            return .success((.setPreferredInput(session: call.path, uid: uid), .plain))
        case (false, sessionInterface, "SetPreferredDataSource"):
            guard args.count == 1, case .string(let id) = args[0] else { return bad("s") }
            return .success((.setPreferredDataSource(session: call.path, id: id), .plain))
        case (false, sessionInterface, "SetPreferredSampleRate"):
            guard args.count == 1, case .double(let hertz) = args[0] else { return bad("d") }
            return .success((.setPreferredSampleRate(session: call.path, hertz: hertz), .plain))
        case (false, sessionInterface, "SetPreferredIOBufferDuration"):
            guard args.count == 1, case .double(let seconds) = args[0] else { return bad("d") }
            return .success((.setPreferredIOBufferDuration(session: call.path, seconds: seconds), .plain))
        case (false, sessionInterface, "SetNowPlayingInfo"):
            guard args.count == 1, args[0].stringDictionary != nil else { return bad("a{sv}") }
            return .success((.setNowPlayingInfo(session: call.path, Wire.nowPlayingInfo(from: args[0])), .plain))
        case (false, sessionInterface, "SetInputMuted"):
            guard args.count == 1, let muted = args[0].bool else { return bad("b") }
            return .success((.setInputMuted(session: call.path, muted: muted), .plain))
        case (false, sessionInterface, "RequestRecordPermission"):
            guard args.isEmpty else { return bad("") }
            return .success((.requestRecordPermission(session: call.path, decided: nil), .plain))
        case (false, properties, "GetAll"):
            guard args.count == 1, let interface = args[0].string else { return bad("s") }
            guard interface == sessionInterface else { return .failure(WireError(unknownInterface(interface))) }
            return .success((.properties(session: call.path), .allProperties))
        case (false, properties, "Get"):
            guard args.count == 2, let interface = args[0].string, let name = args[1].string else { return bad("ss") }
            guard interface == sessionInterface else { return .failure(WireError(unknownInterface(interface))) }
            guard sessionProperties.contains(name) else {
                return .failure(WireError(.error(name: "org.freedesktop.DBus.Error.UnknownProperty", message: "no property \(Apps.quoted(name))")))
            }
            return .success((.properties(session: call.path), .property(name)))
        default:
            return .failure(WireError(.error(name: "org.freedesktop.DBus.Error.UnknownMethod",
                                             message: "no method \(Apps.quoted(call.member)) in \(Apps.quoted(call.interface)) at \(Apps.quoted(call.path))")))
        }
    }

    /// A call to the agent's MPRIS player: its commands go to what is now playing; Seek, SetPosition and
    /// OpenUri are not its to do; its properties are read.
    static func mprisRequest(_ call: DBusMethodCall, _ bad: (String) -> Result<(AppRequest, Shape), WireError>)
        -> Result<(AppRequest, Shape), WireError> {
        let args = call.arguments
        switch (call.interface, call.member) {
        case (mprisPlayer, let member) where PlayerCommand(rawValue: member) != nil:
            return args.isEmpty ? .success((.remoteCommand(PlayerCommand(rawValue: member)!.word), .noValues)) : bad("")
        case (mprisRoot, "Raise"), (mprisRoot, "Quit"), (mprisPlayer, "Seek"), (mprisPlayer, "SetPosition"):
            // (CanRaise, CanQuit and CanSeek are false: as MPRIS asks, these do nothing; answered here,
            // at once, with nothing.)
            return .failure(WireError(.values([])))
        case (mprisPlayer, "OpenUri"):
            return .failure(WireError(.error(name: "org.freedesktop.DBus.Error.NotSupported",
                                             message: "the agent opens nothing: ask the player itself")))
        case (properties, "Get"):
            guard args.count == 2, let interface = args[0].string, let name = args[1].string else { return bad("ss") }
            guard [mprisRoot, mprisPlayer].contains(interface) else { return .failure(WireError(unknownInterface(interface))) }
            return .success((.nowPlayingProperties, .mpris(interface: interface, property: name)))
        case (properties, "GetAll"):
            guard args.count == 1, let interface = args[0].string else { return bad("s") }
            guard [mprisRoot, mprisPlayer].contains(interface) else { return .failure(WireError(unknownInterface(interface))) }
            return .success((.nowPlayingProperties, .mpris(interface: interface, property: nil)))
        case (properties, "Set"):
            return .failure(WireError(.error(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "the agent's player's properties are read-only")))
        default:
            return .failure(WireError(.error(name: "org.freedesktop.DBus.Error.UnknownMethod",
                                             message: "no method \(Apps.quoted(call.member)) in \(Apps.quoted(call.interface)) at \(Apps.quoted(call.path))")))
        }
    }

    /// The MPRIS root interface's properties: a player that cannot be raised or quit, with no track list.
    static let rootProperties: [String: DBusValue] = [
        "Identity": .string("Now playing (audiosessiond)"), "CanQuit": .bool(false), "CanRaise": .bool(false),
        "HasTrackList": .bool(false), "SupportedUriSchemes": .array(elementSignature: "s", []),
        "SupportedMimeTypes": .array(elementSignature: "s", []),
    ]

    /// The MPRIS player interface's properties, from what is now playing.
    static func playerProperties(_ shown: NowPlayingProperties) -> [String: DBusValue] {
        let some = shown.session != nil
        // What its player or its app says it plays; the session's name for a title where nothing does.
        var metadata = Wire.metadata(shown.info)
        metadata[.string(Wire.elapsedKey)] = nil  // (said as Position)
        metadata[.string("mpris:trackid")] = .variant(.objectPath("/org/mpris/MediaPlayer2/TrackList/NoTrack"))
        if shown.info.title == nil, let session = shown.session { metadata[.string("xesam:title")] = .variant(.string(session)) }
        return [
            "PlaybackStatus": .string(shown.status.rawValue), "LoopStatus": .string("None"), "Rate": .double(1), "Shuffle": .bool(false),
            "Metadata": .dictionary(keySignature: "s", valueSignature: "v", metadata), "Volume": .double(1), "Position": .int64(0),
            "MinimumRate": .double(1), "MaximumRate": .double(1),
            "CanGoNext": .bool(some), "CanGoPrevious": .bool(some), "CanPlay": .bool(some), "CanPause": .bool(some),
            "CanSeek": .bool(false), "CanControl": .bool(true),
        ]
    }

    /// Properties as an `a{sv}`.
    static func dictionary(_ all: [String: DBusValue]) -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "v", Dictionary(uniqueKeysWithValues: all.map { (DBusValue.string($0.key), DBusValue.variant($0.value)) }))
    }

    /// What was wrong with a call, as its D-Bus error.
    struct WireError: Error {
        let reply: DBusReply
        init(_ reply: DBusReply) { self.reply = reply }
    }

    static func unknownInterface(_ name: String) -> DBusReply {
        .error(name: "org.freedesktop.DBus.Error.UnknownInterface", message: "no interface \(Apps.quoted(name))")
    }

    static func strings(_ value: DBusValue) -> [String]? {
        guard case .array(let element, let items) = value, element == "s" else { return nil }
        return items.compactMap(\.string)
    }

    static let sessionProperties: Set<String> = [
        "Category", "Mode", "Options", "IsActive", "IsOtherAudioPlaying", "SecondaryAudioShouldBeSilencedHint", "CurrentRoute",
        "AvailableInputs", "SampleRate", "IOBufferDuration", "InputLatency", "OutputLatency", "OutputVolume", "RecordPermission",
        "InputMuted",
    ]

    static func wire(_ reply: AppReply, _ shape: Shape) -> DBusReply {
        switch reply {
        case .session(let path): return .values([.objectPath(path)])
        case .done: return .values([])
        case .properties(let p):
            let all: [String: DBusValue] = [
                "Category": .string(p.category), "Mode": .string(p.mode),
                "Options": .array(elementSignature: "s", p.options.map(DBusValue.string)), "IsActive": .bool(p.isActive),
                "IsOtherAudioPlaying": .bool(p.isOtherAudioPlaying),
                "SecondaryAudioShouldBeSilencedHint": .bool(p.secondaryAudioShouldBeSilencedHint),
                "CurrentRoute": Wire.route(p.route), "AvailableInputs": Wire.ports(p.availableInputs),
                "SampleRate": .double(p.hardware?.sampleRate ?? 0), "IOBufferDuration": .double(p.hardware?.ioBufferDuration ?? 0),
                "InputLatency": .double(p.hardware?.inputLatency ?? 0), "OutputLatency": .double(p.hardware?.outputLatency ?? 0),
                "OutputVolume": .double(p.hardware?.outputVolume ?? 0), "RecordPermission": .string(p.recordPermission),
                "InputMuted": .bool(p.inputMuted),
            ]
            if case .property(let name) = shape, let value = all[name] { return .values([.variant(value)]) }
            return .values([.dictionary(keySignature: "s", valueSignature: "v",
                                        Dictionary(uniqueKeysWithValues: all.map { (DBusValue.string($0.key), DBusValue.variant($0.value)) }))])
        case .permission(let allowed):
            return .values([.bool(allowed)])
        case .status(let json):
            return .values([.string(json)])
        case .routeSet(let said):
            return .values([.string(said)])
        case .remoteCommandSent(let target):
            // (The MPRIS player's commands answer nothing.)
            if case .noValues = shape { return .values([]) }
            return .values([.string(target)])
        case .nowPlaying(let shown, let position):
            guard case .mpris(let interface, let name) = shape else { return .values([]) }
            var all = interface == mprisRoot ? rootProperties : playerProperties(shown)
            // (Where it is, from where its player last said it was: Position is read, never told.)
            if interface == mprisPlayer, let position { all["Position"] = .int64(NowPlayingInfo.microseconds(position)) }
            guard let name else { return .values([dictionary(all)]) }
            guard let value = all[name] else {
                return .error(name: "org.freedesktop.DBus.Error.UnknownProperty", message: "no property \(Apps.quoted(name))")
            }
            return .values([.variant(value)])
        case .inputMutedApps(let apps):
            return .values([.array(elementSignature: "s", apps.map(DBusValue.string))])
        case .agentProperties(let silentMode, let inputMuted, let sessions, let inputMutedApps):
            if case .plain = shape { return .values([]) }
            let all: [String: DBusValue] = [
                "SilentMode": .bool(silentMode), "InputMuted": .bool(inputMuted), "Sessions": .array(elementSignature: "o", sessions.map(DBusValue.objectPath)),
                "InputMutedApps": .array(elementSignature: "s", inputMutedApps.map(DBusValue.string)),
            ]
            if case .property(let name) = shape, let value = all[name] { return .values([.variant(value)]) }
            return .values([.dictionary(keySignature: "s", valueSignature: "v",
                                        Dictionary(uniqueKeysWithValues: all.map { (DBusValue.string($0.key), DBusValue.variant($0.value)) }))])
        case .failed(let error):
            return .error(name: Wire.errorName(error.code), message: error.message)
        case .refused(let why):
            return .error(name: "org.freedesktop.DBus.Error.AccessDenied", message: why)
        }
    }

    static let agentXML = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="org.audiosession.Agent1">
            <annotation name="org.freedesktop.DBus.Property.EmitsChangedSignal" value="false"/>
            <method name="GetSession"><arg name="session" type="o" direction="out"/></method>
            <method name="Status"><arg name="report" type="s" direction="out"/></method>
            <method name="RemoteCommand"><arg name="command" type="s" direction="in"/><arg name="target" type="s" direction="out"/></method>
            <method name="SetRoute"><arg name="scope" type="s" direction="in"/><arg name="device" type="s" direction="in"/><arg name="said" type="s" direction="out"/></method>
            <method name="SetAppInputMuted"><arg name="app" type="s" direction="in"/><arg name="muted" type="b" direction="in"/><arg name="mutedApps" type="as" direction="out"/></method>
            <property name="SilentMode" type="b" access="readwrite"/>
            <property name="InputMuted" type="b" access="readwrite"/>
            <property name="InputMutedApps" type="as" access="read"/>
            <property name="Sessions" type="ao" access="read"/>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface" type="s" direction="in"/><arg name="name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll"><arg name="interface" type="s" direction="in"/><arg name="values" type="a{sv}" direction="out"/></method>
            <method name="Set">
              <arg name="interface" type="s" direction="in"/><arg name="name" type="s" direction="in"/>
              <arg name="value" type="v" direction="in"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect"><arg name="xml" type="s" direction="out"/></method>
          </interface>
        </node>
        """

    static let playerXML = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="org.mpris.MediaPlayer2">
            <method name="Raise"/>
            <method name="Quit"/>
            <property name="CanQuit" type="b" access="read"/>
            <property name="CanRaise" type="b" access="read"/>
            <property name="HasTrackList" type="b" access="read"/>
            <property name="Identity" type="s" access="read"/>
            <property name="SupportedUriSchemes" type="as" access="read"/>
            <property name="SupportedMimeTypes" type="as" access="read"/>
          </interface>
          <interface name="org.mpris.MediaPlayer2.Player">
            <method name="Next"/>
            <method name="Previous"/>
            <method name="Pause"/>
            <method name="PlayPause"/>
            <method name="Stop"/>
            <method name="Play"/>
            <method name="Seek"><arg name="Offset" type="x" direction="in"/></method>
            <method name="SetPosition"><arg name="TrackId" type="o" direction="in"/><arg name="Position" type="x" direction="in"/></method>
            <method name="OpenUri"><arg name="Uri" type="s" direction="in"/></method>
            <signal name="Seeked"><arg name="Position" type="x"/></signal>
            <property name="PlaybackStatus" type="s" access="read"/>
            <property name="LoopStatus" type="s" access="read"/>
            <property name="Rate" type="d" access="read"/>
            <property name="Shuffle" type="b" access="read"/>
            <property name="Metadata" type="a{sv}" access="read"/>
            <property name="Volume" type="d" access="read"/>
            <property name="Position" type="x" access="read"/>
            <property name="MinimumRate" type="d" access="read"/>
            <property name="MaximumRate" type="d" access="read"/>
            <property name="CanGoNext" type="b" access="read"/>
            <property name="CanGoPrevious" type="b" access="read"/>
            <property name="CanPlay" type="b" access="read"/>
            <property name="CanPause" type="b" access="read"/>
            <property name="CanSeek" type="b" access="read"/>
            <property name="CanControl" type="b" access="read"/>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface" type="s" direction="in"/><arg name="name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll"><arg name="interface" type="s" direction="in"/><arg name="values" type="a{sv}" direction="out"/></method>
            <signal name="PropertiesChanged">
              <arg name="interface" type="s"/><arg name="changed" type="a{sv}"/><arg name="invalidated" type="as"/>
            </signal>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect"><arg name="xml" type="s" direction="out"/></method>
          </interface>
        </node>
        """

    static let sessionXML = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="org.audiosession.Session1">
            <annotation name="org.freedesktop.DBus.Property.EmitsChangedSignal" value="false"/>
            <method name="SetCategory">
              <arg name="category" type="s" direction="in"/><arg name="mode" type="s" direction="in"/>
              <arg name="options" type="as" direction="in"/>
            </method>
            <method name="SetActive"><arg name="active" type="b" direction="in"/><arg name="options" type="as" direction="in"/></method>
            <method name="OverrideOutputAudioPort"><arg name="port" type="s" direction="in"/></method>
            <method name="SetPreferredInput"><arg name="uid" type="s" direction="in"/></method>
            <method name="SetPreferredDataSource"><arg name="uid" type="s" direction="in"/></method>
            <method name="SetPreferredSampleRate"><arg name="hz" type="d" direction="in"/></method>
            <method name="SetPreferredIOBufferDuration"><arg name="seconds" type="d" direction="in"/></method>
            <method name="RequestRecordPermission"><arg name="granted" type="b" direction="out"/></method>
            <method name="SetInputMuted"><arg name="muted" type="b" direction="in"/></method>
            <method name="SetNowPlayingInfo"><arg name="info" type="a{sv}" direction="in"/></method>
            <property name="Category" type="s" access="read"/>
            <property name="Mode" type="s" access="read"/>
            <property name="Options" type="as" access="read"/>
            <property name="IsActive" type="b" access="read"/>
            <property name="IsOtherAudioPlaying" type="b" access="read"/>
            <property name="SecondaryAudioShouldBeSilencedHint" type="b" access="read"/>
            <property name="CurrentRoute" type="a{sv}" access="read"/>
            <property name="AvailableInputs" type="aa{sv}" access="read"/>
            <property name="SampleRate" type="d" access="read"/>
            <property name="IOBufferDuration" type="d" access="read"/>
            <property name="InputLatency" type="d" access="read"/>
            <property name="OutputLatency" type="d" access="read"/>
            <property name="OutputVolume" type="d" access="read"/>
            <property name="RecordPermission" type="s" access="read"/>
            <property name="InputMuted" type="b" access="read"/>
            <signal name="Interruption"><arg name="type" type="s"/><arg name="options" type="as"/><arg name="reason" type="s"/></signal>
            <signal name="RouteChange"><arg name="reason" type="s"/><arg name="previousRoute" type="a{sv}"/></signal>
            <signal name="SilenceSecondaryAudioHint"><arg name="type" type="s"/></signal>
            <signal name="MediaServicesWereLost"/>
            <signal name="MediaServicesWereReset"/>
            <signal name="InputMuteChanged"><arg name="muted" type="b"/></signal>
            <signal name="RemoteCommand"><arg name="command" type="s"/></signal>
            <signal name="MutedSpeechActivity"><arg name="activity" type="s"/></signal>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface" type="s" direction="in"/><arg name="name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll"><arg name="interface" type="s" direction="in"/><arg name="values" type="a{sv}" direction="out"/></method>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect"><arg name="xml" type="s" direction="out"/></method>
          </interface>
        </node>
        """
}

import CLibPulse
import FoundationEssentials
import Glibc
import Synchronization

/// Runs on one libpulse threaded mainloop (its own, or one shared with an actor: `PulseLoop`) and, over
/// its life, a sequence of contexts (a failed context cannot reconnect, so each reconnection makes a
/// new one).
///
/// `@unchecked Sendable` rule: every stored `var` below the marker is read and written only while the
/// mainloop lock is held, that is inside `withLock` or inside a libpulse callback (callbacks run on the
/// loop thread with the lock held). `assertLocked()` checks this in debug builds.
final class Connection: @unchecked Sendable {
    let configuration: PulseClient.Configuration
    /// Kept: the loop outlives the connection (its thread stops when the last user lets it go).
    private let loop: PulseLoop
    private let mainloop: OpaquePointer
    private let api: UnsafeMutablePointer<pa_mainloop_api>
    /// The mainloop's API, for time events of the client's own parts (the meters' watch).
    var mainloopAPI: UnsafeMutablePointer<pa_mainloop_api> { api }
    /// The thread that holds the lock through `withLock`, for `assertLocked()`.
    private let lockOwner = Atomic<UInt>(0)
    /// userdata for info callbacks: one tells replies to the initial list requests from single updates.
    private var listReceiver: Receiver!
    private var updateReceiver: Receiver!
    /// For a stream's info asked at its subscription event (its end counted: `ClientNewsHold`).
    private var streamUpdateReceiver: Receiver!

    // MARK: state guarded by the mainloop lock

    private var context: OpaquePointer?
    private var phase: Phase = .idle
    private var model = Snapshot()
    private var outstandingListReplies = 0
    private var pending: [UInt64: PendingOperation] = [:]
    /// Answers to operations sent with `send` that nobody has asked for yet.
    private var answered: [UInt64: Result<OperationResult, PulseError>] = [:]
    private var nextOperationID: UInt64 = 1
    private var subscribers: [Subscriber] = []
    /// Clients' news held while streams' infos are asked (see `ClientNewsHold`).
    private var clientNews = ClientNewsHold()
    /// Tracing (`stampSubscriptions`): told of each stream's subscription event as it comes, before its
    /// info is asked for.
    private var subscriptionStamp: (@Sendable (StreamReference) -> Void)?
    private var connectWaiter: CheckedContinuation<Void, any Error>?
    private var retryDelay: Duration
    private var reconnectTimer: OpaquePointer?
    private var connectTimeoutTimer: OpaquePointer?
    /// A second look at the server info after pipewire-pulse announced a change (see `subscriptionEvent`).
    private var serverRecheckTimer: OpaquePointer?
    /// Wakes when the oldest unanswered command has waited `answerWithin` (see `stallCheckFired`).
    private var stallTimer: OpaquePointer?
    /// libpulse said a command timed out: the connection is taken as lost at the next stall check.
    private var timedOutSeen = false
    /// How many times a context reached the ready state; tests read it to see a reconnection.
    private(set) var connectionCount = 0
    /// A look at the server info through a connection of its own, under way (see `lookAfresh`).
    private var freshLook: OpaquePointer?
    private var freshLookTimer: OpaquePointer?
    /// Another look was asked for while one was under way: it starts when that one ends.
    private var freshLookAgain = false
    /// A fresh look disagreed with this connection about the default devices, and this connection's own
    /// answer asked a moment later still did: this connection missed a change of the default (see
    /// `defaultAsked`), and its server info is read through fresh looks from now on (until the next
    /// connection), every `freshLookPeriod` too (it may miss the next change as well).
    private var serverInfoThroughFreshLooks = false
    /// A fresh look's answer that disagreed, waiting for this connection's own second answer.
    private var freshAnswerToConfirm: ServerInfo?
    private var confirmTimer: OpaquePointer?
    private var freshLookPeriodTimer: OpaquePointer?
    /// How long after a disagreeing fresh look this connection is asked again (its own change event may
    /// simply be a moment behind), and how often a stale connection's server info is looked at afresh.
    static let freshLookConfirmAfter: Duration = .milliseconds(250)
    static let freshLookPeriod: Duration = .seconds(10)
    /// The default device last asked for, by direction (`defaultAsked`).
    private var lastAskedDefault: [Direction: String] = [:]

    enum Phase: Equatable {
        case idle
        /// Waiting for the context to become ready. `initial` is the first connection, whose failure is
        /// reported to the caller instead of being retried.
        case connecting(initial: Bool)
        /// Ready; the initial lists are on their way.
        case synchronizing(initial: Bool)
        case ready
        case waitingToReconnect
        case closed
    }

    init(configuration: PulseClient.Configuration, loop: PulseLoop) {
        self.configuration = configuration
        self.retryDelay = configuration.reconnectDelay.lowerBound
        self.loop = loop
        mainloop = loop.mainloop
        api = loop.api
        listReceiver = Receiver(connection: self, isList: true)
        updateReceiver = Receiver(connection: self, isList: false)
        streamUpdateReceiver = Receiver(connection: self, isList: false, isStream: true)
    }

    // MARK: locking

    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        if pa_threaded_mainloop_in_thread(mainloop) != 0 { return try body() }
        pa_threaded_mainloop_lock(mainloop)
        lockOwner.store(UInt(pthread_self()), ordering: .relaxed)
        defer {
            lockOwner.store(0, ordering: .relaxed)
            pa_threaded_mainloop_unlock(mainloop)
        }
        return try body()
    }

    func assertLocked(_ file: StaticString = #fileID, _ line: UInt = #line) {
        assert(
            pa_threaded_mainloop_in_thread(mainloop) != 0
                || lockOwner.load(ordering: .relaxed) == UInt(pthread_self()),
            "libpulse state touched without the mainloop lock", file: file, line: line)
    }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> Connection {
        Unmanaged<Connection>.fromOpaque(userdata!).takeUnretainedValue()
    }

    var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Where we connect, in words for error messages.
    var addressDescription: String {
        if let server = configuration.server { return server }
        if let env = ProcessInfo.processInfo.environment["PULSE_SERVER"], !env.isEmpty { return env }
        let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] ?? "/run/user/\(getuid())"
        return "unix:\(runtime)/pulse/native"
    }

    // MARK: life cycle

    /// Connects and waits for the first complete snapshot, or throws why it could not.
    func start() async throws {
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            withLock {
                guard phase == .idle else {
                    waiter.resume(throwing: PulseError.badArgument("the client was already started"))
                    return
                }
                connectWaiter = waiter
                phase = .connecting(initial: true)
                connectTimeoutTimer = addTimer(after: configuration.connectTimeout, connectTimeoutCallback)
                if let error = makeContext() { failInitialConnection(error) }
            }
        }
    }

    func close() {
        var finished: [Subscriber] = []
        let wasOpen: Bool = withLock {
            guard phase != .closed else { return false }
            phase = .closed
            cancelTimers()
            dropContext()
            failPending(PulseError.notConnected)
            connectWaiter?.resume(throwing: PulseError.notConnected)
            connectWaiter = nil
            finished = subscribers
            subscribers = []
            return true
        }
        // (The loop runs on for its other users, if any: with the context gone, its operations
        // cancelled and the timers freed, nothing of this connection can be called back any more.)
        guard wasOpen else { return }
        for subscriber in finished { subscriber.finish() }
    }

    /// Makes a fresh context and starts connecting it; returns the error if that fails at once.
    private func makeContext() -> PulseError? {
        assertLocked()
        guard let ctx = newContext(clientProperties: true) else {
            return .noServer(address: addressDescription, reason: "could not create a context")
        }
        context = ctx
        pa_context_set_state_callback(ctx, contextStateCallback, userdata)
        pa_context_set_subscribe_callback(ctx, subscribeCallback, userdata)
        if pa_context_connect(ctx, configuration.server, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
            // A failure can arrive through the state callback inside pa_context_connect, which has then
            // dealt with it and released the context already.
            guard context == ctx else { return nil }
            let reason = errorText(ctx)
            dropContext()
            return .noServer(address: addressDescription, reason: reason)
        }
        return nil
    }

    /// A context named as the configuration says (with its client properties, or for a fresh look
    /// only its name and id: `audiosessionctl status` finds the agent's own client by those properties).
    private func newContext(clientProperties: Bool) -> OpaquePointer? {
        let props = pa_proplist_new()
        defer { pa_proplist_free(props) }
        pa_proplist_sets(props, PA_PROP_APPLICATION_NAME, configuration.applicationName)
        if let id = configuration.applicationID { pa_proplist_sets(props, PA_PROP_APPLICATION_ID, id) }
        if clientProperties {
            for (key, value) in configuration.clientProperties.sorted(by: { $0.key < $1.key }) { pa_proplist_sets(props, key, value) }
        }
        return pa_context_new_with_proplist(api, configuration.applicationName, props)
    }

    /// Disconnects and releases the context. Its pending operations never call back after this.
    private func dropContext() {
        assertLocked()
        guard let ctx = context else { return }
        context = nil
        pa_context_set_state_callback(ctx, nil, nil)
        pa_context_set_subscribe_callback(ctx, nil, nil)
        pa_context_disconnect(ctx)
        pa_context_unref(ctx)
    }

    func errorText(_ ctx: OpaquePointer?) -> String {
        guard let ctx else { return "not connected" }
        return string(pa_strerror(pa_context_errno(ctx)))
    }

    fileprivate func contextStateChanged(_ ctx: OpaquePointer?) {
        guard ctx == context, let ctx else { return }
        switch pa_context_get_state(ctx) {
        case PA_CONTEXT_READY:
            let initial = (phase == .connecting(initial: true))
            phase = .synchronizing(initial: initial)
            model = Snapshot()
            // (A look under way, or a finding, belongs to the connection before.)
            freshLookAgain = false
            endFreshLook()
            endStaleness()
            lastAskedDefault = [:]
            requestEverything(ctx)
        case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
            let reason = errorText(ctx)
            dropContext()
            failPending(PulseError.connectionLost(operation: "operation", reason: reason))
            switch phase {
            case .connecting(initial: true), .synchronizing(initial: true):
                failInitialConnection(.noServer(address: addressDescription, reason: reason))
            case .ready:
                model = Snapshot()
                publish(.disconnected(reason: reason))
                scheduleReconnect()
            case .connecting, .synchronizing:
                scheduleReconnect()
            case .idle, .waitingToReconnect, .closed:
                break
            }
        default:
            break
        }
    }

    private func failInitialConnection(_ error: PulseError) {
        assertLocked()
        dropContext()
        cancelTimers()
        phase = .idle
        connectWaiter?.resume(throwing: error)
        connectWaiter = nil
    }

    private func scheduleReconnect() {
        assertLocked()
        guard configuration.reconnects else { phase = .idle; return }
        phase = .waitingToReconnect
        reconnectTimer = addTimer(after: retryDelay, reconnectCallback)
        retryDelay = min(retryDelay * 2, configuration.reconnectDelay.upperBound)
    }

    fileprivate func reconnectTimerFired() {
        reconnectTimer = nil
        guard phase == .waitingToReconnect else { return }
        phase = .connecting(initial: false)
        if makeContext() != nil { return scheduleReconnect() }
        // A server that accepts the connection and then says nothing (stalled) is tried again later.
        if let timer = connectTimeoutTimer { api.pointee.time_free(timer) }
        connectTimeoutTimer = addTimer(after: configuration.connectTimeout, connectTimeoutCallback)
    }

    fileprivate func serverRecheckFired() {
        serverRecheckTimer = nil
        guard phase == .ready else { return }
        askServerInfo()
        serverRecheckStep += 1
        if serverRecheckStep < Self.serverRecheckDelays.count {
            serverRecheckTimer = addTimer(after: Self.serverRecheckDelays[serverRecheckStep], serverRecheckCallback)
        }
    }

    /// The waits before each further look at the server info after pipewire-pulse announced a change
    /// (see `subscriptionEvent`), each counted from the look before (150 ms, 750 ms, 2.75 s after the
    /// change): WirePlumber under load has taken more than the first wait to make the announced default
    /// the effective one, and nothing was announced then.
    static let serverRecheckDelays: [Duration] = [.milliseconds(150), .milliseconds(600), .seconds(2)]
    /// How far into `serverRecheckDelays` the second looks are.
    private var serverRecheckStep = 0

    fileprivate func connectTimeoutFired() {
        connectTimeoutTimer = nil
        switch phase {
        case .connecting(initial: true), .synchronizing(initial: true):
            failInitialConnection(.noServer(
                address: addressDescription,
                reason: "no answer within \(configuration.connectTimeout.components.seconds) s"))
        case .connecting(initial: false), .synchronizing(initial: false):
            dropContext()
            failPending(PulseError.notConnected)
            scheduleReconnect()
        default:
            break
        }
    }

    // MARK: a server that stops answering

    /// Arms the stall check for the oldest unanswered command, if there is one and no check is armed.
    private func armStallCheck() {
        assertLocked()
        guard stallTimer == nil, phase == .ready, let limit = configuration.answerWithin,
              let oldest = pending.values.compactMap(\.sentAt).min() else { return }
        let waited = Duration.microseconds(Int64(pa_rtclock_now() &- oldest))
        stallTimer = addTimer(after: max(.zero, limit - waited), stallCheckCallback)
    }

    fileprivate func stallCheckFired() {
        stallTimer = nil
        guard phase == .ready else { return }
        let now = pa_rtclock_now()
        let oldest = pending.values.compactMap(\.sentAt).min()
        let waited = oldest.map { Duration.microseconds(Int64(now &- $0)) } ?? .zero
        if timedOutSeen || configuration.answerWithin.map({ waited >= $0 }) == true {
            let reason = timedOutSeen ? "a command timed out" : "no answer for \(waited.components.seconds) s"
            timedOutSeen = false
            // Taken as lost: what was sent is failed with its outcome unknown, the model is emptied, and
            // the reconnection brings a fresh snapshot once the server serves again.
            dropContext()
            failPending(PulseError.connectionLost(operation: "operation", reason: reason))
            model = Snapshot()
            publish(.disconnected(reason: "the sound server stopped answering (\(reason))"))
            scheduleReconnect()
            return
        }
        armStallCheck()
    }

    private func addTimer(after delay: Duration, _ callback: pa_time_event_cb_t) -> OpaquePointer? {
        assertLocked()
        var tv = timeval(after: delay)
        return api.pointee.time_new(api, &tv, callback, userdata)
    }

    private func cancelTimers() {
        assertLocked()
        for timer in [reconnectTimer, connectTimeoutTimer, serverRecheckTimer, stallTimer] {
            if let timer { api.pointee.time_free(timer) }
        }
        reconnectTimer = nil
        connectTimeoutTimer = nil
        serverRecheckTimer = nil
        stallTimer = nil
        freshLookAgain = false
        endFreshLook()
        endStaleness()
    }

    /// Forgets the fresh looks' findings and timers (a new connection, or the end).
    private func endStaleness() {
        assertLocked()
        for timer in [confirmTimer, freshLookPeriodTimer] { if let timer { api.pointee.time_free(timer) } }
        confirmTimer = nil
        freshLookPeriodTimer = nil
        freshAnswerToConfirm = nil
        serverInfoThroughFreshLooks = false
    }

    // MARK: the model

    private func requestEverything(_ ctx: OpaquePointer) {
        assertLocked()
        clientNews.newConnection()
        pa_operation_unref(pa_context_subscribe(ctx, PA_SUBSCRIPTION_MASK_ALL, nil, nil))
        let list = Unmanaged.passUnretained(listReceiver).toOpaque()
        let requests: [OpaquePointer?] = [
            pa_context_get_server_info(ctx, serverInfoCallback, list),
            pa_context_get_module_info_list(ctx, moduleInfoCallback, list),
            pa_context_get_client_info_list(ctx, clientInfoCallback, list),
            pa_context_get_card_info_list(ctx, cardInfoCallback, list),
            pa_context_get_sink_info_list(ctx, sinkInfoCallback, list),
            pa_context_get_source_info_list(ctx, sourceInfoCallback, list),
            pa_context_get_sink_input_info_list(ctx, sinkInputInfoCallback, list),
            pa_context_get_source_output_info_list(ctx, sourceOutputInfoCallback, list),
        ]
        outstandingListReplies = requests.count
        for op in requests { if let op { pa_operation_unref(op) } else { outstandingListReplies -= 1 } }
        if outstandingListReplies == 0 { synchronized() }
    }

    /// A reply to an info request: an entity, or the end of a list (eol > 0) or an error (eol < 0).
    fileprivate func received(_ entity: Entity?, endOfList: Bool, fromList: Bool) {
        assertLocked()
        if let entity {
            // (A connection whose defaults pipewire-pulse left stale: only fresh looks say them. An answer
            // of its own asked before that was known is dropped: the fresh look's answer stands.)
            if case .server = entity, serverInfoThroughFreshLooks, phase == .ready {} else { store(entity) }
        }
        if fromList && endOfList {
            outstandingListReplies -= 1
            if outstandingListReplies == 0 { synchronized() }
        }
    }

    private func synchronized() {
        assertLocked()
        guard case .synchronizing(let initial) = phase else { return }
        phase = .ready
        connectionCount += 1
        retryDelay = configuration.reconnectDelay.lowerBound
        if initial {
            cancelTimers()
            connectWaiter?.resume()
            connectWaiter = nil
        } else if let timer = connectTimeoutTimer {
            api.pointee.time_free(timer)
            connectTimeoutTimer = nil
        }
        timedOutSeen = false
        publish(.connected(model))
    }

    private func store(_ entity: Entity) {
        let old = model.replace(entity)
        guard phase == .ready else { return }
        if let old {
            if old != entity { publish(.changed(old: old, new: entity)) }
        } else {
            publish(.added(entity))
        }
    }

    fileprivate func subscriptionEvent(_ ctx: OpaquePointer?, _ t: pa_subscription_event_type_t, _ index: UInt32) {
        guard let ctx, ctx == context else { return }
        let facilityBits = t.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
        let typeBits = t.rawValue & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue
        guard let facility = Facility(subscriptionBits: facilityBits) else { return }
        if typeBits == PA_SUBSCRIPTION_EVENT_REMOVE.rawValue {
            if let old = model.remove(facility, index), phase == .ready { publish(.removed(old)) }
            return
        }
        if let subscriptionStamp, facility == .sinkInput || facility == .sourceOutput {
            subscriptionStamp(StreamReference(facility == .sinkInput ? .output : .input, index))
        }
        let update = Unmanaged.passUnretained(updateReceiver).toOpaque()
        let streamUpdate = Unmanaged.passUnretained(streamUpdateReceiver).toOpaque()
        let op: OpaquePointer? =
            switch facility {
            case .server: nil  // (asked below: a stale connection's is a fresh look's)
            case .module: pa_context_get_module_info(ctx, index, moduleInfoCallback, update)
            case .client: pa_context_get_client_info(ctx, index, clientInfoCallback, update)
            case .card: pa_context_get_card_info_by_index(ctx, index, cardInfoCallback, update)
            case .sink: pa_context_get_sink_info_by_index(ctx, index, sinkInfoCallback, update)
            case .source: pa_context_get_source_info_by_index(ctx, index, sourceInfoCallback, update)
            case .sinkInput: pa_context_get_sink_input_info(ctx, index, sinkInputInfoCallback, streamUpdate)
            case .sourceOutput: pa_context_get_source_output_info(ctx, index, sourceOutputInfoCallback, streamUpdate)
            case .sampleCache: nil
            }
        if let op {
            pa_operation_unref(op)
            if facility == .sinkInput || facility == .sourceOutput { clientNews.streamInfoAsked() }
        }
        if facility == .server { askServerInfo() }
        // pipewire-pulse announces a default-device change when it is asked for (the configured default)
        // and may not announce it again when WirePlumber makes it the default a moment later: the
        // server info is asked again, shortly after and a few times more (under load, WirePlumber took
        // more than the first 150 ms). (A change this connection missed altogether, `defaultAsked`, is
        // found only by a fresh look.)
        if facility == .server, model.server?.isPipeWire == true {
            // (A later look already waiting starts over: this change's first look comes 150 ms after it.)
            if let timer = serverRecheckTimer, serverRecheckStep > 0 {
                api.pointee.time_free(timer)
                serverRecheckTimer = nil
            }
            serverRecheckStep = 0
            if serverRecheckTimer == nil { serverRecheckTimer = addTimer(after: Self.serverRecheckDelays[0], serverRecheckCallback) }
        }
        if facility == .sampleCache, phase == .ready {
            let kind = typeBits == PA_SUBSCRIPTION_EVENT_NEW.rawValue ? "new" : "change"
            publish(.other(facility: .sampleCache, index: index, kind: kind))
        }
    }

    /// A default device was asked for (and the server answered). Asked again while this connection
    /// still shows another, the server info is looked at afresh: a long-lived connection to
    /// pipewire-pulse misses a change of the default that comes while another client binds the
    /// `default` metadata (PipeWire's daemon passes it only to the binding clients until WirePlumber has
    /// answered the bind), and then says the old sink until the next change (30 s and more, seen about
    /// once in 150 plugs under load), while a new connection says the new one (README, "Differences
    /// between the servers").
    func defaultAsked(_ name: String, _ direction: Direction) {
        withLock {
            guard phase == .ready else { return }
            let shown = model.server?.defaultDeviceName(direction)
            let again = lastAskedDefault[direction] == name && shown != name
            lastAskedDefault[direction] = name
            if again, model.server?.isPipeWire == true { lookAfresh() }
        }
    }

    /// Reads the server info through a short connection of its own (pipewire-pulse only). If it
    /// disagrees with this connection about the default devices, it is taken, and from then on the
    /// server info is read this way (`serverInfoThroughFreshLooks`).
    func lookAfresh() {
        withLock {
            guard phase == .ready, model.server?.isPipeWire == true else { return }
            guard freshLook == nil else { freshLookAgain = true; return }
            guard let ctx = newContext(clientProperties: false) else { return }
            freshLook = ctx
            pa_context_set_state_callback(ctx, freshLookStateCallback, userdata)
            if pa_context_connect(ctx, configuration.server, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
                // (A failure can come through the state callback inside pa_context_connect, which has
                // then ended this look already, and maybe started the one asked for meanwhile.)
                guard freshLook == ctx else { return }
                return endFreshLook()
            }
            freshLookTimer = addTimer(after: configuration.connectTimeout, freshLookTimeoutCallback)
        }
    }

    fileprivate func freshLookStateChanged(_ ctx: OpaquePointer?) {
        guard let ctx, ctx == freshLook else { return }
        switch pa_context_get_state(ctx) {
        case PA_CONTEXT_READY:
            if let op = pa_context_get_server_info(ctx, freshLookAnswerCallback, userdata) { pa_operation_unref(op) } else { endFreshLook() }
        case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
            endFreshLook()
        default:
            break
        }
    }

    fileprivate func freshLookAnswered(_ ctx: OpaquePointer?, _ info: ServerInfo?) {
        guard let ctx, ctx == freshLook else { return }
        endFreshLook()
        guard phase == .ready, let info else { return lookFailed() }
        if serverInfoThroughFreshLooks { return store(.server(info)) }
        guard let own = model.server, !Self.sameDefaults(own, info) else { return }
        // (This connection's change event may only be a moment behind: asked again first.)
        freshAnswerToConfirm = info
        if confirmTimer == nil { confirmTimer = addTimer(after: Self.freshLookConfirmAfter, confirmCallback) }
    }

    fileprivate func confirmTimerFired() {
        confirmTimer = nil
        guard phase == .ready, let ctx = context, freshAnswerToConfirm != nil else { return }
        if let op = pa_context_get_server_info(ctx, confirmAnswerCallback, userdata) { pa_operation_unref(op) }
    }

    /// This connection's own answer, asked after a fresh look disagreed with it.
    fileprivate func confirmAnswered(_ ctx: OpaquePointer?, _ own: ServerInfo?) {
        guard let ctx, ctx == context, phase == .ready, let fresh = freshAnswerToConfirm else { return }
        freshAnswerToConfirm = nil
        guard let own else { return }
        if Self.sameDefaults(own, fresh) { return store(.server(own)) }
        serverInfoThroughFreshLooks = true
        store(.server(fresh))
        if freshLookPeriodTimer == nil { freshLookPeriodTimer = addTimer(after: Self.freshLookPeriod, freshLookPeriodCallback) }
    }

    fileprivate func freshLookPeriodFired() {
        freshLookPeriodTimer = nil
        guard phase == .ready, serverInfoThroughFreshLooks else { return }
        lookAfresh()
        freshLookPeriodTimer = addTimer(after: Self.freshLookPeriod, freshLookPeriodCallback)
    }

    fileprivate func freshLookTimedOut() {
        freshLookTimer = nil
        endFreshLook()
        lookFailed()
    }

    /// A fresh look that failed: a stale connection's own answer is better than none.
    private func lookFailed() {
        assertLocked()
        guard phase == .ready, serverInfoThroughFreshLooks, let ctx = context else { return }
        if let op = pa_context_get_server_info(ctx, staleAnswerCallback, userdata) { pa_operation_unref(op) }
    }

    /// A stale connection's own answer, taken because a fresh look failed.
    fileprivate func staleAnswered(_ info: ServerInfo?) {
        guard phase == .ready, let info else { return }
        store(.server(info))
    }

    static func sameDefaults(_ a: ServerInfo, _ b: ServerInfo) -> Bool {
        a.defaultSinkName == b.defaultSinkName && a.defaultSourceName == b.defaultSourceName
    }

    /// Ends the look under way, if any; starts the one asked for meanwhile.
    private func endFreshLook() {
        assertLocked()
        if let timer = freshLookTimer { api.pointee.time_free(timer) }
        freshLookTimer = nil
        guard let ctx = freshLook else { return }
        freshLook = nil
        pa_context_set_state_callback(ctx, nil, nil)
        pa_context_disconnect(ctx)
        pa_context_unref(ctx)
        if freshLookAgain, phase == .ready {
            freshLookAgain = false
            lookAfresh()
        }
    }

    /// Asks for the server info again. pipewire-pulse can announce a default-device change before
    /// the effective default follows (WirePlumber sets it a moment later) and then not again.
    /// `afresh`: through a fresh look as well (see `lookAfresh`).
    func refreshServerInfo(afresh: Bool = false) {
        withLock {
            guard phase == .ready else { return }
            askServerInfo()
            if afresh && !serverInfoThroughFreshLooks { lookAfresh() }
        }
    }

    /// Asks for the server info: this connection's own, or a fresh look's once this connection's
    /// defaults are known stale. Its answer comes as an update.
    private func askServerInfo() {
        assertLocked()
        if serverInfoThroughFreshLooks { return lookAfresh() }
        guard let ctx = context else { return }
        let update = Unmanaged.passUnretained(updateReceiver).toOpaque()
        if let op = pa_context_get_server_info(ctx, serverInfoCallback, update) { pa_operation_unref(op) }
    }

    var snapshot: Snapshot { withLock { model } }
    var isReady: Bool { withLock { phase == .ready } }
    var connections: Int { withLock { connectionCount } }

    // MARK: events

    func events() -> AsyncStream<PulseEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: PulseEvent.self, bufferingPolicy: .unbounded)
        let subscriber = Subscriber(each: { continuation.yield($0) }, finish: { continuation.finish() })
        // No lock here: onTermination runs inside the cancelled task's own status lock, and a
        // callback holding the mainloop lock may be resuming that very task (a lock-order deadlock,
        // seen in the benchmark). It only raises a flag; `publish` drops the subscriber.
        continuation.onTermination = { [subscriber] _ in subscriber.ended.store(true, ordering: .relaxed) }
        withLock {
            guard phase != .closed else { continuation.finish(); return }
            subscribers.append(subscriber)
            if phase == .ready { continuation.yield(.connected(model)) }
        }
        return stream
    }

    /// Tracing: told of each stream's subscription event as it comes, before its info is asked.
    func stampSubscriptions(_ stamp: @escaping @Sendable (StreamReference) -> Void) {
        withLock { subscriptionStamp = stamp }
    }

    /// Every event from now on, handed to `deliver` on libpulse's thread as it happens (no task in
    /// between): for a consumer that queues them itself. Starts with `.connected` if connected.
    func forwardEvents(_ deliver: @escaping @Sendable (PulseEvent) -> Void) {
        forward(Subscriber(each: deliver, finish: {}))
    }

    /// The same, in groups: the events that go together come in one call, in order (a client's news
    /// held for a stream's info, then that info: `ClientNewsHold`), for a consumer that takes them as
    /// one batch.
    func forwardEventGroups(_ deliver: @escaping @Sendable ([PulseEvent]) -> Void) {
        forward(Subscriber(deliver: deliver, finish: {}))
    }

    private func forward(_ subscriber: Subscriber) {
        withLock {
            guard phase != .closed else { return }
            subscribers.append(subscriber)
            if phase == .ready { subscriber.deliver([.connected(model)]) }
        }
    }

    private func publish(_ event: PulseEvent) {
        assertLocked()
        deliver(clientNews.pass(event))
    }

    /// Events that go together (a client's news held for a stream's info, and that info), in order.
    private func deliver(_ events: [PulseEvent]) {
        guard !events.isEmpty else { return }
        subscribers.removeAll { $0.ended.load(ordering: .relaxed) }
        for subscriber in subscribers { subscriber.deliver(events) }
    }

    /// A stream's info asked at its subscription event is answered (or failed: the stream is gone).
    fileprivate func streamInfoEnded() {
        assertLocked()
        deliver(clientNews.streamInfoEnded())
    }

    // MARK: operations

    enum OperationResult {
        case done
        case index(UInt32)
        case restoreEntries([StreamRestoreEntry])
    }

    /// Runs one libpulse operation and waits for its callback. `start` is called under the lock with
    /// the context and the userdata to pass to one of the operation callbacks below.
    func perform(
        _ description: String,
        _ start: (OpaquePointer, UnsafeMutableRawPointer) throws -> OpaquePointer?
    ) async throws -> OperationResult {
        try await answer(to: send(description, start))
    }

    /// Runs `body` under the lock with the context (nil while not connected), for work on libpulse
    /// objects of our own such as streams.
    func withContext<R>(_ body: (OpaquePointer?) throws -> R) rethrows -> R {
        try withLock { try body(phase == .ready ? context : nil) }
    }

    /// Looks something up in the model under the lock (for commands that need, say, a channel count).
    func read<R>(_ body: (Snapshot) -> R) -> R { withLock { body(model) } }

    /// Sends one operation now, under the lock, and returns its number to wait for the answer later
    /// (`answer(to:)`). The server answers one client's requests in the order they were sent, so a read
    /// sent before a change sees the state before it.
    /// With `whenDone`, nobody waits: it is called with the answer (on libpulse's thread, under the
    /// lock: it must not block).
    @discardableResult
    func send(
        _ description: String,
        whenDone: (@Sendable (Result<OperationResult, PulseError>) -> Void)? = nil,
        _ start: (OpaquePointer, UnsafeMutableRawPointer) throws -> OpaquePointer?
    ) -> UInt64 {
        withLock {
            let operation = PendingOperation(id: nextOperationID, description: description, connection: self)
            nextOperationID += 1
            operation.whenDone = whenDone
            pending[operation.id] = operation
            guard phase == .ready, let ctx = context else {
                finish(operation, .failure(.notConnected))
                return operation.id
            }
            do {
                guard let op = try start(ctx, Unmanaged.passUnretained(operation).toOpaque()) else {
                    finish(operation, .failure(.failed(operation: description, reason: errorText(ctx))))
                    return operation.id
                }
                pa_operation_unref(op)
                operation.sentAt = pa_rtclock_now()
                armStallCheck()
            } catch {
                finish(operation, .failure(error as? PulseError ?? .badArgument("\(error)")))
            }
            return operation.id
        }
    }

    /// Waits for the answer to an operation sent with `send` (once per operation).
    func answer(to id: UInt64) async throws -> OperationResult {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<OperationResult, any Error>) in
            withLock {
                if let result = answered.removeValue(forKey: id) {
                    continuation.resume(with: result.mapError { $0 as any Error })
                } else if let operation = pending[id] {
                    operation.continuation = continuation
                } else {
                    continuation.resume(throwing: PulseError.badArgument("no operation #\(id) is under way"))
                }
            }
        }
    }

    fileprivate func finish(_ operation: PendingOperation, _ result: Result<OperationResult, PulseError>) {
        assertLocked()
        guard pending.removeValue(forKey: operation.id) != nil else { return }
        if let whenDone = operation.whenDone {
            operation.whenDone = nil
            return whenDone(result)
        }
        guard let continuation = operation.continuation else {
            answered[operation.id] = result  // sent with `send`: kept until `answer(to:)` asks
            return
        }
        operation.continuation = nil
        continuation.resume(with: result.mapError { $0 as any Error })
    }

    private func failPending(_ error: PulseError) {
        assertLocked()
        let operations = pending.values
        pending = [:]
        for operation in operations {
            let specific: PulseError =
                if case .connectionLost(_, let reason) = error {
                    .connectionLost(operation: operation.description, reason: reason)
                } else { error }
            if let whenDone = operation.whenDone {
                operation.whenDone = nil
                whenDone(.failure(specific))
            } else if let continuation = operation.continuation {
                continuation.resume(throwing: specific)
            } else {
                answered[operation.id] = .failure(specific)
            }
            operation.continuation = nil
        }
    }

    /// Why an operation the server answered failed: a timeout (the server may still carry it out) is
    /// told apart from a refusal.
    private func failure(of operation: PendingOperation, _ ctx: OpaquePointer?) -> PulseError {
        if let ctx, pa_context_errno(ctx) == Int32(PA_ERR_TIMEOUT.rawValue) {
            // (Not dropped here, inside the context's own callback: at the stall check, at once.)
            timedOutSeen = true
            if let timer = stallTimer { api.pointee.time_free(timer) }
            stallTimer = addTimer(after: .zero, stallCheckCallback)
            return .timedOut(operation: operation.description)
        }
        return .failed(operation: operation.description, reason: errorText(ctx))
    }

    fileprivate func operationSucceeded(_ operation: PendingOperation, _ ok: Bool, _ ctx: OpaquePointer?) {
        finish(operation, ok ? .success(.done) : .failure(failure(of: operation, ctx)))
    }

    fileprivate func operationIndex(_ operation: PendingOperation, _ index: UInt32, _ ctx: OpaquePointer?) {
        finish(operation, index == CLibPulse_INVALID_INDEX ? .failure(failure(of: operation, ctx)) : .success(.index(index)))
    }

    fileprivate func restoreEntry(_ operation: PendingOperation, _ info: UnsafePointer<pa_ext_stream_restore_info>?, _ eol: Int32, _ ctx: OpaquePointer?) {
        if let info { operation.restoreEntries.append(StreamRestoreEntry(info.pointee)) }
        if eol > 0 { finish(operation, .success(.restoreEntries(operation.restoreEntries))) }
        if eol < 0 { finish(operation, .failure(failure(of: operation, ctx))) }
    }
}

/// One consumer of `events()`. `ended` is set (without any lock) when its stream terminates.
final class Subscriber: Sendable {
    /// Hands events on, in order, those that go together at once (called on libpulse's thread, under
    /// the lock: it must not block).
    let deliver: @Sendable ([PulseEvent]) -> Void
    /// The connection is closed: no more events.
    let finish: @Sendable () -> Void
    let ended = Atomic<Bool>(false)
    init(deliver: @escaping @Sendable ([PulseEvent]) -> Void, finish: @escaping @Sendable () -> Void) {
        self.deliver = deliver; self.finish = finish
    }

    /// One event at a time.
    convenience init(each: @escaping @Sendable (PulseEvent) -> Void, finish: @escaping @Sendable () -> Void) {
        self.init(deliver: { events in for event in events { each(event) } }, finish: finish)
    }
}

/// One libpulse operation under way. Lives in `Connection.pending` until its callback (or the loss of
/// the connection) finishes it, so no continuation is ever left waiting.
final class PendingOperation {
    let id: UInt64
    let description: String
    unowned let connection: Connection
    var continuation: CheckedContinuation<Connection.OperationResult, any Error>?
    /// For operations sent with `send(_:whenDone:_:)`: called with the answer instead of keeping it.
    var whenDone: (@Sendable (Result<Connection.OperationResult, PulseError>) -> Void)?
    var restoreEntries: [StreamRestoreEntry] = []
    /// When it went out on the socket (libpulse's monotonic clock, µs); nil if it never did.
    var sentAt: pa_usec_t?

    init(id: UInt64, description: String, connection: Connection) {
        self.id = id; self.description = description; self.connection = connection
    }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> PendingOperation {
        Unmanaged<PendingOperation>.fromOpaque(userdata!).takeUnretainedValue()
    }
}

/// userdata of info callbacks: which connection, and whether the reply belongs to the initial lists.
final class Receiver {
    unowned let connection: Connection
    let isList: Bool
    /// A stream's info asked at its subscription event: its end is counted (`streamInfoEnded`).
    let isStream: Bool
    init(connection: Connection, isList: Bool, isStream: Bool = false) {
        self.connection = connection
        self.isList = isList
        self.isStream = isStream
    }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> Receiver {
        Unmanaged<Receiver>.fromOpaque(userdata!).takeUnretainedValue()
    }

    func deliver(_ entity: Entity?, eol: Int32) {
        connection.received(entity, endOfList: eol != 0, fromList: isList)
        if isStream, eol != 0 { connection.streamInfoEnded() }
    }
}

extension Facility {
    init?(subscriptionBits bits: UInt32) {
        switch bits {
        case PA_SUBSCRIPTION_EVENT_SINK.rawValue: self = .sink
        case PA_SUBSCRIPTION_EVENT_SOURCE.rawValue: self = .source
        case PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue: self = .sinkInput
        case PA_SUBSCRIPTION_EVENT_SOURCE_OUTPUT.rawValue: self = .sourceOutput
        case PA_SUBSCRIPTION_EVENT_MODULE.rawValue: self = .module
        case PA_SUBSCRIPTION_EVENT_CLIENT.rawValue: self = .client
        case PA_SUBSCRIPTION_EVENT_SAMPLE_CACHE.rawValue: self = .sampleCache
        case PA_SUBSCRIPTION_EVENT_SERVER.rawValue: self = .server
        case PA_SUBSCRIPTION_EVENT_CARD.rawValue: self = .card
        default: return nil
        }
    }
}

// MARK: C callbacks. They capture nothing; userdata says which Connection or PendingOperation.

private let contextStateCallback: pa_context_notify_cb_t = { ctx, userdata in
    Connection.from(userdata).contextStateChanged(ctx)
}
private let subscribeCallback: pa_context_subscribe_cb_t = { ctx, t, index, userdata in
    Connection.from(userdata).subscriptionEvent(ctx, t, index)
}
private let reconnectCallback: pa_time_event_cb_t = { api, event, _, userdata in
    api?.pointee.time_free(event)
    Connection.from(userdata).reconnectTimerFired()
}
private let serverRecheckCallback: pa_time_event_cb_t = { api, event, _, userdata in
    api?.pointee.time_free(event)
    Connection.from(userdata).serverRecheckFired()
}
private let stallCheckCallback: pa_time_event_cb_t = { api, event, _, userdata in
    api?.pointee.time_free(event)
    Connection.from(userdata).stallCheckFired()
}
private let connectTimeoutCallback: pa_time_event_cb_t = { api, event, _, userdata in
    api?.pointee.time_free(event)
    Connection.from(userdata).connectTimeoutFired()
}
private let freshLookStateCallback: pa_context_notify_cb_t = { ctx, userdata in
    Connection.from(userdata).freshLookStateChanged(ctx)
}
private let freshLookAnswerCallback: pa_server_info_cb_t = { ctx, info, userdata in
    Connection.from(userdata).freshLookAnswered(ctx, info.map { ServerInfo($0.pointee) })
}
private let freshLookTimeoutCallback: pa_time_event_cb_t = { api, event, _, userdata in
    api?.pointee.time_free(event)
    Connection.from(userdata).freshLookTimedOut()
}
private let confirmCallback: pa_time_event_cb_t = { api, event, _, userdata in
    api?.pointee.time_free(event)
    Connection.from(userdata).confirmTimerFired()
}
private let confirmAnswerCallback: pa_server_info_cb_t = { ctx, info, userdata in
    Connection.from(userdata).confirmAnswered(ctx, info.map { ServerInfo($0.pointee) })
}
private let freshLookPeriodCallback: pa_time_event_cb_t = { api, event, _, userdata in
    api?.pointee.time_free(event)
    Connection.from(userdata).freshLookPeriodFired()
}
private let staleAnswerCallback: pa_server_info_cb_t = { _, info, userdata in
    Connection.from(userdata).staleAnswered(info.map { ServerInfo($0.pointee) })
}
private let serverInfoCallback: pa_server_info_cb_t = { _, info, userdata in
    Receiver.from(userdata).deliver(info.map { .server(ServerInfo($0.pointee)) }, eol: 1)
}
private let moduleInfoCallback: pa_module_info_cb_t = { _, info, eol, userdata in
    Receiver.from(userdata).deliver(info.map { .module(Module($0.pointee)) }, eol: eol)
}
private let clientInfoCallback: pa_client_info_cb_t = { _, info, eol, userdata in
    Receiver.from(userdata).deliver(info.map { .client(Client($0.pointee)) }, eol: eol)
}
private let cardInfoCallback: pa_card_info_cb_t = { _, info, eol, userdata in
    Receiver.from(userdata).deliver(info.map { .card(Card($0.pointee)) }, eol: eol)
}
private let sinkInfoCallback: pa_sink_info_cb_t = { _, info, eol, userdata in
    Receiver.from(userdata).deliver(info.map { .sink(Device($0.pointee)) }, eol: eol)
}
private let sourceInfoCallback: pa_source_info_cb_t = { _, info, eol, userdata in
    Receiver.from(userdata).deliver(info.map { .source(Device($0.pointee)) }, eol: eol)
}
private let sinkInputInfoCallback: pa_sink_input_info_cb_t = { _, info, eol, userdata in
    Receiver.from(userdata).deliver(info.map { .sinkInput(AudioStream($0.pointee)) }, eol: eol)
}
private let sourceOutputInfoCallback: pa_source_output_info_cb_t = { _, info, eol, userdata in
    Receiver.from(userdata).deliver(info.map { .sourceOutput(AudioStream($0.pointee)) }, eol: eol)
}

let operationSuccessCallback: pa_context_success_cb_t = { ctx, success, userdata in
    let operation = PendingOperation.from(userdata)
    operation.connection.operationSucceeded(operation, success != 0, ctx)
}
let operationIndexCallback: pa_context_index_cb_t = { ctx, index, userdata in
    let operation = PendingOperation.from(userdata)
    operation.connection.operationIndex(operation, index, ctx)
}
let restoreReadCallback: pa_ext_stream_restore_read_cb_t = { ctx, info, eol, userdata in
    let operation = PendingOperation.from(userdata)
    operation.connection.restoreEntry(operation, info, eol, ctx)
}

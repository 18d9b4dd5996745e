import CSystemd
import Glibc
import Synchronization

/// What went wrong on the bus.
public enum DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No bus daemon at the address.
    case noBus(address: String, reason: String)
    /// The peer answered with a D-Bus error (its name and message).
    case remote(name: String, message: String)
    /// The connection to the bus is gone (the daemon died, or `close()` was called).
    case disconnected
    /// A message could not be built or read.
    case badMessage(String)

    public var description: String {
        switch self {
        case .noBus(let address, let reason): "no D-Bus daemon at \(address): \(reason)"
        case .remote(let name, let message): "\(name): \(message)"
        case .disconnected: "the D-Bus connection is gone"
        case .badMessage(let what): "a bad D-Bus message: \(what)"
        }
    }
}

/// A signal as received.
public struct DBusSignal: Sendable {
    /// The sender's unique name (":1.42").
    public var sender: String
    public var path: String
    public var interface: String
    public var member: String
    public var body: [DBusValue]
}

/// A method call to an object we export.
public struct DBusMethodCall: Sendable {
    /// The caller's unique name (":1.42"): ask the daemon for its process with GetConnectionUnixProcessID.
    public var sender: String
    public var path: String
    public var interface: String
    public var member: String
    public var arguments: [DBusValue]
}

/// What an exported object answers.
public enum DBusReply: Sendable {
    case values([DBusValue])
    /// A D-Bus error: its name ("org.example.Error.Refused") and a message for people.
    case error(name: String, message: String)
}

/// One connection to a bus daemon, with a thread of its own: the only thread that touches the sd-bus
/// objects (they are not thread-safe; not even their reference counts are atomic). Everything else
/// hands that thread jobs and waits for their answers.
///
/// `@unchecked Sendable` rule: `bus` and every `var` under "loop thread only" are touched only on the
/// connection's thread (inside `run()` and the jobs and callbacks it runs); other threads go through
/// `shared`, behind its mutex, and wake the thread with `wakeFD`.
public final class DBusConnection: @unchecked Sendable {
    public enum Kind: Sendable { case session, system }

    /// Where the connection goes, in words.
    public let address: String
    private let bus: OpaquePointer
    private let wakeFD: Int32
    private let shared = Mutex(Shared())
    private struct Shared {
        var jobs: [@Sendable () -> Void] = []
        var closed = false
        var lost = false
        var lostWatchers: [AsyncStream<Void>.Continuation] = []
        var nextMatch: UInt64 = 1
    }

    // MARK: loop thread only
    private var calls: [UInt64: CheckedContinuation<[DBusValue], any Error>] = [:]
    private var matches: [UInt64: SignalMatch] = [:]
    private var exports: [String: ExportedObject] = [:]
    private var stopping = false

    /// Connects to the session bus (`DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`) or the
    /// system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else /run/dbus/system_bus_socket), or to `address`.
    public static func connect(_ kind: Kind, address: String? = nil, name: String = "audiosession") throws -> DBusConnection {
        func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        let resolved: String =
            if let address { address }
            else if kind == .session {
                variable("DBUS_SESSION_BUS_ADDRESS") ?? "unix:path=\(variable("XDG_RUNTIME_DIR") ?? "/run/user/\(getuid())")/bus"
            } else {
                variable("DBUS_SYSTEM_BUS_ADDRESS") ?? "unix:path=/run/dbus/system_bus_socket"
            }
        var bus: OpaquePointer?
        guard sd_bus_new(&bus) >= 0, let bus else { throw DBusError.noBus(address: resolved, reason: "out of memory") }
        var r = resolved.withCString { sd_bus_set_address(bus, $0) }
        if r >= 0 { r = sd_bus_set_bus_client(bus, 1) }
        if r >= 0 { r = name.withCString { sd_bus_set_description(bus, $0) } }
        if r >= 0 { r = sd_bus_start(bus) }
        if r < 0 {
            sd_bus_flush_close_unref(bus)
            throw DBusError.noBus(address: resolved, reason: String(cString: strerror(-r)))
        }
        let wake = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wake >= 0 else {
            sd_bus_flush_close_unref(bus)
            throw DBusError.noBus(address: resolved, reason: "no eventfd: \(String(cString: strerror(errno)))")
        }
        let connection = DBusConnection(bus: bus, wakeFD: wake, address: resolved)
        connection.startThread()
        return connection
    }

    private init(bus: OpaquePointer, wakeFD: Int32, address: String) {
        self.bus = bus
        self.wakeFD = wakeFD
        self.address = address
    }

    deinit { Glibc.close(wakeFD) }

    private func startThread() {
        var thread = pthread_t()
        // The thread keeps the connection alive until its loop ends.
        let retained = Unmanaged.passRetained(self).toOpaque()
        let r = pthread_create(&thread, nil, { argument in
            let connection = Unmanaged<DBusConnection>.fromOpaque(argument!).takeRetainedValue()
            connection.run()
            return nil
        }, retained)
        precondition(r == 0, "pthread_create failed: \(r)")
        pthread_detach(thread)
    }

    /// Runs `job` on the connection's thread.
    private func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        let accepted = shared.withLock { s in
            guard !s.closed else { return false }
            s.jobs.append(job)
            return true
        }
        if accepted {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
        return accepted
    }

    /// Ends the connection: pending calls fail with `.disconnected`, signal streams finish.
    public func close() {
        _ = enqueue { [self] in stopping = true }
    }

    /// Yields once when the connection is lost (the daemon went away), or at once if it already is.
    /// Not yielded for `close()`.
    public func lost() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self)
        let (lost, closed) = shared.withLock { s in
            if !s.lost && !s.closed { s.lostWatchers.append(continuation) }
            return (s.lost, s.closed)
        }
        if lost { continuation.yield() }
        if lost || closed { continuation.finish() }
        return stream
    }

    // MARK: calls

    /// Calls a method and returns the reply's values; a D-Bus error is thrown as `.remote`.
    public func call(
        _ destination: String, _ path: String, _ interface: String, _ member: String,
        _ arguments: [DBusValue] = [], timeout: Duration = .seconds(5)
    ) async throws -> [DBusValue] {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[DBusValue], any Error>) in
            let accepted = enqueue { [self] in
                startCall(destination, path, interface, member, arguments, timeout, continuation)
            }
            if !accepted { continuation.resume(throwing: DBusError.disconnected) }
        }
    }

    /// Calls a method of the bus daemon itself (org.freedesktop.DBus: ListNames, GetNameOwner,
    /// GetConnectionUnixProcessID, RequestName ...).
    public func callDaemon(_ member: String, _ arguments: [DBusValue] = [], timeout: Duration = .seconds(5)) async throws -> [DBusValue] {
        try await call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", member, arguments, timeout: timeout)
    }

    private func startCall(
        _ destination: String, _ path: String, _ interface: String, _ member: String,
        _ arguments: [DBusValue], _ timeout: Duration, _ continuation: CheckedContinuation<[DBusValue], any Error>
    ) {
        var message: OpaquePointer?
        let r = destination.withCString { d in path.withCString { p in interface.withCString { i in member.withCString { m in
            sd_bus_message_new_method_call(bus, &message, d, p, i, m)
        } } } }
        guard r >= 0, let message else {
            return continuation.resume(throwing: r == -ENOTCONN || r == -ECONNRESET
                ? DBusError.disconnected : DBusError.badMessage("\(interface).\(member) on \(destination): \(String(cString: strerror(-r)))"))
        }
        defer { sd_bus_message_unref(message) }
        do {
            try Wire.append(arguments, to: message)
        } catch {
            return continuation.resume(throwing: error)
        }
        let (seconds, attoseconds) = timeout.components
        let usec = UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000_000)
        let sent = sd_bus_call_async(bus, nil, message, replyCallback, Unmanaged.passUnretained(self).toOpaque(), usec)
        guard sent >= 0 else {
            return continuation.resume(throwing: sent == -ENOTCONN || sent == -ECONNRESET
                ? DBusError.disconnected : DBusError.badMessage("send \(interface).\(member): \(String(cString: strerror(-sent)))"))
        }
        var cookie: UInt64 = 0
        sd_bus_message_get_cookie(message, &cookie)
        calls[cookie] = continuation
    }

    fileprivate func replied(_ m: OpaquePointer) {
        var cookie: UInt64 = 0
        guard sd_bus_message_get_reply_cookie(m, &cookie) >= 0, let continuation = calls.removeValue(forKey: cookie) else { return }
        if sd_bus_message_is_method_error(m, nil) > 0, let error = sd_bus_message_get_error(m) {
            let name = error.pointee.name.map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed"
            let text = error.pointee.message.map { String(cString: $0) } ?? ""
            // sd-bus answers the calls under way itself when the connection closes.
            if name == "org.freedesktop.DBus.Error.NoReply", sd_bus_is_open(bus) <= 0 {
                return continuation.resume(throwing: DBusError.disconnected)
            }
            return continuation.resume(throwing: DBusError.remote(name: name, message: text))
        }
        continuation.resume(with: Result { try Wire.readAll(m) })
    }

    // MARK: signals

    /// The signals that match any of `rules` (D-Bus match rules: "type='signal',interface='...',member='...'"),
    /// in the order the bus delivered them, from now until the stream is dropped or the connection ends.
    /// `fromOthersOnly`: this connection's own signals, which the bus hands back to its matches too, are
    /// dropped on the bus thread before their body is read.
    public func signals(matching rules: [String], fromOthersOnly: Bool = false) -> AsyncStream<DBusSignal> {
        let (stream, continuation) = AsyncStream.makeStream(of: DBusSignal.self)
        let match = SignalMatch(continuation, fromOthersOnly: fromOthersOnly)
        let id = shared.withLock { s in
            defer { s.nextMatch += 1 }
            return s.nextMatch
        }
        // Set before the match is made: a stream dropped at once still gives its match back.
        continuation.onTermination = { [weak self] _ in
            match.cancelled.store(true, ordering: .relaxed)
            _ = self?.enqueue { [self] in
                for slot in self?.matches.removeValue(forKey: id)?.slots ?? [] { sd_bus_slot_unref(slot) }
            }
        }
        let accepted = enqueue { [self] in
            guard !match.cancelled.load(ordering: .relaxed) else { return }
            for rule in rules {
                var slot: OpaquePointer?
                // (A synchronous AddMatch: a round trip to the daemon, on this thread.)
                let r = rule.withCString { sd_bus_add_match(bus, &slot, $0, signalCallback, Unmanaged.passUnretained(match).toOpaque()) }
                guard r >= 0, let slot else { continue }
                match.slots.append(slot)
            }
            matches[id] = match
        }
        if !accepted { continuation.finish() }
        return stream
    }

    public func signals(matching rule: String, fromOthersOnly: Bool = false) -> AsyncStream<DBusSignal> {
        signals(matching: [rule], fromOthersOnly: fromOthersOnly)
    }

    // MARK: exported objects

    /// Exports an object at `path`: every method call to it (any interface) is given to `handle`, off
    /// the bus thread, and its reply sent back. A second export of a path replaces the first.
    public func export(_ path: String, _ handle: @escaping @Sendable (DBusMethodCall) async -> DBusReply) {
        let object = ExportedObject(handle)
        _ = enqueue { [self] in
            if let old = exports.removeValue(forKey: path), let slot = old.slot { sd_bus_slot_unref(slot) }
            var slot: OpaquePointer?
            let r = path.withCString { sd_bus_add_object(bus, &slot, $0, objectCallback, Unmanaged.passUnretained(object).toOpaque()) }
            guard r >= 0 else { return }
            object.slot = slot
            object.connection = self
            exports[path] = object
        }
    }

    /// Exports an object at `path` whose method calls (any interface) go to `queue`'s handler, in the
    /// order the bus delivered them (objects sharing a queue share that order): for a consumer that must
    /// answer one caller's calls in the order they were made.
    public func export(_ path: String, into queue: DBusCallQueue) {
        let object = ExportedObject(queue)
        _ = enqueue { [self] in
            if let old = exports.removeValue(forKey: path), let slot = old.slot { sd_bus_slot_unref(slot) }
            var slot: OpaquePointer?
            let r = path.withCString { sd_bus_add_object(bus, &slot, $0, objectCallback, Unmanaged.passUnretained(object).toOpaque()) }
            guard r >= 0 else { return }
            object.slot = slot
            object.connection = self
            exports[path] = object
        }
    }

    /// Stops exporting the object at `path`.
    public func unexport(_ path: String) {
        _ = enqueue { [self] in
            if let old = exports.removeValue(forKey: path), let slot = old.slot { sd_bus_slot_unref(slot) }
        }
    }

    /// Sends a signal from one of our objects.
    public func emit(_ path: String, _ interface: String, _ member: String, _ values: [DBusValue] = []) {
        _ = enqueue { [self] in
            var message: OpaquePointer?
            let r = path.withCString { p in interface.withCString { i in member.withCString { m in
                sd_bus_message_new_signal(bus, &message, p, i, m)
            } } }
            guard r >= 0, let message else { return }
            defer { sd_bus_message_unref(message) }
            guard (try? Wire.append(values, to: message)) != nil else { return }
            _ = sd_bus_send(bus, message, nil)
        }
    }

    /// How the bus daemon answered a request for a well-known name.
    public enum NameRequest: Sendable, Hashable {
        /// The name is ours (now, or already).
        case owned
        /// Another connection has it; ours waits in the daemon's queue, and the daemon gives us the name
        /// (and says so with `NameAcquired`) when that one lets it go.
        case queued
        /// Another connection has it, and we did not queue.
        case taken
    }

    /// Asks for a well-known name, queueing for it (`queue`) or not. Never lets another connection take
    /// the name from us once we have it (no ALLOW_REPLACEMENT); takes it from an owner that allowed that.
    public func requestName(_ name: String, queue: Bool) async throws -> NameRequest {
        // Flags: 2 replace an owner that allows it, 4 do not queue. Replies: 1 primary owner, 2 in the
        // queue, 3 exists (not queued), 4 already the owner.
        let reply = try await callDaemon("RequestName", [.string(name), .uint32(queue ? 2 : 4)]).first?.integer
        switch reply {
        case 1, 4: return .owned
        case 2: return .queued
        case 3: return .taken
        default: throw DBusError.badMessage("RequestName answered \(reply.map(String.init) ?? "nothing")")
        }
    }

    /// Takes a well-known name; throws if another connection has it.
    public func requestName(_ name: String) async throws {
        // Flags 4: do not queue. Reply 1: we are the primary owner (4: we were already).
        let reply = try await callDaemon("RequestName", [.string(name), .uint32(4)]).first?.integer
        guard reply == 1 || reply == 4 else {
            throw DBusError.remote(name: "org.freedesktop.DBus.Error.AddressInUse", message: "\(name) is taken by another connection")
        }
    }

    /// Answers a call (on the bus thread, once its handler has).
    fileprivate func reply(to kept: UncheckedMessage, with reply: DBusReply) {
        _ = enqueue { [self] in
            let call = kept.pointer
            defer { sd_bus_message_unref(call) }
            guard sd_bus_message_get_expect_reply(call) > 0 else { return }
            var message: OpaquePointer?
            switch reply {
            case .values(let values):
                guard sd_bus_message_new_method_return(call, &message) >= 0, let m = message else { return }
                if (try? Wire.append(values, to: m)) == nil {
                    sd_bus_message_unref(m)
                    message = nil
                    self.fail(call, "org.freedesktop.DBus.Error.Failed", "the reply could not be built", into: &message)
                }
            case .error(let name, let text):
                fail(call, name, text, into: &message)
            }
            guard let message else { return }
            _ = sd_bus_send(bus, message, nil)
            sd_bus_message_unref(message)
        }
    }

    private func fail(_ call: OpaquePointer, _ name: String, _ text: String, into message: inout OpaquePointer?) {
        name.withCString { n in text.withCString { t in
            var error = sd_bus_error(name: n, message: t, _need_free: 0)
            _ = sd_bus_message_new_method_error(call, &message, &error)
        } }
    }

    // MARK: the loop

    private func run() {
        while !stopping {
            let jobs = shared.withLock { s in
                defer { s.jobs = [] }
                return s.jobs
            }
            for job in jobs { job() }
            if stopping { break }
            var r: Int32
            repeat { r = sd_bus_process(bus, nil) } while r > 0
            if r < 0 {
                shared.withLock { s in
                    s.lost = true
                    for watcher in s.lostWatchers { watcher.yield(); watcher.finish() }
                    s.lostWatchers = []
                }
                break
            }
            var fds = [
                pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0),
                pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            ]
            var until: UInt64 = 0
            var milliseconds: Int32 = -1
            if sd_bus_get_timeout(bus, &until) > 0, until != UInt64.max {
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let nowUsec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
                milliseconds = until <= nowUsec ? 0 : Int32(min((until - nowUsec + 999) / 1000, UInt64(Int32.max)))
            }
            _ = poll(&fds, 2, milliseconds)
            if fds[1].revents != 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
        }
        // The end: nothing more is accepted, and everything waiting is told.
        let (leftJobs, watchers) = shared.withLock { s in
            s.closed = true
            defer { s.jobs = []; s.lostWatchers = [] }
            return (s.jobs, s.lostWatchers)
        }
        // Jobs that came too late still run, so that their callers are told below (a call fails, a
        // stream of signals ends).
        for job in leftJobs { job() }
        for watcher in watchers { watcher.finish() }
        for continuation in calls.values { continuation.resume(throwing: DBusError.disconnected) }
        calls = [:]
        for match in matches.values {
            for slot in match.slots { sd_bus_slot_unref(slot) }
            match.slots = []
            match.continuation.finish()
        }
        matches = [:]
        for object in exports.values { if let slot = object.slot { sd_bus_slot_unref(slot) } }
        exports = [:]
        sd_bus_flush_close_unref(bus)
    }
}

private let replyCallback: sd_bus_message_handler_t = { message, userdata, _ in
    guard let message, let userdata else { return 0 }
    Unmanaged<DBusConnection>.fromOpaque(userdata).takeUnretainedValue().replied(message)
    return 1
}

private let signalCallback: sd_bus_message_handler_t = { message, userdata, _ in
    guard let message, let userdata else { return 0 }
    Unmanaged<SignalMatch>.fromOpaque(userdata).takeUnretainedValue().deliver(message)
    return 0  // others may want it too
}

/// One subscription to signals: its stream, and its sd-bus slot.
///
/// `@unchecked Sendable` rule: `slots` is changed and read on the connection's thread only.
private final class SignalMatch: @unchecked Sendable {
    let continuation: AsyncStream<DBusSignal>.Continuation
    var slots: [OpaquePointer] = []
    let cancelled = Atomic<Bool>(false)
    /// Drops the connection's own signals (`signals(matching:fromOthersOnly:)`).
    let fromOthersOnly: Bool
    init(_ continuation: AsyncStream<DBusSignal>.Continuation, fromOthersOnly: Bool) {
        self.continuation = continuation
        self.fromOthersOnly = fromOthersOnly
    }

    func deliver(_ m: OpaquePointer) {
        func text(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
        // (The connection's own, when they are not wanted: left on this thread, before the body is read.)
        var own: UnsafePointer<CChar>?
        if fromOthersOnly, let sender = sd_bus_message_get_sender(m), sd_bus_get_unique_name(sd_bus_message_get_bus(m), &own) >= 0,
           let own, strcmp(sender, own) == 0 { return }
        guard let body = try? Wire.readAll(m) else { return }
        continuation.yield(DBusSignal(
            sender: text(sd_bus_message_get_sender(m)), path: text(sd_bus_message_get_path(m)),
            interface: text(sd_bus_message_get_interface(m)), member: text(sd_bus_message_get_member(m)), body: body))
    }
}

private let objectCallback: sd_bus_message_handler_t = { message, userdata, _ in
    guard let message, let userdata else { return 0 }
    return Unmanaged<ExportedObject>.fromOpaque(userdata).takeUnretainedValue().received(message)
}

/// Method calls to objects exported `into:` it, handed to its handler in the order the bus delivered
/// them, on the connection's own thread as each is read (no hop to another thread: the handler sorts
/// them as it must, and must not block, as nothing else of the connection runs meanwhile).
public final class DBusCallQueue: Sendable {
    /// Takes each call (and this queue, which it may compare with the one it serves).
    private let handler: @Sendable (DBusIncomingCall, DBusCallQueue) -> Void
    private let finished = Mutex(false)
    /// Read on the bus thread as each call is taken (`DBusIncomingCall.received`): the time now, or nil
    /// when nobody is tracing.
    fileprivate let stamp: @Sendable () -> Duration?

    public init(stamp: @escaping @Sendable () -> Duration? = { nil }, handler: @escaping @Sendable (DBusIncomingCall, DBusCallQueue) -> Void) {
        self.stamp = stamp
        self.handler = handler
    }

    /// No more calls: those that come are answered that the object is no longer served.
    public func finish() { finished.withLock { $0 = true } }

    /// Hands a call to the handler (false: finished, nobody takes it).
    fileprivate func take(_ call: DBusIncomingCall) -> Bool {
        guard !finished.withLock({ $0 }) else { return false }
        handler(call, self)
        return true
    }
}

/// A method call taken from a `DBusCallQueue`: answer it once, with `reply`.
public struct DBusIncomingCall: Sendable {
    public let call: DBusMethodCall
    /// When the bus thread took it, by the queue's stamp (nil when not tracing).
    public let received: Duration?
    fileprivate let kept: UncheckedMessage
    fileprivate let connection: DBusConnection

    public func reply(_ reply: DBusReply) { connection.reply(to: kept, with: reply) }
}

/// An object we export: its handler (or the queue its calls go to), and its sd-bus slot.
///
/// `@unchecked Sendable` rule: `slot` and `connection` are set and read on the connection's thread only.
private final class ExportedObject: @unchecked Sendable {
    let handle: (@Sendable (DBusMethodCall) async -> DBusReply)?
    let queue: DBusCallQueue?
    var slot: OpaquePointer?
    weak var connection: DBusConnection?

    init(_ handle: @escaping @Sendable (DBusMethodCall) async -> DBusReply) { self.handle = handle; queue = nil }
    init(_ queue: DBusCallQueue) { self.queue = queue; handle = nil }

    /// On the bus thread: a method call is taken (1) and answered later; anything else is not ours (0).
    func received(_ m: OpaquePointer) -> Int32 {
        var type: UInt8 = 0
        guard sd_bus_message_get_type(m, &type) >= 0, type == UInt8(SD_BUS_MESSAGE_METHOD_CALL),
              let connection else { return 0 }
        func text(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
        let kept = UncheckedMessage(sd_bus_message_ref(m)!)
        // A body we cannot read (a type we do not speak, such as a file descriptor) is the caller's
        // error, answered here: no handler sees it as a call without arguments.
        let arguments: [DBusValue]
        do { arguments = try Wire.readAll(m) } catch {
            connection.reply(to: kept, with: .error(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "the arguments could not be read: \(error)"))
            return 1
        }
        let call = DBusMethodCall(
            sender: text(sd_bus_message_get_sender(m)), path: text(sd_bus_message_get_path(m)),
            interface: text(sd_bus_message_get_interface(m)), member: text(sd_bus_message_get_member(m)),
            arguments: arguments)
        if let queue {
            if !queue.take(DBusIncomingCall(call: call, received: queue.stamp(), kept: kept, connection: connection)) {
                connection.reply(to: kept, with: .error(name: "org.freedesktop.DBus.Error.UnknownObject", message: "no longer served"))
            }
            return 1
        }
        guard let handle else { return 0 }
        Task {
            let reply = await handle(call)
            connection.reply(to: kept, with: reply)
        }
        return 1
    }
}

/// A message pointer carried to another thread and back, never touched there: only the bus thread
/// reads or releases it.
fileprivate struct UncheckedMessage: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

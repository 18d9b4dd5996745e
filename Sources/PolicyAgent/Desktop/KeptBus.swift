import DBus
import Synchronization

/// A bus the agent keeps: connected when it can be, and again after it went away (tried after
/// `retry.lowerBound`, then twice as long each time, up to `retry.upperBound`: AgentSettings.busRetry),
/// like the sound server's connection. `watch` is given each new connection; `absent` is told when
/// there is none (at start, or after a loss). It waits on the agent's one timer (`sleep`).
final class KeptBus: Sendable {
    private let current = Mutex<DBusConnection?>(nil)
    private let stopped = Atomic<Bool>(false)
    private let keeper = Mutex<Task<Void, Never>?>(nil)
    /// Whether the first connection has been tried (made or failed), and who waits for that.
    private let tried = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Nil for `.none`: that bus is not followed.
    static func start(
        _ kind: DBusConnection.Kind, _ choice: AgentConfiguration.BusChoice, retry: ClosedRange<Duration>,
        sleep: @escaping @Sendable (Duration) async -> Void,
        watch: @escaping @Sendable (DBusConnection) -> Void, absent: @escaping @Sendable (String) -> Void
    ) -> KeptBus? {
        let address: String?
        switch choice {
        case .none: return nil
        case .environment: address = nil
        case .address(let given): address = given
        }
        let kept = KeptBus()
        kept.keeper.withLock {
            $0 = Task { await kept.keep(kind, address: address, retry: retry, sleep: sleep, watch, absent) }
        }
        return kept
    }

    private func keep(
        _ kind: DBusConnection.Kind, address: String?, retry: ClosedRange<Duration>, sleep: @Sendable (Duration) async -> Void,
        _ watch: @Sendable (DBusConnection) -> Void, _ absent: @Sendable (String) -> Void
    ) async {
        var delay = retry.lowerBound
        while !stopped.load(ordering: .relaxed) {
            do {
                let bus = try DBusConnection.connect(kind, address: address, name: "audiosessiond")
                current.withLock { $0 = bus }
                if stopped.load(ordering: .relaxed) { bus.close() }
                watch(bus)
                markTried()
                delay = retry.lowerBound
                var lost = false
                for await _ in bus.lost() { lost = true }
                current.withLock { $0 = nil }
                if lost { absent("the \(kind == .session ? "session" : "system") bus went away") }
            } catch {
                absent("\(error)")
                markTried()
            }
            await sleep(delay)
            delay = min(delay * 2, retry.upperBound)
        }
    }

    /// The connection that is up, if any.
    var connection: DBusConnection? { current.withLock { $0 } }

    /// The connection that is up once the first try to connect is over (nil: there was none to be had).
    func firstConnection() async -> DBusConnection? {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let done = tried.withLock { state in
                if !state.done { state.waiters.append(waiter) }
                return state.done
            }
            if done { waiter.resume() }
        }
        return connection
    }

    private func markTried() {
        let waiters = tried.withLock { state in
            defer { state.waiters = [] }
            state.done = true
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func close() {
        markTried()
        stopped.store(true, ordering: .relaxed)
        keeper.withLock { $0?.cancel() }
        current.withLock { $0 }?.close()
    }
}

import Synchronization

/// The agent's inbox: anything (libpulse's thread, signal handlers, the timer, the answers to commands)
/// pushes without blocking; the loop takes everything queued so far at once, as one batch. A burst of
/// server events is then one batch, in which a stream created and gone needs no decision.
final class Inbox<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var waiter: CheckedContinuation<[Element], Never>?
        /// Tracing the event path (`stampArrivals`): the time now, read on the pushing thread.
        var stamp: (@Sendable () -> Duration)?
        /// When the first element of the batch being gathered came, and of the batch last taken.
        var arrived: Duration?
        var taken: Duration?
        /// When the first element of those batches was received before it was pushed (an app's call,
        /// on the bus thread), if it says.
        var received: Duration?
        var takenReceived: Duration?
    }
    private let state = Mutex(State())

    /// `received`: when the item came to the agent before it was pushed (an app's call, taken on the bus
    /// thread), for the trace.
    func push(_ item: Element, received: Duration? = nil) {
        push(contentsOf: [item], received: received)
    }

    /// Items that go together: in one batch, in order (a loop waiting takes them all at once).
    func push(contentsOf items: [Element], received: Duration? = nil) {
        guard !items.isEmpty else { return }
        let waiter: CheckedContinuation<[Element], Never>? = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                state.taken = state.stamp?()
                state.takenReceived = state.stamp == nil ? nil : received
                return waiter
            }
            if state.items.isEmpty, let stamp = state.stamp {
                state.arrived = stamp()
                state.received = received
            }
            state.items.append(contentsOf: items)
            return nil
        }
        waiter?.resume(returning: items)
    }

    /// From now on, each batch's first arrival is stamped with `now` (`lastArrival`): the event path's
    /// trace. Off (the default), a push reads no clock.
    func stampArrivals(with now: @escaping @Sendable () -> Duration) { state.withLock { $0.stamp = now } }

    /// A loop waits in `next` (tests).
    var hasWaiter: Bool { state.withLock { $0.waiter != nil } }

    /// Nothing is waiting to be taken.
    var isEmpty: Bool { state.withLock { $0.items.isEmpty } }

    /// When the first element of the batch `next` returned last was pushed (nil when not stamping).
    var lastArrival: Duration? { state.withLock { $0.taken } }
    /// When that element was received before it was pushed, if it said.
    var lastReceived: Duration? { state.withLock { $0.takenReceived } }

    /// Everything queued, waiting for something if nothing is. On the caller's actor: the push that
    /// resumes it schedules the caller's executor straight away (a hop through the shared pool first
    /// cost a thread wake-up on every event).
    func next(isolation: isolated (any Actor)? = #isolation) async -> [Element] {
        await withCheckedContinuation(isolation: isolation) { continuation in
            let ready: [Element]? = state.withLock { state in
                guard !state.items.isEmpty else {
                    state.waiter = continuation
                    return nil
                }
                defer {
                    state.items = []
                    state.taken = state.arrived
                    state.takenReceived = state.received
                    state.arrived = nil
                    state.received = nil
                }
                return state.items
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

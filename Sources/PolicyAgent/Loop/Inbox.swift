import Synchronization

/// The agent's inbox: anything (libpulse's thread, signal handlers, the timer, the answers to commands)
/// pushes without blocking; the loop takes everything queued so far at once, as one batch. A burst of
/// server events is then one batch, in which a stream created and gone needs no decision.
final class Inbox<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var waiter: CheckedContinuation<[Element], Never>?
    }
    private let state = Mutex(State())

    func push(_ item: Element) {
        let waiter: CheckedContinuation<[Element], Never>? = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.items.append(item)
            return nil
        }
        waiter?.resume(returning: [item])
    }

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
                defer { state.items = [] }
                return state.items
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

@testable import PolicyAgent
import Synchronization
import Testing

/// The agent's one timer, under a clock the test moves.
@Suite("the agent's timer")
struct TimerTests {
    @Test("the agent's timer wakes it again for a deadline it already woke it for", .timeLimit(.minutes(1)))
    func timerFiresAgainForTheSameDeadline() async {
        let clock = ManualClock()
        let (fired, firing) = AsyncStream.makeStream(of: Void.self)
        let timer = AgentTimer(clock: clock) { firing.yield() }
        var wakeUps = fired.makeAsyncIterator()
        timer.schedule(.seconds(1))
        clock.advance(to: .seconds(1))
        _ = await wakeUps.next()
        // The tick it brought did not act on the deadline yet (it came in a batch handled before, say).
        timer.schedule(.seconds(1))
        _ = await wakeUps.next()
        timer.cancel()
    }
}

/// A clock the test moves: sleepers wake when it reaches their instant.
final class ManualClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    private struct Sleeper {
        let id: Int
        let until: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let state = Mutex<(now: Duration, next: Int, sleepers: [Sleeper])>((.zero, 0, []))

    var now: Instant { Instant(offset: state.withLock { $0.now }) }
    var minimumResolution: Duration { .nanoseconds(1) }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = state.withLock { s in s.next += 1; return s.next }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume: Bool = state.withLock { s in
                    guard deadline.offset > s.now, !Task.isCancelled else { return true }
                    s.sleepers.append(Sleeper(id: id, until: deadline.offset, continuation: continuation))
                    return false
                }
                if resume { Task.isCancelled ? continuation.resume(throwing: CancellationError()) : continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { s in
                s.sleepers.firstIndex { $0.id == id }.map { s.sleepers.remove(at: $0) }
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock to `instant` (never back), waking every sleeper due.
    func advance(to instant: Duration) {
        let due = state.withLock { s in
            s.now = max(s.now, instant)
            let now = s.now
            let due = s.sleepers.filter { $0.until <= now }
            s.sleepers.removeAll { $0.until <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}

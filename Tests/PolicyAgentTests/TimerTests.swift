@testable import PolicyAgent
import PulseClient
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

    @Test("on the agent's loop: a deadline moved later fires at the later one, one taken back not at all, the same deadline asked for again after it fired fires again", .timeLimit(.minutes(1)))
    func loopTimer() async {
        let loop = PulseLoop(name: "timer-test")
        let on = OnLoop(loop)
        let (fired, firing) = AsyncStream.makeStream(of: Void.self)
        let timer = LoopTimer(on: loop) { firing.yield() }
        var wakeUps = fired.makeAsyncIterator()
        // Moved later: the first wake-up comes at the later deadline.
        let start = timer.now()
        await on.run { timer.schedule(start + .milliseconds(20)); timer.schedule(start + .milliseconds(200)) }
        _ = await wakeUps.next()
        #expect(timer.now() - start >= .milliseconds(190), "woke at \(timer.now() - start)")
        // Taken back, then another: the first wake-up is the other's.
        let again = timer.now()
        await on.run { timer.schedule(again + .milliseconds(20)); timer.schedule(nil); timer.schedule(again + .milliseconds(200)) }
        _ = await wakeUps.next()
        let second = again + .milliseconds(200)
        #expect(timer.now() - again >= .milliseconds(190), "woke at \(timer.now() - again)")
        // The same deadline again, once it fired: a new wake-up (at once, it has passed).
        await on.run { timer.schedule(second) }
        _ = await wakeUps.next()
        await on.run { timer.cancel() }
    }
}

/// Runs code on a pulse loop's thread (as the agent's batches run).
actor OnLoop {
    let loop: PulseLoop
    init(_ loop: PulseLoop) { self.loop = loop }
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    func run(_ body: @Sendable () -> Void) { body() }
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

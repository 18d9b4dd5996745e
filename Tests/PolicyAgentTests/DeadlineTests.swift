import AudioPolicy
@testable import AgentTower
@testable import PolicyAgent
import PulseClient
import Synchronization
import Testing

/// Time in the shell: every deadline the tower asks for is one a tick acts on, a past one included, and
/// the agent's one timer wakes it for each (found by the suite under load: after a server restart, the
/// session of a call or a reader that had gone held the music for good).
@Suite("deadlines")
struct DeadlineTests {
    @Test("a grace period that ended while a device event came first still ends with the next tick",
          arguments: InMemoryServer.Kind.allCases)
    func graceEndedBehindAnotherEvent(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let call = w.server.play(phone, name: "Call", pid: 2)
        w.deliver()
        #expect(w.muted(song) == true)
        w.server.stop(call)
        w.deliver()
        // The loop's batch brings a device first, after the grace period is over, then the tick.
        w.now += .seconds(1)
        _ = w.server.plug(sink: "hdmi", description: "HDMI")
        w.deliver()
        #expect(w.tower.nextDeadline.map { $0 <= w.now } == true, "the grace period's end, owed a tick")
        w.run([.tick])
        #expect(w.muted(song) == false, "the call ended: the music plays again")
    }

    @Test("a put-back answered after its settling time leaves no deadline behind",
          arguments: [InMemoryServer.Kind.pulseAudio, .wirePlumber04, .wirePlumber05])
    func putBackAnsweredLate(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.advance(.seconds(1))
        #expect(w.volume(song)! < 0.9)
        w.holdsAnswers = true
        w.server.stop(voice)
        w.advance(.seconds(2))
        #expect(w.log.contains { $0.contains(" send write") || $0.contains(" send delete") }, "the memory's put-back was sent")
        // The settling time passes with the put-back unanswered: nothing to do at it, so it is not asked for.
        w.now += w.tower.settings.putBackSettles + .seconds(1)
        w.run([.tick])
        #expect(w.tower.nextDeadline.map { $0 > w.now } ?? true, "a deadline left behind: \(String(describing: w.tower.nextDeadline))")
        // The answer comes: the settling time is over, so the next tick forgets the entry.
        w.releaseAnswers()
        w.advance(.zero)
        #expect(w.tower.nextDeadline == nil)
        #expect(abs(w.volume(song)! - 1) < 0.01)
    }

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

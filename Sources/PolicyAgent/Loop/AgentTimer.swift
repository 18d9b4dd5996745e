import PulseClient
import Synchronization

/// What the agent's loop needs of time: the time now (since the agent started), and one wake-up at the
/// control tower's next deadline. `schedule` and `cancel` are called on the agent's loop's thread (its
/// batches run there); `now` and `sleep` anywhere.
protocol AgentTime: Sendable {
    func now() -> Duration
    /// Calls the timer's action at `deadline` (replacing any wake-up scheduled before); nil: none.
    func schedule(_ deadline: Duration?)
    func cancel()
    /// Waits `duration` on the same clock (the D-Bus connections' retries); returns early if cancelled.
    func sleep(for duration: Duration) async
}

/// The one timer of an agent on any clock (a manual one in tests), a task sleeping for each deadline. The
/// agent on the system's clock uses `LoopTimer`. It is the only code of the agent that sleeps; everything
/// else keeps deadlines as state.
final class AgentTimer<C: Clock>: AgentTime where C.Duration == Duration {
    let clock: C
    let origin: C.Instant
    let fire: @Sendable () -> Void
    private let scheduled = Mutex<(task: Task<Void, Never>, at: Duration)?>(nil)

    init(clock: C, fire: @escaping @Sendable () -> Void) {
        self.clock = clock
        origin = clock.now
        self.fire = fire
    }

    func now() -> Duration { origin.duration(to: clock.now) }

    func schedule(_ deadline: Duration?) {
        scheduled.withLock { current in
            if let current, current.at == deadline, !current.task.isCancelled { return }
            current?.task.cancel()
            guard let deadline else { current = nil; return }
            let (clock, origin, fire) = (self.clock, self.origin, self.fire)
            let task = Task { [self] in
                do { try await clock.sleep(until: origin.advanced(by: deadline), tolerance: nil) } catch { return }
                // Fired: the same deadline asked for again (its tick not handled yet, or not acted on)
                // is a new wake-up, not this one.
                self.scheduled.withLock { if $0?.at == deadline { $0 = nil } }
                fire()
            }
            current = (task, deadline)
        }
    }

    func cancel() { schedule(nil) }

    func sleep(for duration: Duration) async {
        try? await clock.sleep(until: clock.now.advanced(by: duration), tolerance: nil)
    }
}

/// The one timer of the agent on the system's clock: the time from `ContinuousClock`, the wake-up a
/// libpulse timer on the agent's own loop (`LoopAlarm`), moved in place at each new deadline. (A task
/// per deadline, as `AgentTimer` sleeps, was cancelled and made anew at most batches of a call, waking
/// a thread of the shared pool each time on two cores beside the server.) `schedule` and `cancel` are
/// called on the loop's thread, as the agent's batches run there.
final class LoopTimer: AgentTime {
    let clock = ContinuousClock()
    let origin: ContinuousClock.Instant
    private let alarm: LoopAlarm
    /// The deadline set (changed on the loop's thread only; a lock to be `Sendable`, never contended).
    private let deadline = Mutex<Duration?>(nil)

    init(on loop: PulseLoop, fire: @escaping @Sendable () -> Void) {
        origin = clock.now
        alarm = LoopAlarm(on: loop, fire: fire)
    }

    func now() -> Duration { origin.duration(to: clock.now) }

    func schedule(_ next: Duration?) {
        deadline.withLock { current in
            if current == nil, next == nil { return }
            // (A deadline, even the same, is set afresh: libpulse's timer runs on CLOCK_MONOTONIC, which
            // stops while the machine sleeps, and `now` on one that does not; and one that fired, asked for
            // again (its tick not handled yet, or not acted on), is a new wake-up. In place, on this thread:
            // cheap.)
            current = next
            alarm.set(after: next.map { $0 - now() })
        }
    }

    func cancel() {
        deadline.withLock { $0 = nil }
        alarm.close()
    }

    func sleep(for duration: Duration) async {
        try? await clock.sleep(until: clock.now.advanced(by: duration), tolerance: nil)
    }
}

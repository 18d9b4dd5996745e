import Synchronization

/// What the agent's loop needs of time: the time now (since the agent started), and one wake-up at the
/// control tower's next deadline.
protocol AgentTime: Sendable {
    func now() -> Duration
    /// Calls the timer's action at `deadline` (replacing any wake-up scheduled before); nil: none.
    func schedule(_ deadline: Duration?)
    func cancel()
    /// Waits `duration` on the same clock (the D-Bus connections' retries); returns early if cancelled.
    func sleep(for duration: Duration) async
}

/// The one timer of the agent, on any clock: the system's in the agent, a manual one in tests. It is
/// the only code of the agent that sleeps; everything else keeps deadlines as state.
///
/// (A libpulse timer on the agent's loop, moved in place with `time_restart` at each new deadline, was
/// tried instead, for the shared-pool thread each new task wakes, and taken back: with it, a server lost
/// under the load bench on PipeWire 0.3 was never reconnected to in 2 runs of 3, and the music stayed
/// muted. Why is not known; not libpulse 16.1 keeping a timer moved later as its next one, as first
/// thought: a timer behind one moved later fires on time there. Maybe not the timer at all: the bench
/// did not say then whether the server served anyone; six later runs with it left the music muted once,
/// when the server served nobody, as this timer did once on PipeWire 1.4 the same day. README.)
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

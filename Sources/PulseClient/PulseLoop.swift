import CLibPulse
import Glibc
import Synchronization

/// A libpulse threaded mainloop that also runs Swift jobs: the executor of an actor that should live
/// on libpulse's own thread. A server event is then handled, and the commands it calls for are queued
/// on the socket, on one thread with no hop in between (an actor on the shared pool took two: to a pool
/// thread, and back through the mainloop's wake-up, about 0.5 ms of a call's mute under load).
///
/// As a task executor too: a task that prefers it (`withTaskExecutorPreference`) is resumed there by a
/// continuation resumed on the loop's thread, instead of on the shared pool first (Swift resumes a
/// continuation on the task's generic executor, then hops to the actor).
///
/// Jobs run on the loop's thread with the mainloop lock held, between libpulse's own callbacks, in the
/// order they were enqueued. A job must not block waiting for libpulse (it would wait for itself); it
/// may `await`, which gives the thread back.
///
/// `@unchecked Sendable` rule: `mainloop`, `api` and `wakeEvent` are set once in `init` and only used
/// there, in `deinit`, and on the loop's thread or under its lock (libpulse's rule); the job queue is a
/// `Mutex`; `wakeFD` is an eventfd, safe to write from any thread.
public final class PulseLoop: SerialExecutor, TaskExecutor, @unchecked Sendable {
    let mainloop: OpaquePointer
    let api: UnsafeMutablePointer<pa_mainloop_api>
    private let wakeFD: Int32
    private var wakeEvent: OpaquePointer?
    private let queue = Mutex<[Queued]>([])

    /// What waits for the loop's next turn: a Swift job, or a call of `nextTurn`.
    private enum Queued {
        case job(UnownedJob)
        case call(@Sendable () -> Void)
    }

    /// Starts the loop's thread (named `name`, as `top -H` shows it).
    public init(name: String = "pulse-client") {
        guard let loop = pa_threaded_mainloop_new() else { fatalError("pa_threaded_mainloop_new failed: out of memory") }
        mainloop = loop
        api = pa_threaded_mainloop_get_api(loop)
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else { fatalError("eventfd failed: \(String(cString: strerror(errno)))") }
        pa_threaded_mainloop_set_name(loop, name)
        // (Before the thread starts: no lock needed yet.)
        wakeEvent = api.pointee.io_new(api, wakeFD, PA_IO_EVENT_INPUT, { _, _, fd, _, userdata in
            var count: UInt64 = 0
            _ = read(fd, &count, MemoryLayout<UInt64>.size)
            Unmanaged<PulseLoop>.fromOpaque(userdata!).takeUnretainedValue().runQueued()
        }, Unmanaged.passUnretained(self).toOpaque())
        if pa_threaded_mainloop_start(loop) < 0 { fatalError("pa_threaded_mainloop_start failed") }
    }

    deinit {
        let (mainloop, api, fd, event) = (Raw(mainloop), Raw(api), wakeFD, wakeEvent.map(Raw.init))
        @Sendable func stop() {
            pa_threaded_mainloop_stop(mainloop.value)
            pa_threaded_mainloop_free(mainloop.value)
            close(fd)
        }
        if pa_threaded_mainloop_in_thread(mainloop.value) != 0 {
            // Released on its own thread (the last job of an actor that was its only user): the thread
            // cannot join itself, so another one stops it once this callback has returned.
            if let event { api.value.pointee.io_free(event.value) }
            Task.detached { stop() }
        } else {
            pa_threaded_mainloop_lock(mainloop.value)
            if let event { api.value.pointee.io_free(event.value) }
            pa_threaded_mainloop_unlock(mainloop.value)
            stop()
        }
    }

    /// True on the loop's own thread.
    public var isCurrent: Bool { pa_threaded_mainloop_in_thread(mainloop) != 0 }

    public func enqueue(_ job: consuming ExecutorJob) {
        enqueue(.job(UnownedJob(job)))
    }

    /// Goes on at the loop's next turn, once libpulse has had its thread back (the commands queued on
    /// its socket are written then). A yield that needs nothing but this loop: `Task.yield` goes through
    /// the shared pool, and a process whose pool threads are all busy (a test run: seen in CI) held the
    /// agent there, halfway through a batch, for as long.
    public func nextTurn(isolation: isolated (any Actor)? = #isolation) async {
        await withCheckedContinuation(isolation: isolation) { continuation in
            enqueue(.call { continuation.resume() })
        }
    }

    /// Gives the thread back for `duration` on libpulse's own timer (real time), then goes on; called on
    /// the loop's thread. What arrives meanwhile is handled by libpulse as usual. The agent leaves the
    /// CPU to the server and the apps this way once a call's mute is on the socket (issue 22): on two
    /// cores the rest of its batch, run at once, held the mute's carrying out back.
    public func pause(for duration: Duration, isolation: isolated (any Actor)? = #isolation) async {
        precondition(isCurrent, "not on the pulse loop's thread")
        await withCheckedContinuation(isolation: isolation) { (continuation: CheckedContinuation<Void, Never>) in
            var tv = timeval(after: duration)
            let waiter = Unmanaged.passRetained(Waiter(continuation)).toOpaque()
            guard api.pointee.time_new(api, &tv, { api, event, _, userdata in
                api!.pointee.time_free(event)
                Unmanaged<Waiter>.fromOpaque(userdata!).takeRetainedValue().continuation.resume()
            }, waiter) != nil else {
                return Unmanaged<Waiter>.fromOpaque(waiter).takeRetainedValue().continuation.resume()
            }
        }
    }

    /// One `pause`'s continuation, held by its timer until it fires.
    private final class Waiter {
        let continuation: CheckedContinuation<Void, Never>
        init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }
    }

    /// Wakes the loop for the first job of an empty queue only: `runQueued` takes the whole queue at
    /// once, so a job queued after that finds the queue empty and wakes it again. (A wake-up for every
    /// job was tried against a stalled suite run, whose cause was elsewhere: looks that waited for a
    /// half-carried-out batch. It cost a write per job on the event path.)
    private func enqueue(_ item: Queued) {
        let first = queue.withLock { queue in
            queue.append(item)
            return queue.count == 1
        }
        guard first else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    public func checkIsolated() {
        precondition(isCurrent, "not on the pulse loop's thread")
    }

    /// The jobs queued so far (those queued while they run wait for the next turn of the loop, so that
    /// libpulse's own events and writes are not starved).
    private func runQueued() {
        let items = queue.withLock { queue in
            defer { queue = [] }
            return queue
        }
        // (Both: a job of the actor and a job of a task that prefers the loop both run here, and the
        // runtime then knows either needs no hop.)
        let (serial, task) = (asUnownedSerialExecutor(), asUnownedTaskExecutor())
        for item in items {
            switch item {
            case .job(let job): job.runSynchronously(isolatedTo: serial, taskExecutor: task)
            case .call(let call): call()
            }
        }
    }

    /// A libpulse pointer handed to the thread that stops the loop (nothing else touches it then).
    private struct Raw<T>: @unchecked Sendable {
        let value: T
        init(_ value: T) { self.value = value }
    }
}

extension timeval {
    /// The time of day `delay` from now, as libpulse's mainloop takes a timer's (a negative delay: now).
    init(after delay: Duration) {
        self.init()
        pa_gettimeofday(&self)
        let (seconds, attoseconds) = delay.components
        pa_timeval_add(&self, pa_usec_t(max(0, seconds)) * 1_000_000 + pa_usec_t(max(0, attoseconds) / 1_000_000_000_000))
    }
}

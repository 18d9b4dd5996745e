/// Where the control tower is in its life: one value, not a flag per fact.
///
///     starting(stopBy: nil) --first connection--> running --stop--> stopping --all answered, or time--> finished
///     starting(stopBy: nil) --stop--> starting(stopBy: t) --first connection--> running --> stopping ...
///                                     starting(stopBy: t) --t passed, no server--> finished
public enum LifeCycle: Hashable, Sendable {
    /// The server has not answered yet. `stopBy`: a stop came meanwhile; the first connection (which
    /// brings what a predecessor left, to be given back too) is waited for until then.
    case starting(stopBy: Duration?)
    /// Connected at least once: a later connection is the server coming back.
    case running
    /// Everything held is being given back; the server's answers are waited for until `until`, and
    /// the put-backs of its memory (through streams of ours, which may wait seconds to be linked right
    /// after the server restarted) until `memoryUntil`.
    /// `failures`: commands of the stop the server refused on streams still there (the journal then keeps
    /// what they undo); a put-back of the memory left undone is known from the memory itself.
    case stopping(until: Duration, memoryUntil: Duration, failures: Int)
    /// Everything is undone, or the time ran out: the loop may end.
    case finished

    /// A command failed: one of the stop's, if stopping (nothing else is counted).
    mutating func stopFailed() {
        if case .stopping(let until, let memoryUntil, let failures) = self { self = .stopping(until: until, memoryUntil: memoryUntil, failures: failures + 1) }
    }
}

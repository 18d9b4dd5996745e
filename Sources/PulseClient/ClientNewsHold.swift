import ServerModel

/// Clients' news held back while streams' infos are asked (issue 22). An app's client is told of, and
/// its info asked, just before its first stream; on PulseAudio the client's info often comes after the
/// stream's word, just before the stream's own info, and handed on alone it made the agent work on a
/// batch of it while the stream's info waited behind that work (0.06 ms at the median of a call's
/// stream, 0.2 ms at p90: README). Held, a client's news goes out with the next stream's info, just
/// before it, and the agent has both in one batch.
///
/// Nothing is reordered: any other event lets what is held go first. Nothing waits longer than the
/// streams' infos asked (every request is answered, or fails with its stream gone, or its connection).
public struct ClientNewsHold {
    /// Streams' infos asked at their subscription events and not answered yet.
    public private(set) var asked = 0
    private var held: [PulseEvent] = []

    public init() {}

    /// A stream's info is asked at its subscription event.
    public mutating func streamInfoAsked() { asked += 1 }

    /// Its answer has ended (or failed): the last one ended lets what is held go, in order.
    public mutating func streamInfoEnded(releasingTo deliver: (PulseEvent) -> Void) {
        asked = max(0, asked - 1)
        if asked == 0 { release(to: deliver) }
    }

    /// An event to hand on: held if it is a client's news while a stream's info is asked; otherwise handed
    /// on after what is held.
    public mutating func pass(_ event: PulseEvent, to deliver: (PulseEvent) -> Void) {
        if asked > 0, event.isClientNews { return held.append(event) }
        release(to: deliver)
        deliver(event)
    }

    /// A new connection: nothing is asked on it yet (its old requests are never answered). What is held
    /// goes before the next event.
    public mutating func newConnection() { asked = 0 }

    private mutating func release(to deliver: (PulseEvent) -> Void) {
        guard !held.isEmpty else { return }
        let events = held
        held = []
        for event in events { deliver(event) }
    }
}

import ServerModel

/// Clients' news held back while streams' infos are asked (issue 22). An app's client is told of, and
/// its info asked, just before its first stream; on PulseAudio the client's info often came after the
/// stream's word, just before the stream's own info, and handed on alone it made the agent work on a
/// batch of it while the stream's info waited behind that work. Held, a client's news goes out in one
/// group with the next event, just before it: with the stream's info, the agent has both in one batch.
///
/// Nothing is reordered: any other event lets what is held go first. What is held waits for the streams'
/// infos asked before it, not for those asked after (a stream changing again and again keeps asking):
/// once those have ended (answered, or failed with their stream gone), it goes out on its own. Every
/// request ends, or its connection does.
package struct ClientNewsHold {
    /// Streams' infos asked at their subscription events and not ended yet.
    package private(set) var asked = 0
    private var held: [PulseEvent] = []
    /// Of the infos asked, those asked before the first event held: what it waits for.
    private var waitingFor = 0

    package init() {}

    /// A stream's info is asked at its subscription event.
    package mutating func streamInfoAsked() { asked += 1 }

    /// A stream's info asked has ended: what goes out now (what was held, once the infos it waited
    /// for have all ended).
    package mutating func streamInfoEnded() -> [PulseEvent] {
        asked = max(0, asked - 1)
        guard !held.isEmpty else { return [] }
        waitingFor = max(0, waitingFor - 1)
        return waitingFor == 0 ? release() : []
    }

    /// An event to hand on: what goes out now, in order: nothing while it is a client's news held, else
    /// what was held and then it.
    package mutating func pass(_ event: PulseEvent) -> [PulseEvent] {
        if asked > 0, event.isClientNews {
            if held.isEmpty { waitingFor = asked }
            held.append(event)
            return []
        }
        guard !held.isEmpty else { return [event] }
        var out = release()
        out.append(event)
        return out
    }

    /// A new connection: nothing is asked on it yet (the old one's requests never end). What is held
    /// goes out before its next event.
    package mutating func newConnection() {
        asked = 0
        waitingFor = 0
    }

    private mutating func release() -> [PulseEvent] {
        defer { held = [] }
        return held
    }
}

@testable import PulseClient
import ServerModel
import Testing

/// A client's news held while a stream's info is asked, handed on just before that info (issue 22), with
/// nothing reordered and nothing kept once the infos asked are answered.
@Suite("clients' news held for a stream's info")
struct ClientNewsHoldTests {
    static func client(_ id: UInt32, _ name: String = "pacat") -> Entity { .client(Client(id: id, name: name)) }
    static func stream(_ id: UInt32, client: UInt32) -> Entity {
        .sinkInput(AudioStream(id: id, direction: .output, name: "Call", client: client, device: nil,
                               volume: ChannelVolumes(channels: 2, volume: .norm)))
    }

    /// A step: an event to pass, a stream's info asked, the end of one, a new connection.
    enum Step { case pass(PulseEvent), ask, end, newConnection }

    /// What is handed on at each step.
    static func handedOn(_ steps: [Step]) -> [[PulseEvent]] {
        var hold = ClientNewsHold()
        return steps.map { step in
            var out: [PulseEvent] = []
            switch step {
            case .pass(let event): out = hold.pass(event)
            case .ask: hold.streamInfoAsked()
            case .end: out = hold.streamInfoEnded()
            case .newConnection: hold.newConnection()
            }
            return out
        }
    }

    @Test("a client's info that comes after its stream's word goes out just before the stream's info, in one go")
    func clientWithItsStream() {
        let changed = PulseEvent.changed(old: Self.client(5), new: Self.client(5, "Call"))
        let added = PulseEvent.added(Self.stream(9, client: 5))
        // The stream's word (its info asked), the client's info, then the stream's info and its end.
        let out = Self.handedOn([.ask, .pass(changed), .pass(added), .end])
        #expect(out == [[], [], [changed, added], []])
    }

    @Test("with no stream's info asked, a client's news goes out at once")
    func nothingAsked() {
        let added = PulseEvent.added(Self.client(5))
        #expect(Self.handedOn([.pass(added)]) == [[added]])
    }

    @Test("what is held goes out when the last info asked ends, answered or failed, and not before")
    func releasedAtTheLastEnd() {
        let a = PulseEvent.added(Self.client(5)), b = PulseEvent.changed(old: Self.client(5), new: Self.client(5, "Call"))
        // Two streams' infos asked; both streams gone before their infos came (no stream event at all).
        let out = Self.handedOn([.ask, .ask, .pass(a), .pass(b), .end, .end, .end])
        #expect(out == [[], [], [], [], [], [a, b], []], "in the order they came, once; an extra end is harmless")
    }

    @Test("any other event lets what is held go first: nothing is reordered")
    func noReordering() {
        let news = PulseEvent.added(Self.client(5))
        let gone = PulseEvent.removed(Self.client(5))
        let sample = PulseEvent.other(facility: .sampleCache, index: 1, kind: "new")
        #expect(Self.handedOn([.ask, .pass(news), .pass(gone)]) == [[], [], [news, gone]], "a client gone is not held")
        #expect(Self.handedOn([.ask, .pass(news), .pass(sample)]) == [[], [], [news, sample]])
        #expect(Self.handedOn([.ask, .pass(news), .pass(.disconnected(reason: "gone"))]) == [[], [], [news, .disconnected(reason: "gone")]])
    }

    @Test("what is held waits for the infos asked before it, not for those asked after")
    func notExtendedByLaterRequests() {
        let news = PulseEvent.added(Self.client(5))
        // One info asked, the news held, then a stream changing again and again: each change asked
        // before the last is answered, none publishing anything (its info as the model has it).
        let out = Self.handedOn([.ask, .pass(news), .ask, .end, .ask, .end, .end])
        #expect(out == [[], [], [], [news], [], [], []], "out when the info it waited for ends, though others are asked")
        // News held while other news is held joins it, and waits for what the first waited for.
        let later = PulseEvent.changed(old: Self.client(5), new: Self.client(5, "Call"))
        #expect(Self.handedOn([.ask, .ask, .pass(news), .end, .pass(later), .end]) == [[], [], [], [], [], [news, later]])
        // News let out by another event, then news held anew: it waits for the infos asked by then.
        let other = PulseEvent.other(facility: .sampleCache, index: 1, kind: "new")
        #expect(Self.handedOn([.ask, .pass(news), .ask, .pass(other), .pass(later), .end, .end])
                    == [[], [], [], [news, other], [], [], [later]])
    }

    @Test("a new connection asks nothing yet: its clients' news is not held for the old one's requests")
    func newConnection() {
        let news = PulseEvent.added(Self.client(5)), again = PulseEvent.added(Self.client(6))
        #expect(Self.handedOn([.ask, .pass(news), .newConnection, .pass(again)]) == [[], [], [], [news, again]])
    }
}

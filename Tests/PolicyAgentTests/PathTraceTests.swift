@testable import PolicyAgent
import ServerModel
import Synchronization
import Testing

/// The event path's stamps in the inbox (issue 22): when a batch's first input came, and, for an app's
/// call, when the bus thread took it.
@Suite("the event path's trace")
struct PathTraceTests {
    /// A clock the test moves by hand.
    final class Hand: Sendable {
        let now = Mutex(Duration.zero)
        func read() -> Duration { now.withLock { $0 } }
        func move(to instant: Duration) { now.withLock { $0 = instant } }
    }

    @Test("a batch gathered while the loop works keeps its first push and that input's bus receipt")
    func gathered() async {
        let inbox = Inbox<Int>()
        let hand = Hand()
        inbox.stampArrivals { hand.read() }
        hand.move(to: .microseconds(100))
        inbox.push(1, received: .microseconds(40))
        hand.move(to: .microseconds(150))
        inbox.push(2, received: .microseconds(120))
        #expect(await inbox.next() == [1, 2])
        #expect(inbox.lastArrival == .microseconds(100))
        #expect(inbox.lastReceived == .microseconds(40))
        // A batch of inputs that say nothing of a bus: no receipt kept from the last one.
        hand.move(to: .microseconds(300))
        inbox.push(3)
        #expect(await inbox.next() == [3])
        #expect(inbox.lastArrival == .microseconds(300))
        #expect(inbox.lastReceived == nil)
    }

    @Test("items that go together reach a waiting loop in one batch (a client's news with its stream's info)")
    func groupToAWaitingLoop() async {
        let inbox = Inbox<Int>()
        let taken = Task { await inbox.next() }
        while !inbox.hasWaiter { await Task.yield() }
        inbox.push(contentsOf: [1, 2, 3])
        #expect(await taken.value == [1, 2, 3], "one at a time, the loop would have taken [1] alone")
        inbox.push(contentsOf: [])
        inbox.push(4)
        #expect(await inbox.next() == [4], "an empty group pushes nothing")
    }

    @Test("not tracing: no clock read and no receipt kept")
    func off() async {
        let inbox = Inbox<Int>()
        inbox.push(1, received: .microseconds(5))
        #expect(await inbox.next() == [1])
        #expect(inbox.lastArrival == nil)
        #expect(inbox.lastReceived == nil)
    }

    @Test("a stream's subscription stamp is the first since its last event, and goes with that event")
    func subscriptionStamps() {
        let stamps = SubscriptionStamps()
        let stream = AudioStream(id: 7, direction: .output, name: "Call", client: 1, device: nil, volume: ChannelVolumes(channels: 2, volume: .norm))
        stamps.note(StreamReference(.output, 7), at: .microseconds(10))
        stamps.note(StreamReference(.output, 7), at: .microseconds(20))
        stamps.note(StreamReference(.input, 7), at: .microseconds(30))
        #expect(stamps.take(.added(.sinkInput(stream))) == .microseconds(10))
        #expect(stamps.take(.changed(old: .sinkInput(stream), new: .sinkInput(stream))) == nil, "taken with the first event")
        #expect(stamps.take(.removed(.sinkInput(AudioStream(id: 8, direction: .output, name: "Other", client: 1, device: nil, volume: ChannelVolumes(channels: 2, volume: .norm))))) == nil)
    }
}

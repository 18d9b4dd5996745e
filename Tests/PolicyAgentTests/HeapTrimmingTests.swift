@testable import AgentTower
@testable import PolicyAgent
import ServerModel
import Testing

/// When the agent gives its heaps' free memory back: after a burst once idle, after a connection gained
/// or lost, and not batch by batch in ordinary use.
@Suite("heap trimming")
struct HeapTrimmingTests {
    /// Which of these batches (inputs, connection, idle) trim.
    static func trims(_ batches: [(Int, Bool, Bool)]) -> [Bool] {
        var trimming = HeapTrimming()
        return batches.map { trimming.after(inputs: $0.0, connection: $0.1, idle: $0.2) }
    }

    @Test("a burst is trimmed once the inbox is empty, and counting starts over")
    func burstOnceIdle() {
        #expect(Self.trims([(200, false, false), (100, false, false), (1, false, true), (1, false, true)]) == [false, false, true, false],
                "not while more waits in the inbox; once, when it is empty")
    }

    @Test("one trim per burst's worth of inputs however they come batched; a connection gained or lost always trims")
    func ordinaryUseAndConnections() {
        let single = Self.trims(Array(repeating: (1, false, true), count: 2 * HeapTrimming.burst))
        #expect(single.indices.filter { single[$0] } == [HeapTrimming.burst - 1, 2 * HeapTrimming.burst - 1])
        #expect(Self.trims([(1, true, false), (1, true, false)]) == [true, true])
    }

    @Test("a connection gained or lost is a connection; other server events are not")
    func connectionInputs() {
        #expect(TowerInput.server(.connected(Snapshot())).isConnection)
        #expect(TowerInput.server(.disconnected(reason: "gone")).isConnection)
        #expect(!TowerInput.tick.isConnection)
    }

    @Test("glibc takes the fixed threshold for large blocks (the agent's first step)")
    func largeBlocksApart() {
        #expect(Heap.keepLargeBlocksApart())
    }
}

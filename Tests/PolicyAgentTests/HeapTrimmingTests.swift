@testable import AgentTower
@testable import PolicyAgent
import ServerModel
import Testing

/// When the agent trims its heaps: after a connection gained or lost, every so many inputs once the inbox
/// is empty, and never before a batch's commands are on the socket.
@Suite("heap trimming")
struct HeapTrimmingTests {
    /// Which of these batches (inputs, connection, idle, written) trim.
    static func trims(_ batches: [(Int, Bool, Bool, Bool)]) -> [Bool] {
        var trimming = HeapTrimming()
        return batches.map { trimming.after(inputs: $0.0, connection: $0.1, idle: $0.2, written: $0.3) }
    }

    @Test("a burst is trimmed once the inbox is empty, and counting starts over")
    func burstOnceIdle() {
        #expect(Self.trims([(200, false, false, true), (100, false, false, true), (1, false, true, true), (1, false, true, true)])
                    == [false, false, true, false],
                "not while more waits in the inbox; once, when it is empty")
    }

    @Test("one trim per so many inputs however they come batched; a connection gained or lost always trims")
    func ordinaryUseAndConnections() {
        let single = Self.trims(Array(repeating: (1, false, true, true), count: 2 * HeapTrimming.inputs))
        #expect(single.indices.filter { single[$0] } == [HeapTrimming.inputs - 1, 2 * HeapTrimming.inputs - 1])
        #expect(Self.trims([(100, false, true, true), (100, false, true, true), (56, false, true, true), (255, false, true, true)])
                    == [false, false, true, false], "batches of several inputs add up")
        #expect(Self.trims([(1, true, false, true), (1, true, false, true)]) == [true, true])
    }

    @Test("a trim waits for a batch whose commands are on the socket, the connection's too")
    func notBeforeACommand() {
        #expect(Self.trims([(1, true, false, false), (1, false, false, true)]) == [false, true])
        #expect(Self.trims([(HeapTrimming.inputs, false, true, false), (1, false, true, true)]) == [false, true])
    }

    @Test("a connection gained or lost is a connection; other server events are not")
    func connectionInputs() {
        #expect(TowerInput.server(.connected(Snapshot())).isConnection)
        #expect(TowerInput.server(.disconnected(reason: "gone")).isConnection)
        #expect(!TowerInput.tick.isConnection)
    }
}

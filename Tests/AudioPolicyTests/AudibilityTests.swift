import ServerModel
import Testing

/// What a meter says of the blocks one read brings (PipeWire delivers two or three at a time).
struct AudibilityTests {
    func said(_ before: Bool?, _ peaks: [Float]) -> [Bool] {
        var blocks = Audibility(threshold: 1e-4)
        for peak in peaks { blocks.take(peak) }
        return blocks.changes(after: before)
    }

    @Test("a sound that ended inside a read is silent at once: the grace period counts from that read, not the next")
    func endedInsideARead() {
        // The voice's last block, then two silent ones: it stopped (a read later, before).
        #expect(said(true, [0.3, 0, 0]) == [false])
        #expect(said(true, [0, -0.2]) == [], "the last block is audible (either sign): still heard")
        #expect(said(true, [0, 0]) == [false])
    }

    @Test("how long a stream was silent when said: its silent blocks at the read's end, of all the read's blocks")
    func silentForHowLong() {
        var blocks = Audibility(threshold: 1e-4)
        for peak: Float in [0.3, 0, 0] { blocks.take(peak) }
        #expect(blocks.silentFor(over: .milliseconds(120), blockAtMost: .milliseconds(40)) == .milliseconds(80))
        // A reopened meter's first read, long after its opening: a block's time at most.
        #expect(blocks.silentFor(over: .seconds(2), blockAtMost: .milliseconds(40)) == .milliseconds(80))
        blocks.take(0.1)
        #expect(blocks.silentFor(over: .milliseconds(120), blockAtMost: .milliseconds(40)) == .zero)
        #expect(Audibility(threshold: 1e-4).silentFor(over: .seconds(1), blockAtMost: .milliseconds(40)) == .zero)
    }

    @Test("a sound inside a read is heard, even when it ended in it too; nothing is said twice")
    func heardInsideARead() {
        #expect(said(false, [0, 0.5]) == [true])
        #expect(said(false, [0.5, 0]) == [true, false], "a blip is heard, then silent")
        #expect(said(nil, [0, 0]) == [false], "the first block is said whatever it is")
        #expect(said(nil, [5e-5]) == [false], "below -80 dBFS is silence")
        #expect(said(false, [0, 0]) == [])
        #expect(said(true, []) == [], "nothing taken, nothing said")
    }
}

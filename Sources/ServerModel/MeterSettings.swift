/// How meters listen.
public struct MeterSettings: Hashable, Sendable {
    /// A block whose peak reaches this amplitude (of full scale) is audible: 1e-4 is -80 dBFS, above
    /// the dither of 16-bit audio and below anything meant to be heard. Programs that keep a stream
    /// open between sounds write digital silence (speech-dispatcher, browsers: peak 0).
    public var threshold: Float
    /// Blocks per second: the server sends each block's peak (40 ms at 25 Hz), so a sound is known at
    /// most one block after it starts. (PipeWire 0.3 sends one per graph cycle, ~47 a second.)
    public var rate: UInt32
    /// A meter the server ends while its stream is still there (PulseAudio ends it when the stream
    /// moves to another device) is opened again, this many times in a row before it counts as failed.
    public var reopenAttempts: Int
    /// A meter that gets no block for this long hears silence: pipewire-pulse 1.x delivers nothing at
    /// all from a stream its program has stopped feeding (speech-dispatcher's voice between utterances),
    /// where PulseAudio delivers zeros. (PulseAudio's null sinks deliver their monitors in bursts up to
    /// ~1.5 s apart, and a new stream's first block up to 2 s after it: longer than those.)
    public var silentWithoutBlocks: Duration
    /// Blocks delivered together: two halve the meters' wake-ups on PipeWire (CPU: 10 silent streams
    /// metered cost the agent 0.67 % of a core on PipeWire 0.3.65 one by one) for one block more before
    /// a sound is known (40 ms at 25 Hz; PulseAudio delivers each block alone anyway).
    public var blocksPerRead: Int
    /// The same where blocks come one per graph cycle (pipewire-pulse 0.3: 21-37 ms apart as measured,
    /// not 40; a read of three came every ~112 ms in the voice bench): three rather than two. With two,
    /// 10 silent streams metered cost the agent 0.47-0.55 % of a core there (target 0.5 %), ducking
    /// onset as heard 43 ms (target 100 ms).
    public var blocksPerReadPerGraphCycle: Int

    /// How long a block is, at `rate` (blocks come no further apart than that).
    public var block: Duration { .seconds(1) / Int(max(1, rate)) }

    public init(threshold: Float = 1e-4, rate: UInt32 = 25, reopenAttempts: Int = 5, silentWithoutBlocks: Duration = .seconds(3),
                blocksPerRead: Int = 2, blocksPerReadPerGraphCycle: Int = 3) {
        self.threshold = threshold; self.rate = rate; self.reopenAttempts = reopenAttempts; self.silentWithoutBlocks = silentWithoutBlocks
        self.blocksPerRead = blocksPerRead; self.blocksPerReadPerGraphCycle = blocksPerReadPerGraphCycle
    }
}

/// What a meter says of the blocks it took in one read (their peaks, oldest first): a change between
/// audible and silent, or two. Heard when any block was audible; then silent when the last one is
/// not, so a sound that ended inside the read is known to have ended at once rather than one read
/// later (PipeWire delivers two or three blocks a read: the grace period before the music comes back
/// up counted from one read after the voice's last sound).
public struct Audibility: Sendable {
    let threshold: Float
    /// Blocks taken, and the silent ones at the end (fewer: the block before them was audible).
    private var blocks = 0
    private var trailingSilent = 0
    public init(threshold: Float) { self.threshold = threshold }

    /// The next block's peak (of full scale, either sign).
    public mutating func take(_ peak: Float) {
        blocks += 1
        trailingSilent = abs(peak) >= threshold ? 0 : trailingSilent + 1
    }

    /// How long the stream has been silent, at the read's end, for blocks that came over `interval`
    /// (since the read before), each `blockAtMost` long at most: the read's silent blocks at its end,
    /// of all its blocks.
    public func silentFor(over interval: Duration, blockAtMost: Duration) -> Duration {
        blocks == 0 ? .zero : min(interval, blockAtMost * blocks) * trailingSilent / blocks
    }

    /// Whether any block was taken.
    public var tookAny: Bool { blocks > 0 }

    /// What to say, in order, after `said` (nil: nothing said yet).
    public func changes(after said: Bool?) -> [Bool] {
        guard blocks > 0 else { return [] }
        var said = said, changes: [Bool] = []
        if trailingSilent < blocks && said != true { changes.append(true); said = true }
        if trailingSilent > 0 && said != false { changes.append(false) }
        return changes
    }
}

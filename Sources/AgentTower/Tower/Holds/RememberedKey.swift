import AudioPolicy
import Glibc
import Logging
import ServerModel

/// The server's memory of one app or role, as far as our holds touch it.
struct RememberedKey: Hashable, Sendable {
    enum Before: Hashable, Sendable {
        /// A read sent ahead of the first hold, not answered yet.
        case reading(CommandID)
        /// What it remembered (nil: nothing).
        case known(StreamRestoreEntry?)
    }
    var before: Before
    /// While a read is under way: what the journal has meanwhile, from the stream's own values (what a
    /// failed read falls back to, rather than "nothing remembered", which would delete the entry).
    var provisional: StreamRestoreEntry?
    /// What our trace there looks like: the volumes we set on its streams, and whether we muted one.
    var ours: [ChannelVolumes] = []
    /// The volumes of our put-backs a change of the user's overtook (their writes may have landed after
    /// it; the latest `JournalChange.tracesPerKey`): a trace of ours too, but a volume the key had before
    /// us (the user's or the app's), never a duck, so a stream of unknown age that shows it may be
    /// showing its own (`Holds.inheritance`). Kept apart from `ours`, each with its own bound.
    var overtakenPutBacks: [ChannelVolumes] = []
    /// Every volume of ours there: `ours`, and the overtaken put-backs if they count.
    func traces(countingPutBacks: Bool = true) -> [ChannelVolumes] { countingPutBacks ? ours + overtakenPutBacks : ours }
    /// The volumes the user set on its streams, one per stream, the latest (at most
    /// `JournalChange.tracesPerKey`; journaled): a stream found playing at a takeover with one of them,
    /// on the way of a predecessor's ramp, is the user's (soak seed 1 on PipeWire 1.4: the user's 50 %
    /// set to 70 %). (`userVolumeStreams`: whose each is, where this run saw it set.)
    var userVolumes: [ChannelVolumes] = []
    var userVolumeStreams: [StreamKey?] = []

    /// The user set `volume` on `stream`: it replaces the stream's earlier one, and comes last.
    mutating func noteUserVolume(_ volume: ChannelVolumes, on stream: StreamKey) {
        if let earlier = userVolumeStreams.firstIndex(of: stream) {
            userVolumes.remove(at: earlier)
            userVolumeStreams.remove(at: earlier)
        }
        userVolumes = Array((userVolumes + [volume]).suffix(JournalChange.tracesPerKey))
        userVolumeStreams = Array((userVolumeStreams + [stream]).suffix(JournalChange.tracesPerKey))
    }
    /// The ramps a predecessor's holds on its streams went down and up (its journal has their ends):
    /// every volume on the way is ours too.
    var ramps: [Ramp] = []
    var mutedOne = false
    /// We moved one of its streams off the default: the device it remembers is ours too, and goes back.
    var movedOne = false
    /// Where a stream of it that we moved off the default is now (nil once none is): where the server
    /// sends the key's new streams meanwhile.
    var movedTo: String?

    /// The volumes from a duck's level up to the volume it was ducked from, per channel.
    struct Ramp: Hashable, Sendable {
        var low: ChannelVolumes
        var high: ChannelVolumes

        func contains(_ volume: ChannelVolumes) -> Bool {
            volume.values.count == low.values.count && volume.values.count == high.values.count
                && zip(volume.values, zip(low.values, high.values)).allSatisfy { v, range in
                    Int64(v.rawValue) + Holds.tolerance >= Int64(range.0.rawValue) && Int64(v.rawValue) <= Int64(range.1.rawValue) + Holds.tolerance
                }
        }
    }
    /// Put back: until then a new stream may still have been given our trace.
    var settlesAt: Duration?
    /// A put-back that failed is tried again then (`failedPutBacks` times so far).
    var putBackAt: Duration?
    var failedPutBacks = 0
    var putBackCommand: CommandID?
    /// What the put-back under way writes (`before` as it was sent). A change the user makes meanwhile
    /// can reach the server before our write, which then overwrites it: the write's volume is a trace of
    /// ours from then on, and the user's is written again once ours is answered.
    var puttingBack: Before?
    /// One of its streams was held while the put-back was under way: its answer is not the end of it
    /// (what the hold left may have reached the server after the write), the memory is written again.
    var heldDuringPutBack = false
    /// The journal has what it remembered before us, not yet put back.
    var journaled = false

    init(before: Before) { self.before = before }
}

/// What the server's memory of streams does, per server. Both remember every client's mute and volume
/// per app or role, ours included, and give them to the next stream of that app or role.
struct MemoryWays: Hashable, Sendable {
    /// ext-stream-restore reads are answered in order with our commands, so a read sent ahead of our
    /// first hold is the memory as it was (PulseAudio). Elsewhere the memory before us is taken from the
    /// stream's own values before our first hold, which is what the server would have kept.
    var readable: Bool
    /// An entry written through ext-stream-restore is what the next stream gets (PulseAudio). pipewire-
    /// pulse with WirePlumber 0.4 writes it to the "route-settings" metadata, which WirePlumber follows
    /// only when the value there changes: a stream's own save (a ducked stream's last volume, which can
    /// reach WirePlumber after our write) does not touch that metadata, so writing the same entry again
    /// is not seen, and the duck stays remembered. There the memory is written through streams too.
    var writable: Bool
    /// An entry can be deleted (PulseAudio; pipewire-pulse ignores deletes).
    var deletable: Bool
    /// Where none of that reaches the memory for sure (pipewire-pulse 1.x: WirePlumber 0.5 keeps it and
    /// answers ext-stream-restore without touching it; WirePlumber 0.4, above), it is written through
    /// streams of our own, given the values wanted (`ServerCommand.writeMemoryThroughStream`): a
    /// stream's change is what WirePlumber saves, every time.
    var throughStreams = false

    static let pulseAudio = MemoryWays(readable: true, writable: true, deletable: true)
    /// WirePlumber 0.4 and 0.5 alike.
    static let wirePlumber = MemoryWays(readable: false, writable: false, deletable: false, throughStreams: true)

    static func of(_ server: ServerInfo?) -> MemoryWays { server?.isPipeWire == true ? .wirePlumber : .pulseAudio }
}

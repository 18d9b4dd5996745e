public import AudioPolicy
public import ServerModel

// The journal's values (what the tower records and a successor finds); the file itself is the shell's
// (`Journal` in PolicyAgent, which names these `Journal.Entry` and `Journal.Leftovers`).

/// A change of what the agent holds on the server, for the journal.
public enum JournalChange: Sendable, Hashable {
    /// What is held on one stream (nil: nothing any more).
    case hold(StreamKey, JournalEntry?)
    /// The server's memory of an app or role as it was before our first hold of it (nil: it had none).
    case remember(String, StreamRestoreEntry?)
    /// That memory has been put back.
    case putBack(String)
    /// A volume a put-back of that memory wrote which the user's change has since replaced: the write
    /// may have landed after the change, so a new stream given this volume is given the user's instead.
    case trace(String, ChannelVolumes)
    /// The volumes the user set on that memory's key's streams (one per stream, the latest
    /// `tracesPerKey`): a successor takes a stream it finds playing with one of them, on the way of a
    /// ramp of ours, for the user's.
    case userVolumes(String, [ChannelVolumes])
    /// A stream of that memory's key went away held on a volume (ducked, or on a ramp's way): the
    /// server's memory of the key may keep any volume between these ends until it is put back.
    case ramp(String, low: ChannelVolumes, high: ChannelVolumes)

    /// The most traces kept per remembered key (the latest), in memory and in the journal.
    public static let tracesPerKey = 8
    /// A server module taken over (unloaded, or replaced by a copy) until the agent stops.
    case tookOver(module: String, argument: String)
    /// A Bluetooth card switched away from `from` until switched back.
    case switched(card: String, from: String)
    case switchedBack(card: String)
    /// Nothing is held (a clean stop).
    case clear
}

/// One stream held, as the journal keeps it.
public struct JournalEntry: Codable, Hashable, Sendable {
    public var direction: Direction
    public var index: UInt32
    /// The stream's `application.process.id` and name, so that a reused index is not mistaken for it.
    public var processID: String?
    public var name: String
    /// We muted it: unmute it.
    public var muted: Bool
    /// We ducked it from this volume: put it back.
    public var baseVolume: [UInt32]?
    /// The duck level it was held at (nil: on its way back up, or an earlier version's line).
    public var level: Double?
    /// The key of the server's memory for the stream's app or role.
    public var restoreKey: String?
    /// We moved it off the default device (nil in an earlier version's line: not moved).
    public var moved: Bool?

    public init(direction: Direction, index: UInt32, processID: String?, name: String, muted: Bool,
                baseVolume: [UInt32]?, level: Double? = nil, restoreKey: String?, moved: Bool = false) {
        self.direction = direction; self.index = index; self.processID = processID; self.name = name
        self.muted = muted; self.baseVolume = baseVolume; self.level = level; self.restoreKey = restoreKey
        self.moved = moved ? true : nil
    }

    /// `baseVolume` as a volume.
    package var base: ChannelVolumes? { baseVolume.map { ChannelVolumes($0.map(Volume.init(rawValue:))) } }
}

/// What a previous run left: streams it held, remembered entries it had not put back yet, the
/// server modules it had taken over, and the Bluetooth cards it had switched (with their profiles);
/// and the lines that could not be read.
public struct JournalLeftovers: Sendable {
    public var streams: [JournalEntry] = []
    public var remembered: [String: StreamRestoreEntry?] = [:]
    /// Per remembered key, the volumes of put-backs the user's change overtook (`JournalChange.trace`).
    public var traces: [String: [ChannelVolumes]] = [:]
    /// Per remembered key, the volumes the user set on its streams (`JournalChange.userVolumes`).
    public var userVolumes: [String: [ChannelVolumes]] = [:]
    /// Per remembered key, the ends of the ramps of streams that went away held (`JournalChange.ramp`):
    /// low and high, in turn.
    public var ramps: [String: [ChannelVolumes]] = [:]
    public var modules: [(module: String, argument: String)] = []
    public var cards: [String: String] = [:]
    /// The first lines skipped (at most `namedBadLines`), in words (file and line number).
    public var skipped: [String] = []
    /// How many lines were skipped in all.
    public var skippedCount = 0
    /// How many lines were read as journal lines.
    public var goodCount = 0
    /// How many bytes of the file were read.
    public var bytesRead = 0
    /// Why the file was taken for corrupt and moved aside (to `held.log~`), if it was.
    public var movedAside: String?
    /// A problem with the state directory's journal files themselves (a link planted there, say).
    public var problem: String?
    public var isEmpty: Bool { streams.isEmpty && remembered.isEmpty && modules.isEmpty && cards.isEmpty }
    public init() {}
}

extension StreamKey {
    /// How the journal names a stream (`out#3`, as earlier versions did).
    package var journalName: String { description }
}

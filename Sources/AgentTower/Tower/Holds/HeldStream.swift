import AudioPolicy
import Glibc
import Logging
import ServerModel

/// One stream as the holds see it.
struct HeldStream: Hashable, Sendable {
    let key: StreamKey
    let reference: StreamReference
    /// The key the server remembers the stream's mute and volume by (its app or role).
    let memoryKey: String?
    let processID: String?
    let firstSeen: Duration
    var name: String
    var channelMap: [String]
    /// What the server last reported.
    var muted: Bool
    var volume: ChannelVolumes
    var hasDevice: Bool
    /// We muted it, and have not unmuted it.
    var mutedByUs = false
    /// The mute values we sent that the server has not shown yet, in order: until they are shown, a
    /// report of one of them is ours, and of another value older than our commands, not the user.
    var muteEchoes: [Bool] = []
    /// A command since the last answered one went unanswered (said once in the log until one is answered).
    var unanswered = false
    /// We hold its volume (ducked, or on the way back up).
    var hold: VolumeHold?
    var ramp: Ramp?
    /// The server's memory of our mute is in its mute: to undo (or to hold, if the core wants it muted).
    var correctMute = false
    /// The volume it would have had without the server's memory of our duck (to set, or to duck from).
    var natural: ChannelVolumes?
    /// The volumes we sent lately (the latest last), to know their echoes, and how many of them the
    /// server has shown (the first `shownUpTo` of them are behind it).
    var sent: [ChannelVolumes] = []
    var shownUpTo = 0
    var failures = 0
    var retryAt: Duration?

    var isHeld: Bool { mutedByUs || hold != nil }

    init(_ stream: AudioStream, at now: Duration) {
        key = StreamKey(stream)
        reference = StreamReference(stream.direction, stream.id)
        memoryKey = stream.properties["module-stream-restore.id"]
        processID = stream.properties["application.process.id"]
        firstSeen = now
        name = stream.name
        channelMap = stream.channelMap
        muted = stream.isMuted
        volume = stream.volume
        hasDevice = stream.device != nil
    }

    mutating func noteSent(_ volume: ChannelVolumes) {
        sent.append(volume)
        if sent.count > 64 {
            let dropped = sent.count - 64
            sent.removeFirst(dropped)
            shownUpTo = max(0, shownUpTo - dropped)
        }
    }

    /// Whether a reported volume is the echo of one we sent (and, if so, the server is past it).
    mutating func echo(_ volume: ChannelVolumes) -> Bool {
        // The last one shown again (a report of something else) is still ours.
        if shownUpTo > 0, Holds.close(sent[shownUpTo - 1], volume) { return true }
        guard let i = sent[shownUpTo...].firstIndex(where: { Holds.close($0, volume) }) else { return false }
        shownUpTo = i + 1
        return true
    }

    mutating func report(_ stream: AudioStream) {
        name = stream.name
        channelMap = stream.channelMap
        muted = stream.isMuted
        volume = stream.volume
        hasDevice = stream.device != nil
    }
}

/// A volume we hold on a stream.
struct VolumeHold: Hashable, Sendable {
    /// The user's volume: what it goes back to.
    var base: ChannelVolumes
    /// The duck level while ducked; nil on the way back up.
    var level: Double?
    /// The server has shown one of ours since the hold began: a volume not ours is then the user's.
    var shown = false
}

/// A volume ramp: `steps` values from `from` to `to`, the first at `start`, one every `step`.
struct Ramp: Hashable, Sendable {
    var from: ChannelVolumes
    var to: ChannelVolumes
    var start: Duration
    var step: Duration
    var steps: Int
    var done = 0

    var nextAt: Duration { start + step * done }

    func value(at index: Int) -> ChannelVolumes {
        guard index > 0 else { return from }
        let t = Double(index) / Double(steps)
        return ChannelVolumes(zip(from.values, to.values).map { a, b in Volume(fraction: a.fraction + (b.fraction - a.fraction) * t) })
    }
}

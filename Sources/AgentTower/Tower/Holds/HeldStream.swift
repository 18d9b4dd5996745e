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
    /// When it appeared, as far as the server's memory goes: in its first `memoryActsWithin` a mute or
    /// volume of our trace is taken as the memory's (`Holds.inheritance`).
    var firstSeen: Duration
    var name: String
    var channelMap: [String]
    /// What the server last reported.
    var muted: Bool
    var volume: ChannelVolumes
    var hasDevice: Bool
    /// Whose its mute is.
    var mute: MuteHold = .free
    /// The mute values we sent that the server has not shown yet, in order: until they are shown, a
    /// report of one of them is ours, and of another value older than our commands, not the user.
    var muteEchoes: [Bool] = []
    /// A command since the last answered one went unanswered (said once in the log until one is answered).
    var unanswered = false
    /// Whose its volume is, and where ours is going.
    var volumeHold: VolumeHold = .free(inherited: nil)
    /// The volumes we sent lately (the latest last), to know their echoes, and how many of them the
    /// server has shown (the first `shownUpTo` of them are behind it).
    var sent: [ChannelVolumes] = []
    var shownUpTo = 0
    /// The user's volume, set while volumes of ours were still on their way to the server: one of them
    /// the server shows after it is the server carrying out our command late, and the user's is put
    /// back (until `until`).
    var overtaken: Overtaken?
    var failures = 0
    var retryAt: Duration?

    /// We moved it off the default device: the server remembers that move as where its app's or role's
    /// streams go (`RememberedDevice`), until it is moved back or gone and the memory is put back.
    var moved = false
    /// When the server first showed it on a device (pipewire-pulse shows a new stream on none until
    /// WirePlumber links it; PulseAudio links it as it is created).
    var linkedAt: Duration?
    /// It has shown a volume above 0. pipewire-pulse shows a new stream at 0 until WirePlumber gives it
    /// one (a stream moved before it is linked has its device first): until then it has no volume to
    /// duck, and the first it shows is the server's memory, however late it comes (`Holds.inheritance`).
    /// Set by `Holds.observe` once a report has been judged, not by `report`.
    var shownVolume: Bool

    var mutedByUs: Bool { mute == .held }
    var isHeld: Bool { mutedByUs || volumeHold.base != nil || moved }

    /// What the server's memory of our holds gave it, for the log: "mute volume 40% 40%", or "".
    var inheritedWords: String {
        var words = mute == .inherited ? "mute " : ""
        if case .free(let natural?) = volumeHold { words += "volume \(natural)" }
        return words
    }

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
        shownVolume = stream.volume.overall != .muted
    }

    mutating func noteSent(_ volume: ChannelVolumes, at now: Duration) {
        lastSentAt = now
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

    /// When we last sent a volume.
    var lastSentAt: Duration?

    /// Whether volumes we sent may still be on their way: not shown by the server yet, and the last sent
    /// within `window`. (One sent longer ago has landed: a server that carried out two changes before
    /// it was asked for the stream shows the last only.)
    func volumesOnTheirWay(at now: Duration, within window: Duration) -> Bool {
        shownUpTo < sent.count && lastSentAt.map { now - $0 < window } == true
    }

    mutating func report(_ stream: AudioStream) {
        name = stream.name
        channelMap = stream.channelMap
        muted = stream.isMuted
        volume = stream.volume
        hasDevice = stream.device != nil
    }
}

/// The user's volume over ours still on their way.
struct Overtaken: Hashable, Sendable {
    var volume: ChannelVolumes
    var until: Duration
}

/// Whose a stream's mute is.
enum MuteHold: Hashable, Sendable {
    /// The user's and the app's.
    case free
    /// Muted by the server's memory of our mute on its key: `reconcile` holds it (the core wants it
    /// muted) or undoes it.
    case inherited
    /// Muted by us, and not unmuted since.
    case held
}

/// Whose a stream's volume is, and where ours is going.
enum VolumeHold: Hashable, Sendable {
    /// The user's and the app's. `inherited`: the volume it would have had without the server's memory
    /// of our duck (for `reconcile` to set, or to duck from).
    case free(inherited: ChannelVolumes?)
    /// Lowered by us to an amplitude of `level` of the user's volume `base` (on the way while `ramp`
    /// runs). `shown`: the server has shown one of ours since the hold began, so a volume not ours is
    /// then the user's.
    case ducked(base: ChannelVolumes, level: Double, shown: Bool, ramp: Ramp?)
    /// On the way back up to `base`, the user's volume, where the hold ends. No ramp: taken over from
    /// a predecessor on its way up, for `reconcile` to start one.
    case rising(base: ChannelVolumes, shown: Bool, ramp: Ramp?)

    /// The user's volume, while we hold it.
    var base: ChannelVolumes? {
        switch self {
        case .free: nil
        case .ducked(let base, _, _, _), .rising(let base, _, _): base
        }
    }

    /// The duck level, while lowered.
    var level: Double? { if case .ducked(_, let level, _, _) = self { level } else { nil } }

    var ramp: Ramp? {
        switch self {
        case .free: nil
        case .ducked(_, _, _, let ramp), .rising(_, _, let ramp): ramp
        }
    }

    var shown: Bool {
        switch self {
        case .free: false
        case .ducked(_, _, let shown, _), .rising(_, let shown, _): shown
        }
    }

    /// The same hold with the server having shown one of ours.
    var seen: VolumeHold {
        switch self {
        case .free: self
        case .ducked(let base, let level, _, let ramp): .ducked(base: base, level: level, shown: true, ramp: ramp)
        case .rising(let base, _, let ramp): .rising(base: base, shown: true, ramp: ramp)
        }
    }

    /// The same hold on its way along `ramp` (nil: arrived).
    func along(_ ramp: Ramp?) -> VolumeHold {
        switch self {
        case .free: preconditionFailure("a ramp on a volume we do not hold")
        case .ducked(let base, let level, let shown, _): .ducked(base: base, level: level, shown: shown, ramp: ramp)
        case .rising(let base, let shown, _): .rising(base: base, shown: shown, ramp: ramp)
        }
    }
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

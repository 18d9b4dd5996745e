import AudioPolicy
import FoundationEssentials
import Glibc
import PulseClient

/// What the agent knows of a stream and holds on it.
struct TrackedStream {
    var stream: AudioStream
    /// We muted it.
    var mutedByUs = false
    /// The server has shown our mute, or a volume of ours, since we set it. Until then a report of the
    /// stream unmuted, or at another volume, is older than our command (an event already on its way, a
    /// stream being relinked by WirePlumber), not the user: only once ours has been seen does a
    /// different value mean someone else changed it.
    var muteSeen = false
    var volumeSeen = false
    /// We ducked it; this is the user's volume to go back to.
    var base: ChannelVolumes?
    /// Volumes we set recently (ramp steps), to tell our changes from the user's.
    var ours: [ChannelVolumes] = []
    var ramp: Task<Void, Never>?
    /// The level it is ducked to (amplitude), while ducked.
    var duckLevel: Double?
    /// A duck decided before the stream had a device: pipewire-pulse announces a new stream at volume 0
    /// until WirePlumber links it, and that is no volume to go back to.
    var pendingDuck: (level: Double, ramp: Duration)?
    /// When the agent first saw it.
    let firstSeen = ContinuousClock.now
    /// The key of the server's remembered entry for this stream's app or role.
    var restoreKey: String? { stream.properties["module-stream-restore.id"] }
    var isHeld: Bool { mutedByUs || base != nil }
}

/// A remembered entry put back, and what we had set on streams of its key (see memoryBeforeUs).
struct PutBack {
    var entry: StreamRestoreEntry?
    var at: ContinuousClock.Instant
    var ours: [ChannelVolumes]
}

/// Carrying out mute, unmute, duck and unduck on the server (SPEC.md 5.2-5.4), never fighting the
/// user (5.11) and leaving no trace (5.12): the journal knows what is held; the server's remembered
/// entries are put back once a stream is released.
extension Agent {
    func track(_ stream: AudioStream) {
        let key = StreamKey(stream)
        guard var t = tracked[key] else { tracked[key] = TrackedStream(stream: stream); return }
        t.stream = stream
        if t.mutedByUs && stream.isMuted { t.muteSeen = true }
        if t.base != nil && t.ours.contains(where: { Self.close($0, stream.volume) }) { t.volumeSeen = true }
        tracked[key] = t
    }

    func forgetAllStreams() {
        for t in tracked.values { t.ramp?.cancel() }
        tracked = [:]
        // The server's memory as it was before we touched it is kept: once connected again, it is put
        // back (putBackAfterReconnection), for a server that restarts still remembers.
    }

    /// Did the user change the stream's mute or volume (a value we did not set) while we held it?
    func userChange(_ stream: AudioStream) -> (mute: Bool, volume: Bool) {
        guard let t = tracked[StreamKey(stream)] else { return (false, false) }
        let mute = t.mutedByUs && t.muteSeen && !stream.isMuted
        let volume = t.base != nil && t.volumeSeen && !t.ours.contains { Self.close($0, stream.volume) }
        return (mute, volume)
    }

    /// pipewire-pulse rounds volumes through floats: a unit or two apart is the same volume.
    static func close(_ a: ChannelVolumes, _ b: ChannelVolumes) -> Bool {
        a.values.count == b.values.count
            && zip(a.values, b.values).allSatisfy { abs(Int64($0.rawValue) - Int64($1.rawValue)) <= 0x10000 / 200 }
    }

    /// The user took the stream over: forget what we held on it, restore nothing.
    func userTookOver(_ key: StreamKey, mute: Bool, volume: Bool) {
        guard var t = tracked[key] else { return }
        if mute { t.mutedByUs = false }
        if volume { t.ramp?.cancel(); t.ramp = nil; t.base = nil; t.ours = [] }
        tracked[key] = t
        record(key)
    }

    func enforce(_ action: PolicyAction) async {
        guard let client else { return }
        switch action {
        case .mute(let key):
            guard tracked[key] != nil else { return }
            rememberRestoreEntry(for: key)
            if tracked[key]?.mutedByUs == false { tracked[key]?.muteSeen = false }
            tracked[key]?.mutedByUs = true
            record(key)
            // Sent, not awaited: the next event is handled at once (a storm is not one round trip per
            // stream), and whatever we send later on this stream is carried out after it.
            client.sendMute(true, streamIndex: key.index, direction: key.pulseDirection, failed: failure("mute \(key)"))
        case .unmute(let key):
            guard tracked[key]?.mutedByUs == true else { return }
            tracked[key]?.mutedByUs = false
            record(key)
            client.sendMute(false, streamIndex: key.index, direction: key.pulseDirection, failed: failure("unmute \(key)"))
            await released(key)
        case .duck(let key, let level, let ramp):
            guard let t = tracked[key] else { return }
            if t.stream.device == nil && t.base == nil {
                tracked[key]?.pendingDuck = (level, ramp)
                return
            }
            rememberRestoreEntry(for: key)
            let inherited = t.base == nil ? await inheritedVolume(of: key) : nil
            guard var t = tracked[key] else { return }
            let base = t.base ?? inherited ?? t.stream.volume
            if t.base == nil { t.volumeSeen = false }
            t.base = base
            t.duckLevel = level
            t.pendingDuck = nil
            tracked[key] = t
            record(key)
            startRamp(key, to: Self.ducked(base, level), over: ramp, then: nil)
        case .unduck(let key, let ramp):
            tracked[key]?.pendingDuck = nil
            guard let base = tracked[key]?.base else { return }
            tracked[key]?.duckLevel = nil
            startRamp(key, to: base, over: ramp) { agent in await agent.unducked(key) }
        default:
            break
        }
    }

    /// The volume `base` lowered to an amplitude of `level` (PulseAudio's volume scale is cubic in amplitude).
    static func ducked(_ base: ChannelVolumes, _ level: Double) -> ChannelVolumes {
        let factor = cbrt(level)
        return ChannelVolumes(base.values.map { Volume(fraction: $0.fraction * factor) })
    }

    /// The stream has its device now: carry out the duck decided before.
    func runPendingDuck(_ key: StreamKey) async {
        guard let pending = tracked[key]?.pendingDuck else { return }
        tracked[key]?.pendingDuck = nil
        await enforce(.duck(key, level: pending.level, ramp: pending.ramp))
    }

    /// What to do when a command sent without waiting fails: say so (a stream that went away meanwhile
    /// is the usual reason).
    func failure(_ what: String) -> @Sendable (PulseError) -> Void {
        { [logger] error in logger.warning("\(what) failed", metadata: ["error": "\(error)"]) }
    }

    /// Steps the stream's volume to `target` over `duration` (25 ms steps), cancelling a ramp under way.
    func startRamp(_ key: StreamKey, to target: ChannelVolumes, over duration: Duration,
                   then finish: (@Sendable (Agent) async -> Void)?) {
        guard let t = tracked[key], let client else { return }
        t.ramp?.cancel()
        let start = t.ours.last ?? t.stream.volume
        let steps = max(1, Int(duration / .milliseconds(25)))
        let path = (1...steps).map { step in
            ChannelVolumes(zip(start.values, target.values).map { a, b in
                Volume(fraction: a.fraction + (b.fraction - a.fraction) * Double(step) / Double(steps))
            })
        }
        tracked[key]?.ours = Array((t.ours + path).suffix(64))
        tracked[key]?.ramp = Task { [weak self] in
            for (i, volume) in path.enumerated() {
                if Task.isCancelled { return }
                try? await client.setVolume(volume, streamIndex: key.index, direction: key.pulseDirection)
                if i < path.count - 1 { try? await Task.sleep(for: .milliseconds(25)) }
            }
            if !Task.isCancelled, let self, let finish { await finish(self) }
        }
    }

    func unducked(_ key: StreamKey) async {
        tracked[key]?.base = nil
        tracked[key]?.ramp = nil
        record(key)
        await released(key)
    }

    /// A stream we held went away: put back the server's remembered entry if nothing else holds it.
    func trackedStreamGone(_ key: StreamKey) async {
        guard let t = tracked.removeValue(forKey: key) else { return }
        t.ramp?.cancel()
        journal.set(key.description, nil)
        if t.isHeld { await putBackRestoreEntry(t.restoreKey) }
    }

    /// The stream is no longer held: put back the remembered entry of its app or role.
    func released(_ key: StreamKey) async {
        guard let t = tracked[key], !t.isHeld else { return }
        await putBackRestoreEntry(t.restoreKey)
    }

    // MARK: the server's memory (ext-stream-restore)

    /// Sends a read of the server's memory for the stream's app or role, at the first hold of that key,
    /// without waiting: the mute or volume change sent after it is carried out after the read, so the
    /// answer is the memory as it was before we touched anything. `settleRestoreRead` collects it when
    /// it is time to put it back.
    func rememberRestoreEntry(for key: StreamKey) {
        guard let client, let t = tracked[key], let restoreKey = t.restoreKey,
              restoreSnapshots[restoreKey] == nil, restoreReads[restoreKey] == nil else { return }
        let read = client.readStreamRestoreNow()
        // pipewire-pulse cannot delete an entry: where it has none, put back the stream's own values as
        // they were before we touched it, which is what a fresh stream would get.
        let fallback: StreamRestoreEntry? = isPipeWire
            ? StreamRestoreEntry(name: restoreKey, channelMap: t.stream.channelMap, volume: t.base ?? t.stream.volume,
                                 device: nil, isMuted: t.stream.isMuted && !t.mutedByUs)
            : nil
        restoreReads[restoreKey] = Task {
            guard let entries = try? await client.entries(of: read) else { return nil }
            return .some(entries.first { $0.name == restoreKey } ?? fallback)
        }
        // Kept (and journaled, for a successor after a crash) as soon as it is known.
        Task { await self.settleRestoreRead(restoreKey) }
    }

    /// Waits for the read `rememberRestoreEntry` sent for this key, if any, and keeps its answer (when
    /// the entry is to be put back: nothing waits for it on the way to a mute).
    func settleRestoreRead(_ restoreKey: String?) async {
        guard let restoreKey, let read = restoreReads[restoreKey] else { return }
        let entry = await read.value
        guard restoreReads[restoreKey] == read else { return }  // settled meanwhile
        restoreReads[restoreKey] = nil
        if let entry {
            restoreSnapshots[restoreKey] = .some(entry)
            journal.remember(restoreKey, entry)
        }
    }

    func putBackRestoreEntry(_ restoreKey: String?) async {
        await settleRestoreRead(restoreKey)
        guard let client, let restoreKey, let snapshot = restoreSnapshots[restoreKey] else { return }
        // Still held on another stream of the same app or role: later.
        guard !tracked.values.contains(where: { $0.isHeld && $0.restoreKey == restoreKey }) else { return }
        restoreSnapshots[restoreKey] = nil
        recentlyPutBack[restoreKey] = PutBack(entry: snapshot, at: ContinuousClock.now, ours: oursFor(restoreKey))
        if let entry = snapshot {
            await attempt("restore the remembered entry \(restoreKey)") {
                try await client.writeStreamRestore([entry], mode: .replace)
            }
        } else {
            // Nothing was remembered before: forget what our changes made the server remember.
            await attempt("forget the remembered entry \(restoreKey)") {
                try await client.deleteStreamRestore(names: [restoreKey])
            }
        }
        journal.putBack(restoreKey)
    }

    /// Connected again after losing the server: no stream is held any more (the core started afresh),
    /// so every remembered entry we had changed goes back as it was.
    func putBackAfterReconnection() async {
        for restoreKey in Set(restoreSnapshots.keys).union(restoreReads.keys).sorted() {
            await putBackRestoreEntry(restoreKey)
        }
    }

    // MARK: the journal

    func record(_ key: StreamKey) {
        guard let t = tracked[key], t.isHeld else { return journal.set(key.description, nil) }
        journal.set(key.description, Journal.Entry(
            direction: key.direction.rawValue, index: key.index, processID: t.stream.properties["application.process.id"],
            name: t.stream.name, muted: t.mutedByUs, baseVolume: t.base?.values.map(\.rawValue), restoreKey: t.restoreKey))
    }

    /// Undoes what a dead predecessor held, on the streams that are still there.
    func undo(_ leftovers: [Journal.Entry], in snapshot: Snapshot) async {
        guard let client else { return }
        for entry in leftovers {
            let direction: Direction = entry.direction == "output" ? .output : .input
            guard let stream = snapshot.streams(direction).first(where: {
                $0.id == entry.index && $0.properties["application.process.id"] == entry.processID
            }) else { continue }
            if entry.muted && stream.isMuted {
                await attempt("unmute a leftover") { try await client.setMute(false, streamIndex: stream.id, direction: direction) }
            }
            if let base = entry.baseVolume {
                await attempt("restore a leftover volume") {
                    try await client.setVolume(ChannelVolumes(base.map(Volume.init(rawValue:))), streamIndex: stream.id, direction: direction)
                }
            }
            logger.notice("undid a leftover", metadata: ["stream": "\(entry.direction)#\(entry.index)", "app": "\(entry.name)"])
        }
    }

    /// Stopping: everything held goes back at once (no ramps).
    func releaseAll() async {
        guard let client else { return }
        for key in tracked.keys.sorted() {
            guard let t = tracked[key], t.isHeld else { continue }
            t.ramp?.cancel()
            if t.mutedByUs {
                await attempt("unmute \(key)") { try await client.setMute(false, streamIndex: key.index, direction: key.pulseDirection) }
            }
            if let base = t.base {
                await attempt("restore the volume of \(key)") {
                    try await client.setVolume(base, streamIndex: key.index, direction: key.pulseDirection)
                }
            }
            tracked[key]?.mutedByUs = false
            tracked[key]?.base = nil
            await released(key)
        }
    }
}

extension Agent {
    /// The server's memory for `restoreKey` as it was before we touched it, while what the server gives
    /// a new stream of that key may be our trace instead: while we hold the key, and for 5 s after we
    /// put it back (in case the stream was given our value before the put-back landed). `ours`: the volumes we set on the key's other streams, which is what such
    /// a trace looks like. While we hold the key, only a `young` stream can have been given our trace.
    /// nil: nothing of ours can be in what the stream got.
    func memoryBeforeUs(_ restoreKey: String, for key: StreamKey, young: Bool) async
        -> (before: StreamRestoreEntry?, ours: [ChannelVolumes])? {
        if let put = recentlyPutBack[restoreKey] {
            if ContinuousClock.now - put.at < .seconds(5) { return (put.entry, put.ours) }
            recentlyPutBack[restoreKey] = nil
        }
        guard young, restoreSnapshots[restoreKey] != nil || restoreReads[restoreKey] != nil else { return nil }
        let ours = tracked.filter { $0.key != key && $0.value.restoreKey == restoreKey }.flatMap(\.value.ours)
        await settleRestoreRead(restoreKey)
        guard let known = restoreSnapshots[restoreKey] else { return nil }  // put back meanwhile
        return (known, ours)
    }

    /// True for a stream the agent first saw less than 3 s ago: the server's memory acts on a stream
    /// as it appears (WirePlumber a moment after); later changes are the user's.
    func isYoung(_ key: StreamKey) -> Bool {
        tracked[key].map { ContinuousClock.now - $0.firstSeen < .seconds(3) } ?? false
    }

    /// The sound server remembers the mute of every stream by app or role, ours included, and gives it
    /// to the next stream of that app or role: while we hold a music stream muted, a new music stream
    /// starts muted (PulseAudio at once, WirePlumber a moment later); and a stream that appears just
    /// after we put the memory back may have been given the mute before the put-back landed. If the
    /// memory as it was before we touched it said "not muted", and the core holds nothing on the
    /// stream, that mute is our trace: undo it (SPEC.md 5.12). Only while we hold another stream of
    /// that app or role muted (or have just put the memory back) can the memory hold our mute: a user
    /// who mutes a new stream then, in its first seconds, is not told apart from this; anything else
    /// is the user's.
    func undoInheritedMute(_ stream: AudioStream) async {
        guard stream.isMuted, let client, let restoreKey = stream.properties["module-stream-restore.id"] else { return }
        let key = StreamKey(stream)
        let holdingMute = tracked.contains { $0.key != key && $0.value.restoreKey == restoreKey && $0.value.mutedByUs }
        guard holdingMute || recentlyPutBack[restoreKey] != nil,
              let memory = await memoryBeforeUs(restoreKey, for: key, young: isYoung(key)),
              memory.before?.isMuted != true else { return }
        guard tracked[key] != nil, machine.state.streams[key]?.heldMute == false, tracked[key]?.mutedByUs != true else { return }
        logger.notice("undid a mute the server remembered from us", metadata: ["stream": "\(key)", "entry": "\(restoreKey)"])
        client.sendMute(false, streamIndex: key.index, direction: key.pulseDirection, failed: failure("unmute \(key)"))
    }
}

extension Agent {
    /// Volumes we set on the streams of an app or role: what the server's memory holds while we duck them.
    func oursFor(_ restoreKey: String) -> [ChannelVolumes] {
        tracked.values.filter { $0.restoreKey == restoreKey }.flatMap(\.ours)
    }

    /// The volume a young stream would have had without us, if the one it has was given by the server's
    /// memory of our duck (a volume we set on another stream of its app or role, while we hold that key
    /// or just after we put it back); nil if its volume is its own.
    func inheritedVolume(of key: StreamKey) async -> ChannelVolumes? {
        guard isYoung(key), let t = tracked[key], let restoreKey = t.restoreKey else { return nil }
        let volume = t.stream.volume
        guard let memory = await memoryBeforeUs(restoreKey, for: key, young: true),
              memory.ours.contains(where: { Self.close($0, volume) }) else { return nil }
        let channels = volume.values.count
        let natural: ChannelVolumes =
            if let remembered = memory.before?.volume, !remembered.values.isEmpty {
                remembered.values.count == channels ? remembered : ChannelVolumes(channels: channels, volume: remembered.overall)
            } else {
                ChannelVolumes(channels: channels, volume: .norm)
            }
        return Self.close(natural, volume) ? nil : natural
    }

    /// A young stream was given our duck's volume by the server's memory: if we duck it, the duck goes
    /// from the volume it would have had; if not, it gets that volume back. True if it was so.
    func correctInheritedVolume(_ stream: AudioStream) async -> Bool {
        let key = StreamKey(stream)
        guard tracked[key] != nil else { return false }
        track(stream)
        guard let t = tracked[key], !t.ours.contains(where: { Self.close($0, stream.volume) }),
              let natural = await inheritedVolume(of: key), let client else { return false }
        logger.notice("undid a volume the server remembered from us", metadata: ["stream": "\(key)", "volume": "\(natural)"])
        if var t = tracked[key], t.base != nil, let level = t.duckLevel {
            t.base = natural
            tracked[key] = t
            record(key)
            startRamp(key, to: Self.ducked(natural, level), over: .zero, then: nil)
        } else {
            let ours = Array(((tracked[key]?.ours ?? []) + [natural]).suffix(64))
            tracked[key]?.ours = ours
            await attempt("restore the volume of \(key)") {
                try await client.setVolume(natural, streamIndex: key.index, direction: key.pulseDirection)
            }
        }
        return true
    }
}

import AudioPolicy
import Glibc
import Logging
import ServerModel

/// What the agent holds on the server's streams, and what the server remembers of them (SPEC.md 5.11,
/// 5.12): a pure machine, fed what the server reports and the answers to our commands, told the time,
/// and returning commands, journal changes and, for every change it sees, a verdict: our own echo, the
/// server's memory of our hold, or the user.
///
/// Per stream it keeps what we hold (a mute; a volume hold with the user's volume to go back to, its
/// duck level and ramp), what we sent and whether the server has shown it, and what the server last
/// reported. The policy core says what it wants (`Intent`); `reconcile` brings the server there.
///
/// Per remembered key (`module-stream-restore.id`: the app or role the server remembers by) it keeps
/// what the server remembered before our first hold of that key, what we may have left there (our
/// volumes, our mute), and puts it back once no stream of the key is held. Each server's ways are in
/// `MemoryWays`.
struct Holds: Hashable, Sendable {
    var settings: AgentSettings
    var ways: MemoryWays = .pulseAudio
    private(set) var streams: [StreamKey: HeldStream] = [:]
    private(set) var memory: [String: RememberedKey] = [:]
    /// The agent is stopping (`releaseEverything`): a failed put-back of the memory is tried again at once.
    private(set) var stopping = false

    init(settings: AgentSettings) { self.settings = settings }

    /// What the policy core wants of each stream, as its actions said (`want`): what `reconcile` brings
    /// the server to. Only the core's actions change it.
    private(set) var wanted: [StreamKey: Intent] = [:]

    /// What the policy core wants of a stream now.
    struct Intent: Hashable, Sendable {
        var mute = false
        /// The duck level (amplitude), if it must be lowered.
        var duck: Double?
        /// How long the way to `duck` (or back up, with none) takes: the core's ramp.
        var ramp: Duration
    }

    /// What the core wants of the stream now: nothing held unless its actions said so (and a way back
    /// up, with none said, over `duckRampUp`).
    func wanted(_ key: StreamKey) -> Intent { wanted[key] ?? Intent(ramp: settings.policy.duckRampUp) }

    /// Takes what a core's action wants of a stream; the stream it is about, if it is one of those.
    mutating func want(_ action: PolicyAction) -> StreamKey? {
        let key: StreamKey
        var intent: Intent
        switch action {
        case .mute(let k), .unmute(let k), .duck(let k, _, _), .unduck(let k, _), .letGo(let k, _, _):
            key = k
            intent = wanted(k)
        default:
            return nil
        }
        switch action {
        case .mute: intent.mute = true
        case .unmute: intent.mute = false
        case .duck(_, let level, let ramp): (intent.duck, intent.ramp) = (level, ramp)
        case .unduck(_, let ramp): (intent.duck, intent.ramp) = (nil, ramp)
        case .letGo(_, let mute, let volume):
            if mute { intent.mute = false }
            if volume { intent.duck = nil }
        default: break
        }
        wanted[key] = intent
        return key
    }

    /// What the server's report of a stream said that came from someone else than us and the server's
    /// memory of our holds: the user (a mixer, the desktop's volume keys) or the app itself.
    struct UserChange: Hashable, Sendable {
        var mute = false
        var volume = false
        var any: Bool { mute || volume }
    }

    // MARK: observations

    /// The server reports a stream (new, or changed). Returns what the user changed of what we hold.
    /// `new`: the stream has just been created (not found already there when the agent connected,
    /// whose first seconds are long past: the server's memory acts only on a stream as it starts).
    mutating func observe(_ stream: AudioStream, at now: Duration, new: Bool = true, _ out: inout Outbox) -> UserChange {
        let key = StreamKey(stream)
        guard var held = streams[key] else {
            var fresh = HeldStream(stream, at: new ? now : now - settings.memoryActsWithin)
            if stream.device != nil { fresh.linkedAt = fresh.firstSeen }
            noteInheritance(&fresh, mute: stream.isMuted, volume: true, at: now)
            streams[key] = fresh
            return UserChange()
        }
        let old = held
        held.report(stream)
        if held.linkedAt == nil && stream.device != nil { held.linkedAt = now }
        var change = UserChange()
        // The volume first: what the server's memory gave a new stream decides what its mute says too.
        // Until the mute is judged, the stream's state as the volume's verdict records it has the old mute
        // (one report may bring both: WirePlumber's memory and the link at once).
        held.muted = old.muted
        if !Self.close(stream.volume, old.volume) {
            // One of ours if it is a volume we sent after the last one the server showed: the server
            // carries out our commands in order, so going back to an earlier one of ours is someone
            // else's doing (the user setting, by chance, a volume a ramp passed through).
            let ours = held.echo(stream.volume)
            switch held.volumeHold {
            case .ducked, .rising:
                if ours {
                    held.volumeHold = held.volumeHold.seen
                } else if held.volumeHold.shown {
                    // Not one of ours, and ours had been shown: the user's volume wins (5.11).
                    change.volume = true
                    held.volumeHold = .free(inherited: nil)
                    userSet(held, volume: stream.volume, &out)
                    userOvertook(&held, at: now)
                }  // else older than our first step
            case .free:
                guard !ours else {
                    putBackOvertaken(&held, at: now, &out)
                    break
                }
                // (WirePlumber gives a stream its memory before it is linked; pipewire-pulse reports a
                // stream at volume 0 until then, which is no one's choice.)
                noteInheritance(&held, mute: false, volume: true, at: now)
                if held.volumeHold == .free(inherited: nil) && held.hasDevice {
                    userSet(held, volume: stream.volume, &out)
                    userOvertook(&held, at: now)
                }
            }
        }
        held.muted = stream.isMuted
        if stream.isMuted != old.muted {
            if !held.muteEchoes.isEmpty {
                // Ours, shown (with the ones sent before it); else a report older than our commands.
                if let i = held.muteEchoes.firstIndex(of: stream.isMuted) { held.muteEchoes.removeFirst(i + 1) }
            } else if held.mutedByUs && !stream.isMuted {
                change.mute = true
                held.mute = .free
                userSet(held, mute: false, &out)
            } else if !held.mutedByUs {
                noteInheritance(&held, mute: stream.isMuted, volume: false, at: now)
                if held.mute != .inherited { userSet(held, mute: stream.isMuted, &out) }
            }
        }
        // What the key remembered was taken from a stream not linked yet (no volume to go by; where the
        // memory is read, an entry without a volume means none): the first volume of its own a linked
        // stream of the key shows is it.
        // (Not a volume that still reads 0: pipewire-pulse shows a linked stream so a moment before
        // WirePlumber gives it its volume; taken, that 0 was put back, the key's next stream silent.)
        if !ways.readable, held.hasDevice, held.volume.overall != .muted, held.volumeHold == .free(inherited: nil), let name = held.memoryKey, var remembered = memory[name],
           case .known(let entry?) = remembered.before, entry.volume == nil, !held.sent.contains(where: { Self.close($0, held.volume) }),
           !remembered.traces().contains(where: { Self.close($0, held.volume) }) {
            var filled = entry
            filled.volume = held.volume
            filled.channelMap = held.channelMap
            remembered.before = .known(filled)
            memory[name] = remembered
            if remembered.journaled { out.journal(.remember(name, filled)) }
        }
        // The user took what we held (5.11): the journal says so at once, or a successor after a kill -9
        // would take the old hold for its own (the user's volume within its ramp, the user's mute again).
        if change.any { journal(held, &out) }
        if stream.volume.overall != .muted { held.shownVolume = true }
        streams[key] = held
        return change
    }

    /// A stream went away: what we held on it is gone with it, and the server remembers our trace.
    mutating func gone(_ key: StreamKey, at now: Duration, _ out: inout Outbox) {
        wanted[key] = nil
        guard let held = streams.removeValue(forKey: key) else { return }
        guard held.isHeld else { return }
        // Gone ducked or on a ramp's way: the server's memory of its key may keep any step of it, and
        // until that memory is put back a successor must know them for ours (the soak, seed 168 on
        // PipeWire 1.4: a movie stopped on its way back up, another of its role still held, then
        // kill -9: the next movie started at 67 %, between the ramp's ends, and was left there).
        if let name = held.memoryKey, let base = held.volumeHold.base, memory[name]?.journaled == true {
            out.journal(.ramp(name, low: Self.ducked(base, held.volumeHold.level ?? 0), high: base))
        }
        out.journal(.hold(key, nil))
        if let name = held.memoryKey { putBackIfReleased(name, at: now, &out) }
    }

    /// The server went away: every stream with it. What the memory holds of ours is put back once
    /// connected again (`reconnected`).
    mutating func serverLost() {
        streams = [:]
        wanted = [:]
        for name in memory.keys {
            // (A put-back under way is lost with the connection: its settling time goes too, or the next
            // connection would not send it again and that time's end would forget the key, the server
            // keeping our trace: the soak, seed 188 on PipeWire 1.4, the server gone twice in a row.)
            if memory[name]?.putBackCommand != nil { memory[name]?.settlesAt = nil }
            memory[name]?.putBackCommand = nil
            memory[name]?.puttingBack = nil
            memory[name]?.heldDuringPutBack = false
            memory[name]?.failedPutBacks = 0
        }
    }

    /// Connected again (`ways` already set for the new server): the memory we changed goes back.
    mutating func reconnected(at now: Duration, _ out: inout Outbox) {
        for name in memory.keys.sorted() { putBackIfReleased(name, at: now, &out) }
    }

    // MARK: carrying out what the core wants

    /// Brings the stream to what the core wants: mutes, unmutes, ducks (ramped), goes back up; and
    /// corrects what the server's memory of our holds gave it.
    mutating func reconcile(_ key: StreamKey, at now: Duration, _ out: inout Outbox) {
        guard var held = streams[key] else { return }
        let intent = wanted(key)
        let wasHeld = held.isHeld

        // The server's memory of our mute: held from the start if the core wants it muted, else undone.
        if held.mute == .inherited {
            held.mute = intent.mute ? .held : .free
            if !intent.mute {
                sendMute(false, &held, &out)
                let entry = held.memoryKey ?? ""
                out.log(.notice) { ("undid a mute the server remembered from us", ["stream": "\(key)", "entry": "\(entry)"]) }
            }
        }
        if intent.mute && !held.mutedByUs && held.muted && held.muteEchoes.isEmpty {
            // Muted already, by the user's hand (or the app's): that mute is theirs, not ours to hold
            // or to undo later (5.11).
        } else if intent.mute != held.mutedByUs {
            if intent.mute { remember(held, at: now, &out) }
            held.mute = intent.mute ? .held : .free
            if intent.mute, let name = held.memoryKey { memory[name]?.mutedOne = true }
            journal(held, &out)
            sendMute(intent.mute, &held, &out)
        }

        switch (held.volumeHold, intent.duck) {
        case (.free(let natural?), nil):
            held.volumeHold = .free(inherited: nil)
            held.noteSent(natural, at: now)
            out.send(.setStreamVolume(held.reference, natural), for: .stream(key))
            out.log(.notice) { ("undid a volume the server remembered from us", ["stream": "\(key)", "volume": "\(natural)"]) }
        case (.free(let natural), let level?):
            // pipewire-pulse reports a new stream at volume 0 until WirePlumber gives it its volume: no
            // volume to go back to. Not even once it has a device: one moved before it is linked has the
            // device at once and its volume later, with the link (the soak, seed 174 on PipeWire 1.4: an
            // alarm moved unlinked was ducked from 0 %, a step shown at once, and WirePlumber's memory
            // given with the link, our duck of another alarm, was then taken for the user's volume). Its
            // duck begins with the first volume it shows (`shownVolume`; a 0 the user or the app chose
            // later is ducked as any volume, and the user's change of it wins, 5.11).
            guard held.hasDevice, natural != nil || held.shownVolume else { break }
            remember(held, at: now, &out)
            let base = natural ?? held.overtaken.flatMap { now < $0.until ? $0.volume : nil } ?? held.volume
            held.overtaken = nil
            held.volumeHold = .ducked(base: base, level: level, shown: false, ramp: nil)
            journal(held, &out)
            startRamp(&held, to: Self.ducked(base, level), over: intent.ramp, at: now, &out)
        case (let hold, let level?) where hold.level != level:
            // Lower or higher than it was, or down again on the way up: from where the volume is now.
            guard let base = hold.base else { preconditionFailure("a stream's volume we do not hold is held") }
            held.volumeHold = .ducked(base: base, level: level, shown: hold.shown, ramp: hold.ramp)
            journal(held, &out)
            startRamp(&held, to: Self.ducked(base, level), over: intent.ramp, at: now, &out)
        case (.ducked(let base, _, let shown, let ramp), nil):
            held.volumeHold = .rising(base: base, shown: shown, ramp: ramp)
            journal(held, &out)
            startRamp(&held, to: base, over: intent.ramp, at: now, &out)
        case (.rising(let base, _, .none), nil):
            // A hold taken over from a predecessor on its way up: no ramp here yet.
            journal(held, &out)
            startRamp(&held, to: base, over: intent.ramp, at: now, &out)
        default:
            break
        }
        streams[key] = held
        if wasHeld && !held.isHeld, let name = held.memoryKey { putBackIfReleased(name, at: now, &out) }
        // (Held from here on by the memory's own mute, say, without `remember`: the same as there.)
        if !wasHeld && held.isHeld, let name = held.memoryKey, memory[name]?.putBackCommand != nil {
            memory[name]?.heldDuringPutBack = true
        }
    }

    /// Stopping: everything held goes back at once (no ramps), then the server's memory.
    mutating func releaseEverything(at now: Duration, _ out: inout Outbox) {
        stopping = true
        // (The stop's put-backs get their tries afresh: those spent before it are no reason to try less.)
        for name in memory.keys { memory[name]?.failedPutBacks = 0 }
        // (The core's stop moved every stream it had moved back to the default; one it could not, with
        // no default device to go to, has its key's memory put back all the same.)
        for key in streams.keys.sorted() where streams[key]?.moved == true {
            streams[key]?.moved = false
            if let held = streams[key] { journal(held, &out) }
        }
        for key in streams.keys.sorted() { releaseAtOnce(key, &out) }
        for name in memory.keys.sorted() {
            memory[name]?.settlesAt = nil
            putBackIfReleased(name, at: now, &out)
        }
    }

    /// What we hold on the stream goes back at once (no ramp).
    private mutating func releaseAtOnce(_ key: StreamKey, _ out: inout Outbox) {
        guard var held = streams[key], held.isHeld else { return }
        if held.mutedByUs {
            held.mute = .free
            sendMute(false, &held, &out)
        }
        if let base = held.volumeHold.base {
            held.volumeHold = .free(inherited: nil)
            out.send(.setStreamVolume(held.reference, base), for: .stream(key))
        }
        // (A moved stream stays journaled as moved.)
        journal(held, &out)
        streams[key] = held
    }

    /// A stream still there that is nobody's session any more (a capture moved to a sink's monitor,
    /// the server's own plumbing): what we hold on it goes back at once. It stays known until it goes
    /// (a refused release is sent again; one not shown when the connection is lost is kept across it).
    mutating func letGoOf(_ key: StreamKey, at now: Duration, _ out: inout Outbox) {
        wanted[key] = nil
        releaseAtOnce(key, &out)
        guard let name = streams[key]?.memoryKey else { return }
        putBackIfReleased(name, at: now, &out)
    }

    /// We move a stream: off the default device (`offDefault`), or back to it. The server remembers
    /// where a key's stream was last moved and sends the key's next stream there (both servers; a move
    /// to the default makes it forget, but on PulseAudio not one to the device the stream is on, which
    /// it ignores): that memory is ours while such a stream is there, and goes back
    /// as it was once none is (`putBackIfReleased`, with the mute and volume). Called before the move's
    /// command when it goes off the default (the read of the memory must come first, to find what it
    /// remembered before us), after it when it comes back (the move's own forgetting comes before the
    /// put-back's write).
    mutating func moving(_ key: StreamKey, offDefault: Bool, to device: String, at now: Duration, _ out: inout Outbox) {
        guard var held = streams[key], let name = held.memoryKey else { return }
        if offDefault {
            if !held.moved { remember(held, at: now, &out) }
            memory[name]?.movedOne = true
            memory[name]?.movedTo = device
            guard !held.moved else { return }
            held.moved = true
            streams[key] = held
            journal(held, &out)
        } else {
            guard held.moved else { return }
            held.moved = false
            streams[key] = held
            journal(held, &out)
            if !streams.values.contains(where: { $0.memoryKey == name && $0.moved }) { memory[name]?.movedTo = nil }
            if !held.isHeld { putBackIfReleased(name, at: now, &out) }
        }
    }

    /// Someone else moved a stream we had moved (judged the user's): where it is, and where the server
    /// now sends its key's streams, are the user's. It is ours no more; what goes back of the key's
    /// memory is the device the user chose (PulseAudio's entry; WirePlumber keeps the user's own).
    mutating func movedByUser(_ key: StreamKey, to device: String?, at now: Duration, _ out: inout Outbox) {
        guard var held = streams[key], held.moved else { return }
        held.moved = false
        streams[key] = held
        journal(held, &out)
        guard let name = held.memoryKey, var remembered = memory[name] else { return }
        if case .known(let before) = remembered.before, before?.device != device {
            // (Nothing remembered before: the server has an entry now, the stream's, with the user's device.)
            var entry = before ?? inferredEntry(held)
            entry.device = device
            remembered.before = .known(entry)
            if remembered.journaled { out.journal(.remember(name, entry)) }
        }
        if !streams.values.contains(where: { $0.memoryKey == name && $0.moved }) {
            remembered.movedOne = false
            remembered.movedTo = nil
        }
        memory[name] = remembered
        putBackIfReleased(name, at: now, &out)
    }

    /// A new stream of a key whose memory of a device is ours (we moved one of its streams off the
    /// default) that the server sent to a device not the default: our move, inherited (the key is an
    /// app's or a role's, which other apps may share). Held as moved: moved back with the others, and
    /// the key's memory goes back once none is left. Returns whether it was.
    mutating func inheritedMove(_ key: StreamKey, on device: String, at now: Duration, _ out: inout Outbox) -> Bool {
        // (Linked just now, for the first time, on the device our move sent another of the key's streams to.)
        guard var held = streams[key], !held.moved, now - held.firstSeen < settings.memoryActsWithin, held.linkedAt == now,
              let name = held.memoryKey, let movedTo = memory[name]?.movedTo, movedTo == device else { return false }
        // (Journaled as the first move of a stream is: the memory before us, then the hold.)
        remember(held, at: now, &out)
        held.moved = true
        streams[key] = held
        journal(held, &out)
        out.log(.notice) { ("a new stream went where the server remembered our move of its app or role", ["stream": "\(key)", "entry": "\(name)"]) }
        return true
    }

    // MARK: answers and time

    /// A command on a stream failed. Refused (the server answered no): sent again a little later while
    /// the stream is there, and after a few attempts the hold is given up (returned, for the core to know
    /// it holds nothing there). Unanswered (timed out, the connection lost, not connected): no refusal,
    /// and never the user's change: the hold stays as it is, the server may still carry the command out
    /// in order, and a connection taken as lost is made again with everything held enforced again.
    mutating func failed(_ key: StreamKey, _ error: PulseError, at now: Duration, _ out: inout Outbox) -> UserChange? {
        guard var held = streams[key] else { return nil }
        if error.isUnanswered {
            if !held.unanswered {
                held.unanswered = true
                streams[key] = held
                out.log(.warning) { ("the sound server did not answer a command on a stream; the hold stays", ["stream": "\(key)", "error": "\(error)"]) }
            }
            return nil
        }
        held.failures += 1
        if held.failures < settings.commandAttempts {
            held.retryAt = now + settings.commandRetry
            streams[key] = held
            out.log(.warning) { ("a command on a stream failed; trying again", ["stream": "\(key)", "error": "\(error)"]) }
            return nil
        }
        let given = UserChange(mute: held.mutedByUs, volume: held.volumeHold.base != nil)
        out.log(.error) { ("could not hold the stream; giving it up", ["stream": "\(key)", "error": "\(error)"]) }
        held.muteEchoes = []
        if held.mutedByUs { held.mute = .free }
        if held.volumeHold.base != nil { held.volumeHold = .free(inherited: nil) }
        held.retryAt = nil
        streams[key] = held
        // (A moved stream stays journaled as moved.)
        journal(held, &out)
        if let name = held.memoryKey { putBackIfReleased(name, at: now, &out) }
        return given
    }

    mutating func succeeded(_ key: StreamKey) {
        streams[key]?.failures = 0
        streams[key]?.unanswered = false
    }

    /// The answer to a read of the server's memory sent before the first hold of `name`.
    mutating func memoryRead(_ name: String, _ result: Result<ServerAnswer, PulseError>, at now: Duration, _ out: inout Outbox) {
        guard var key = memory[name], case .reading = key.before else { return }
        let entry: StreamRestoreEntry?
        switch result {
        case .success(.restoreEntries(let entries)):
            entry = entries.first { $0.name == name }
        default:
            // Unknown: what the stream had of its own is the best guess (as journaled meanwhile).
            entry = key.provisional ?? streams.values.first { $0.memoryKey == name }.map { inferredEntry($0) }
            out.log(.warning) { ("could not read the server's memory", ["entry": "\(name)", "answer": "\(result)"]) }
        }
        key.before = .known(entry)
        key.provisional = nil
        key.journaled = true
        memory[name] = key
        out.journal(.remember(name, entry))
        out.log(.debug) { ("what the server remembers, read", ["entry": "\(name)", "volume": "\(entry?.volume.map { "\($0)" } ?? "-")", "muted": "\(entry?.isMuted ?? false)"]) }
        putBackIfReleased(name, at: now, &out)
    }

    /// The answer to putting the memory of `name` back.
    mutating func memoryPutBack(_ name: String, _ result: Result<ServerAnswer, PulseError>, at now: Duration, _ out: inout Outbox) {
        guard let key = memory[name], key.putBackCommand != nil else { return }
        memory[name]?.putBackCommand = nil
        memory[name]?.puttingBack = nil
        memory[name]?.heldDuringPutBack = false
        switch result {
        case .success:
            memory[name]?.failedPutBacks = 0
            // Held again while the put-back was under way (a write through streams takes a while): what
            // it remembered before us stays in the journal, for the next put-back, once let go.
            guard !isHeld(memoryKey: name) else {
                out.log(.debug) { ("the server's memory was written, and is held again", ["entry": "\(name)"]) }
                return
            }
            // Held again and let go while it was under way (a stream of the key ducked, gone ducked): what
            // that hold left may have reached the server after the write (read from soak seed 142).
            if key.heldDuringPutBack {
                out.log(.debug) { ("held again while its memory was being put back: writing it again", ["entry": "\(name)"]) }
                memory[name]?.settlesAt = nil
                putBackIfReleased(name, at: now, &out)
                return
            }
            // What the server must keep changed meanwhile (the user changed the app's volume or mute; or
            // its first linked stream showed what it was): the server may have taken our write after
            // that change. What it must keep now is written again.
            if key.before != key.puttingBack {
                out.log(.debug) { ("what the server must keep changed while its memory was being put back: writing it again", ["entry": "\(name)"]) }
                memory[name]?.settlesAt = nil
                putBackIfReleased(name, at: now, &out)
                return
            }
            out.log(.debug) { ("the server's memory is back", ["entry": "\(name)"]) }
            memory[name]?.journaled = false
            out.journal(.putBack(name))
        case .failure(let error):
            // Left in the journal (the next connection, or the next run, tries again), and tried again in
            // a while meanwhile, a few times (a busy WirePlumber has kept a probe's write from showing).
            memory[name]?.settlesAt = nil
            let tries = (memory[name]?.failedPutBacks ?? 0) + 1
            memory[name]?.failedPutBacks = tries
            out.log(.warning) { ("could not put the server's memory back", ["entry": "\(name)", "error": "\(error)", "tries": "\(tries)"]) }
            // Stopping, a refusal is tried again at once: nothing comes after the stop. (Not a connection
            // lost: every try would fail alike at once; the next connection puts it back.)
            if tries < settings.commandAttempts {
                if stopping && !error.isUnanswered { putBackIfReleased(name, at: now, &out) } else { memory[name]?.putBackAt = now + settings.putBackSettles }
            }
        }
    }

    /// The earliest instant something here needs time: a ramp step, a retry, a put-back settling. Only
    /// what a tick acts on: a put-back still waiting for its answer waits for that, not for time (a
    /// deadline a tick leaves in place would be asked for again and again, or never again).
    var nextDeadline: Duration? {
        var next: Duration?
        for held in streams.values {
            for at in [held.volumeHold.ramp?.nextAt, held.retryAt].compactMap({ $0 }) { next = min(next ?? at, at) }
        }
        for key in memory.values where key.putBackCommand == nil {
            for at in [key.settlesAt, key.putBackAt].compactMap({ $0 }) { next = min(next ?? at, at) }
        }
        return next
    }

    mutating func tick(at now: Duration, _ out: inout Outbox) {
        // Only the streams with something due, in order (a tick comes every ramp step: no sort of them all).
        let due = streams.values.filter { $0.retryAt.map { $0 <= now } == true || $0.volumeHold.ramp.map { $0.nextAt <= now } == true }
        for key in due.map(\.key).sorted() {
            guard var held = streams[key] else { continue }
            if let at = held.retryAt, at <= now {
                held.retryAt = nil
                if held.muted != held.mutedByUs { sendMute(held.mutedByUs, &held, &out) }
                if held.volumeHold.base != nil, held.volumeHold.ramp == nil, let last = held.sent.last, !Self.close(last, held.volume) {
                    out.send(.setStreamVolume(held.reference, last), for: .stream(key))
                }
            }
            if held.volumeHold.ramp.map({ $0.nextAt <= now }) == true { stepRamp(&held, at: now, &out) }
            let released = held.volumeHold.base == nil && streams[key]?.volumeHold.base != nil
            streams[key] = held
            if released {
                journal(held, &out)
                if !held.isHeld, let name = held.memoryKey { putBackIfReleased(name, at: now, &out) }
            }
        }
        for name in memory.keys.sorted() where memory[name]?.putBackAt.map({ $0 <= now }) == true {
            memory[name]?.putBackAt = nil
            putBackIfReleased(name, at: now, &out)
        }
        for (name, key) in memory where key.settlesAt.map({ $0 <= now }) == true && key.putBackCommand == nil {
            if isHeld(memoryKey: name) { memory[name]?.settlesAt = nil } else { memory[name] = nil }
        }
    }

    // MARK: a predecessor's leftovers

    /// What a dead predecessor held (its journal), on the streams that are still there: taken over as
    /// our own holds (with the user's volume it recorded), so that the core decides anew whether they
    /// stay, and what goes back is the volume from before the first hold, never a ducked one.
    mutating func adopt(_ entries: [JournalEntry], remembered: [String: StreamRestoreEntry?], traces: [String: [ChannelVolumes]] = [:],
                        userVolumes: [String: [ChannelVolumes]] = [:], ramps: [String: [ChannelVolumes]] = [:], in snapshot: Snapshot, at now: Duration, from whom: String = "a previous run", _ out: inout Outbox) {
        for (name, entry) in remembered where memory[name] == nil {
            var key = RememberedKey(before: .known(entry))
            key.journaled = true
            // Its put-backs the user's change overtook (their writes may have landed after that change).
            key.overtakenPutBacks = traces[name] ?? []
            key.userVolumes = userVolumes[name] ?? []
            key.userVolumeStreams = key.userVolumes.map { _ in nil }
            let ends = ramps[name] ?? []
            for i in stride(from: 0, to: ends.count - 1, by: 2) { key.ramps.append(RememberedKey.Ramp(low: ends[i], high: ends[i + 1])) }
            // What our trace looks like, from what the predecessor held on the key's streams (gone or not):
            // a new stream given it is corrected as if this run had held them.
            // A ramp's ends, not its level alone: killed in the middle of one, it left a volume on the way.
            for held in entries where held.restoreKey == name {
                if held.muted { key.mutedOne = true }
                if held.moved == true { key.movedOne = true }
                if let base = held.base {
                    key.ours.append(Self.ducked(base, held.level ?? settings.policy.duckLevel))
                    // (No level: on its way back up from a level not known, so from anywhere below.)
                    key.ramps.append(RememberedKey.Ramp(low: Self.ducked(base, held.level ?? 0), high: base))
                }
            }
            memory[name] = key
        }
        for entry in entries {
            guard let stream = snapshot.stream(entry.direction, entry.index),
                  stream.properties["application.process.id"] == entry.processID else { continue }
            let key = StreamKey(stream)
            var held = streams[key] ?? HeldStream(stream, at: now - settings.memoryActsWithin)
            // Still as the predecessor left it: ours. Changed meanwhile (the user unmuted it, set a volume): the user's.
            if entry.muted && stream.isMuted { held.mute = .held }
            // Moved by the predecessor: the memory of the key's device goes back once it is gone.
            if entry.moved == true { held.moved = true }
            if let base = entry.base,
               base.values.count == stream.volume.values.count {
                if RememberedKey.Ramp(low: Self.ducked(base, entry.level ?? 0), high: base).contains(stream.volume) {
                    held.volumeHold = entry.level.map { .ducked(base: base, level: $0, shown: true, ramp: nil) }
                        ?? .rising(base: base, shown: true, ramp: nil)
                    held.noteSent(stream.volume, at: now)
                }
            }
            streams[key] = held
            if let name = held.memoryKey, memory[name] == nil, held.isHeld { rememberFromStream(held, name, &out) }
            journal(held, &out)
            out.log(.notice) { ("took over a hold \(whom) left", ["stream": "\(key)", "app": "\(entry.name)"]) }
        }
        // The other streams of the keys the predecessor held may have been given its trace by the server
        // while it was dying: checked as if they had just appeared.
        for stream in snapshot.streams(.output) + snapshot.streams(.input) {
            let key = StreamKey(stream)
            guard streams[key] == nil, let name = stream.properties["module-stream-restore.id"], remembered[name] != nil else { continue }
            var held = HeldStream(stream, at: now)
            // Linked already, its age is not known: a volume of an overtaken put-back, or one the user
            // set on a stream of its key, may be the user's own on it (soak seed 1 on PipeWire 1.4, twice:
            // the user's 50 % taken for ours and set to 70 %); what a duck of ours left is still undone.
            noteInheritance(&held, mute: stream.isMuted, volume: true, countingPutBacks: stream.device == nil, at: now)
            // Linked already, it has what the server gave it: a later change is the user's (a mute a
            // moment after the takeover was undone as our trace; soak seed 53 on PipeWire 1.4). One
            // not linked yet gets the memory when it is: still young.
            if stream.device != nil { held.firstSeen = now - settings.memoryActsWithin }
            streams[key] = held
        }
    }

    // MARK: inside

    /// The user set the stream's volume (`held.volume`) while volumes of ours may still be on their
    /// way: the server carries each out after the user's, and the user's is put back over them
    /// (`putBackOvertaken`). (A ramp's step sent before the agent saw the user's change: the soak.)
    private func userOvertook(_ held: inout HeldStream, at now: Duration) {
        if let overtaken = held.overtaken, now < overtaken.until {
            held.overtaken?.volume = held.volume
        } else if held.volumesOnTheirWay(at: now, within: settings.lateEchoesWithin) {
            held.overtaken = Overtaken(volume: held.volume, until: now + settings.lateEchoesWithin)
        } else {
            held.overtaken = nil
        }
    }

    /// The server showed a volume of ours on a stream that is no longer held: if it came after the
    /// user's (`overtaken`), the user's goes back.
    private func putBackOvertaken(_ held: inout HeldStream, at now: Duration, _ out: inout Outbox) {
        guard let users = held.overtaken else { return }
        let theirs = Self.close(held.volume, users.volume)
        if now >= users.until || theirs && held.sent[held.shownUpTo...].allSatisfy({ Self.close($0, users.volume) }) {
            held.overtaken = nil
        } else if !theirs, !held.sent[held.shownUpTo...].contains(where: { Self.close($0, users.volume) }) {
            // (Once: a put-back on its way lands after every step sent before it.)
            held.noteSent(users.volume, at: now)
            out.send(.setStreamVolume(held.reference, users.volume), for: .stream(held.key))
            let (key, late) = (held.key, held.volume)
            out.log(.notice) { ("a volume of ours landed after the user's: the user's put back", ["stream": "\(key)", "ours": "\(late)", "user": "\(users.volume)"]) }
        }
    }

    /// Records a change the user (or the app) made on a stream of a remembered key: the server keeps
    /// that stream's whole state for the key (its volume and mute as they would be without us), and
    /// that is what goes back there.
    private mutating func userSet(_ held: HeldStream, mute: Bool? = nil, volume: ChannelVolumes? = nil, _ out: inout Outbox) {
        guard let name = held.memoryKey, var key = memory[name], case .known(let entry) = key.before else { return }
        var updated = inferredEntry(held)
        // (The user's change of a volume or mute is no change of where the key's streams go.)
        updated.device = entry?.device
        if let mute { updated.isMuted = mute }
        // (Nor is a change of the mute one of the volume: the volume remembered stays. A stream of
        // pipewire-pulse may show the remembered mute while its volume still reads 0, a moment before
        // WirePlumber gives it the volume: taken for the user's, that 0 was put back, and the next
        // stream of the key was silent: the soak in the suite, seed 1 on PipeWire 0.3.)
        if let volume { updated.volume = volume } else if let entry { updated.volume = entry.volume }
        guard updated != entry else { return }
        if key.putBackCommand != nil, case .known(let writing)? = key.puttingBack, let volume = updated.volume {
            // Our write under way may land after this change: what it gives a new stream is ours. (Only
            // its volume: an overtaken mute is rare, and a new stream's inherited mute is corrected only
            // where we muted one of the key's streams, `mutedOne`.)
            // (Nothing remembered: a new stream plays at 100 %.)
            let stale: ChannelVolumes? = if let writing { writing.volume } else { ChannelVolumes(channels: volume.values.count, volume: .norm) }
            if let stale, !stale.values.isEmpty, !Self.close(stale, volume) {
                key.overtakenPutBacks = Array((key.overtakenPutBacks + [stale]).suffix(JournalChange.tracesPerKey))
                out.journal(.trace(name, stale))
                // (The journal keeps the latest `JournalChange.tracesPerKey` of them for a successor.)
            }
        }
        key.before = .known(updated)
        memory[name] = key
        if key.journaled { out.journal(.remember(name, updated)) }
        if let volume, !volume.values.isEmpty {
            // One per stream, its latest (a drag in a mixer is many changes of one stream: the volumes
            // set on the key's other streams stay).
            key.noteUserVolume(volume, on: held.key)
            memory[name] = key
            if key.journaled { out.journal(.userVolumes(name, key.userVolumes)) }
        }
        let remembered = updated
        out.log(.debug) { ("the user's change is what the server remembers", ["entry": "\(name)", "volume": "\(remembered.volume.map { "\($0)" } ?? "?")", "muted": "\(remembered.isMuted)"]) }
    }

    /// A stream's values may be what the server's memory of our hold gave it (PulseAudio as it is
    /// created, WirePlumber a moment after): while we hold its key, or just after putting it back,
    /// in its first seconds, a mute when the memory said unmuted, or one of the volumes we set on its
    /// key's streams when the memory said another. Such values are noted for `reconcile` to correct.
    /// `countingPutBacks`: false for a stream whose age is not known (found linked at a takeover): our
    /// overtaken put-backs do not count there (the volume, one the key had before us, may be the one the
    /// user gave that stream), nor does a volume on the way of a ramp that the user set on one of the
    /// key's streams.
    private func inheritance(_ held: HeldStream, mute: Bool, volume: Bool, countingPutBacks: Bool = true, at now: Duration) -> (mute: Bool, volume: ChannelVolumes?) {
        // (A stream that has shown no volume yet is given the memory whenever it comes: with the link on
        // PipeWire, which under load has come more than `memoryActsWithin` after the stream.)
        guard now - held.firstSeen < settings.memoryActsWithin || !held.shownVolume, let name = held.memoryKey, let key = memory[name],
              case .known(let entry) = key.before else { return (false, nil) }
        let mutedByMemory = mute && held.muted && !held.mutedByUs && key.mutedOne && entry?.isMuted != true
        // (A volume on the way of a ramp, on a stream of unknown age, that the user set on one of the
        // key's streams is the user's; an exact trace of ours is ours.)
        guard volume, case .free = held.volumeHold,
              key.traces(countingPutBacks: countingPutBacks).contains(where: { Self.close($0, held.volume) })
                || (key.ramps.contains(where: { $0.contains(held.volume) })
                    && (countingPutBacks || !key.userVolumes.contains(where: { Self.close($0, held.volume) })))
        else { return (mutedByMemory, nil) }
        // What it remembered before us: nothing, or an entry without a volume (a fresh stream then plays
        // at 100 %), a volume, or, where the memory cannot be read, an entry whose volume we never saw
        // (nothing to correct to).
        let channels = held.volume.values.count
        let natural: ChannelVolumes
        if let remembered = entry?.volume {
            guard !remembered.values.isEmpty, remembered.overall != .muted else { return (mutedByMemory, nil) }
            natural = remembered.values.count == channels ? remembered : ChannelVolumes(channels: channels, volume: remembered.overall)
        } else if entry == nil || ways.readable {
            natural = ChannelVolumes(channels: channels, volume: .norm)
        } else {
            return (mutedByMemory, nil)
        }
        return (mutedByMemory, Self.close(natural, held.volume) ? nil : natural)
    }

    private func noteInheritance(_ held: inout HeldStream, mute: Bool, volume: Bool, countingPutBacks: Bool = true, at now: Duration) {
        let found = inheritance(held, mute: mute, volume: volume, countingPutBacks: countingPutBacks, at: now)
        if found.mute {
            // (Already inherited: seen muted again before a reconcile, which a test can drive: the same.)
            guard held.mute != .held else { preconditionFailure("a mute of ours taken for the server's memory of one") }
            held.mute = .inherited
        }
        if let natural = found.volume {
            guard case .free = held.volumeHold else { preconditionFailure("a volume we hold taken for the server's memory of one") }
            held.volumeHold = .free(inherited: natural)
        }
    }

    /// At the first hold of a stream of a remembered key, what the server remembers of the key is
    /// taken: read (sent ahead of the hold's command, so the answer is the memory as it was), or,
    /// where the memory cannot be read, the stream's own values as they were before us.
    private mutating func remember(_ held: HeldStream, at now: Duration, _ out: inout Outbox) {
        guard let name = held.memoryKey else { return }
        if var key = memory[name] {
            // Put back a moment ago (or not yet): held again, with what it remembered before us.
            key.settlesAt = nil
            // (Held while its put-back is under way: what this hold leaves there may come after the
            // put-back's write, which then is not the end of it.)
            if key.putBackCommand != nil { key.heldDuringPutBack = true }
            if case .known(let entry) = key.before, !key.journaled {
                key.journaled = true
                out.journal(.remember(name, entry))
                // (Its put-back journaled cleared what a successor would need of it: written again.)
                for trace in key.overtakenPutBacks { out.journal(.trace(name, trace)) }
                if !key.userVolumes.isEmpty { out.journal(.userVolumes(name, key.userVolumes)) }
            }
            memory[name] = key
            return
        }
        if ways.readable {
            let id = out.send(.readStreamRestore, for: .memoryRead(name))
            var key = RememberedKey(before: .reading(id))
            key.provisional = inferredEntry(held)
            memory[name] = key
            // Write-ahead: the journal has an entry for the key before the hold's first command, taken
            // from the stream's own values as where the memory cannot be read; the read's answer
            // replaces it. (Killed before that answer, a run left its hold journaled and nothing of the
            // memory: its successor did not know a volume on the ramp's way as its trace, issue 20 7a.)
            out.journal(.remember(name, key.provisional))
        } else {
            rememberFromStream(held, name, &out)
        }
    }

    /// What the server remembers of the key, taken from the stream's own values (journaled at once).
    private mutating func rememberFromStream(_ held: HeldStream, _ name: String, _ out: inout Outbox) {
        let entry = inferredEntry(held)
        var key = RememberedKey(before: .known(entry))
        key.journaled = true
        memory[name] = key
        out.journal(.remember(name, entry))
        out.log(.debug) { ("what the server remembers, from the stream", ["entry": "\(name)", "volume": "\(entry.volume.map { "\($0)" } ?? "?")", "muted": "\(entry.isMuted)"]) }
    }

    /// What the server keeps for a stream's key when nothing of ours is in its values. A stream not
    /// linked yet has no volume to go by (pipewire-pulse reports 0 until WirePlumber links it).
    private func inferredEntry(_ held: HeldStream) -> StreamRestoreEntry {
        let natural: ChannelVolumes? = if case .free(let inherited) = held.volumeHold { inherited } else { nil }
        // (Never a volume that reads 0: pipewire-pulse shows a stream so until WirePlumber gives it its
        // volume, linked or not; no memory of a volume is better than a silent one.)
        let volume = held.volumeHold.base ?? natural ?? (held.volume.overall != .muted ? held.volume : nil)
        return StreamRestoreEntry(name: held.memoryKey ?? "", channelMap: held.channelMap, volume: volume, device: nil,
                                  isMuted: held.muted && held.mute == .free)
    }

    /// Once no stream of the key is held, the server's memory of it goes back as it was before us.
    private mutating func putBackIfReleased(_ name: String, at now: Duration, _ out: inout Outbox) {
        guard var key = memory[name], case .known(let entry) = key.before, key.putBackCommand == nil, key.settlesAt == nil,
              !isHeld(memoryKey: name) else { return }
        key.settlesAt = now + settings.putBackSettles
        out.log(.debug) { ("putting the server's memory back", ["entry": "\(name)", "volume": "\(entry?.volume.map { "\($0)" } ?? "-")",
                                                                "muted": "\(entry?.isMuted ?? false)"]) }
        key.puttingBack = key.before
        if ways.writable, let entry {
            // (With the device it remembered before us: read ahead of our first move of its streams.)
            key.putBackCommand = out.send(.writeStreamRestore([entry]), for: .memoryPutBack(name))
        } else if ways.throughStreams, let entry {
            let device: RememberedDevice = key.movedOne ? .set(entry.device) : .untouched
            key.putBackCommand = out.send(.writeMemoryThroughStream(entry, device: device), for: .memoryPutBack(name))
        } else if ways.deletable {
            key.putBackCommand = out.send(.deleteStreamRestore([name]), for: .memoryPutBack(name))
        } else {
            key.journaled = false
            out.journal(.putBack(name))
        }
        memory[name] = key
    }

    /// Some memory of an app or role still has our trace, not put back (the journal keeps it).
    var memoryLeftChanged: Bool { memory.values.contains { $0.journaled } }

    /// Whether a stream of the remembered key is held now.
    private func isHeld(memoryKey name: String) -> Bool {
        streams.values.contains { $0.memoryKey == name && $0.isHeld }
    }

    private func journal(_ held: HeldStream, _ out: inout Outbox) {
        out.journal(.hold(held.key, held.isHeld ? Self.entry(held) : nil))
    }

    private static func entry(_ held: HeldStream) -> JournalEntry {
        JournalEntry(
            direction: held.key.direction, index: held.key.index, processID: held.processID, name: held.name,
            muted: held.mutedByUs, baseVolume: held.volumeHold.base?.values.map(\.rawValue), level: held.volumeHold.level,
            restoreKey: held.memoryKey, moved: held.moved)
    }

    /// What is held now, as the journal says it: kept when the connection is lost, and taken over on the
    /// streams still there when it comes back (a server that stalled still has them, muted or ducked by
    /// us; one that restarted has none).
    /// A stream let go whose release the server has not shown yet (an unmute, or the way back up, sent
    /// into a stalled connection that may drop it) counts too, as the server last showed it: taken over,
    /// it is let go again.
    var heldEntries: [JournalEntry] {
        streams.values.sorted { $0.key < $1.key }.compactMap { held in
            if held.isHeld { return Self.entry(held) }
            let unmuteUnshown = held.muted && !held.muteEchoes.isEmpty
            let upUnshown = held.shownUpTo < held.sent.count ? held.sent.last : nil
            guard unmuteUnshown || upUnshown != nil else { return nil }
            var entry = Self.entry(held)
            entry.muted = unmuteUnshown
            // (On its way back up to the last volume sent: taken over as a hold going up, from anywhere below.)
            entry.baseVolume = upUnshown.map { $0.values.map(\.rawValue) }
            entry.level = nil
            return entry
        }
    }

    private func sendMute(_ muted: Bool, _ held: inout HeldStream, _ out: inout Outbox, for purpose: Purpose? = nil) {
        // A report showing the other value before ours has landed is older than our command.
        // Each value sent that the server will show: an unmute sent and a mute right after it (before the
        // unmute was shown) are two echoes, not a user's unmute and then ours.
        if !(held.muteEchoes.isEmpty && held.muted == muted) { held.muteEchoes = Array((held.muteEchoes + [muted]).suffix(16)) }
        out.send(.setStreamMute(held.reference, muted), for: purpose ?? .stream(held.key))
    }

    /// Steps the stream's volume to `target` over `duration`: the first step now, the rest at the timer.
    private mutating func startRamp(_ held: inout HeldStream, to target: ChannelVolumes, over duration: Duration,
                                    at now: Duration, _ out: inout Outbox) {
        let from = held.volumeHold.ramp.map { $0.value(at: $0.done) } ?? (held.volumeHold.shown ? held.sent.last : nil) ?? held.volume
        let steps = max(1, Int(duration / settings.rampStep))
        held.volumeHold = held.volumeHold.along(Ramp(from: from, to: target, start: now, step: settings.rampStep, steps: steps))
        stepRamp(&held, at: now, &out)
    }

    private mutating func stepRamp(_ held: inout HeldStream, at now: Duration, _ out: inout Outbox) {
        guard var ramp = held.volumeHold.ramp else { return }
        let due = min(ramp.steps, Int((now - ramp.start) / ramp.step) + 1)
        guard due > ramp.done else { return }
        ramp.done = due
        let volume = ramp.value(at: due)
        // Exactly where the stream is already, every step before it shown: the server shows no change for
        // it, so it is shown now (a duck down to where the server's memory of our duck had put a new
        // stream was never "shown", and the user's volume after it was taken for an old report: the
        // suite's soak, seed 1 on PulseAudio). Exactly: a step merely close is a change the server shows,
        // and until it does, a user's volume before it is put back over it (`putBackOvertaken`).
        let showsNoChange = held.shownUpTo == held.sent.count && volume == held.volume
        held.noteSent(volume, at: now)
        if showsNoChange {
            held.shownUpTo = held.sent.count
            held.volumeHold = held.volumeHold.seen
        }
        if let name = held.memoryKey, var key = memory[name] {
            key.ours = Array((key.ours + [volume]).suffix(64))
            memory[name] = key
        }
        out.send(.setStreamVolume(held.reference, volume), for: .stream(held.key))
        if ramp.done < ramp.steps {
            held.volumeHold = held.volumeHold.along(ramp)
        } else if case .rising = held.volumeHold {
            // Back up at the user's volume: nothing held any more.
            held.volumeHold = .free(inherited: nil)
        } else {
            held.volumeHold = held.volumeHold.along(nil)
        }
    }

    /// The volume `base` lowered to an amplitude of `level` (the server's volume scale is cubic in amplitude).
    static func ducked(_ base: ChannelVolumes, _ level: Double) -> ChannelVolumes {
        let factor = cbrt(level)
        return ChannelVolumes(base.values.map { Volume(fraction: $0.fraction * factor) })
    }

    /// pipewire-pulse rounds volumes through floats: this far apart (half a percent) is the same volume.
    static let tolerance = Int64(Volume.norm.rawValue) / 200

    static func close(_ a: ChannelVolumes, _ b: ChannelVolumes) -> Bool { a.isClose(to: b, within: tolerance) }
}

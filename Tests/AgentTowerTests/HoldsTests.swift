import AudioPolicy
import Glibc
@testable import AgentTower
import ServerModel
import Testing
import TowerTesting

/// What the agent holds and what the server remembers, on an in-memory server of each kind, under a
/// manual clock (SPEC.md 5.4, 5.11, 5.12).
@Suite("holds")
struct HoldsTests {
    static let ducked = cbrt(0.2)

    @Test("a duck ramps down and back up to the user's volume, and the server's memory goes back as it was", arguments: InMemoryServer.Kind.allCases)
    func duckRampsAndLeavesNoTrace(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.deliver()
        #expect(w.volume(song)! > Self.ducked + 0.01, "the first step only, at once")
        w.advance(.milliseconds(200))
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01)
        w.server.stop(voice)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - 1) < 0.01)
        if kind != .wirePlumber05 {
            #expect(w.server.memory["sink-input-by-media-role:music"]?.volume?.values.first.map { abs($0.fraction - 1) < 0.01 } != false,
                    "\(String(describing: w.server.memory["sink-input-by-media-role:music"]))")
        }
    }

    @Test("a player started during a duck is ducked from the volume it would have had, and goes back to it", arguments: InMemoryServer.Kind.allCases)
    func newPlayerDuringDuck(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [mixer])
        Self.mixerStartedDuringADuck(&w)
    }

    /// Music playing, a reader ducking it, a player that mixes started during the duck: ducked from
    /// 100 %, and both back at 100 % once the reader stops.
    static func mixerStartedDuringADuck(_ w: inout TowerWorld, sourceLocation: SourceLocation = #_sourceLocation) {
        let (song, voice) = Self.musicDuckedByAReader(&w)
        let second = w.server.play(music, name: "Mixer", pid: 3)
        w.deliver()
        w.advance(.seconds(1))
        #expect(abs(w.volume(second)! - ducked) < 0.01, "ducked from 100 %, not from the remembered duck: \(w.volume(second)!)",
                sourceLocation: sourceLocation)
        w.server.stop(voice)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - 1) < 0.01, sourceLocation: sourceLocation)
        #expect(abs(w.volume(second)! - 1) < 0.01, "\(w.volume(second)!)", sourceLocation: sourceLocation)
    }

    /// Found by the suite under load: PulseAudio saves a stream's entry without a volume when no one set
    /// one, and a read that came after that save found such an entry. A fresh stream then plays at 100 %,
    /// which is what a player started during the duck must be ducked from and go back to.
    @Test("PulseAudio: an entry read without a volume means 100 % for a player started during a duck")
    func entryWithoutVolume() {
        var w = TowerWorld(.pulseAudio, policies: [mixer])
        let name = "sink-input-by-media-role:music"
        w.server.memory[name] = StreamRestoreEntry(name: name, channelMap: ["front-left", "front-right"], volume: nil, device: nil, isMuted: false)
        Self.mixerStartedDuringADuck(&w)
        #expect(w.server.memory[name]?.volume == nil, "the entry goes back without a volume: \(String(describing: w.server.memory[name]))")
    }

    /// Found by the suite under load on PipeWire 1.4: a player that mixes, started during a call, came
    /// linked, at its volume and with the mute WirePlumber remembered from our hold, all in one report;
    /// its volume, judged first, took the stream's whole state (the mute too) for the user's.
    @Test("PipeWire: a stream whose first linked report brings our remembered mute with its volume is unmuted",
          arguments: [InMemoryServer.Kind.wirePlumber04, .wirePlumber05])
    func mutedByMemoryInTheLinkingReport(_ kind: InMemoryServer.Kind) {
        let server = InMemoryServer(kind)
        server.linksWithMemory = true
        var w = TowerWorld(server: server, policies: [mixer])
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let call = w.server.play(phone, name: "Call", pid: 2)
        w.deliver()
        #expect(w.muted(song) == true)
        let second = w.server.play(music, name: "Mixer", pid: 3)
        w.deliver()
        #expect(w.muted(second) == false, "\(w.log.suffix(8).joined(separator: "\n"))")
        withExtendedLifetime(call) {}
    }

    /// A command the server refuses goes back to the decision (issue 10): a mute refused every time is
    /// tried again, then given up, and the core is told it holds nothing there; the stream plays on,
    /// and nothing of ours is left once the call is over.
    /// Found by the soak on PipeWire 0.3 (seed 2): WirePlumber 0.4 follows a stream-restore write only
    /// when it changes the "route-settings" metadata, and a ducked stream's own save does not touch that;
    /// the second put-back of the same entry was not seen, and a fresh stream started ducked.
    @Test("the memory goes back after every duck of a stream that went away ducked, also when the entry is the same",
          arguments: InMemoryServer.Kind.allCases)
    func samePutBackTwice(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        for round in 1...3 {
            let song = w.server.play(music, name: "Music", pid: 10 + round)
            w.deliver()
            let voice = w.server.play(reader, name: "Reader", pid: 20 + round)
            w.advance(.seconds(1))
            #expect(w.volume(song)! < 0.9, "round \(round): ducked")
            w.server.stop(song)
            w.deliver()
            w.server.stop(voice)
            w.advance(.seconds(10))
            let fresh = w.server.play(music, name: "Fresh", pid: 30 + round)
            w.deliver()
            #expect(abs(w.volume(fresh)! - 1) < 0.01, "round \(round): a fresh stream at \(w.volume(fresh)!)")
            w.server.stop(fresh)
            w.advance(.seconds(10))
        }
    }

    /// Issue 20 case 3: a command the server leaves unanswered was counted as a refusal, and after three
    /// the hold was given up and undone; when the server answered again, the music played through the call.
    @Test("a mute a wedged server leaves unanswered is no refusal: the hold stays, carried out when it catches up, and undone at the call's end",
          arguments: InMemoryServer.Kind.allCases)
    func unansweredMuteStays(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        w.server.wedge()
        let call = w.server.play(phone, name: "Call", pid: 2)
        w.advance(.seconds(5))
        #expect(!w.log.contains { $0.contains("giving it up") }, "\(w.log.suffix(10).joined(separator: "\n"))")
        #expect(w.log.filter { $0.contains("did not answer a command on a stream; the hold stays") }.count == 1, "said once")
        w.server.unwedge()
        w.advance(.seconds(1))
        #expect(w.muted(song) == true, "held through the call once the server catches up")
        #expect(!w.log.contains { $0.contains("the user's change") }, "our late mute is not taken for the user's")
        w.server.stop(call)
        w.advance(.seconds(5))
        #expect(w.muted(song) == false)
        #expect(abs(w.volume(song)! - 1) < 0.01)
        w.advance(.seconds(10))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.isMuted != true, "the server remembers no mute of ours")
    }

    /// Issue 20 case 3: the connection to a stalled server taken as lost, and made again: the music's
    /// mute, still there, was taken for the user's (a stream found muted), so it stayed muted after the
    /// call; and the ducked reader's music stayed at the duck level.
    @Test("a connection lost while the server lives on: what was held is taken over when it comes back, and let go at the end",
          arguments: InMemoryServer.Kind.allCases)
    func holdsKeptAcrossALostConnection(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let (song, call) = Self.musicMutedByACall(&w)
        w.server.dropConnection()
        w.advance(.seconds(30))
        #expect(w.tower.statusReport().serverLost?.contains("stopped answering") == true)
        #expect(w.tower.statusReport().secondsServerLost != nil)
        w.server.connectAgain()
        w.advance(.seconds(1))
        #expect(w.tower.statusReport().serverLost == nil)
        #expect(w.log.contains { $0.contains("took over a hold the lost connection left") }, "\(w.log.suffix(20).joined(separator: "\n"))")
        #expect(w.muted(song) == true, "still held: the call goes on")
        w.server.stop(call)
        w.advance(.seconds(5))
        #expect(w.muted(song) == false, "let go at the call's end: \(w.log.suffix(20).joined(separator: "\n"))")
        // A duck across a lost connection: back to the user's volume at its end.
        let voice = w.server.play(reader, name: "Reader", pid: 3)
        w.advance(.seconds(1))
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01)
        w.server.dropConnection()
        w.advance(.seconds(2))
        w.server.connectAgain()
        w.advance(.seconds(1))
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01, "still ducked")
        w.server.stop(voice)
        w.advance(.seconds(3))
        #expect(abs(w.volume(song)! - 1) < 0.01, "back up: \(w.volume(song)!)")
    }

    @Test("a mute the server refuses is tried again, then given up", arguments: InMemoryServer.Kind.allCases)
    func refusedMute(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        w.server.refuse = { if case .setStreamMute = $0 { return true } else { return false } }
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let call = w.server.play(phone, name: "Call", pid: 2)
        w.advance(.seconds(5))
        #expect(w.log.contains { $0.contains("a command on a stream failed; trying again") })
        #expect(w.log.contains { $0.contains("could not hold the stream; giving it up") }, "\(w.log.suffix(10).joined(separator: "\n"))")
        #expect(w.muted(song) == false)
        w.server.refuse = { _ in false }
        w.server.stop(call)
        w.advance(.seconds(5))
        #expect(w.muted(song) == false)
        #expect(abs(w.volume(song)! - 1) < 0.01)
    }
}

extension HoldsTests {
    /// Music playing (process 1), then a call (process 2) that has muted it a second later.
    static func musicMutedByACall(_ w: inout TowerWorld, sourceLocation: SourceLocation = #_sourceLocation) -> (song: UInt32, call: UInt32) {
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let call = w.server.play(phone, name: "Call", pid: 2)
        w.advance(.seconds(1))
        #expect(w.muted(song) == true, sourceLocation: sourceLocation)
        return (song, call)
    }

    /// Music playing (process 1), then a screen reader's voice (process 2) that has ducked it a second later.
    static func musicDuckedByAReader(_ w: inout TowerWorld) -> (song: UInt32, voice: UInt32) {
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.advance(.seconds(1))
        return (song, voice)
    }

    /// Found in review: a release sent into a stalled connection (the duck's way back up, an unmute) that
    /// the server drops with the connection left the stream ducked or muted for good: let go, it was not
    /// among what the agent kept across the loss, and found so again it looked like the user's.
    @Test("a release the stalled server dropped with the connection is sent again when it comes back",
          arguments: InMemoryServer.Kind.allCases)
    func releaseDroppedWithTheConnection(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let (song, voice) = Self.musicDuckedByAReader(&w)
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01)
        let call = w.server.play(phone, name: "Call", pid: 3)
        w.advance(.seconds(1))
        #expect(w.muted(song) == true)
        w.server.wedge()
        w.server.stop(voice)
        w.server.stop(call)
        w.advance(.seconds(3))
        w.server.dropConnection()
        w.server.unwedgeDroppingBacklog()
        w.advance(.seconds(1))
        w.server.connectAgain()
        w.advance(.seconds(3))
        #expect(w.muted(song) == false, "\(w.log.suffix(12).joined(separator: "\n"))")
        #expect(abs(w.volume(song)! - 1) < 0.01, "back up: \(w.volume(song)!)")
    }

    /// Found by the suite under load (PipeWire 0.3, CI): the user set the music's volume while the memory
    /// of its role was being put back after a duck, and the put-back's write reached WirePlumber after the
    /// user's change. The server kept the volume from before the user's change, and the agent took the
    /// memory for put back: the next music stream started there.
    @Test("the user's volume set while the server's memory is being put back is what the server keeps",
          arguments: [InMemoryServer.Kind.wirePlumber04, .wirePlumber05])
    func userChangeDuringAPutBack(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let key = "sink-input-by-media-role:music"
        let (song, voice) = Self.musicDuckedByAReader(&w)
        w.server.writesLandLate = true
        w.holdsAnswers = true
        w.server.stop(voice)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - 1) < 0.01)
        #expect(w.log.contains { $0.contains(" send writeMemoryThroughStream") }, "the put-back is under way")
        w.server.userSetVolume(song, 0.8)
        w.deliver()
        // Our write lands after the user's change, then it is answered.
        w.server.landWrites()
        w.server.writesLandLate = false
        w.releaseAnswers()
        w.advance(.seconds(1))
        let kept = w.server.memory[key]?.volume?.values.first?.fraction
        #expect(kept.map { abs($0 - 0.8) < 0.01 } == true, "the server keeps \(kept.map { "\($0)" } ?? "nothing"): \(w.log.suffix(8).joined(separator: "\n"))")
        #expect(abs(w.volume(song)! - 0.8) < 0.01)
    }

    /// Soak seed 113 (PipeWire 1.4, 10 minutes): just after pipewire-pulse restarted, the memory of the
    /// music's role, left at our duck by a stream gone ducked, was being put back through a probe stream
    /// when the agent was told to stop. Another key's probe waited 3 s to be linked and failed; the stop
    /// gave up after its own 3 s with the music's put-back unanswered, and with no agent the next music
    /// stream started at the duck's 49 %. The stop now waits longer for put-backs of the memory.
    @Test("stopping waits for a put-back of the server's memory under way, longer than for other commands",
          arguments: [InMemoryServer.Kind.wirePlumber04, .wirePlumber05])
    func stopWaitsForAPutBack(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let key = "sink-input-by-media-role:music"
        let (song, voice) = Self.musicDuckedByAReader(&w)
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01)
        // Gone ducked: the server remembers the duck; the put-back is slow to land and to be answered.
        w.server.writesLandLate = true
        w.holdsAnswers = true
        w.server.stop(song)
        w.deliver()
        #expect(w.log.contains { $0.contains(" send writeMemoryThroughStream") }, "the put-back is under way")
        w.stop()
        w.advance(.seconds(5))
        #expect(!w.tower.isFinished, "still waiting for the put-back: \(w.log.suffix(6).joined(separator: "\n"))")
        w.server.landWrites()
        w.server.writesLandLate = false
        w.releaseAnswers()
        #expect(w.tower.isFinished)
        #expect(w.log.contains { $0.contains("stopped; nothing left held") }, "\(w.log.suffix(6).joined(separator: "\n"))")
        #expect(abs((w.server.memory[key]?.volume?.values.first?.fraction ?? 0) - 1) < 0.01, "\(String(describing: w.server.memory[key]))")
        withExtendedLifetime(voice) {}
    }

    /// A put-back never answered: the stop ends at its memory deadline all the same, and says the journal
    /// keeps it (the next run puts it back). Asked to stop again meanwhile (a second Ctrl-C), nothing is
    /// sent again: the stop under way goes on.
    @Test("a put-back never answered ends the stop at its memory deadline, the journal keeping it; a second stop request changes nothing",
          arguments: [InMemoryServer.Kind.wirePlumber04, .wirePlumber05])
    func putBackNeverAnsweredAtTheStop(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let (song, voice) = Self.musicDuckedByAReader(&w)
        w.holdsAnswers = true
        w.server.stop(song)
        w.deliver()
        w.stop()
        let sent = w.log.filter { $0.contains(" send ") }.count
        w.advance(.seconds(4))
        w.stop()
        #expect(w.log.filter { $0.contains(" send ") }.count == sent, "nothing sent again: \(w.log.suffix(6).joined(separator: "\n"))")
        #expect(!w.tower.isFinished)
        #expect(w.tower.nextDeadline.map { $0 > w.now } == true, "a deadline to come, not one past")
        w.advance(w.tower.settings.stopTimeoutForMemory)
        #expect(w.tower.isFinished)
        #expect(w.log.contains { $0.contains("the journal keeps it for the next run") }, "\(w.log.suffix(6).joined(separator: "\n"))")
        withExtendedLifetime(voice) {}
    }

    /// The same soak run: a put-back that fails while the agent stops (a probe not linked in time) was
    /// left for 5 s later, which never came: it is tried again at once.
    @Test("a put-back of the server's memory that fails while stopping is tried again at once",
          arguments: [InMemoryServer.Kind.wirePlumber04, .wirePlumber05])
    func putBackFailingAtTheStop(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let key = "sink-input-by-media-role:music"
        let (song, voice) = Self.musicDuckedByAReader(&w)
        w.server.stop(song)
        w.advance(.seconds(1))
        // Held again by a new stream of the key, then the agent stops: the first write of the memory fails.
        let again = w.server.play(music, name: "Music", pid: 3)
        w.advance(.seconds(1))
        #expect(abs(w.volume(again)! - Self.ducked) < 0.01)
        w.server.stop(again)
        var refusals = 1
        w.server.refuse = { command in
            guard case .writeMemoryThroughStream = command, refusals > 0 else { return false }
            refusals -= 1
            return true
        }
        w.stop()
        #expect(w.log.contains { $0.contains("could not put the server's memory back") }, "\(w.log.suffix(8).joined(separator: "\n"))")
        #expect(w.tower.isFinished)
        #expect(w.log.contains { $0.contains("stopped; nothing left held") }, "\(w.log.suffix(8).joined(separator: "\n"))")
        #expect(abs((w.server.memory[key]?.volume?.values.first?.fraction ?? 0) - 1) < 0.01, "\(String(describing: w.server.memory[key]))")
        withExtendedLifetime(voice) {}
    }

    /// Seen once in the soak on PipeWire 1.4: a put-back that failed (a probe's write not shown in time)
    /// was left for the next connection or run, and the app's next stream, with no agent, started muted.
    @Test("a put-back of the server's memory that fails is tried again a while later", arguments: InMemoryServer.Kind.allCases)
    func failedPutBackIsTriedAgain(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let (song, call) = Self.musicMutedByACall(&w)
        w.server.refuse = { command in
            switch command {
            case .writeStreamRestore, .writeMemoryThroughStream, .deleteStreamRestore: true
            default: false
            }
        }
        w.server.stop(song)
        w.advance(.seconds(1))
        #expect(w.log.contains { $0.contains("could not put the server's memory back") })
        w.server.refuse = { _ in false }
        w.advance(.seconds(10))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.isMuted != true,
                "\(String(describing: w.server.memory["sink-input-by-media-role:music"])): \(w.log.suffix(8).joined(separator: "\n"))")
        withExtendedLifetime(call) {}
    }
}

extension HoldsTests {
    /// Read after soak seed 142 (PipeWire 1.4): the memory of a role being put back through a probe
    /// (slow to be answered) when a new stream of the role was ducked and went away ducked: its duck is
    /// what the server remembers then, but the put-back's late answer was taken for the memory being
    /// back, with nothing written again. A key held again while its put-back was under way is written
    /// again once that put-back is answered and nothing holds it.
    @Test("a key held again and let go while its put-back was under way is put back again after the answer",
          arguments: InMemoryServer.Kind.allCases)
    func heldAgainDuringAPutBack(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let key = "sink-input-by-media-role:music"
        let (song, voice) = Self.musicDuckedByAReader(&w)
        w.server.stop(song)
        w.holdsAnswers = true
        w.deliver()
        let putBacks = { w.log.filter { $0.contains(" send writeMemoryThroughStream") || $0.contains(" send writeStreamRestore") || $0.contains(" send deleteStreamRestore") }.count }
        #expect(putBacks() == 1, "the put-back is under way")
        // A new stream of the role, ducked by the reader still speaking, then gone ducked.
        let again = w.server.play(music, name: "Music", pid: 3)
        w.advance(.seconds(1))
        #expect(abs(w.volume(again)! - Self.ducked) < 0.01, "\(w.log.suffix(8).joined(separator: "\n"))")
        w.server.stop(again)
        w.deliver()
        w.releaseAnswers()
        w.advance(.seconds(6))
        let kept = w.server.memory[key]?.volume?.values.first?.fraction
        // (PulseAudio: it remembered nothing before us, and nothing is what it keeps: 100 %.)
        #expect(kept.map { abs($0 - 1) < 0.01 } ?? (kind == .pulseAudio), "the server keeps \(kept.map { "\($0)" } ?? "nothing"): \(w.log.suffix(10).joined(separator: "\n"))")
        #expect(putBacks() == 2, "written once more, and no more")
        withExtendedLifetime(voice) {}
    }
}

extension HoldsTests {
    /// The suite's soak, seed 1 on PulseAudio: a music stream started while another was ducked, so the
    /// server's memory gave it our duck (58 %), and the reader still spoke, so it was ducked at once:
    /// from 100 % (what it would have had) to 58 %, where it already was. The server showed none of
    /// those steps (no change), so the duck was never "shown", and the user's 50 % a few seconds later
    /// was taken for a report older than our first step: ignored, and the way back up went to 100 %.
    /// A step sent exactly to where the stream is, every earlier one shown, is shown at once.
    @Test("the user's volume on a stream ducked to where the server's memory had put it wins", arguments: InMemoryServer.Kind.allCases)
    func userVolumeOnAStreamDuckedWhereItWas(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let (first, voice) = Self.musicDuckedByAReader(&w)
        #expect(abs(w.volume(first)! - Self.ducked) < 0.01)
        let second = w.server.play(music, name: "Music", pid: 3)
        w.advance(.seconds(3))
        #expect(abs(w.volume(second)! - Self.ducked) < 0.01, "ducked: \(w.log.suffix(8).joined(separator: "\n"))")
        w.server.userSetVolume(second, 0.5)
        w.advance(.seconds(1))
        w.server.stop(voice)
        w.advance(.seconds(5))
        #expect(abs(w.volume(second)! - 0.5) < 0.01, "the user's 50 % stands: \(w.log.suffix(12).joined(separator: "\n"))")
        #expect(abs(w.volume(first)! - 1) < 0.01)
    }

    /// The soak, seed 174 on PipeWire 1.4, its log read: a new alarm stream, shown unlinked at 0 %, was
    /// moved to the sink its policy names and ducked at once (a volume hold begun on no volume: 0 %
    /// ducked is 0 %, a step shown at once); WirePlumber then linked it with the role's memory, our duck
    /// of another stream of the role (18 %), which the agent took for the user's volume: the role's
    /// memory before us became 18 %, and the stop put that back. (PipeWire 1.4's pipewire-pulse shows
    /// the unlinked stream running, so its session is active and its route carried out; 0.3.65's shows
    /// it corked until it is linked.) The link may come late: under load WirePlumber has taken longer
    /// than the memory's usual moment (`memoryActsWithin`).
    @Test("PipeWire 1.4: a stream moved before it is linked is ducked from what it would have had; the duck WirePlumber's link brings is not the user's",
          arguments: [Duration.zero, .seconds(5)])
    func movedBeforeItIsLinked(linkAfter: Duration) {
        let kind = InMemoryServer.Kind.wirePlumber05
        let speakers = AppPolicy(name: "speakers-only", match: .init(name: ["Speakers Only"]), configuration: SessionConfiguration(.playback),
                                 preferredOutputs: [.type(.builtInSpeaker)])
        var w = TowerWorld(kind, policies: [speakers])
        w.server.plug(sink: "usb_headset", description: "USB Headset", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        let (song, voice) = Self.musicDuckedByAReader(&w)
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01)
        w.server.linksLater = true
        let second = w.server.play(music, name: "Speakers Only", pid: 3)
        w.deliver()
        w.advance(linkAfter)
        let speaker = w.server.snapshot.sinks.values.first { $0.name == "builtin_speaker" }?.id
        #expect(w.server.stream(second)?.device == speaker, "moved before it is linked")
        #expect(!w.log.contains { $0.contains("send setStreamVolume(sink input #\(second),") }, "no volume sent before it has one")
        w.server.link(second)
        w.advance(.seconds(1))
        #expect(abs(w.volume(second)! - Self.ducked) < 0.01, "ducked from 100 %: \(w.volume(second)!)")
        w.server.stop(voice)
        w.advance(.seconds(5))
        #expect(abs(w.volume(second)! - 1) < 0.01, "back to 100 %, not to our duck: \(w.volume(second)!) \(w.log.suffix(12).joined(separator: "\n"))")
        #expect(abs(w.volume(song)! - 1) < 0.01)
        w.server.stop(second)
        w.server.stop(song)
        w.advance(.seconds(5))
        let remembered = w.server.memory["sink-input-by-media-role:music"]?.volume?.values.first?.fraction
        #expect(remembered.map { abs($0 - 1) < 0.01 } != false, "the role's memory as before us: \(String(describing: remembered))")
    }

    /// Found in review of the fix above: a stream the user had turned down to 0 is still ducked when a
    /// reader speaks (from 0, where it is), so that the user's raise during the duck wins as on any
    /// ducked stream (5.11) instead of being ducked at once.
    @Test("the user's raise of a stream they had at 0, during a duck, wins", arguments: InMemoryServer.Kind.allCases)
    func userRaisesAStreamTheyHadAtZero(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        w.server.userSetVolume(song, 0)
        w.advance(.seconds(1))
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.advance(.seconds(1))
        w.server.userSetVolume(song, 0.5)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - 0.5) < 0.01, "the user's 50 % stands while the reader speaks: \(w.volume(song)!) \(w.log.suffix(10).joined(separator: "\n"))")
        w.server.stop(voice)
        w.advance(.seconds(5))
        #expect(abs(w.volume(song)! - 0.5) < 0.01, "\(w.volume(song)!)")
    }

    /// The soak, seed 188 on PipeWire 1.4 (its log read): an alarm ducked when the server went away, so
    /// WirePlumber kept the duck for the role; the next connection began putting the role's memory back
    /// (through a probe), and the server went away again before it was answered. The lost connection
    /// cleared the put-back under way but not its settling time, so the next connection did not send it
    /// again, and the settling time's end forgot the key: WirePlumber kept our duck (18 %) for good.
    @Test("WirePlumber 0.5: a put-back of the memory under way when the server goes away is sent again on the next connection")
    func putBackUnderWayWhenTheServerGoes() {
        var w = TowerWorld(.wirePlumber05)
        let (song, _) = Self.musicDuckedByAReader(&w)
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01)
        let key = "sink-input-by-media-role:music"
        // The server goes away with the music ducked: it remembers the duck.
        w.server.writesLandLate = true
        w.holdsAnswers = true
        w.server.restart()
        w.advance(.seconds(1))
        #expect(w.log.contains { $0.contains("putting the server's memory back") && $0.contains(key) }, "the put-back begun")
        // ... and again, the put-back's probe not landed nor answered.
        w.server.writesLandLate = false
        w.server.restart()
        w.holdsAnswers = false
        w.advance(.zero)
        // (The lost probe's answer, if any comes, comes after the new connection.)
        w.releaseAnswers()
        w.advance(.seconds(15))
        let remembered = w.server.memory[key]?.volume?.values.first?.fraction
        #expect(remembered.map { abs($0 - 1) < 0.01 } == true, "the role's memory as before us: \(String(describing: remembered)) \(w.log.filter { $0.contains("memory") || $0.contains("send write") || $0.contains("lost") }.joined(separator: "\n"))")
    }
}

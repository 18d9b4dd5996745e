import AudioPolicy
import Glibc
@testable import AgentTower
@testable import PolicyAgent
import Testing
import TowerTesting

/// The tower's holds with the shell's journal file: what a successor after a "kill -9" finds.
@Suite("holds and the journal file")
struct HoldsJournalTests {
    static let ducked = cbrt(0.2)

    /// Ducks that take a second to ramp down: long enough to be caught in the middle.
    static let slowDucks: AgentSettings = {
        var settings = AgentSettings()
        settings.policy.duckRampDown = .seconds(1)
        return settings
    }()

    /// A tower on a fresh in-memory server, journaling to a file in `scratch`.
    static func world(_ kind: InMemoryServer.Kind, journalIn scratch: Scratch, settings: AgentSettings = AgentSettings()) -> TowerWorld {
        TowerWorld(server: InMemoryServer(kind), settings: settings, journal: Journal(directory: scratch.path))
    }

    /// Issue 20 case 7a: an agent killed in the middle of a duck's ramp, the server restarted, a new music
    /// stream given the mid-ramp volume the server remembered: the successor knew the duck's end only
    /// (its journal said the level), not the volumes on the way, and left the stream at 43 %.
    @Test("killed in the middle of a ramp: a new stream given a volume on the ramp's way is put back by the successor",
          arguments: InMemoryServer.Kind.allCases)
    func midRampVolumeIsOurs(_ kind: InMemoryServer.Kind) {
        let scratch = Scratch()
        defer { scratch.remove() }
        let settings = Self.slowDucks
        var w = Self.world(kind, journalIn: scratch, settings: settings)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        _ = w.server.play(reader, name: "Reader", pid: 2)
        w.advance(.milliseconds(400))
        let midway = w.volume(song)!
        #expect(midway < 0.95 && midway > Self.ducked + 0.05, "in the middle of the ramp: \(midway)")
        // kill -9, then the server restarts: streams gone, its memory kept (the mid-ramp volume, where
        // every client's volume is saved).
        w.server.restart()
        _ = w.server.takeEvents()
        let remembered = w.server.memory["sink-input-by-media-role:music"]?.volume?.values.first?.fraction
        let server = w.server
        // The successor starts, and a player with it, before the server has carried out the successor's
        // put-back of its memory (a busy server, just restarted): the stream is given the mid-ramp volume.
        server.wedge()
        var next = TowerWorld(server: server, settings: settings, leftovers: Journal(directory: scratch.path).leftovers(),
                              journal: Journal(directory: scratch.path), now: w.now)
        let fresh = next.server.play(music, name: "Music", pid: 3)
        next.deliver()
        next.server.unwedge()
        next.advance(.seconds(2))
        #expect(abs(next.volume(fresh)! - 1) < 0.01, "given \(remembered.map { "\($0)" } ?? "-"), now \(next.volume(fresh)!): \(next.log.suffix(12).joined(separator: "\n"))")
    }

    /// The suite's soak, seed 1 on PipeWire 1.4 (its log read): the predecessor held one movie ducked
    /// (from the user's 70 %); the user set 50 % on a second movie of the role, then 70 % on a third,
    /// so the role's memory said 70 %; killed (-9), the successor found the second movie playing at
    /// 50 %, on the way of the ducked movie's ramp (its journal has the ramp's ends), took it for a
    /// volume the server's memory gave it, and set 70 %. The volumes the user set on the role's streams
    /// are journaled: a stream found playing at a takeover with one of them is left alone.
    @Test("the user's volume on a movie, on the way of another's duck: after kill -9, the successor leaves it",
          arguments: InMemoryServer.Kind.allCases)
    func usersVolumeOnARampsWayAfterKill(_ kind: InMemoryServer.Kind) {
        let scratch = Scratch()
        defer { scratch.remove() }
        var w = Self.world(kind, journalIn: scratch)
        let video = ["media.role": "video"]
        let first = w.server.play(video, name: "Movie", pid: 1)
        w.advance(.seconds(5))
        w.server.userSetVolume(first, 0.7)
        w.advance(.seconds(1))
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.advance(.seconds(2))
        #expect(abs(w.volume(first)! - 0.7 * Self.ducked) < 0.01, "the first movie ducked from 70 %: \(w.volume(first)!)")
        // (Movies interrupt each other: the newest plays, the others are muted.)
        let second = w.server.play(video, name: "Movie", pid: 3)
        w.advance(.seconds(5))
        let third = w.server.play(video, name: "Movie", pid: 4)
        w.advance(.seconds(5))
        w.server.userSetVolume(second, 0.5)
        w.advance(.seconds(1))
        w.server.userSetMute(second, false)
        w.advance(.seconds(1))
        // (A drag in a mixer: many changes of the third movie's volume, ending at 70 %.)
        for step in 1...12 {
            w.server.userSetVolume(third, 0.7 + Double(step) / 100)
            w.advance(.milliseconds(50))
        }
        w.server.userSetVolume(third, 0.7)
        w.advance(.seconds(1))
        #expect(abs(w.volume(second)! - 0.5) < 0.01 && abs(w.volume(third)! - 0.7) < 0.01, "\(w.log.suffix(12).joined(separator: "\n"))")
        // kill -9, the reader still speaking; the successor finds everything playing.
        let left = Journal(directory: scratch.path).leftovers()
        #expect(!left.streams.contains { $0.index == second }, "the second movie let go: \(left.streams.map(\.index))")
        #expect(left.userVolumes["sink-input-by-media-role:video"]?.contains { abs($0.overall.fraction - 0.5) < 0.01 } == true, "the user's 50 % journaled: \(left.userVolumes)")
        w.server.forgetEvents()
        var next = TowerWorld(server: w.server, leftovers: left, journal: Journal(directory: scratch.path), now: w.now)
        next.advance(.seconds(5))
        // (The reader still speaking, the successor ducks the movies it found; the reader gone, each goes
        // back to where the user left it.)
        next.server.stop(voice)
        next.advance(.seconds(3))
        #expect(abs(next.volume(second)! - 0.5) < 0.01, "the user's 50 % stays: \(next.volume(second)!)\n\(next.log.suffix(16).joined(separator: "\n"))")
        #expect(abs(next.volume(third)! - 0.7) < 0.01)
        #expect(abs(next.volume(first)! - 0.7) < 0.01)
    }

    /// The soak, seed 168 on PipeWire 1.4 (its log read): a movie (at the user's 100 %) stopped on its
    /// ramp's way while another of its role (at the user's 50 %) was still held, so the role's memory
    /// was not put back yet and kept the step it was at; killed (-9), the successor's journal had the
    /// other movie's ramp only (29-50 %), and the next movie, given 67 % by the server's memory, was
    /// left there. The ramp of a stream that goes away held is journaled with its key until the key's
    /// memory is put back (this test), and a successor takes its steps for ours (`TakeoverTests`).
    @Test("a stream gone in the middle of its ramp, another of its key still held: the journal keeps the ramp's ends with the key until its memory is put back",
          arguments: InMemoryServer.Kind.allCases)
    func rampOfAGoneStreamIsJournaled(_ kind: InMemoryServer.Kind) {
        let scratch = Scratch()
        defer { scratch.remove() }
        var w = Self.world(kind, journalIn: scratch, settings: Self.slowDucks)
        let game = ["media.role": "game"]
        let first = w.server.play(game, name: "Game", pid: 1)
        let second = w.server.play(game, name: "Game", pid: 2)
        w.advance(.seconds(5))
        w.server.userSetVolume(second, 0.5)
        w.advance(.seconds(1))
        let voice = w.server.play(reader, name: "Reader", pid: 3)
        w.advance(.milliseconds(400))
        let midway = w.volume(first)!
        #expect(midway < 0.95 && midway > Self.ducked + 0.05, "the first game in the middle of its ramp: \(midway)")
        w.server.stop(first)
        w.advance(.seconds(2))
        let key = "sink-input-by-media-role:game"
        let ends = Journal(directory: scratch.path).leftovers().ramps[key]?.map { $0.values.first!.fraction } ?? []
        #expect(ends.count == 2 && abs(ends[0] - Self.ducked) < 0.01 && abs(ends[1] - 1) < 0.01, "the gone stream's ramp, 100 % down to its duck: \(ends)")
        // The second still held: the ramp stays; the reader gone and the memory put back, it goes.
        w.server.stop(voice)
        w.advance(.seconds(10))
        #expect(Journal(directory: scratch.path).leftovers().ramps.isEmpty, "put back: \(w.log.suffix(8).joined(separator: "\n"))")
    }

    /// Found by the tower soak (seed 28, once an alarm app joined its apps): the user set a ducked
    /// stream's volume (the user wins: let go), and the release was never journaled; killed later, the
    /// successor took the journal's old duck for its own, as the user's volume lay within the duck's
    /// ramp, and brought the stream "back up" to the volume from before the duck. The same for a mute:
    /// unmuted by the user, muted again by the user, taken over as ours and undone.
    @Test("the user's volume and mute on a held stream, then kill -9: the release was journaled, and the successor leaves the user's volume and mute",
          arguments: InMemoryServer.Kind.allCases)
    func usersChangeOfAHeldStreamIsJournaled(_ kind: InMemoryServer.Kind) {
        let scratch = Scratch()
        defer { scratch.remove() }
        var w = Self.world(kind, journalIn: scratch)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01, "ducked")
        w.server.userSetVolume(song, 0.5)
        w.deliver()
        w.advance(.seconds(1))
        let call = w.server.play(["media.role": "phone"], name: "Call", pid: 3)
        w.advance(.seconds(1))
        #expect(w.server.stream(song)?.isMuted == true, "muted for the call")
        w.server.userSetMute(song, false)
        w.deliver()
        w.server.userSetMute(song, true)
        w.deliver()
        w.advance(.seconds(1))
        // kill -9, while the reader and the call go on; the successor finds them all.
        let left = Journal(directory: scratch.path).leftovers()
        #expect(!left.streams.contains { $0.index == song }, "the release journaled: \(left.streams.map(\.index))")
        w.server.forgetEvents()
        var next = TowerWorld(server: w.server, leftovers: left, journal: Journal(directory: scratch.path), now: w.now)
        next.server.stop(voice)
        next.server.stop(call)
        next.advance(.seconds(5))
        #expect(abs(next.volume(song)! - 0.5) < 0.01, "the user's volume: \(next.volume(song)!)\n\(next.log.suffix(12).joined(separator: "\n"))")
        #expect(next.server.stream(song)?.isMuted == true, "the user's mute")
    }

    /// Found by the suite under load (PipeWire 0.3, CI, "kill -9 after a history of holds"): the user set
    /// the music's volume while the memory of its role was being put back, a reader ducked it again, and
    /// the put-back's write reached WirePlumber last. Killed then, the agent left the memory at the volume
    /// from before the user's change, which was no trace of ours its successor knew: a music stream
    /// started with the successor kept it.
    @Test("killed with a put-back the user's change overtook: a new stream given the put-back's volume is put to the user's by the successor",
          arguments: [InMemoryServer.Kind.wirePlumber04, .wirePlumber05])
    func overtakenPutBackIsOurs(_ kind: InMemoryServer.Kind) {
        let scratch = Scratch()
        defer { scratch.remove() }
        var w = Self.world(kind, journalIn: scratch)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.advance(.seconds(1))
        w.server.writesLandLate = true
        w.holdsAnswers = true
        w.server.stop(voice)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - 1) < 0.01)
        w.server.userSetVolume(song, 0.8)
        w.deliver()
        let again = w.server.play(reader, name: "Reader", pid: 3)
        w.advance(.seconds(1))
        #expect(abs(w.volume(song)! - 0.8 * Self.ducked) < 0.01, "ducked from the user's volume")
        w.server.landWrites()
        let remembered = w.server.memory["sink-input-by-media-role:music"]?.volume?.values.first?.fraction
        // kill -9: its streams go with it.
        w.server.stop(again)
        w.server.stop(song)
        _ = w.server.takeEvents()
        var next = TowerWorld(server: w.server, leftovers: Journal(directory: scratch.path).leftovers(),
                              journal: Journal(directory: scratch.path), now: w.now)
        let fresh = next.server.play(music, name: "Music", pid: 4)
        next.deliver()
        next.server.landWrites()
        next.advance(.seconds(2))
        #expect(abs(next.volume(fresh)! - 0.8) < 0.01, "given \(remembered.map { "\($0)" } ?? "-"), now \(next.volume(fresh)!): \(next.log.suffix(12).joined(separator: "\n"))")
    }

    /// Issue 20 case 7a, with the real binary: on PulseAudio the memory is read ahead of the first
    /// hold, and was journaled when the answer came, after the duck's first step had gone out. Killed
    /// in between, the run left its hold journaled and nothing of the memory: the successor adopted no
    /// key, and a music stream the server gave the step's volume (93 %) stayed there.
    @Test("write-ahead: the journal has an entry for a key's memory before the first command that holds a stream of it (the read's answer replaces it)",
          arguments: InMemoryServer.Kind.allCases)
    func memoryJournaledBeforeTheFirstHold(_ kind: InMemoryServer.Kind) {
        let scratch = Scratch()
        defer { scratch.remove() }
        var w = Self.world(kind, journalIn: scratch)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        w.effects = []
        _ = w.server.play(reader, name: "Reader", pid: 2)
        w.deliver()
        let key = "sink-input-by-media-role:music"
        let remembered = w.effects.firstIndex { if case .journal(.remember(key, _)) = $0 { true } else { false } }
        let firstStep = w.effects.firstIndex {
            if case .send(_, .setStreamVolume(let reference, _)) = $0 { "\(reference)".contains("\(song)") } else { false }
        }
        #expect(firstStep != nil, "the duck's first step: \(w.effects)")
        #expect(remembered.map { r in firstStep.map { r < $0 } ?? true } == true,
                "journaled at \(remembered.map(String.init) ?? "never"), first step at \(firstStep.map(String.init) ?? "never")")
    }
}

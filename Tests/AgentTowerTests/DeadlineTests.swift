import AudioPolicy
@testable import AgentTower
import ServerModel
import Testing
import TowerTesting

/// Time in the shell: every deadline the tower asks for is one a tick acts on, a past one included, and
/// the agent's one timer wakes it for each (found by the suite under load: after a server restart, the
/// session of a call or a reader that had gone held the music for good).
@Suite("deadlines")
struct DeadlineTests {
    @Test("a grace period that ended while a device event came first still ends with the next tick",
          arguments: InMemoryServer.Kind.allCases)
    func graceEndedBehindAnotherEvent(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let call = w.server.play(phone, name: "Call", pid: 2)
        w.deliver()
        #expect(w.muted(song) == true)
        w.server.stop(call)
        w.deliver()
        // The loop's batch brings a device first, after the grace period is over, then the tick.
        w.now += .seconds(1)
        _ = w.server.plug(sink: "hdmi", description: "HDMI")
        w.deliver()
        #expect(w.tower.nextDeadline.map { $0 <= w.now } == true, "the grace period's end, owed a tick")
        w.run([.tick])
        #expect(w.muted(song) == false, "the call ended: the music plays again")
    }

    @Test("a put-back answered after its settling time leaves no deadline behind",
          arguments: [InMemoryServer.Kind.pulseAudio, .wirePlumber04, .wirePlumber05])
    func putBackAnsweredLate(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let (song, voice) = HoldsTests.musicDuckedByAReader(&w)
        #expect(w.volume(song)! < 0.9)
        w.holdsAnswers = true
        w.server.stop(voice)
        w.advance(.seconds(2))
        #expect(w.log.contains { $0.contains(" send write") || $0.contains(" send delete") }, "the memory's put-back was sent")
        // The settling time passes with the put-back unanswered: nothing to do at it, so it is not asked for.
        w.now += w.tower.settings.putBackSettles + .seconds(1)
        w.run([.tick])
        #expect(w.tower.nextDeadline.map { $0 > w.now } ?? true, "a deadline left behind: \(String(describing: w.tower.nextDeadline))")
        // The answer comes: the settling time is over, so the next tick forgets the entry.
        w.releaseAnswers()
        w.advance(.zero)
        #expect(w.tower.nextDeadline == nil)
        #expect(abs(w.volume(song)! - 1) < 0.01)
    }
}

import AudioPolicy
@testable import AgentTower
@testable import PolicyAgent
import ServerModel
import Testing
import TowerTesting

/// What a successor takes over after a kill -9, and what it leaves to the user.
@Suite("a successor's takeover and the user")
struct TakeoverTests {
    @Test("a stream playing when the agent was killed, of a key whose memory had our mute: the user mutes it a moment after the takeover, and it stays muted", arguments: InMemoryServer.Kind.allCases)
    func usersMuteAfterTakeover(_ kind: InMemoryServer.Kind) {
        let server = InMemoryServer(kind)
        let key = "sink-input-by-media-role:music"
        let other = server.play(["media.role": "music"], name: "Player B", pid: 5)
        // What a predecessor killed during a call left: Player A (gone since) muted by it, the music's
        // memory as it was before.
        var left = JournalLeftovers()
        left.remembered[key] = .some(StreamRestoreEntry(name: key, channelMap: ["front-left", "front-right"], volume: nil, device: nil, isMuted: false))
        left.streams = [JournalEntry(direction: .output, index: 999, processID: "3", name: "Player A", muted: true, baseVolume: nil, restoreKey: key)]
        _ = server.takeEvents()
        var next = TowerWorld(server: server, leftovers: left)
        next.advance(.seconds(1))
        #expect(server.stream(other)?.isMuted == false)
        // The user mutes Player B a second after the takeover.
        server.userSetMute(other, true)
        next.advance(.seconds(5))
        #expect(server.stream(other)?.isMuted == true, "the user's mute stays: \(next.log.suffix(12))")
    }
}

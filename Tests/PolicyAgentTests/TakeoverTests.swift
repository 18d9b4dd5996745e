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

extension TakeoverTests {
    /// Soak seed 1 on PipeWire 1.4 (the suite's): the user set 50 % on one movie and 70 % on another of
    /// the same role; the agent's put-back of the role's memory (50 %) landed after the 70 %, so the
    /// journal kept 50 % as a trace of ours. A successor after a kill -9 took the first movie's 50 % for
    /// the server's memory giving it that trace, and set it to 70 % (SPEC 5.11: the user's volume wins).
    /// A put-back's trace is a volume the key had before us, the user's or the app's: on a stream
    /// already linked when the successor looks, whose age is not known, it is not ours to undo.
    @Test("a successor leaves the user's volume on a playing stream that matches an overtaken put-back of its role", arguments: InMemoryServer.Kind.allCases)
    func usersVolumeMatchingAPutBackTraceStands(_ kind: InMemoryServer.Kind) {
        let server = InMemoryServer(kind)
        let key = "sink-input-by-media-role:video"
        let first = server.play(["media.role": "video"], name: "Movie", pid: 5)
        server.userSetVolume(first, 0.5)
        let second = server.play(["media.role": "video"], name: "Movie", pid: 6)
        server.userSetVolume(second, 0.7)
        let seventy = ChannelVolumes(channels: 2, volume: Volume(fraction: 0.7))
        var left = JournalLeftovers()
        left.remembered[key] = .some(StreamRestoreEntry(name: key, channelMap: ["front-left", "front-right"], volume: seventy, device: nil, isMuted: false))
        left.traces[key] = [ChannelVolumes(channels: 2, volume: Volume(fraction: 0.5))]
        _ = server.takeEvents()
        var next = TowerWorld(server: server, leftovers: left)
        next.advance(.seconds(5))
        #expect(server.stream(first)?.volume.values.allSatisfy { abs($0.fraction - 0.5) < 0.01 } == true,
                "the user's 50 % stays: \(next.log.suffix(12))")
        #expect(server.stream(second)?.volume.values.allSatisfy { abs($0.fraction - 0.7) < 0.01 } == true)
    }

    /// The soak, seed 168 on PipeWire 1.4 (`HoldsJournalTests.rampOfAGoneStreamIsJournaled`): the journal
    /// kept the ramp of a movie that went away on its way back up; the next movie, started after the
    /// takeover and given a step of it by the server's memory, is put back to the role's volume.
    @Test("a new stream given a step of a gone stream's journaled ramp is put back by the successor", arguments: InMemoryServer.Kind.allCases)
    func stepOfAGoneStreamsRampIsOurs(_ kind: InMemoryServer.Kind) {
        let server = InMemoryServer(kind)
        let key = "sink-input-by-media-role:video"
        let fifty = ChannelVolumes(channels: 2, volume: Volume(fraction: 0.5))
        let full = ChannelVolumes(channels: 2, volume: .norm)
        var left = JournalLeftovers()
        left.remembered[key] = .some(StreamRestoreEntry(name: key, channelMap: ["front-left", "front-right"], volume: fifty, device: nil, isMuted: false))
        left.ramps[key] = [Holds.ducked(full, 0.2), full]
        var next = TowerWorld(server: server, leftovers: left)
        next.advance(.seconds(1))
        let fresh = server.play(["media.role": "video"], name: "Movie", pid: 7, volume: ChannelVolumes(channels: 2, volume: Volume(fraction: 0.67)))
        next.advance(.seconds(3))
        #expect(server.stream(fresh)?.volume.values.allSatisfy { abs($0.fraction - 0.5) < 0.01 } == true,
                "put back to the role's 50 %: \(next.log.suffix(12).joined(separator: "\n"))")
    }
}

import AudioPolicy
@testable import AgentTower
import Foundation
@testable import PolicyAgent
import ServerModel
import Testing
import TowerTesting

/// Issue 23: both servers remember where an app's or role's stream was last moved and send its next
/// stream there (PulseAudio's stream-restore with its default `restore_device`, WirePlumber as the
/// key's target). A stream the agent moves off the default makes that memory ours: it goes back as it
/// was once the stream is gone, also after a kill -9 (the journal says which streams were moved).
@Suite("the server's memory of where an app's streams go")
struct MovedMemoryTests {
    let speakers = AppPolicy(name: "speakers-only", match: .init(name: ["Speakers Only"]), configuration: SessionConfiguration(.playback),
                             preferredOutputs: [.type(.builtInSpeaker)])

    /// The USB headset plugged last (the default), a song the policy sends to the speaker.
    func pinnedSong(_ w: inout TowerWorld) -> UInt32 {
        w.server.plug(sink: "usb_headset", description: "USB Headset", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        let song = w.server.play(["media.role": "music"], name: "Speakers Only", pid: 3)
        w.deliver()
        return song
    }

    /// A tower that moved the song to the speaker (its journal in `scratch`), killed (-9); its successor,
    /// with `successorPolicies`, started from what the journal left.
    func killedWithTheSongMoved(_ kind: InMemoryServer.Kind, _ scratch: Scratch, successorPolicies: [AppPolicy])
        -> (w: TowerWorld, song: UInt32, left: JournalLeftovers, next: TowerWorld) {
        var journal = Journal(directory: scratch.path)
        _ = journal.leftovers()
        var w = TowerWorld(server: InMemoryServer(kind), policies: [speakers], journal: journal)
        let song = pinnedSong(&w)
        #expect(sinkName(w, song) == "builtin_speaker")
        journal = Journal(directory: scratch.path)
        let left = journal.leftovers()
        w.server.forgetEvents()
        let next = TowerWorld(server: w.server, policies: successorPolicies, leftovers: left, journal: journal, now: w.now)
        return (w, song, left, next)
    }

    func sinkName(_ w: TowerWorld, _ id: UInt32?) -> String? {
        id.flatMap { w.server.stream($0)?.device }.flatMap { d in w.server.snapshot.sinks[d]?.name }
    }

    @Test("a stream moved off the default, once gone, leaves the server remembering no device for its role", arguments: InMemoryServer.Kind.allCases)
    func goneWhileRunning(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        let song = pinnedSong(&w)
        #expect(sinkName(w, song) == "builtin_speaker", "moved by its policy")
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == "builtin_speaker", "the server remembers the move")
        w.server.stop(song)
        w.advance(.seconds(10))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil, "\(w.log.suffix(12))")
        // Another app of that role, with no policy: on the default.
        let other = w.server.play(["media.role": "music"], name: "Other Player", pid: 4)
        w.deliver()
        #expect(sinkName(w, other) == "usb_headset")
    }

    @Test("the user makes the device a moved stream is on the default: the memory stays ours while it plays; the stop puts it back", arguments: InMemoryServer.Kind.allCases)
    func defaultComesToTheMovedStream(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        let song = pinnedSong(&w)
        w.advance(.seconds(5))
        _ = w.server.perform(.setDefaultDevice("builtin_speaker", .output))
        w.advance(.seconds(5))
        #expect(w.server.snapshot.server?.defaultSinkName == "builtin_speaker")
        #expect(sinkName(w, song) == "builtin_speaker")
        let before = w.log.count
        w.stop()
        #expect(w.tower.isFinished)
        #expect(w.log[before...].contains { $0.contains(" send moveStream(") && $0.contains("toDevice: \"builtin_speaker\"") }, "moved to the default it is on")
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil, "\(w.log.suffix(12))")
    }

    @Test("another app of the role starts while the agent's move of the role is remembered: the server sends it there, the agent moves it back to the default; the memory goes back once the first is gone", arguments: InMemoryServer.Kind.allCases)
    func anotherAppOfTheRoleInheritsTheMove(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        let song = pinnedSong(&w)
        #expect(sinkName(w, song) == "builtin_speaker")
        let other = w.server.play(["media.role": "music"], name: "Other Player", pid: 4)
        w.deliver()
        w.advance(.seconds(1))
        #expect(sinkName(w, other) == "usb_headset", "moved back to the default: \(w.log.suffix(12))")
        // (The move to the default makes the server forget where the role's streams go: the key is shared.)
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil)
        w.server.stop(song)
        w.advance(.seconds(10))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil, "\(w.log.suffix(12))")
        #expect(sinkName(w, other) == "usb_headset")
        w.stop()
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil)
    }

    @Test("another app of the role that asks for a device of its own, not the one the agent's move sent the role to, is left where it asked", arguments: InMemoryServer.Kind.allCases)
    func anAppsOwnDeviceIsItsOwn(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        let song = pinnedSong(&w)
        w.server.plug(sink: "hdmi_tv", description: "TV", properties: ["device.bus": "pci", "device.class": "sound"])
        w.advance(.seconds(5))
        let other = w.server.play(["media.role": "music"], name: "Other Player", pid: 4, device: "hdmi_tv")
        w.deliver()
        w.advance(.seconds(1))
        #expect(sinkName(w, other) == "hdmi_tv", "\(w.log.suffix(12))")
        #expect(!w.log.contains { $0.contains("a new stream went where the server remembered our move") })
        withExtendedLifetime(song) {}
    }

    @Test("the user moves a stream the agent moved: the device the server then remembers for the role is the user's, and stays once the stream is gone", arguments: InMemoryServer.Kind.allCases)
    func usersMoveIsRemembered(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        let song = pinnedSong(&w)
        w.server.plug(sink: "hdmi_tv", description: "TV", properties: ["device.bus": "pci", "device.class": "sound"])
        w.advance(.seconds(5))
        _ = w.server.perform(.moveStream(StreamReference(.output, song), toDevice: "hdmi_tv"))
        w.deliver()
        w.advance(.seconds(1))
        #expect(w.log.contains { $0.contains("a stream moved by someone else") })
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == "hdmi_tv")
        w.server.stop(song)
        w.advance(.seconds(10))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == "hdmi_tv", "the user's: \(w.log.suffix(12))")
        w.stop()
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == "hdmi_tv")
    }

    @Test("the user moves a stream the agent moved, and the agent stops at once (its judgement still awaited): the stream stays where the user put it, the role's device is the user's", arguments: InMemoryServer.Kind.allCases)
    func stopRightAfterTheUsersMove(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        let song = pinnedSong(&w)
        w.server.plug(sink: "hdmi_tv", description: "TV", properties: ["device.bus": "pci", "device.class": "sound"])
        w.advance(.seconds(5))
        _ = w.server.perform(.moveStream(StreamReference(.output, song), toDevice: "hdmi_tv"))
        w.deliver()
        w.stop()
        #expect(w.tower.isFinished)
        #expect(sinkName(w, song) == "hdmi_tv", "\(w.log.suffix(12))")
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == "hdmi_tv")
    }

    @Test("the user moves a stream the agent moved to the default: the role's streams follow the default again, also once it is gone", arguments: InMemoryServer.Kind.allCases)
    func usersMoveToTheDefault(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        let song = pinnedSong(&w)
        w.advance(.seconds(3))  // (a move within moveSettles of ours is not judged the user's)
        _ = w.server.perform(.moveStream(StreamReference(.output, song), toDevice: "usb_headset"))
        w.deliver()
        w.advance(.seconds(1))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil)
        w.server.stop(song)
        w.advance(.seconds(10))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil, "\(w.log.suffix(12))")
    }

    @Test("a device the role remembered before the agent moved its stream is remembered again after", arguments: InMemoryServer.Kind.allCases)
    func deviceBeforeComesBack(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        w.server.plug(sink: "hdmi", description: "HDMI", properties: ["device.bus": "pci", "device.class": "sound", "device.icon_name": "video-display"])
        w.advance(.seconds(5))
        w.server.memory["sink-input-by-media-role:music"] = StreamRestoreEntry(
            name: "sink-input-by-media-role:music", channelMap: ["front-left", "front-right"], volume: nil, device: "hdmi", isMuted: false)
        _ = pinnedSong(&w)
        let song = w.server.snapshot.sinkInputs.values.first { $0.name == "Speakers Only" }?.id
        #expect(sinkName(w, song) == "builtin_speaker")
        w.server.stop(song!)
        w.advance(.seconds(10))
        // Through streams (WirePlumber) the device before is not known: the memory follows the default.
        let expected: String? = kind == .pulseAudio ? "hdmi" : nil
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == expected, "\(w.log.suffix(12))")
    }

    @Test("killed while a stream it moved plays: its successor puts the memory back once the stream is gone", arguments: InMemoryServer.Kind.allCases)
    func killedWhileMoved(_ kind: InMemoryServer.Kind) {
        let scratch = Scratch()
        defer { scratch.remove() }
        // The same policy keeps the song on the speaker in the successor.
        var (w, song, left, next) = killedWithTheSongMoved(kind, scratch, successorPolicies: [speakers])
        #expect(left.streams.contains { $0.moved == true }, "the move is journaled")
        next.advance(.seconds(5))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == "builtin_speaker", "kept while the moved stream plays")
        w.server.stop(song)
        next.advance(.seconds(10))
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil, "\(next.log.suffix(12))")
    }

    @Test("killed while a stream it moved plays: its successor, with no rule sending it anywhere, moves it back to the default and puts the memory back; its stop leaves nothing", arguments: InMemoryServer.Kind.allCases)
    func killedWhileMovedStreamStays(_ kind: InMemoryServer.Kind) {
        let scratch = Scratch()
        defer { scratch.remove() }
        var (w, song, _, next) = killedWithTheSongMoved(kind, scratch, successorPolicies: [])
        next.advance(.seconds(5))
        #expect(sinkName(next, song) == "usb_headset", "back on the default: \(next.log.suffix(12))")
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil)
        // (Not the move back alone: the memory is written back too.)
        #expect(next.log.contains { [" send writeStreamRestore(", " send writeMemoryThroughStream(", " send deleteStreamRestore("].contains(where: $0.contains) }, "\(next.log.suffix(12))")
        next.stop()
        #expect(next.tower.isFinished)
        #expect(w.server.memory["sink-input-by-media-role:music"]?.device == nil)
    }

    @Test("the journal's line of a moved stream reads back as moved; an earlier version's line as not moved")
    func journalLine() throws {
        let entry = JournalEntry(direction: .output, index: 7, processID: "3", name: "Song", muted: false, baseVolume: nil,
                                 restoreKey: "sink-input-by-media-role:music", moved: true)
        let line = Journal.Line(key: "\(StreamKey(.output, 7))", entry: entry).json
        #expect(line.contains("\"moved\":true"))
        let back = try JSONDecoder().decode(Journal.Line.self, from: Data(line.utf8))
        #expect(back.entry?.moved == true)
        let old = try JSONDecoder().decode(Journal.Line.self, from: Data(line.replacingOccurrences(of: ",\"moved\":true", with: "").utf8))
        #expect(old.entry?.moved == nil)
    }
}

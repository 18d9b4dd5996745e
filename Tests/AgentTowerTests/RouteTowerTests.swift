import AudioPolicy
@testable import AgentTower
import ServerModel
import Testing
import TowerTesting

/// Issue 23 through the tower: a policy's preferred outputs move its streams, and status says where
/// each session's sound goes and what it prefers.
@Suite("tower: routes per app")
struct RouteTowerTests {
    let speakers = AppPolicy(name: "speakers-only", match: .init(name: ["Speakers Only"]), configuration: SessionConfiguration(.playback),
                             preferredOutputs: [.device("dac"), .type(.builtInSpeaker)])

    @Test("a player whose policy prefers the speaker is moved there while the USB headset is the default; status shows its route and preference", arguments: InMemoryServer.Kind.allCases)
    func preferredOutputInStatus(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        w.server.plug(sink: "usb_headset", description: "USB Headset", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        #expect(w.server.snapshot.server?.defaultSinkName == "usb_headset", "last in wins")
        let song = w.server.play(["media.role": "music"], name: "Speakers Only", pid: 3)
        w.deliver()
        let speaker = w.server.snapshot.sinks.values.first { $0.name == "builtin_speaker" }?.id
        #expect(w.server.stream(song)?.device == speaker, "moved to the speaker")
        let line = w.tower.statusReport().sessions.first { $0.session.contains("speakers-only") }
        #expect(line?.route == "out builtInSpeaker builtin_speaker", "\(String(describing: line))")
        #expect(line?.preferredOutputs == "dac, builtInSpeaker")
        // A session on the default shows no route of its own.
        _ = w.server.play(["media.role": "event"], name: "Bell", pid: 4)
        w.deliver()
        #expect(w.tower.statusReport().sessions.first { $0.session.contains("role=event") }?.route == nil)
    }

    @Test("an app that declares its session and matches a policy file with output: gets that output too", arguments: InMemoryServer.Kind.allCases)
    func declaredAppTakesItsPolicysOutput(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [speakers])
        w.server.plug(sink: "usb_headset", description: "USB Headset", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        let app = AppClient(busName: ":1.70", processID: 70, name: "Speakers Only")
        guard case .session(let path)? = w.app(app, .getSession) else { Issue.record("no session"); return }
        _ = w.app(app, .setCategory(session: path, category: "playback", mode: "default", options: []))
        _ = w.app(app, .setActive(session: path, active: true, options: []))
        let song = w.server.play(["media.role": "music"], name: "Speakers Only", pid: 70)
        w.deliver()
        let speaker = w.server.snapshot.sinks.values.first { $0.name == "builtin_speaker" }?.id
        #expect(w.server.stream(song)?.device == speaker, "moved to the speaker, as its policy says")
        #expect(w.tower.statusReport().sessions.first { $0.session.contains("declared") }?.preferredOutputs == "dac, builtInSpeaker")
    }

    let dac = AppPolicy(name: "dac-player", match: .init(name: ["DAC Player"]), configuration: SessionConfiguration(.playback),
                        preferredOutputs: [.type(.usbAudio)])

    /// The speaker the default, the USB DAC plugged first; a song its policy sends to the DAC.
    func songOnTheDAC(_ kind: InMemoryServer.Kind) -> (TowerWorld, song: UInt32, dac: UInt32) {
        var w = TowerWorld(kind, policies: [dac])
        let usb = w.server.plug(sink: "usb_dac", description: "USB DAC", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        _ = w.server.perform(.setDefaultDevice("builtin_speaker", .output))
        w.advance(.seconds(5))
        let song = w.server.play(["media.role": "music"], name: "DAC Player", pid: 3)
        w.deliver()
        w.advance(.seconds(5))
        return (w, song, usb)
    }

    @Test("the server rescues a stream from a device a batch before it removes the device: no move of the user's; the device back, the stream goes back to it", arguments: InMemoryServer.Kind.allCases)
    func rescueBeforeRemoval(_ kind: InMemoryServer.Kind) {
        var (w, song, usb) = songOnTheDAC(kind)
        #expect(w.server.stream(song)?.device == usb, "on its DAC")
        // The rescue, in a batch of its own; the removal in the next.
        _ = w.server.perform(.moveStream(StreamReference(.output, song), toDevice: "builtin_speaker"))
        w.deliver()
        w.advance(.milliseconds(50))
        w.server.unplug(sink: usb)
        w.deliver()
        w.advance(.seconds(5))
        #expect(!w.log.contains { $0.contains("a stream moved by someone else") }, "\(w.log.suffix(10))")
        let again = w.server.plug(sink: "usb_dac", description: "USB DAC", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        #expect(w.server.stream(song)?.device == again, "back on its DAC: \(w.log.suffix(10))")
    }

    @Test("a stream the agent placed, moved by the user to a device that stays: the user's once the device is still there a moment later; the agent leaves it there, also at its stop", arguments: InMemoryServer.Kind.allCases)
    func usersMoveJudgedAMomentLater(_ kind: InMemoryServer.Kind) {
        var (w, song, _) = songOnTheDAC(kind)
        let tv = w.server.plug(sink: "hdmi_tv", description: "TV", properties: ["device.bus": "pci", "device.class": "sound"])
        w.advance(.seconds(5))
        _ = w.server.perform(.moveStream(StreamReference(.output, song), toDevice: "hdmi_tv"))
        w.deliver()
        #expect(!w.log.contains { $0.contains("a stream moved by someone else") }, "not yet")
        w.advance(.seconds(1))
        #expect(w.log.contains { $0.contains("a stream moved by someone else") })
        w.stop()
        #expect(w.server.stream(song)?.device == tv, "left where the user put it, not moved to the default")
    }
}

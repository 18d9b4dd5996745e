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
}

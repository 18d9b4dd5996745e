import Foundation
import AudioPolicy
@testable import AgentTower
@testable import PolicyAgent
import Testing
import TowerTesting

/// What the user sets on the agent that outlives it (the microphone's mute for every app, silent
/// mode): kept in the state directory, given back to the next run (issue 24).
@Suite("kept settings")
struct KeptSettingsTests {
    let user = AppClient(busName: ":1.30", processID: 30, name: "audiosessionctl")

    /// The two switches of what was kept (the sets of devices seen are kept too).
    func switches(_ kept: KeptSettings?) -> KeptSettings? { kept.map { KeptSettings(inputMuted: $0.inputMuted, silentMode: $0.silentMode) } }

    @Test("route choices are kept with their set of devices, and a tower given them back brings them back once its devices are listed", arguments: InMemoryServer.Kind.allCases)
    func routesKeptAndGivenBack(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        w.server.plug(sink: "usb_dac", description: "USB DAC", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        #expect(w.server.snapshot.server?.defaultSinkName == "usb_dac")
        #expect(w.app(user, .setRoute(scope: "default", device: "builtin_speaker")) == .routeSet("default output on builtin_speaker (remembered with builtin_speaker, usb_dac)"))
        #expect(w.app(user, .setRoute(scope: "category:playback", device: "usb_dac")) == .routeSet("category playback on usb_dac (remembered with builtin_speaker, usb_dac)"))
        w.advance(.seconds(1))
        #expect(w.server.snapshot.server?.defaultSinkName == "builtin_speaker")
        let set = DeviceSet(["builtin_speaker", "usb_dac"])
        #expect(w.kept?.routes[set] == RouteChoices(output: "builtin_speaker", scoped: [.category(.playback): "usb_dac"]))
        // Refused: an unknown scope, a device not connected, dropping the default, a sandboxed app.
        guard case .failed(let scope) = w.app(user, .setRoute(scope: "loud", device: "usb_dac")),
              case .failed(let device) = w.app(user, .setRoute(scope: "category:playback", device: "hdmi")),
              case .failed = w.app(user, .setRoute(scope: "default", device: "")) else { Issue.record("taken"); return }
        #expect(scope.message == "no route scope 'loud' (accepted: default, default-input, category:NAME, app:NAME)")
        #expect(device.message == "no output device 'hdmi' (connected: builtin_speaker, usb_dac)")
        #expect(w.app(AppClient(busName: ":1.31", processID: 31, appID: "org.example.App", name: "app"), .setRoute(scope: "default", device: "usb_dac"))
                == .refused("a sandboxed app cannot choose where other apps' sound goes"))
        // The next run, with the same devices: the USB DAC plugged last, the speaker the default all the same,
        // and music on the DAC.
        let server = InMemoryServer(kind)
        server.plug(sink: "usb_dac", description: "USB DAC", properties: ["device.bus": "usb", "device.class": "sound"])
        _ = server.takeEvents()  // (there before the agent: in its listing)
        var next = TowerWorld(server: server, kept: w.kept)
        next.advance(.seconds(1))
        #expect(next.server.snapshot.server?.defaultSinkName == "builtin_speaker", "\(next.log.joined(separator: "\n"))")
        let song = next.server.play(["media.role": "music"], name: "Music", pid: 3)
        next.deliver()
        #expect(next.server.stream(song)?.device == next.server.snapshot.sinks.values.first { $0.name == "usb_dac" }?.id)
        #expect(next.tower.statusReport().routeChoices == ["default output builtin_speaker", "category playback on usb_dac"])
    }

    @Test("the routes file: written and read back; a line that is not ours is named with its line, the others hold")
    func routesFile() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let directory = try StateDirectory.open(scratch.path)
        var routes = RememberedRoutes()
        routes.remember(RouteChoices(output: "builtin_speaker", scoped: [.app("rhythmbox"): "usb_dac"]), for: DeviceSet(["usb_dac", "builtin_speaker"]))
        routes.remember(RouteChoices(), for: DeviceSet(["builtin_speaker"]))
        try KeptSettingsFile.write(KeptSettings(routes: routes), in: directory)
        #expect(KeptSettingsFile.read(in: directory).0.routes == routes)
        let text = try String(contentsOfFile: "\(scratch.path)/routes", encoding: .utf8)
        #expect(text.hasPrefix(#"{"devices":["builtin_speaker","usb_dac"],"output":"builtin_speaker","scoped":{"app:rhythmbox":"usb_dac"}}"#), "\(text)")
        scratch.write("routes", Array((text + "{\"devices\": 3}\nnot json\n{\"devices\":[\"a\"],\"scoped\":{\"category:loud\":\"a\"}}\n").utf8))
        let (kept, problem) = KeptSettingsFile.read(in: directory)
        #expect(kept.routes == routes)
        #expect(problem?.contains("routes:3: not a set of devices with the user's route choices") == true, "\(problem ?? "none")")
        #expect(problem?.contains("routes:5:") == true)
    }

    @Test("the microphone muted for every app and silent mode are kept when they change, and a tower given them back holds them: a capture stream is muted, an ambient app silenced")
    func keptAndGivenBack() {
        var w = TowerWorld(.pulseAudio)
        #expect(w.app(user, .inputMuted(true)) == .done)
        #expect(switches(w.kept) == KeptSettings(inputMuted: true))
        _ = w.app(user, .silentMode(true))
        #expect(switches(w.kept) == KeptSettings(inputMuted: true, silentMode: true))
        // The next run.
        var next = TowerWorld(server: InMemoryServer(.pulseAudio), kept: KeptSettings(inputMuted: true, silentMode: true))
        let mic = next.server.play(["media.role": "phone"], name: "Recorder", pid: 5, direction: .input)
        next.deliver()
        #expect(next.muted(mic, .input) == true, "\(next.log.suffix(6).joined(separator: "\n"))")
        #expect(next.log.contains { $0.contains("the microphone stays muted for every app") })
        guard case .agentProperties(let silent, let muted, _, _) = next.app(user, .silentMode(nil)) else {
            Issue.record("no properties")
            return
        }
        #expect(silent && muted)
        _ = next.app(user, .inputMuted(false))
        #expect(switches(next.kept) == KeptSettings(silentMode: true))
        #expect(next.muted(mic, .input) == false)
    }

    @Test("the file: written and read back; a line that is no setting is named with the file and its line, and the others hold; a link is not followed")
    func file() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let directory = try StateDirectory.open(scratch.path)
        #expect(KeptSettingsFile.read(in: directory) == (KeptSettings(), nil), "no file: the defaults, no problem")
        try KeptSettingsFile.write(KeptSettings(inputMuted: true), in: directory)
        #expect(KeptSettingsFile.read(in: directory) == (KeptSettings(inputMuted: true), nil))
        scratch.write("settings", Array("silent-mode\n\u{1b}[31mloud\ninput-muted\n".utf8))
        let (kept, problem) = KeptSettingsFile.read(in: directory)
        #expect(kept == KeptSettings(inputMuted: true, silentMode: true))
        #expect(problem?.contains("settings:2: not a setting") == true, "\(problem ?? "none")")
        #expect(problem?.contains("\u{1b}") == false, "escaped")
        try FileManager.default.removeItem(atPath: "\(scratch.path)/settings")
        scratch.write("elsewhere", Array("input-muted\n".utf8))
        try FileManager.default.createSymbolicLink(atPath: "\(scratch.path)/settings", withDestinationPath: "\(scratch.path)/elsewhere")
        let (linked, why) = KeptSettingsFile.read(in: directory)
        #expect(linked == KeptSettings(), "not read through a link")
        #expect(why != nil, "said")
    }
}

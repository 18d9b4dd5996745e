@testable import AgentTower
import AudioPolicy
import ServerModel
import Testing
import TowerTesting

/// Speech while muted through the tower (issue 24): a muted call's microphone metered (a capture's
/// meter), its reports to the core, the signal to the app and the log line once per start.
@Suite("speech while muted, tower")
struct MutedSpeechTowerTests {
    @Test("a declared call muted by itself: its capture's microphone metered, speech told as MutedSpeechActivity and logged once, its end told; unmuted, no meter", arguments: InMemoryServer.Kind.allCases)
    func toldAndLogged(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let app = AppClient(busName: ":1.60", processID: 60, name: "softphone")
        guard case .session(let path)? = w.app(app, .getSession) else { Issue.record("no session"); return }
        _ = w.app(app, .setCategory(session: path, category: "playAndRecord", mode: "voiceChat", options: []))
        _ = w.app(app, .setActive(session: path, active: true, options: []))
        let capture = w.server.play([:], name: "softphone", pid: 60, direction: .input)
        w.deliver()
        #expect(w.meteredMicrophones.isEmpty, "not muted: not metered")
        _ = w.app(app, .setInputMuted(session: path, muted: true))
        #expect(w.meteredMicrophones == [capture])
        func said() -> [SessionNotification] {
            w.appSignals.filter { $0.path == path }.map(\.1).filter { if case .mutedSpeechActivity = $0 { true } else { false } }
        }
        #expect(said().isEmpty, "its microphone quiet")
        w.speaks(true)
        w.advance(.seconds(1))
        #expect(said() == [.mutedSpeechActivity(started: true)])
        #expect(w.log.filter { $0.contains("speaking while muted") }.count == 1, "\(w.log.suffix(5))")
        w.speaks(false)
        w.advance(.seconds(3))
        #expect(said() == [.mutedSpeechActivity(started: true), .mutedSpeechActivity(started: false)])
        _ = w.app(app, .setInputMuted(session: path, muted: false))
        #expect(w.meteredMicrophones.isEmpty)
    }

    @Test("the user's mute of an app by name: a name that is none (a space, a control or bidi character) refused, named; a sandboxed caller refused; the list read back")
    func appNames() {
        var w = TowerWorld(.pulseAudio)
        let user = AppClient(busName: ":1.80", processID: 80, name: "audiosessionctl")
        for bad in ["two words", "evil\u{202E}gpj", "", String(repeating: "a", count: 256)] {
            guard case .failed(let error)? = w.app(user, .appInputMuted(app: bad, muted: true)) else { Issue.record("\(bad.debugDescription) taken"); continue }
            #expect(error.code == .badParam && error.message.contains("is not an app name"), "\(error)")
        }
        let sandboxed = AppClient(busName: ":1.81", processID: 81, appID: "org.example.App", name: "flatpak-app")
        guard case .refused? = w.app(sandboxed, .appInputMuted(app: "zoom", muted: true)) else { Issue.record("a sandboxed app muted another"); return }
        #expect(w.app(user, .appInputMuted(app: "zoom", muted: true)) == .inputMutedApps(["zoom"]))
        #expect(w.tower.statusReport().inputMutedApps == ["zoom"])
        #expect(w.app(user, .appInputMuted(app: "zoom", muted: false)) == .inputMutedApps([]))
    }
}

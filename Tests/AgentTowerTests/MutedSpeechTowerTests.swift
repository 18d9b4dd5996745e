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
}

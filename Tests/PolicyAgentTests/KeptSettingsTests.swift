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

    @Test("the microphone muted for every app and silent mode are kept when they change, and a tower given them back holds them: a capture stream is muted, an ambient app silenced")
    func keptAndGivenBack() {
        var w = TowerWorld(.pulseAudio)
        #expect(w.app(user, .inputMuted(true)) == .done)
        #expect(w.kept == KeptSettings(inputMuted: true))
        _ = w.app(user, .silentMode(true))
        #expect(w.kept == KeptSettings(inputMuted: true, silentMode: true))
        // The next run.
        var next = TowerWorld(server: InMemoryServer(.pulseAudio), kept: KeptSettings(inputMuted: true, silentMode: true))
        let mic = next.server.play(["media.role": "phone"], name: "Recorder", pid: 5, direction: .input)
        next.deliver()
        #expect(next.muted(mic, .input) == true, "\(next.log.suffix(6).joined(separator: "\n"))")
        #expect(next.log.contains { $0.contains("the microphone stays muted for every app") })
        guard case .agentProperties(let silent, let muted, _) = next.app(user, .silentMode(nil)) else {
            Issue.record("no properties")
            return
        }
        #expect(silent && muted)
        _ = next.app(user, .inputMuted(false))
        #expect(next.kept == KeptSettings(silentMode: true))
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

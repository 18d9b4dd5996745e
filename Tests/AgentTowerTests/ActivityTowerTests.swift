import AudioPolicy
import Glibc
@testable import AgentTower
import ServerModel
import Testing
import TowerTesting

/// SPEC.md section 1 through the control tower: which streams it meters, what their sound does, and
/// calls inferred from behaviour, on an in-memory server of each kind under a manual clock.
@Suite("activity from sound")
struct ActivityTowerTests {
    let screenReader = AppPolicy(name: "speech-dispatcher", match: .init(name: ["speech-dispatcher-espeak-ng"]),
                                 configuration: SessionConfiguration(.playback, mode: .spokenAudio, options: [.duckOthers, .interruptSpokenAudioAndMixWithOthers]),
                                 duckLevel: 0.3)
    let browser = AppPolicy(name: "chromium", match: .init(name: ["Chromium"]), configuration: SessionConfiguration(.playback, options: .mixWithOthers))
    let voiceChannel = AppPolicy(name: "discord", match: .init(name: ["Discord"]),
                                 configuration: SessionConfiguration(.playAndRecord, options: .mixWithOthers), infersCalls: false)

    /// Issue 20 case 7b, at its root: speech-dispatcher 0.11 plays its voice from the daemon and its fallback
    /// from its child `sd_dummy`, both matching speech-dispatcher.yaml. As two apps, the voice interrupted
    /// the fallback's session (spoken audio) and ducked its stream at every utterance, and on PipeWire the
    /// server remembered that mute and duck for the fallback. One program, one session: the voice leaves
    /// its own fallback alone.
    @Test("a process and its child matched by the same policy file are one app (speech-dispatcher and sd_dummy): the voice leaves its fallback alone",
          arguments: InMemoryServer.Kind.allCases)
    func childProcessIsTheSameApp(_ kind: InMemoryServer.Kind) {
        let reader = AppPolicy(name: "speech-dispatcher", match: .init(binary: ["sd_dummy", "speech-dispatcher"]),
                               configuration: screenReader.configuration, duckLevel: 0.3)
        var w = TowerWorld(kind, policies: [reader], parents: [201: 200, 200: 50, 301: 300, 302: 300, 300: 50])
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        // The fallback first (the daemon starts it), silent; then the voice, which speaks.
        let fallback = w.server.play([:], name: "speech-dispatcher-dummy", pid: 201, binary: "sd_dummy")
        w.silent.insert(fallback)
        w.advance(.seconds(2))
        let voice = w.server.play([:], name: "speech-dispatcher-espeak-ng", pid: 200, binary: "speech-dispatcher")
        w.advance(.seconds(1))
        let sessions = w.tower.statusReport().sessions.filter { $0.session.hasSuffix(":speech-dispatcher") }
        #expect(sessions.count == 1, "\(sessions.map(\.session))")
        #expect(w.muted(fallback) == false, "not interrupted by its own voice")
        #expect(abs(w.volume(fallback)! - 1) < 0.01, "nor ducked by it")
        #expect(w.volume(song)! < 0.9, "the music ducked")
        w.server.stop(fallback)
        w.server.stop(voice)
        w.advance(.seconds(5))
        #expect(abs(w.volume(song)! - 1) < 0.01)
        // A process that merely shares a parent with another of the policy's (siblings) is another app.
        let one = w.server.play([:], name: "speech-dispatcher-dummy", pid: 301, binary: "sd_dummy")
        let two = w.server.play([:], name: "speech-dispatcher-espeak-ng", pid: 302, binary: "speech-dispatcher")
        w.advance(.seconds(1))
        #expect(w.tower.statusReport().sessions.filter { $0.session.hasSuffix(":speech-dispatcher") }.count == 2)
        withExtendedLifetime((one, two)) {}
    }

    @Test("a screen reader idle with its stream open leaves the music alone; speaking, it ducks it; silent again, the music comes back", arguments: InMemoryServer.Kind.allCases)
    func idleScreenReader(_ kind: InMemoryServer.Kind) {
        // speech-dispatcher's voice: its stream open, writing silence.
        var (w, song, voice) = voiceBesideMusic(kind)
        #expect(w.metered == [voice], "the reader's stream is metered (the music plays: it would duck it); the music's not (no other player)")
        #expect(abs(w.volume(song)! - 1) < 0.01, "idle: the music at its volume")
        w.advance(.seconds(600))
        #expect(abs(w.volume(song)! - 1) < 0.01, "ten minutes later too")
        #expect(w.log.filter { $0.contains("duck to") }.count <= 1, "at most the moment before its meter's first block")

        w.sounds(voice, true)
        w.advance(.milliseconds(200))
        #expect(abs(w.volume(song)! - cbrt(0.3)) < 0.01, "speaking: ducked to 30 %")
        let status = w.tower.statusReport().sessions.first { $0.session.contains("speech-dispatcher") }
        #expect(status?.streams == ["out#\(voice) heard"])

        w.sounds(voice, false)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - 1) < 0.01, "silent again: back")
        let after = w.tower.statusReport().sessions.first { $0.session.contains("speech-dispatcher") }
        #expect(after?.streams?.first?.hasPrefix("out#\(voice) open and silent for") == true, "\(after?.streams ?? [])")
    }

    /// Music playing (process 1), then a screen reader's voice (process 2), silent or speaking, two
    /// seconds on (its meter's first block taken).
    func voiceBesideMusic(_ kind: InMemoryServer.Kind, silent: Bool = true) -> (TowerWorld, song: UInt32, voice: UInt32) {
        var w = TowerWorld(kind, policies: [screenReader])
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let voice = w.server.play([:], name: "speech-dispatcher-espeak-ng", pid: 2)
        if silent { w.silent.insert(voice) }
        w.advance(.seconds(2))
        return (w, song, voice)
    }

    @Test("a meter that says its stream went silent a while ago: the grace period counts from then", arguments: InMemoryServer.Kind.allCases)
    func silenceSaidLate(_ kind: InMemoryServer.Kind) {
        var (w, _, voice) = voiceBesideMusic(kind, silent: false)
        #expect(w.metered == [voice])
        let said = w.now
        w.run([.sound(.silent(stream: voice, for: .milliseconds(100)))])
        let sound = w.tower.state.streams[StreamKey(.output, voice)]?.sound
        #expect(sound == .quiet(since: said - .milliseconds(100)), "\(String(describing: sound))")
    }

    @Test("a meter that fails: its stream counts while it runs, and the log says why", arguments: InMemoryServer.Kind.allCases)
    func failedMeter(_ kind: InMemoryServer.Kind) {
        var (w, song, voice) = voiceBesideMusic(kind)
        #expect(abs(w.volume(song)! - 1) < 0.01)
        w.run([.sound(.failed(stream: voice, reason: "No such entity"))])
        w.advance(.seconds(1))
        #expect(abs(w.volume(song)! - cbrt(0.3)) < 0.01, "a running stream of a ducker, not metered: ducking")
        #expect(w.log.contains { $0.contains("a stream cannot be metered") && $0.contains("No such entity") })
    }

    @Test("a browser that records from the microphone while it plays is a call: the music is paused and muted, and back after; status says so", arguments: InMemoryServer.Kind.allCases)
    func browserCall(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [browser])
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let page = w.server.play([:], name: "Chromium", pid: 7)
        w.deliver()
        #expect(w.muted(song) == false, "a page plays along")
        #expect(!w.metered.contains(page), "a page that mixes is not metered")
        let mic = w.server.play([:], name: "Chromium", pid: 7, direction: .input)
        w.deliver()
        #expect(w.muted(song) == false, "not a call before the page is heard while it records")
        w.advance(.milliseconds(200))
        #expect(w.metered.contains(page), "recording, the page is metered")
        #expect(w.muted(song) == true, "heard while it records: a call now")
        let line = w.tower.statusReport().sessions.first { $0.session.hasPrefix("player[7]") }
        #expect(line?.configuration == "playAndRecord/voiceChat")
        #expect(line?.inferredCall?.contains("records (in#\(mic) from builtin_mic) while it plays") == true, "\(line?.inferredCall ?? "none")")
        #expect(line?.inferredCall?.contains("back to playback") == true)
        w.advance(.seconds(5))
        #expect(w.metered.contains(page), "a call from its sound stays metered")
        w.server.stop(mic, direction: .input)
        w.advance(.seconds(1))
        #expect(w.muted(song) == false)
        #expect(w.tower.statusReport().sessions.first { $0.session.hasPrefix("player[7]") }?.inferredCall == nil)
        #expect(!w.metered.contains(page))
    }

    @Test("a page that records beside a silent output of its own (Firefox opens one with the microphone) is no call", arguments: InMemoryServer.Kind.allCases)
    func recordingPageWithSilentOutput(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [browser])
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let output = w.server.play([:], name: "Chromium", pid: 7)
        w.silent.insert(output)
        _ = w.server.play([:], name: "Chromium", pid: 7, direction: .input)
        w.deliver()
        w.advance(.seconds(5))
        #expect(w.metered.contains(output), "recording, its output is metered")
        #expect(w.muted(song) == false, "silent beside its recording: no call")
        #expect(w.tower.statusReport().sessions.first { $0.session.hasPrefix("player[7]") }?.inferredCall == nil)
        w.sounds(output, true)
        #expect(w.muted(song) == true, "heard while it records: a call")
    }

    @Test("an app whose streams match its policy by different facts (Chromium's playback and its capture, 'Chromium input') is one session, declared once")
    func oneSessionDeclaredOnce() {
        let chromium = AppPolicy(name: "chromium", match: .init(name: ["Chromium", "Chromium input"]),
                                 configuration: SessionConfiguration(.playback, options: .mixWithOthers))
        var w = TowerWorld(.pulseAudio, policies: [chromium])
        w.server.play([:], name: "Chromium", pid: 7)
        w.server.play([:], name: "Chromium input", pid: 7, direction: .input)
        w.server.play([:], name: "Chromium", pid: 7)
        w.advance(.seconds(1))
        let declared = w.log.filter { $0.contains(" session ") && $0.contains("session=player[7]:chromium") }
        #expect(declared.count == 1, "\(declared)")
        #expect(w.tower.statusReport().sessions.filter { $0.session.hasPrefix("player[7]") }.count == 1)
    }

    @Test("a Flatpak app that plays from one process and records from another is one app: its call is inferred", arguments: InMemoryServer.Kind.allCases)
    func flatpakAppIsOneApp(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let app: Properties = ["pipewire.access.portal.app_id": "org.example.Phone"]
        w.server.play(app, name: "Phone", pid: 40)
        w.server.play(app, name: "Phone", pid: 41, direction: .input)
        w.advance(.seconds(1))
        #expect(w.muted(song) == true, "one app recording while it plays: a call")
        let sessions = w.tower.statusReport().sessions.filter { $0.session.contains("[org.example.Phone]") }
        #expect(sessions.count == 1 && sessions.first?.inferredCall != nil, "\(w.tower.statusReport().sessions.map(\.session))")
    }

    @Test("an always-open voice channel (infer-calls: no) records while it plays and mixes", arguments: InMemoryServer.Kind.allCases)
    func voiceChannelMixes(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [voiceChannel])
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        w.server.play([:], name: "Discord", pid: 8)
        w.server.play([:], name: "Discord", pid: 8, direction: .input)
        w.advance(.seconds(1))
        #expect(w.muted(song) == false)
        #expect(w.tower.statusReport().sessions.allSatisfy { $0.inferredCall == nil })
    }

    @Test("a capture of a sink's monitor (a screen recorder) while playing is no call", arguments: InMemoryServer.Kind.allCases)
    func monitorCaptureIsNoCall(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [browser])
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        w.server.play([:], name: "Chromium", pid: 7)
        w.server.play(["stream.capture.sink": "true"], name: "Chromium", pid: 7, direction: .input)
        w.advance(.seconds(1))
        #expect(w.muted(song) == false)
    }

    /// Found in review (issue 21): a stream that stops being anyone's session kept what we held on it.
    @Test("a recorder denied the microphone, its capture moved to a sink's monitor by the user: no longer a microphone's, it is unmuted",
          arguments: InMemoryServer.Kind.allCases)
    func captureMovedToAMonitorIsLetGo(_ kind: InMemoryServer.Kind) {
        let denied = AppPolicy(name: "recorder", match: .init(name: ["Recorder"]), configuration: SessionConfiguration(.record),
                               microphoneAllowed: false)
        var w = TowerWorld(kind, policies: [denied])
        let capture = w.server.play([:], name: "Recorder", pid: 5, direction: .input)
        w.deliver()
        #expect(w.server.stream(capture, .input)?.isMuted == true, "the microphone denied: it records silence")
        let sink = w.server.snapshot.sinks.values.first { $0.name == "builtin_speaker" }!.id
        let monitor = w.server.plugMonitor(of: sink, name: "builtin_speaker.monitor")
        w.server.moveCapture(capture, to: monitor)
        w.deliver()
        #expect(w.server.stream(capture, .input)?.isMuted == false, "a monitor's capture is nobody's session: nothing held")
    }
}

import SoundServerTesting
import Testing

/// Real programs from Debian with the agent, on a private PulseAudio.
@Suite("real programs on PulseAudio", .serialized, .timeLimit(.minutes(3)))
struct RealAppsOnPulseAudio {
    let kind = ServerKind.pulseaudio
    @Test("PulseAudio: real apps: speech-dispatcher idle ducks nothing, speaking it ducks the film, silent again the film is back")
    func screenReader() async throws { try await RealAppScenarios.screenReaderIdleAndSpeaking(kind) }
    @Test("PulseAudio: real apps: a SIP call between two linphonec pauses mpv and plays it again after")
    func sipCall() async throws { try await RealAppScenarios.sipCallPausesThePlayer(kind) }
    @Test("PulseAudio: real apps: arecord as a recorder interrupts mpv while it records")
    func recorder() async throws { try await RealAppScenarios.recorderSilencesThePlayer(kind) }
    @Test("PulseAudio: real apps: headless Chromium playing mixes, a page recording alone pauses nothing, a web call in it pauses mpv")
    func chromium() async throws { try await RealAppScenarios.browserPageMixesAndWebCallIsACall(kind, .chromium) }
    @Test("PulseAudio: real apps: headless Firefox ESR playing mixes, a page recording alone pauses nothing, a web call in it pauses mpv")
    func firefox() async throws { try await RealAppScenarios.browserPageMixesAndWebCallIsACall(kind, .firefox) }
}

/// The same on PipeWire 0.3.65 with WirePlumber 0.4.13.
@Suite("real programs on PipeWire", .serialized, .timeLimit(.minutes(3)))
struct RealAppsOnPipeWire {
    let kind = ServerKind.pipewire
    @Test("PipeWire: real apps: speech-dispatcher idle ducks nothing, speaking it ducks the film, silent again the film is back")
    func screenReader() async throws { try await RealAppScenarios.screenReaderIdleAndSpeaking(kind) }
    @Test("PipeWire: real apps: a SIP call between two linphonec pauses mpv and plays it again after")
    func sipCall() async throws { try await RealAppScenarios.sipCallPausesThePlayer(kind) }
    @Test("PipeWire: real apps: arecord as a recorder interrupts mpv while it records")
    func recorder() async throws { try await RealAppScenarios.recorderSilencesThePlayer(kind) }
    @Test("PipeWire: real apps: headless Chromium playing mixes, a page recording alone pauses nothing, a web call in it pauses mpv")
    func chromium() async throws { try await RealAppScenarios.browserPageMixesAndWebCallIsACall(kind, .chromium) }
    @Test("PipeWire: real apps: headless Firefox ESR playing mixes, a page recording alone pauses nothing, a web call in it pauses mpv")
    func firefox() async throws { try await RealAppScenarios.browserPageMixesAndWebCallIsACall(kind, .firefox) }
}

/// The same on PipeWire 1.4.2 with WirePlumber 0.5.8.
@Suite("real programs on PipeWire 1.4", .serialized, .timeLimit(.minutes(3)))
struct RealAppsOnPipeWire14 {
    let kind = ServerKind.pipewire14
    @Test("PipeWire 1.4: real apps: speech-dispatcher idle ducks nothing, speaking it ducks the film, silent again the film is back")
    func screenReader() async throws { try await RealAppScenarios.screenReaderIdleAndSpeaking(kind) }
    @Test("PipeWire 1.4: real apps: a SIP call between two linphonec pauses mpv and plays it again after")
    func sipCall() async throws { try await RealAppScenarios.sipCallPausesThePlayer(kind) }
    @Test("PipeWire 1.4: real apps: arecord as a recorder interrupts mpv while it records")
    func recorder() async throws { try await RealAppScenarios.recorderSilencesThePlayer(kind) }
    @Test("PipeWire 1.4: real apps: headless Chromium playing mixes, a page recording alone pauses nothing, a web call in it pauses mpv")
    func chromium() async throws { try await RealAppScenarios.browserPageMixesAndWebCallIsACall(kind, .chromium) }
    @Test("PipeWire 1.4: real apps: headless Firefox ESR playing mixes, a page recording alone pauses nothing, a web call in it pauses mpv")
    func firefox() async throws { try await RealAppScenarios.browserPageMixesAndWebCallIsACall(kind, .firefox) }
}

import AudioPolicy
import Foundation
import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing

/// What real programs from Debian do with the agent running (issue 19), not imitations: the music is
/// mpv with mpv-mpris (a real MPRIS player), the others are speech-dispatcher with espeak-ng (a screen
/// reader's voice), two linphonec in a real SIP call on loopback, arecord, and headless Chromium and Firefox ESR
/// playing a page and in a web call. Their streams are what the programs open themselves (recorded in
/// Tests/Fixtures/RealApps). Run on every server by the suites in RealAppSuites.swift.
enum RealAppScenarios {
    /// mpv's stream, its every channel within 1 % of `fraction`.
    static func waitMPVVolume(_ w: AgentWorld, _ mpv: MPVPlayer, _ fraction: Double, _ what: String, timeout: Duration = .seconds(20)) async throws {
        try await w.observer.wait(for: "mpv at \(Int(fraction * 100)) % (\(what))", timeout: timeout) { s in
            PlayerScenarios.mpvStream(mpv, s).flatMap { stream in
                stream.volume.values.allSatisfy { abs($0.fraction - fraction) < 0.01 } ? true : nil
            }
        }
    }

    static func waitMPVMuted(_ w: AgentWorld, _ mpv: MPVPlayer, _ muted: Bool, _ what: String, timeout: Duration = .seconds(20)) async throws {
        try await w.observer.wait(for: "mpv muted=\(muted) (\(what))", timeout: timeout) { s in
            PlayerScenarios.mpvStream(mpv, s)?.isMuted == muted ? true : nil
        }
    }

    /// A screen reader's voice (speech-dispatcher 0.11 with espeak-ng, as Orca keeps it running): its
    /// streams stay open and silent between utterances, from the daemon's start (sd_dummy) and from the
    /// first utterance on (the espeak-ng voice). Idle, it leaves the film in mpv alone; speaking, it ducks
    /// it to 30 % (policies/speech-dispatcher.yaml); silent again, the film is back at its volume, and
    /// stays there while the voice's stream stays open. The film is never paused (the voice ducks, it
    /// interrupts spoken audio only).
    static func screenReaderIdleAndSpeaking(_ kind: ServerKind) async throws {
        try await PlayerScenarios.withPlayer(kind) { w, mpv, remote in
            // The screen reader starts while the film is paused (a desktop session's start), and idles.
            try await remote.send("Pause")
            try await remote.wait(for: "Paused")
            let speech = try SpeechDispatcher(on: w.server)
            defer { speech.stop() }
            let dummy = try await w.observer.wait(for: "speech-dispatcher's fallback stream (sd_dummy)", timeout: .seconds(20)) { s in
                s.sinkInputs.values.first { $0.properties["application.process.binary"] == "sd_dummy" && $0.device != nil }?.id
            }
            try await w.settle()
            // The film plays: the reader's stream is metered now (it would duck the film), and heard silent
            // (pipewire-pulse 1.4 delivers no block at all from a stream not fed: silent after a while).
            try await remote.send("Play")
            try await remote.wait(for: "Playing")
            try await w.waitForAgent("sd_dummy heard silent", timeout: .seconds(20)) { state in
                if case .quiet? = state.streams[StreamKey(.output, dummy)]?.sound { true } else { false }
            }
            try await waitMPVVolume(w, mpv, 1.0, "speech-dispatcher idle")
            try await w.settle()
            #expect(PlayerScenarios.mpvStream(mpv, w.observer.snapshot)?.volume.values.allSatisfy { abs($0.fraction - 1) < 0.01 } == true,
                    "an idle screen reader ducks nothing")

            // It speaks: ducked while it speaks.
            let sentence = "The quick brown fox jumps over the lazy dog, and the screen reader goes on reading this sentence "
                + "for a few seconds more, so that the film is heard lowered under it."
            let speaking = Task { try await speech.say(sentence) }
            try await waitMPVVolume(w, mpv, cbrt(0.3), "speech-dispatcher speaking")
            // The fallback (sd_dummy, a child of the daemon that plays the voice) is the same program: its
            // voice neither interrupts nor ducks it (issue 20 case 7b: it did, and PipeWire remembered it).
            try await w.settle()
            // (What the agent holds: pipewire-pulse 0.3 reports an idle stream it unlinked at volume 0.)
            let fallback = await w.agent.state.streams[StreamKey(.output, dummy)]
            #expect(fallback?.heldMute != true, "sd_dummy not interrupted by its own daemon's voice")
            #expect(fallback?.heldDuck == nil, "nor ducked by it")
            #expect(w.observer.snapshot.sinkInputs[dummy]?.isMuted != true)
            let readers = await w.agent.statusReport().sessions.filter { $0.session.hasSuffix(":speech-dispatcher") }
            #expect(readers.count == 1, "one app: \(readers.map(\.session))")
            try await speaking.value
            // Said: the voice's stream stays open (PulseAudio and PipeWire 1.4: uncorked, writing silence),
            // and the film is back.
            try await waitMPVVolume(w, mpv, 1.0, "speech-dispatcher silent again")
            try await w.settle()
            #expect(PlayerScenarios.mpvStream(mpv, w.observer.snapshot)?.volume.values.allSatisfy { abs($0.fraction - 1) < 0.01 } == true)
            #expect(try await remote.status() == "Playing", "ducked, never paused")
            let voices = w.observer.snapshot.sinkInputs.values.filter { $0.properties["application.name"] == "speech-dispatcher-espeak-ng" }
            #expect(!voices.isEmpty || kind == .pipewire, "the voice's stream stays open after speaking (PipeWire 0.3.65 ends it after a few seconds)")
        }
    }

    /// A real SIP call: two Debian linphonec on 127.0.0.1 in a private network namespace, the callee
    /// answering by itself. linphonec sets no media.role (its streams say `media.name=phone`): its
    /// policy (policies/linphone.yaml, binary linphonec), and its recording while it plays, make it a
    /// call. The film in mpv is paused through MPRIS and muted while the call lasts, and plays again
    /// after it (each side plays a short end-of-call tone after hanging up, a call's stream too).
    static func sipCallPausesThePlayer(_ kind: ServerKind) async throws {
        try await PlayerScenarios.withPlayer(kind) { w, mpv, remote in
            let sip = try LinphoneCall(on: w.server)
            defer { sip.stop() }
            do {
                try await sip.waitUntilListening()
                try await w.settle()
                #expect(try await remote.status() == "Playing", "an idle softphone opens no stream and interrupts nothing")
                try await sip.call()
            } catch {
                Issue.record("\(error)\n\(sip.logs)")
                throw error
            }
            try await remote.wait(for: "Paused", timeout: .seconds(20))
            try await waitMPVMuted(w, mpv, true, "during the SIP call")
            // One session per linphonec, each a call (the callee's streams may come a moment after the
            // caller's; both ends on one desktop, the later call interrupts the earlier, SPEC.md 5.1).
            try await w.waitForAgent("both linphonec in a call", agent: { agent in
                let calls = await agent.statusReport().sessions.filter { $0.session.hasPrefix("linphonec[") }
                return calls.count == 2 && calls.allSatisfy { $0.configuration == "playAndRecord/voiceChat" }
                    && calls.contains { $0.state == "active" }
            })
            try sip.hangUp()
            try await remote.wait(for: "Playing", timeout: .seconds(20))
            try await waitMPVMuted(w, mpv, false, "after the SIP call")
        }
    }

    /// A recording app (Debian's arecord, through ALSA's pulse plug-in: its capture says binary `aplay`
    /// and name `ALSA plug-in [aplay]`) given a recorder's policy by the user: while it records, the
    /// film is interrupted (SPEC.md section 2: record interrupts non-mixable sessions, and 5.3 silences
    /// all other output), paused and muted; when it stops, the film plays again.
    static func recorderSilencesThePlayer(_ kind: ServerKind) async throws {
        let memo = """
            description: "Voice memos with arecord: recording silences what plays."
            match:
              binary: [aplay]
              name: ['ALSA plug-in [aplay]']
            category: record
            """
        try await PlayerScenarios.withPlayer(kind, policies: ["voice-memo": memo]) { w, mpv, remote, _ in
            let recorder = try ChildProcess.spawn(["arecord", "-q", "-D", "pulse", "-f", "cd", "-d", "120", "\(w.directory)/memo.wav"],
                                                  environment: ["PULSE_SERVER": w.server.address])
            defer { recorder.signal(SIGKILL) }
            let capture = try await w.observer.wait(for: "arecord's capture", timeout: .seconds(20)) { s in
                s.sourceOutputs.values.first { $0.properties["application.process.id"] == "\(recorder.pid)" }
            }
            #expect(capture.properties["application.process.binary"] == "aplay")
            try await waitMPVMuted(w, mpv, true, "while arecord records")
            try await remote.wait(for: "Paused")
            recorder.signal(SIGINT)
            _ = await recorder.wait()
            try await remote.wait(for: "Playing")
            try await waitMPVMuted(w, mpv, false, "arecord done")
        }
    }

    /// A headless browser (Chromium, Firefox ESR): a page playing mixes with the film
    /// (policies/chromium.yaml, firefox.yaml); a page that records and plays nothing is no call (Firefox
    /// opens a silent output beside the microphone all the same); a web call (the page records the
    /// microphone through getUserMedia while it plays the far end) is a call, inferred from that
    /// behaviour (neither browser's streams say anything of a call): the film is paused and muted
    /// while the call lasts, and plays again once the page is gone.
    static func browserPageMixesAndWebCallIsACall(_ kind: ServerKind, _ browser: HeadlessBrowser.Kind) async throws {
        try await PlayerScenarios.withPlayer(kind) { w, mpv, remote in
            let tone = toneWAV(seconds: 20)
            @Sendable func browserStream(_ s: Snapshot, _ direction: Direction) -> AudioStream? {
                s.streams(direction).first { $0.properties["application.process.binary"] == browser.binary && !$0.isCorked }
            }
            // (A browser's start takes long under the whole suite's load: three at once, on two cores.)
            let starts = Duration.seconds(60)
            let page = try HeadlessBrowser(browser, on: w.server, page: "<audio src='tone.wav' autoplay loop></audio>", files: ["tone.wav": tone])
            _ = try await w.observer.wait(for: "the page's sound", timeout: starts) { s in browserStream(s, .output) }
            try await w.settle()
            #expect(try await remote.status() == "Playing", "a page playing mixes")
            #expect(PlayerScenarios.mpvStream(mpv, w.observer.snapshot)?.isMuted == false)
            page.stop()
            try await w.observer.wait(for: "the page gone", timeout: .seconds(20)) { s in browserStream(s, .output) == nil ? true : nil }

            // A page that records: at first it plays nothing (a voice memo, dictation), and is no call.
            // Firefox opens an output beside the microphone all the same, uncorked and silent; heard
            // silent, it is not playing. The far end speaks once far.wav is beside the page: a web call.
            let webCall = """
                <audio id="far" loop></audio>
                <script>
                navigator.mediaDevices.getUserMedia({audio: true}).then(stream => {
                  window.microphone = stream;
                  const far = document.getElementById('far');
                  const speak = () => { far.src = 'far.wav'; far.load(); far.play().catch(() => setTimeout(speak, 250)); };
                  speak();
                });
                </script>
                """
            let call = try HeadlessBrowser(browser, on: w.server, page: webCall, microphone: true, after: page)
            defer { call.stop() }
            _ = try await w.observer.wait(for: "the page's capture", timeout: starts) { s in browserStream(s, .input) }
            // Firefox's silent output runs with the capture (the fixtures show both at once), and the
            // agent hears it silent; Chromium opens none. (Firefox may also open the far end's stream
            // before it has anything to play: corked, or on PipeWire 1.4 left unlinked by WirePlumber;
            // neither is metered, and neither begins a call.)
            @Sendable func running(_ s: Snapshot) -> [UInt32] {
                s.sinkInputs.values.filter { $0.properties["application.process.binary"] == browser.binary && !$0.isCorked && $0.device != nil }.map(\.id)
            }
            // (Firefox's may come linked a moment after the capture shows, on a busy machine: awaited.)
            let silentOutputs = browser == .chromium ? running(w.observer.snapshot)
                : try await w.observer.wait(for: "Firefox's output beside the capture, running", timeout: starts) { s in
                    let found = running(s)
                    return found.isEmpty ? nil : found
                }
            #expect(silentOutputs.isEmpty == (browser == .chromium), "the recording page's outputs: \(silentOutputs)")
            // (Heard silent: one of them at least. On PipeWire 1.4 the second, fed nothing, was once
            // never metered; unmetered, it begins no call all the same. Firefox may close that output and
            // open another a moment later: those running as the agent is asked are the ones.)
            let observer = w.observer
            do {
                try await w.waitForAgent("the recording page's outputs heard silent: \(silentOutputs)", timeout: .seconds(20)) { state in
                    let now = browser == .chromium ? silentOutputs : running(observer.snapshot)
                    let sounds = now.compactMap { state.streams[StreamKey(.output, $0)]?.sound }
                    let quiet = sounds.contains { if case .quiet = $0 { true } else { false } }
                    return !sounds.contains(.heard) && (quiet || now.isEmpty && browser == .chromium)
                }
            } catch {
                let state = await w.agent.state
                Issue.record("the agent's view of the outputs: \(silentOutputs.map { (id: UInt32) in "\(id): \(String(describing: state.streams[StreamKey(.output, id)]))" }) observer: \(w.observer.snapshot.sinkInputs.values.filter { $0.properties["application.process.binary"] == browser.binary }.map { "\($0.id) corked=\($0.isCorked) device=\(String(describing: $0.device)) pid=\($0.properties["application.process.id"] ?? "")" })")
                throw error
            }
            try await w.settle()
            #expect(try await remote.status() == "Playing", "a page recording alone pauses no one")
            #expect(PlayerScenarios.mpvStream(mpv, w.observer.snapshot)?.isMuted == false, "nor mutes anyone")
            #expect(await !w.agent.statusReport().sessions.contains { $0.session.hasPrefix("\(browser.binary)[") && $0.inferredCall != nil },
                    "no call inferred from a page recording alone")

            try call.add("far.wav", tone)
            try await remote.wait(for: "Paused", timeout: .seconds(20))
            try await waitMPVMuted(w, mpv, true, "during the web call")
            // (What the agent shows is published at the end of its batch, which may come a moment after
            // the mute it sent has reached the server.)
            try await w.waitForAgent("the web call shown as a call inferred from its behaviour", agent: { agent in
                await agent.statusReport().sessions.contains {
                    $0.session.hasPrefix("\(browser.binary)[") && $0.inferredCall != nil && $0.configuration == "playAndRecord/voiceChat"
                }
            })
            call.stop()
            try await remote.wait(for: "Playing", timeout: .seconds(20))
            try await waitMPVMuted(w, mpv, false, "the web call over")
        }
    }
}

import AudioPolicy
import Testing

/// SPEC.md section 1: an app that never heard of us plays while its streams run and are heard, and is
/// in a call while it records from a microphone as it plays.
struct ActivityTests {
    let browser = SessionConfiguration(.playback, options: .mixWithOthers)

    func metered(_ h: Harness) -> Set<StreamKey> { Set(h.state.streams.values.filter(\.meterAsked).map(\.key)) }

    @Test("a screen reader's open silent stream ducks nothing once its meter's first block is silent; its voice ducks the music, which comes back a grace period after")
    func silentDuckerDucksNothingUntilHeard() {
        var h = Harness()
        h.laptop()
        let song = h.app("rhythmbox", music)
        // speech-dispatcher opens its stream and writes silence for as long as it runs. Until its
        // meter's first block it counts (a voice that starts speaking must not wait for the meter).
        let opened = h.app("speech-dispatcher", screenReader, heard: false)
        #expect(metered(h).contains(opened), "a ducker's running stream is metered")
        #expect(h.status("speech-dispatcher") == .active, "until the grace period after its first, silent, block")
        h.advance(.seconds(1))
        #expect(h.status("speech-dispatcher") == .inactive)
        #expect(h.stream(song)?.heldDuck == nil)
        h.advance(.seconds(600))
        #expect(h.stream(song)?.heldDuck == nil, "ten minutes of silence duck nothing")

        let speaks = h.hear(opened, true)
        #expect(speaks.contains(.duck(song, level: 0.2, ramp: .milliseconds(150))))
        #expect(h.status("speech-dispatcher") == .active)
        // Gaps between words are shorter than the grace period: nothing moves.
        h.hear(opened, false)
        h.advance(.milliseconds(300))
        h.hear(opened, true)
        #expect(h.stream(song)?.heldDuck == 0.2)
        h.hear(opened, false)
        h.advance(.milliseconds(400))
        #expect(h.stream(song)?.heldDuck == 0.2)
        let after = h.advance(.milliseconds(200))
        #expect(after.contains(.unduck(song, ramp: .milliseconds(500))))
        #expect(h.status("speech-dispatcher") == .inactive)
        #expect(h.nothingHeld)
        #expect(metered(h).contains(opened), "still open, still metered")
    }

    @Test("the grace period counts from the voice's last sound: a meter that says so a read late says how late, taken up to silenceSaidLate")
    func graceFromTheLastSound() {
        var h = Harness()
        h.laptop()
        let song = h.app("rhythmbox", music)
        let voice = h.app("speech-dispatcher", screenReader)
        #expect(h.stream(song)?.heldDuck == 0.2)
        // Said 112 ms late (three blocks a read on pipewire-pulse 0.3; the last two silent).
        h.hear(voice, false, silentFor: .milliseconds(75))
        h.advance(.milliseconds(424))
        #expect(h.stream(song)?.heldDuck == 0.2)
        let back = h.advance(.milliseconds(1))
        #expect(back.contains(.unduck(song, ramp: .milliseconds(500))), "500 ms after the last sound, not after the word of it")

        // A meter's word that it was silent for long is taken up to silenceSaidLate (200 ms).
        h.hear(voice, true)
        #expect(h.stream(song)?.heldDuck == 0.2)
        h.hear(voice, false, silentFor: .seconds(30))
        h.advance(.milliseconds(299))
        #expect(h.stream(song)?.heldDuck == 0.2)
        #expect(h.advance(.milliseconds(1)).contains(.unduck(song, ramp: .milliseconds(500))))
        #expect(h.nothingHeld)
    }

    @Test("a silent open stream of a non-mixable app interrupts no one once its meter's first block is silent; its first sound does")
    func silentPlayerInterruptsNoOneUntilHeard() {
        var h = Harness()
        h.laptop()
        let podcast = h.app("gpodder", music)
        let game = h.app("steam", SessionConfiguration(.soloAmbient), heard: false)
        // (Until then it counted, as a player that starts does: the podcast was interrupted a moment.)
        let resumed = h.advance(.seconds(1))
        #expect(resumed.contains(.unmute(podcast)))
        #expect(h.status("gpodder") == .active)
        #expect(h.status("steam") == .inactive)
        #expect(h.stream(podcast)?.heldMute == false)
        let plays = h.hear(game, true)
        #expect(h.status("gpodder") == .interrupted(by: SessionID("steam")))
        #expect(plays.contains(.mute(podcast)))
    }

    @Test("a call's stream interrupts at its start, before any sound; silent for callIdleAfter it stops counting, and counts again when heard")
    func callCountsFromItsStartUntilIdle() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let voice = h.app("linphonec", call, heard: false)
        #expect(h.status("spotify") == .interrupted(by: SessionID("linphonec")))
        #expect(h.stream(song)?.heldMute == true)
        #expect(metered(h).contains(voice))
        // A long quiet moment in a call ends nothing before callIdleAfter.
        h.advance(.seconds(59))
        #expect(h.status("spotify") == .interrupted(by: SessionID("linphonec")))
        #expect(h.machine.nextDeadline == h.now + .seconds(1))
        h.advance(.seconds(1))
        let idle = h.advance(.milliseconds(500))
        #expect(idle.contains(.unmute(song)))
        #expect(h.status("linphonec") == .inactive)
        // Its far end speaks again: a call again.
        let again = h.hear(voice, true)
        #expect(again.contains(.mute(song)))
        #expect(h.status("spotify") == .interrupted(by: SessionID("linphonec")))
        // A call heard and then quiet: the same 60 s from its last sound.
        h.hear(voice, false)
        h.advance(.seconds(30))
        #expect(h.status("linphonec") == .active)
    }

    @Test("mixable apps' streams and captures are not metered: they count while they run, as before")
    func mixableAndCaptureStreamsAreNotMetered() {
        var h = Harness()
        h.laptop()
        let page = h.app("chromium", browser, heard: false)
        let recording = h.app("gnome-sound-recorder", recorder, direction: .input, heard: false)
        #expect(metered(h).isEmpty)
        #expect(h.status("chromium") == .active)
        #expect(h.status("gnome-sound-recorder") == .active)
        #expect(h.stream(page)?.heldMute == true, "the recorder silences the page, heard or not")
        _ = recording
    }

    @Test("a meter runs only while its stream runs and another app plays whom it would change: corked, it stops; alone, it stops")
    func meterFollowsTheCorkAndTheAudience() {
        var h = Harness()
        h.laptop()
        let song = h.app("rhythmbox", music)
        #expect(metered(h).isEmpty, "a player alone changes no one: not metered (a meter is a capture, which desktops show as a microphone in use)")
        #expect(h.status("rhythmbox") == .active)
        let podcast = h.app("gpodder", music)
        #expect(metered(h) == [podcast], "two players: the podcast's sound decides whether the music plays; the interrupted music's changes nothing until then")
        #expect(h.status("rhythmbox") == .interrupted(by: SessionID("gpodder")))
        // The interrupted player pauses (its stream corks): the podcast plays alone, metered no more.
        let corked = h.send(.streamRunning(song, false))
        #expect(corked.contains(.meter(podcast, false)))
        #expect(!corked.contains(.meter(song, false)))
        // The user plays it again during the interruption: the podcast is metered again; the music waits for it.
        let uncorked = h.send(.streamRunning(song, true))
        #expect(uncorked.contains(.meter(podcast, true)) && !uncorked.contains(.meter(song, true)))
        #expect(h.status("rhythmbox") == .interrupted(by: SessionID("gpodder")))
        // The podcast's stream open and silent: a grace period later it plays no more, and the music resumes,
        // metered now that its sound decides whether the podcast would interrupt it.
        h.hear(podcast, false)
        let resumed = h.advance(.seconds(1))
        #expect(h.status("gpodder") == .inactive)
        #expect(h.status("rhythmbox") == .active)
        #expect(h.stream(song)?.heldMute == false)
        #expect(resumed.contains(.meter(song, true)))
        // Heard again, the podcast interrupts the music again, whose meter stops.
        let again = h.hear(podcast, true)
        #expect(h.status("rhythmbox") == .interrupted(by: SessionID("gpodder")))
        #expect(again.contains(.meter(song, false)))
        let gone = h.send(.streamGone(podcast))
        #expect(gone.contains(.meter(podcast, false)))
        #expect(!gone.contains(.meter(song, true)), "alone, the music changes no one")
    }

    @Test("a player's meter stopped, the player counts again (of two players, the one that started last wins); a screen reader's stays silent")
    func stoppedMeterForgetsAPlayerButNotADucker() {
        var h = Harness()
        h.laptop()
        let song = h.app("rhythmbox", music)
        let voice = h.app("speech-dispatcher", screenReader, heard: false)
        h.advance(.seconds(1))
        #expect(h.stream(song)?.heldDuck == nil)
        #expect(h.stream(voice)?.meterAsked == true)
        // The music stops (corked): the reader has no one to duck, its meter stops; it stays silent.
        h.send(.streamRunning(song, false))
        #expect(h.stream(voice)?.meterAsked == false)
        #expect(h.stream(voice)?.sound == .quiet(since: h.now - .seconds(1)))
        // The music plays again: not ducked for a moment by a reader known to be silent.
        let again = h.send(.streamRunning(song, true))
        #expect(!again.contains { if case .duck = $0 { true } else { false } })
        #expect(again.contains(.meter(voice, true)))
    }

    @Test("a stream is metered once it has run for meterAfter: a call's mute goes out alone, and a short sound is never metered")
    func meteredOnceItHasRunAWhile() {
        var h = Harness()
        var settings = PolicySettings()
        settings.meterAfter = .milliseconds(200)
        h.machine = PolicyMachine(settings: settings)
        h.laptop()
        let song = h.app("spotify", music)
        h.send(.declare(SessionDeclaration(SessionID("zoom"), app: "zoom", origin: .inferred, configuration: SessionConfiguration(.playAndRecord, mode: .voiceChat))))
        let appeared = h.send(.streamAppeared(StreamKey(.output, 51), session: SessionID("zoom"), running: true, device: nil))
        #expect(appeared.contains(.mute(song)), "the call's mute at once")
        #expect(!appeared.contains { if case .meter = $0 { true } else { false } }, "no meter in the same breath")
        #expect(h.machine.nextDeadline == h.now + .milliseconds(200))
        let later = h.advance(.milliseconds(200))
        #expect(!later.contains { if case .meter = $0 { true } else { false } }, "a call's stream waits callMeterAfter; the interrupted music is not metered")
        #expect(h.machine.nextDeadline == h.now - .milliseconds(200) + settings.callMeterAfter)
        let call = h.advance(settings.callMeterAfter)
        #expect(call.contains(.meter(StreamKey(.output, 51), true)))
        #expect(!call.contains(.meter(song, true)))
        // A short sound (an event, a ring) gone before then is never metered.
        h.send(.declare(SessionDeclaration(SessionID("reader"), app: "reader", origin: .inferred, configuration: screenReader)))
        let blip = StreamKey(.output, 52)
        h.send(.streamAppeared(blip, session: SessionID("reader"), running: true, device: nil))
        let gone = h.advance(.milliseconds(100)) + h.send(.streamGone(blip)) + h.advance(.milliseconds(200))
        #expect(!gone.contains(.meter(blip, true)))
    }

    @Test("a stream whose meter cannot be had counts while it runs, as before")
    func failedMeterCountsByCork() {
        var h = Harness()
        h.laptop()
        let podcast = h.app("gpodder", music)
        let other = h.app("rhythmbox", music, heard: false)
        h.advance(.seconds(1))
        #expect(h.status("rhythmbox") == .inactive)
        #expect(h.status("gpodder") == .active)
        let failed = h.send(.meterFailed(other))
        #expect(h.status("rhythmbox") == .active)
        #expect(failed.contains(.mute(podcast)))
        #expect(!metered(h).contains(other))
        // (Late reports of the failed meter change nothing.)
        h.hear(other, false)
        h.advance(.seconds(2))
        #expect(h.status("rhythmbox") == .active)
    }

    @Test("during a call, a player that opens a silent stream is held silent from its start, not heard over the call until its first sound")
    func playerStartingDuringACallIsHeldFromItsStart() {
        var h = Harness()
        h.laptop()
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let song = h.app("spotify", music, heard: false)
        #expect(h.stream(song)?.heldMute == true)
        let ended = h.send(.deactivate(SessionID("zoom"), .notifyOthersOnDeactivation))
        #expect(ended.contains(.unmute(song)))
        #expect(!ended.contains { if case .meter = $0 { true } else { false } }, "interrupted, it was never metered; alone, it changes no one")
    }

    /// Issue 20 case 8: an agent started during a call finds the call's stream and the player's in any
    /// order (PipeWire's indexes say nothing of which came first): a player found after the call was
    /// muted, and played on unheard through the call, never paused.
    @Test("a player that starts while a call is active is paused (and muted), and played again after the call")
    func playerStartingDuringACallIsPaused() {
        var h = Harness()
        h.laptop()
        h.app("phone", call)
        let song = h.app("spotify", music)
        #expect(h.status("spotify") == .interrupted(by: SessionID("phone")))
        #expect(h.actions.contains(.pausePlayer(SessionID("spotify"), by: SessionID("phone"))), "\(h.actions)")
        #expect(h.stream(song)?.heldMute == true)
        let callStream = h.state.streams.values.first { $0.session == SessionID("phone") }!.key
        let ended = h.send(.streamGone(callStream)) + h.advance(.seconds(1))
        #expect(h.status("spotify") == .active)
        #expect(h.stream(song)?.heldMute == false)
        #expect(ended.contains(.resumePlayer(SessionID("spotify"))), "played again after the call: \(ended)")
    }

    // MARK: calls from behaviour

    @Test("an app that records from the microphone while it plays is a call: the music is interrupted, and resumes a grace period after the recording ends")
    func recordingWhilePlayingIsACall() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let page = h.app("chromium", browser, infersCalls: true)
        #expect(h.status("spotify") == .active, "a page playing mixes")
        let mic = h.play("chromium", direction: .input)
        #expect(h.actions.contains(.meter(page, true)), "recording, its output is metered")
        #expect(h.session("chromium").inferredCall == nil, "not a call before its meter's word")
        h.hear(page, true)
        #expect(h.session("chromium").inferredCall?.capture == mic)
        #expect(h.session("chromium").isCall)
        #expect(h.status("spotify") == .interrupted(by: SessionID("chromium")))
        #expect(h.stream(song)?.heldMute == true)
        #expect(h.actions.contains(.pausePlayer(SessionID("spotify"), by: SessionID("chromium"))))
        #expect(metered(h).contains(page), "a call's stream is metered")

        h.send(.streamGone(mic))
        h.advance(.milliseconds(200))
        #expect(h.session("chromium").inferredCall != nil, "a gap shorter than the grace period ends nothing")
        let ended = h.advance(.milliseconds(400))
        #expect(h.session("chromium").inferredCall == nil)
        #expect(h.session("chromium").activeConfiguration == browser)
        #expect(ended.contains(.resumePlayer(SessionID("spotify"))))
        #expect(ended.contains(.unmute(song)))
        #expect(h.status("spotify") == .active)
        #expect(!metered(h).contains(page), "a page again: not metered")
        #expect(h.nothingHeld)
    }

    @Test("a page that records beside the silent output the browser opens with the microphone is no call (Firefox); the far end's first sound makes it one, and its silence for callIdleAfter ends it")
    func recordingBesideASilentOutputIsNoCall() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        // Firefox: the microphone and a silent output together, from one process.
        let duplex = h.app("firefox", browser, heard: false, infersCalls: true)
        h.play("firefox", direction: .input)
        #expect(metered(h).contains(duplex), "recording, its output is metered")
        h.hear(duplex, false)
        h.advance(.seconds(5))
        #expect(h.session("firefox").inferredCall == nil, "recording beside silence: no call")
        #expect(h.status("spotify") == .active)
        #expect(h.stream(song)?.heldMute == false)

        // The far end speaks (a stream of its own, as Firefox plays it): a call from its first sound.
        let far = h.play("firefox", heard: true)
        if !metered(h).contains(far) { Issue.record("the far end is metered at once: \(h.actions)") }
        #expect(h.session("firefox").isCall)
        #expect(h.status("spotify") == .interrupted(by: SessionID("firefox")))
        // Silent a while: still the call (a pause in the conversation).
        h.hear(far, false)
        h.advance(h.state.settings.callIdleAfter - .seconds(1))
        #expect(h.session("firefox").isCall, "a pause in the conversation ends nothing")
        // Silent for callIdleAfter, and a grace period more: the call is over, the music back.
        h.advance(.seconds(1))
        h.advance(h.state.settings.gracePeriod)
        #expect(h.session("firefox").inferredCall == nil)
        #expect(h.status("spotify") == .active)
        #expect(h.stream(song)?.heldMute == false)
    }

    @Test("an app whose policy says its calls are not inferred (an always-open voice channel) mixes while it records and plays")
    func voiceChannelIsNotACall() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        h.app("discord", SessionConfiguration(.playAndRecord, options: .mixWithOthers), infersCalls: false)
        h.play("discord", direction: .input)
        #expect(h.session("discord").inferredCall == nil)
        #expect(h.status("spotify") == .active)
        #expect(h.stream(song)?.heldMute == false)
    }

    @Test("recording alone is not a call, nor is playing alone; a declared session is never inferred")
    func recordingAloneIsNotACall() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        h.app("chromium", browser, direction: .input, infersCalls: true)
        #expect(h.session("chromium").inferredCall == nil)
        #expect(h.status("spotify") == .active)
        h.declared("app", SessionConfiguration(.playback, options: .mixWithOthers))
        h.send(.activate(SessionID("app")))
        h.play("app")
        h.play("app", direction: .input)
        #expect(h.session("app").inferredCall == nil)
    }

    @Test("a reclassification during an inferred call waits for the call's end")
    func reclassificationDuringInferredCall() {
        var h = Harness()
        h.laptop()
        let page = h.app("chromium", browser, infersCalls: true)
        h.play("chromium", direction: .input)
        h.hear(page, true)
        #expect(h.session("chromium").isCall)
        let quieter = SessionConfiguration(.ambient)
        h.send(.declare(SessionDeclaration(SessionID("chromium"), app: "chromium", origin: .inferred, configuration: quieter, infersCalls: true)))
        #expect(h.session("chromium").isCall)
        #expect(h.session("chromium").inferredCall?.classified == quieter)
    }
}

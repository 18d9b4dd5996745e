import AudioPolicy
import Testing

/// The stories of the audio-session model, as SPEC.md tells them.
struct ScenarioTests {
    @Test("a call interrupts the music, which resumes when the call ends with notifyOthersOnDeactivation (5.2, 5.6)")
    func callInterruptsMusicAndMusicResumesWhenNotified() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        #expect(h.status("spotify") == .active)

        h.declared("zoom", call)
        let began = h.send(.activate(SessionID("zoom")))
        #expect(began.contains(.reply(SessionID("zoom"), nil)))
        #expect(h.status("spotify") == .interrupted(by: SessionID("zoom")))
        #expect(h.notifications(for: "spotify", in: began) == [.began])
        #expect(began.contains(.pausePlayer(SessionID("spotify"), by: SessionID("zoom"))))
        #expect(began.contains(.mute(song)))

        let ended = h.send(.deactivate(SessionID("zoom"), .notifyOthersOnDeactivation))
        #expect(h.notifications(for: "spotify", in: ended).contains(.endedResume))
        #expect(ended.contains(.resumePlayer(SessionID("spotify"))))
        #expect(ended.contains(.unmute(song)))
        #expect(h.status("spotify") == .active)
        #expect(h.nothingHeld)
    }

    @Test("without notifyOthersOnDeactivation the music hears ended without shouldResume, and is unmuted all the same (5.6, 5.12)")
    func callEndsWithoutNotifying() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let ended = h.send(.deactivate(SessionID("zoom"), []))
        #expect(h.notifications(for: "spotify", in: ended).contains(.ended))
        #expect(!ended.contains(.resumePlayer(SessionID("spotify"))))
        #expect(ended.contains(.unmute(song)))
        #expect(h.nothingHeld)
    }

    @Test("a call stream (media.role=phone) of an app without the library interrupts and resumes the music")
    func inferredCallInterruptsAndResumes() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let voice = h.app("firefox-call", call)
        #expect(h.status("spotify") == .interrupted(by: SessionID("firefox-call")))
        #expect(h.stream(song)?.heldMute == true)
        h.send(.streamGone(voice))
        // The grace period: a gap shorter than it ends nothing.
        h.advance(.milliseconds(200))
        #expect(h.status("spotify") == .interrupted(by: SessionID("firefox-call")))
        let after = h.advance(.milliseconds(400))
        #expect(after.contains(.resumePlayer(SessionID("spotify"))))
        #expect(after.contains(.unmute(song)))
        #expect(h.nothingHeld)
    }

    @Test("calls always win: music cannot start during a call (5.1)")
    func musicCannotInterruptACall() {
        var h = Harness()
        h.laptop()
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        h.declared("rhythmbox", music)
        let refused = h.send(.activate(SessionID("rhythmbox")))
        #expect(refused.contains { if case .reply(_, let e?) = $0 { return e.code == .insufficientPriority }; return false })
        #expect(h.status("zoom") == .active)
        // An app without the library that starts playing during the call is held silent, and plays
        // when the call ends.
        let song = h.app("spotify", music)
        #expect(h.stream(song)?.heldMute == true)
        let ended = h.send(.deactivate(SessionID("zoom"), .notifyOthersOnDeactivation))
        #expect(ended.contains(.unmute(song)))
        #expect(h.status("spotify") == .active)
    }

    @Test("a second call interrupts the first (5.1)")
    func anotherCallInterruptsACall() {
        var h = Harness()
        h.laptop()
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        h.declared("teams", SessionConfiguration(.playAndRecord, mode: .videoChat))
        h.send(.activate(SessionID("teams")))
        #expect(h.status("zoom") == .interrupted(by: SessionID("teams")))
    }

    @Test("two non-mixable players: the second interrupts the first (5.2)")
    func twoPlayers() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        h.app("vlc", SessionConfiguration(.playback, mode: .moviePlayback))
        #expect(h.status("spotify") == .interrupted(by: SessionID("vlc")))
        #expect(h.status("vlc") == .active)
    }

    @Test("a navigation voice ducks the music, which comes back up (5.4)")
    func navigationDucksMusic() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let voice = h.app("maps", navigation)
        #expect(h.status("spotify") == .active, "duckOthers mixes: no interruption")
        #expect(h.actions.contains(.duck(song, level: 0.2, ramp: .milliseconds(150))))
        #expect(h.stream(voice)?.heldDuck == nil, "the ducker is not ducked")
        h.send(.streamGone(voice))
        let up = h.advance(.seconds(1))
        #expect(up.contains(.unduck(song, ramp: .milliseconds(500))))
        #expect(h.nothingHeld)
    }

    @Test("several duckers do not stack below the duck level (5.4)")
    func duckersDoNotStack() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        h.app("maps", navigation, duckLevel: 0.3)
        h.app("assistant", SessionConfiguration(.playback, options: .duckOthers), duckLevel: 0.2)
        #expect(h.stream(song)?.heldDuck == 0.2)
        #expect(h.actions.contains(.duck(song, level: 0.2, ramp: .milliseconds(150))))
    }

    @Test("the deeper ducker ending, the music goes up to the milder duck as an unduck goes: over duckRampUp (5.4, issue 21)")
    func milderDuckRampsUp() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        h.app("maps", navigation, duckLevel: 0.3)
        let assistant = h.app("assistant", SessionConfiguration(.playback, options: .duckOthers), duckLevel: 0.2)
        h.send(.streamGone(assistant))
        let up = h.advance(.seconds(1))
        #expect(up.contains(.duck(song, level: 0.3, ramp: .milliseconds(500))), "\(up)")
    }

    @Test("a declared app gone from the bus leaves none of its streams held (issue 21)")
    func removedSessionLetsGoOfItsStreams() {
        var h = Harness()
        h.laptop()
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let voice = h.play("zoom")
        h.declared("radio", music)
        h.send(.activate(SessionID("radio")))
        let radio = h.play("radio")
        #expect(h.stream(radio)?.heldMute == true)
        let gone = h.send(.remove(SessionID("radio")))
        #expect(gone.contains(.unmute(radio)), "\(gone)")
        _ = voice
    }

    @Test("an unmute by hand is said as the hold let go, nothing to undo (5.11, issue 21)")
    func userTakeOverIsSaid() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        h.app("maps", navigation)
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let taken = h.send(.userChangedStream(song, mute: true, volume: false))
        #expect(taken == [.letGo(song, mute: true, volume: false)])
        #expect(h.send(.userChangedStream(song, mute: true, volume: false)).isEmpty, "said once")
    }

    @Test("headphones gone: the paused player's output is silent until its pause shows, or for pauseShowsWithin at most; the user's hand ends it (5.8, 5.11, issue 21)")
    func silentUntilThePauseShows() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let muted = h.send(.pauseOnItsWay(SessionID("spotify")))
        #expect(muted.contains(.mute(song)), "\(muted)")
        #expect(h.machine.nextDeadline == h.now + h.state.settings.pauseShowsWithin)
        #expect(h.send(.pauseShown(SessionID("spotify"))).contains(.unmute(song)))
        // Never shown: heard again at the deadline.
        h.send(.pauseOnItsWay(SessionID("spotify")))
        h.now += h.state.settings.pauseShowsWithin
        #expect(h.send(.tick).contains(.unmute(song)))
        // The user unmuting the stream: theirs at once. (A volume set meanwhile is no answer to the silence.)
        h.send(.pauseOnItsWay(SessionID("spotify")))
        h.send(.userChangedStream(song, mute: false, volume: true))
        #expect(h.state.sessions[SessionID("spotify")]?.silencedUntilPaused != nil)
        #expect(h.send(.userChangedStream(song, mute: true, volume: false)) == [.letGo(song, mute: true, volume: false)])
        #expect(h.state.sessions[SessionID("spotify")]?.silencedUntilPaused == nil)
        #expect(h.nothingHeld)
    }

    @Test("headphones gone: the silence holds a stream whose mute the user took over for another reason (silent mode) (5.8, issue 21 review)")
    func silenceOverridesAnEarlierTakeOver() {
        var h = Harness()
        h.laptop()
        let sfx = h.app("game", SessionConfiguration(.soloAmbient))
        h.send(.silentMode(true))
        #expect(h.stream(sfx)?.heldMute == true)
        h.send(.userChangedStream(sfx, mute: true, volume: false))
        #expect(h.stream(sfx)?.heldMute == false, "the user's, for silent mode")
        #expect(h.send(.pauseOnItsWay(SessionID("game"))).contains(.mute(sfx)), "nothing out loud before the pause shows")
    }

    @Test("an inferred session is forgotten once its streams are gone and its grace has run out; a declared one and one waiting on an interruption stay (issue 21)")
    func idleSessionsEnd() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let voice = h.app("maps", navigation)
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        h.send(.streamGone(song))
        h.send(.streamGone(voice))
        let later = h.advance(.seconds(1))
        #expect(later.contains(.sessionEnded(SessionID("maps"))), "\(later)")
        #expect(h.status("maps") == nil)
        #expect(h.status("spotify") == .interrupted(by: SessionID("zoom")), "waits for the call's end")
        let ended = h.send(.deactivate(SessionID("zoom"), .notifyOthersOnDeactivation))
        #expect(ended.contains(.sessionEnded(SessionID("spotify"))), "over with the call: nothing left to wait for")
        #expect(h.status("spotify") == nil)
        #expect(h.status("zoom") == .inactive, "declared: its app ends it")
    }

    @Test("calls and measurement sessions are never ducked (5.4, section 3)")
    func callsAreNotDucked() {
        var h = Harness()
        h.laptop()
        let voice = h.app("zoom", call)
        let tuner = h.app("tuner", SessionConfiguration(.playback, mode: .measurement, options: .mixWithOthers))
        h.app("maps", navigation)
        #expect(h.stream(voice)?.heldDuck == nil)
        #expect(h.stream(tuner)?.heldDuck == nil)
    }

    @Test("a game plays along with the user's music (ambient mixes)")
    func gameMixesWithMusic() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let sfx = h.app("supertuxkart", game)
        #expect(h.status("spotify") == .active)
        #expect(h.status("supertuxkart") == .active)
        #expect(h.nothingHeld)
        #expect(h.stream(song)?.heldMute == false && h.stream(sfx)?.heldMute == false)
    }

    @Test("a recorder silences playback, even mixable playback, but not calls (5.3)")
    func recorderSilencesPlayback() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let sfx = h.app("game", game)
        let voice = h.app("zoom", call)
        // During the call the recorder may not start: calls always win.
        h.send(.streamGone(voice))
        h.advance(.seconds(1))
        let mic = h.app("audacity", recorder, direction: .input)
        #expect(h.status("audacity") == .active)
        #expect(h.stream(song)?.heldMute == true)
        #expect(h.stream(sfx)?.heldMute == true)
        #expect(h.stream(mic)?.heldMute == false)
        h.send(.streamGone(mic))
        h.advance(.seconds(1))
        #expect(h.nothingHeld)
    }

    @Test("a screen reader pauses a podcast (spokenAudio) but ducks music (5.5)")
    func screenReaderPausesPodcastDucksMusic() {
        var h = Harness()
        h.laptop()
        let episode = h.app("gpodder", podcast)
        let reader = h.app("orca", screenReader)
        #expect(h.status("gpodder") == .interrupted(by: SessionID("orca")))
        #expect(h.actions.contains(.pausePlayer(SessionID("gpodder"), by: SessionID("orca"))))
        h.send(.streamGone(reader))
        h.advance(.seconds(1))
        #expect(h.status("gpodder") == .active)
        #expect(h.stream(episode)?.heldMute == false)

        var m = Harness()
        m.laptop()
        let song = m.app("spotify", music)
        m.app("orca", screenReader)
        #expect(m.status("spotify") == .active)
        #expect(m.stream(song)?.heldDuck == 0.2)
    }

    @Test("the wrong-resume guard: music the user paused during the call is not resumed (5.7)")
    func userPausedMusicIsNotResumed() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        h.send(.userPaused(SessionID("spotify")))
        let ended = h.send(.deactivate(SessionID("zoom"), .notifyOthersOnDeactivation))
        #expect(h.notifications(for: "spotify", in: ended).contains(.ended))
        #expect(!ended.contains(.resumePlayer(SessionID("spotify"))))
        #expect(h.nothingHeld)
    }

    @Test("never fight the user: an unmute by hand during an interruption wins (5.11)")
    func userUnmuteWins() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        h.app("maps", navigation)
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        #expect(h.stream(song)?.heldMute == true)
        h.send(.userChangedStream(song, mute: true, volume: true))
        #expect(h.stream(song)?.heldMute == false)
        #expect(h.stream(song)?.heldDuck == nil)
        let ended = h.send(.deactivate(SessionID("zoom"), .notifyOthersOnDeactivation))
        #expect(!ended.contains(.unmute(song)), "we do not undo what we no longer hold")
        #expect(!ended.contains(.unduck(song, ramp: .milliseconds(500))))
    }

    @Test("silent mode and the screen lock silence ambient sounds, not playback or calls (5.10)")
    func silentModeSilencesAmbient() {
        var h = Harness()
        h.laptop()
        let sfx = h.app("game", game)
        let solo = h.app("solo", SessionConfiguration(.soloAmbient))
        let song = h.app("spotify", SessionConfiguration(.playback, options: .mixWithOthers))
        h.send(.silentMode(true))
        #expect(h.stream(sfx)?.heldMute == true)
        #expect(h.stream(solo)?.heldMute == true)
        #expect(h.stream(song)?.heldMute == false)
        h.send(.silentMode(false))
        h.send(.screenLocked(true))
        #expect(h.stream(sfx)?.heldMute == true)
        h.send(.screenLocked(false))
        #expect(h.nothingHeld)
    }

    @Test("microphone denied: the app records silence (section 7)")
    func microphoneDenied() {
        var h = Harness()
        h.laptop()
        h.send(.declare(SessionDeclaration(SessionID("spy"), app: "spy", origin: .inferred, configuration: recorder,
                                           microphoneAllowed: false)))
        let mic = h.play("spy", direction: .input)
        #expect(h.stream(mic)?.heldMute == true)
        h.send(.setMicrophone(SessionID("spy"), allowed: true))
        #expect(h.stream(mic)?.heldMute == false)
    }

    @Test("the secondary-audio hint and isOtherAudioPlaying (5.9)")
    func secondaryAudioHint() {
        var h = Harness()
        h.laptop()
        h.app("game", game)
        #expect(!h.machine.secondaryAudioShouldBeSilencedHint(for: SessionID("game")))
        let song = h.app("spotify", music)
        #expect(h.notifications(for: "game").contains(.silenceSecondaryAudioHint(.begin)))
        #expect(h.machine.secondaryAudioShouldBeSilencedHint(for: SessionID("game")))
        #expect(h.machine.isOtherAudioPlaying(for: SessionID("game")))
        // The hint follows playing, not the session's grace period.
        let end = h.send(.streamGone(song))
        #expect(h.notifications(for: "game", in: end).contains(.silenceSecondaryAudioHint(.end)))
        #expect(!h.machine.isOtherAudioPlaying(for: SessionID("game")))
    }

    @Test("setting a category while inactive takes effect on activation; while active, at once")
    func setCategoryActiveAndInactive() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        h.declared("app", SessionConfiguration(.ambient))
        h.send(.setCategory(SessionID("app"), SessionConfiguration(.playback)))
        #expect(h.session("app").activeConfiguration.category == .ambient)
        #expect(h.status("spotify") == .active, "an inactive session's new category interrupts nobody")
        h.send(.activate(SessionID("app")))
        #expect(h.session("app").activeConfiguration.category == .playback)
        #expect(h.status("spotify") == .interrupted(by: SessionID("app")))

        var k = Harness()
        k.laptop()
        k.app("spotify", music)
        k.declared("app", SessionConfiguration(.ambient))
        k.send(.activate(SessionID("app")))
        #expect(k.status("spotify") == .active)
        k.send(.setCategory(SessionID("app"), SessionConfiguration(.playback)))
        #expect(k.session("app").activeConfiguration.category == .playback)
        #expect(k.status("spotify") == .interrupted(by: SessionID("app")))
    }

    @Test("activation errors: bad configuration, no input, deactivating while busy, lost media services")
    func activationErrors() {
        var h = Harness()
        h.plug(.builtInSpeaker, "speaker")
        let bad = h.send(.declare(SessionDeclaration(SessionID("x"), app: "x", origin: .declared,
                                                     configuration: SessionConfiguration(.ambient, mode: .voiceChat))))
        #expect(bad.contains { if case .reply(_, let e?) = $0 { return e.code == .incompatibleCategory }; return false })
        h.declared("rec", recorder)
        let noInput = h.send(.activate(SessionID("rec")))
        #expect(noInput.contains { if case .reply(_, let e?) = $0 { return e.code == .resourceNotAvailable }; return false })
        h.declared("player", music)
        h.send(.activate(SessionID("player")))
        h.play("player")
        let busy = h.send(.deactivate(SessionID("player"), []))
        #expect(busy.contains { if case .reply(_, let e?) = $0 { return e.code == .isBusy }; return false })
        h.send(.mediaServicesLost)
        h.declared("late", music)
        let lost = h.send(.activate(SessionID("late")))
        #expect(lost.contains { if case .reply(_, let e?) = $0 { return e.code == .mediaServicesFailed }; return false })
    }

    @Test("an interrupted session that goes away hands those it interrupted to its own interrupter (found by the property tests)")
    func interruptedInterrupterGoesAway() {
        var h = Harness()
        h.laptop()
        let first = h.app("first-call", call)
        h.app("second-call", call)
        #expect(h.status("first-call") == .interrupted(by: SessionID("second-call")))
        h.app("third-call", call)
        #expect(h.status("second-call") == .interrupted(by: SessionID("third-call")))
        h.send(.remove(SessionID("second-call")))
        #expect(h.status("first-call") == .interrupted(by: SessionID("third-call")))
        h.send(.remove(SessionID("third-call")))
        #expect(h.status("first-call") == .active)
        #expect(h.stream(first)?.heldMute == false)
    }

    /// Two players, the second interrupting the first, and a call interrupting the second; the call
    /// over (its grace period passed: `actions` are the end's), the second is played again and awaited.
    func waitingOnAPlayerPlayedAgain() -> (Harness, first: StreamKey, second: StreamKey) {
        var h = Harness()
        h.laptop()
        let first = h.app("first", music)
        let second = h.app("second", music)
        #expect(h.status("first") == .interrupted(by: SessionID("second")))
        let phone = h.app("phone", call)
        #expect(h.status("second") == .interrupted(by: SessionID("phone")))
        h.send(.streamRunning(second, false))  // our pause reaches it
        h.send(.streamGone(phone))
        h.advance(.seconds(1))
        return (h, first, second)
    }

    /// Seen with VLC and mpv (issue 24's test): at the call's end both were played again, and VLC was
    /// paused again a moment later once mpv played; both sounded meanwhile.
    @Test("a call's end plays again the player it interrupted; the one that player had interrupted waits for it (a while at most), and plays again once it quits")
    func playerPlayedAgainKeepsThoseItInterruptedWaiting() {
        var (h, first, second) = waitingOnAPlayerPlayedAgain()
        let ended = h.actions
        #expect(ended.contains(.resumePlayer(SessionID("second"))))
        #expect(!ended.contains(.resumePlayer(SessionID("first"))), "\(ended)")
        #expect(h.status("first") == .interrupted(by: SessionID("second")))
        #expect(h.stream(first)?.heldMute == true)
        h.now += .milliseconds(400)
        let played = h.send(.streamRunning(second, true))  // our play reaches it
        #expect(h.status("second") == .active)
        #expect(h.status("first") == .interrupted(by: SessionID("second")), "still waiting on it, never played in between")
        #expect(h.notifications(for: "first", in: ended + played).isEmpty)
        h.stop(second)
        #expect(h.status("first") == .active)
        #expect(h.stream(first)?.heldMute == false)
    }

    @Test("a player played again at a call's end that does not play: those it had interrupted play again once the wait is over")
    func playerPlayedAgainThatNeverPlays() {
        var (h, first, _) = waitingOnAPlayerPlayedAgain()
        #expect(h.status("first") == .interrupted(by: SessionID("second")))
        #expect(h.machine.nextDeadline == h.now + h.state.settings.resumeAwaited, "the wait's end is a deadline")
        let early = h.advance(h.state.settings.resumeAwaited - .milliseconds(1))
        #expect(!early.contains(.resumePlayer(SessionID("first"))))
        let over = h.advance(.milliseconds(1))
        #expect(over.contains(.resumePlayer(SessionID("first"))), "\(over)")
        #expect(h.notifications(for: "first", in: over) == [.endedResume])
        _ = first
    }


    @Test("a call that comes while a player played again is awaited: at the wait's end those waiting wait on the call, not played to be paused again")
    func callDuringTheWait() {
        var (h, first, _) = waitingOnAPlayerPlayedAgain()
        let phone = h.app("phone-2", call)
        let over = h.advance(h.state.settings.resumeAwaited)
        #expect(!over.contains(.resumePlayer(SessionID("first"))), "\(over)")
        #expect(h.status("first") == .interrupted(by: SessionID("phone-2")))
        #expect(h.stream(first)?.heldMute == true)
        h.send(.streamGone(phone))
        let after = h.advance(.seconds(1))
        #expect(after.contains(.resumePlayer(SessionID("first"))), "played again after the second call: \(after)")
    }

    @Test("a player the user starts while another played again is awaited keeps playing at the wait's end: those waiting wait on it")
    func newPlayerDuringTheWait() {
        var (h, _, _) = waitingOnAPlayerPlayedAgain()
        h.app("third", music)
        #expect(h.status("third") == .active)
        let over = h.advance(h.state.settings.resumeAwaited)
        #expect(!over.contains(.resumePlayer(SessionID("first"))), "\(over)")
        #expect(h.status("third") == .active, "the user's new player is not interrupted")
        #expect(h.status("first") == .interrupted(by: SessionID("third")))
    }

    @Test("a player played again that the shell had nothing to play for: those waiting on it play again at once")
    func nothingResumedEndsTheWait() {
        var (h, _, _) = waitingOnAPlayerPlayedAgain()
        #expect(h.status("first") == .interrupted(by: SessionID("second")))
        let told = h.send(.nothingResumed(SessionID("second")))
        #expect(told.contains(.resumePlayer(SessionID("first"))), "\(told)")
        #expect(h.session("second").resumeAwaitedUntil == nil)
    }

    @Test("a chain of interruptions: the first player plays again once the second and third have quit (issue 10, case 2)")
    func chainOfInterruptionsEndsWithTheFirstPlayerPlaying() {
        var h = Harness()
        h.laptop()
        let first = h.app("first", music)
        let second = h.app("second", music)
        #expect(h.status("first") == .interrupted(by: SessionID("second")))
        let third = h.app("third", music)
        #expect(h.status("second") == .interrupted(by: SessionID("third")))
        h.stop(second)
        h.stop(third)
        #expect(h.status("first") == .active)
        #expect(h.stream(first)?.heldMute == false)
    }
}

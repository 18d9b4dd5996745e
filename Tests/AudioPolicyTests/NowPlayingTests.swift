import AudioPolicy
import Testing

/// What is now playing (issue 24, SPEC.md 10): the session that last started non-mixable playback
/// and has not ended, where the media keys go.
@Suite("now playing")
struct NowPlayingTests {
    @Test("the last to start non-mixable playback is now playing; one that mixes, a call or a game is not; an interrupted one stays, and takes it again when it resumes")
    func lastStarted() {
        var h = Harness()
        h.laptop()
        #expect(h.state.nowPlaying == nil)
        h.app("spotify", music)
        #expect(h.state.nowPlaying == SessionID("spotify"))
        #expect(h.actions.contains(.nowPlaying(SessionID("spotify"))), "\(h.actions)")
        h.app("chime", SessionConfiguration(.playback, options: .mixWithOthers))
        h.app("game", SessionConfiguration(.soloAmbient))
        #expect(h.state.nowPlaying == SessionID("spotify"), "mixing, or not playback: not now playing")
        h.app("vlc", music)
        #expect(h.state.nowPlaying == SessionID("vlc"), "the last to start")
        // A call interrupts it: the call is not now playing, the player stays; it resumes after.
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        #expect(h.status("vlc") == .interrupted(by: SessionID("zoom")))
        #expect(h.state.nowPlaying == SessionID("vlc"))
        h.send(.deactivate(SessionID("zoom"), .notifyOthersOnDeactivation))
        #expect(h.status("vlc") == .active)
        #expect(h.state.nowPlaying == SessionID("vlc"))
    }

    @Test("one that resumes after another player's end takes it; one whose app ended gives it back; none left, nothing")
    func resumesAndEnds() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", music)
        let video = h.app("vlc", music)
        #expect(h.state.nowPlaying == SessionID("vlc"))
        #expect(h.status("spotify") == .interrupted(by: SessionID("vlc")))
        h.stop(video)
        #expect(h.state.sessions[SessionID("vlc")] == nil, "VLC's session ended")
        #expect(h.status("spotify") == .active, "resumed")
        #expect(h.state.nowPlaying == SessionID("spotify"))
        h.stop(song)
        h.advance(.seconds(2))
        #expect(h.state.sessions[SessionID("spotify")] == nil)
        #expect(h.state.nowPlaying == nil)
    }

    @Test("a declared player is now playing from its activation, and stays after its deactivation until it ends")
    func declaredPlayer() {
        var h = Harness()
        h.laptop()
        h.declared("podcasts", music)
        #expect(h.state.nowPlaying == nil, "declared, not active")
        h.send(.activate(SessionID("podcasts")))
        #expect(h.state.nowPlaying == SessionID("podcasts"))
        h.send(.deactivate(SessionID("podcasts"), []))
        #expect(h.state.nowPlaying == SessionID("podcasts"), "paused, the keys resume it")
        let removed = h.send(.remove(SessionID("podcasts")))
        #expect(removed.contains(.nowPlaying(nil)), "\(removed)")
    }
}

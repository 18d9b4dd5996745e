import AudioPolicy
import Testing

/// The microphone's mute (issue 24, SPEC.md 10.2): for every app, or a declared app's own input.
@Suite("input mute")
struct InputMuteTests {
    /// Records while others play and record (a voice memo app that mixes).
    static let mixingRecorder = SessionConfiguration(.playAndRecord, options: .mixWithOthers)

    @Test("the microphone muted for every app: every capture stream is muted, one started later too; playback is not; unmuted, all go back")
    func everyApp() {
        var h = Harness()
        h.laptop()
        let song = h.app("spotify", SessionConfiguration(.playback, options: .mixWithOthers))
        let dictation = h.app("nerd-dictation", Self.mixingRecorder, direction: .input)
        let muted = h.send(.inputMuted(true))
        #expect(muted.contains(.mute(dictation)), "\(muted)")
        #expect(h.stream(song)?.heldMute == false, "playback is not the microphone")
        let later = h.app("audacity", Self.mixingRecorder, direction: .input)
        #expect(h.stream(later)?.heldMute == true, "a capture started while muted")
        #expect(h.machine.whyHeld(session: SessionID("audacity")) == ["the microphone is muted"])
        let unmuted = h.send(.inputMuted(false))
        #expect(unmuted.contains(.unmute(dictation)) && unmuted.contains(.unmute(later)), "\(unmuted)")
        #expect(h.nothingHeld)
    }

    @Test("a declared call is told first, then its capture is muted; told again when the mute ends")
    func callToldFirst() {
        var h = Harness()
        h.laptop()
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let voice = h.play("zoom", direction: .input)
        h.declared("player", music)
        let actions = h.send(.inputMuted(true))
        let told = actions.firstIndex(of: .notify(SessionID("zoom"), .inputMuteChanged(true)))
        let mute = actions.firstIndex(of: .mute(voice))
        #expect(told != nil && mute != nil && told! < mute!, "\(actions)")
        #expect(h.notifications(for: "player", in: actions).isEmpty, "a session that does not record is not told")
        #expect(h.send(.inputMuted(true)).isEmpty, "said once")
        let off = h.send(.inputMuted(false))
        #expect(h.notifications(for: "zoom", in: off) == [.inputMuteChanged(false)])
        #expect(off.contains(.unmute(voice)))
    }

    @Test("a declared app's own input mute: its capture only; told; the microphone's mute for every app on and off meanwhile says nothing new")
    func ownInput() {
        var h = Harness()
        h.laptop()
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let voice = h.play("zoom", direction: .input)
        let other = h.app("obs", Self.mixingRecorder, direction: .input)
        let actions = h.send(.setInputMuted(SessionID("zoom"), true))
        #expect(actions.contains(.mute(voice)) && !actions.contains(.mute(other)), "\(actions)")
        #expect(h.notifications(for: "zoom", in: actions) == [.inputMuteChanged(true)])
        #expect(h.machine.whyHeld(session: SessionID("zoom")) == ["its app muted its input"])
        // The global mute on and off again: its own still holds, nothing said to it.
        #expect(h.notifications(for: "zoom", in: h.send(.inputMuted(true))).isEmpty)
        #expect(h.notifications(for: "zoom", in: h.send(.inputMuted(false))).isEmpty)
        #expect(h.stream(voice)?.heldMute == true)
        #expect(h.stream(other)?.heldMute == false)
        let own = h.send(.setInputMuted(SessionID("zoom"), false))
        #expect(own.contains(.unmute(voice)))
        #expect(h.nothingHeld)
    }

    @Test("a session that does not record is not told, but reads the mute; it is told when its recording category comes in force (its activation)")
    func toldWhenItComesToRecord() {
        /// What it is told of its input's mute (a route change may come with the category).
        func said(_ h: Harness, _ actions: [PolicyAction]) -> [SessionNotification] {
            h.notifications(for: "notes", in: actions).filter { if case .inputMuteChanged = $0 { true } else { false } }
        }
        var h = Harness()
        h.laptop()
        let notes = SessionID("notes")
        h.declared("notes", music)
        #expect(said(h, h.send(.inputMuted(true))).isEmpty)
        #expect(h.machine.isInputMuted(notes), "what it reads")
        #expect(said(h, h.send(.setCategory(notes, Self.mixingRecorder))).isEmpty, "inactive: in force at its activation")
        let recording = h.send(.activate(notes))
        #expect(said(h, recording) == [.inputMuteChanged(true)], "\(recording)")
        #expect(said(h, h.send(.setInputMuted(notes, true))).isEmpty, "muted already: nothing new to say")
        #expect(said(h, h.send(.inputMuted(false))) == [], "its own mute still holds")
        #expect(said(h, h.send(.setInputMuted(notes, false))) == [.inputMuteChanged(false)])
    }

    @Test("the user unmuting a capture stream the global mute holds wins until the mute ends (5.11)")
    func userWins() {
        var h = Harness()
        h.laptop()
        let dictation = h.app("nerd-dictation", Self.mixingRecorder, direction: .input)
        h.send(.inputMuted(true))
        #expect(h.send(.userChangedStream(dictation, mute: true, volume: false)) == [.letGo(dictation, mute: true, volume: false)])
        h.send(.inputMuted(false))
        h.send(.inputMuted(true))
        #expect(h.stream(dictation)?.heldMute == true, "a new mute holds it again")
    }
}

/// The user's mute of one app's microphone (`audiosessionctl mic mute APP`, issue 24).
@Suite("input mute of one app")
struct AppInputMuteTests {
    static func recorder(_ h: inout Harness, _ id: String, names: [String]) -> StreamKey {
        var d = SessionDeclaration(SessionID(id), app: id, origin: .inferred, configuration: InputMuteTests.mixingRecorder)
        d.names = names
        h.send(.declare(d))
        return h.play(id, direction: .input)
    }

    @Test("muted by any of its names: its captures, one started later too, not another app's nor its playback; the reason says who; unmuted, given back")
    func byName() {
        var h = Harness()
        h.laptop()
        let dictation = Self.recorder(&h, "dictation[7]", names: ["org.example.Dictation", "nerd-dictation"])
        let obs = Self.recorder(&h, "obs[8]", names: ["obs"])
        let muted = h.send(.appInputMuted("nerd-dictation", true))
        #expect(muted.contains(.mute(dictation)) && !muted.contains(.mute(obs)), "\(muted)")
        #expect(h.machine.whyHeld(session: SessionID("dictation[7]")) == ["the user muted nerd-dictation's microphone"])
        let later = h.play("dictation[7]", direction: .input)
        #expect(h.stream(later)?.heldMute == true, "a capture it starts later")
        let song = h.play("dictation[7]")
        #expect(h.stream(song)?.heldMute == false, "its playback is not its microphone")
        // Another session of the same app, by its app id.
        let other = Self.recorder(&h, "dictation[9]", names: ["org.example.Dictation"])
        #expect(h.stream(other)?.heldMute == false, "muted by another name of it: not this one")
        h.send(.appInputMuted("org.example.Dictation", true))
        #expect(h.stream(other)?.heldMute == true)
        h.send(.appInputMuted("nerd-dictation", false))
        #expect(h.stream(dictation)?.heldMute == true, "still muted by its app id")
        h.send(.appInputMuted("org.example.Dictation", false))
        #expect(h.nothingHeld)
        #expect(h.state.inputMutedApps.isEmpty)
    }

    @Test("a declared call muted by its app's name is told first, and its microphone is metered for speech")
    func declaredCallTold() {
        var h = Harness()
        h.laptop()
        var d = SessionDeclaration(SessionID("zoom"), app: "zoom", origin: .declared, configuration: call)
        d.names = ["zoom"]
        h.send(.declare(d))
        h.send(.activate(SessionID("zoom")))
        let voice = h.play("zoom", direction: .input)
        let actions = h.send(.appInputMuted("zoom", true))
        let told = actions.firstIndex(of: .notify(SessionID("zoom"), .inputMuteChanged(true)))
        let mute = actions.firstIndex(of: .mute(voice))
        #expect(told != nil && mute != nil && told! < mute!, "\(actions)")
        #expect(actions.contains(.meter(voice, true)))
        #expect(h.machine.isInputMuted(SessionID("zoom")))
        #expect(h.notifications(for: "zoom", in: h.send(.appInputMuted("zoom", false))) == [.inputMuteChanged(false)])
    }

    @Test("at most inputMutedAppsLimit apps are kept muted by name")
    func bounded() {
        var h = Harness()
        for i in 0..<(PolicyState.inputMutedAppsLimit + 5) { h.send(.appInputMuted("app\(i)", true)) }
        #expect(h.state.inputMutedApps.count == PolicyState.inputMutedAppsLimit)
    }
}

extension AppInputMuteTests {
    @Test("a capture the user unmuted in a mixer while the microphone was muted for every app is muted by the user's mute of its app (a new reason)")
    func newReasonOverTheUsersUnmute() {
        var h = Harness()
        h.laptop()
        let dictation = Self.recorder(&h, "dictation[7]", names: ["nerd-dictation"])
        h.send(.inputMuted(true))
        h.send(.userChangedStream(dictation, mute: true, volume: false))
        #expect(h.stream(dictation)?.heldMute == false, "the user's unmute wins")
        let muted = h.send(.appInputMuted("nerd-dictation", true))
        #expect(muted.contains(.mute(dictation)), "\(muted)")
    }
}

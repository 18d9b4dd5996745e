import AudioPolicy
import Testing

/// Speech while muted (issue 24, SPEC.md section 10): a muted call's microphone is metered, and speech
/// (not a click, not the pauses between words) is told to the call.
@Suite("speech while muted")
struct MutedSpeechTests {
    static let zoom = SessionID("zoom")

    /// A laptop, a declared call active with its capture running (not muted yet). Returns its capture.
    static func callRecording(_ h: inout Harness) -> StreamKey {
        h.laptop()
        h.declared("zoom", call)
        h.send(.activate(zoom))
        return h.play("zoom", direction: .input)
    }

    static func speech(_ h: Harness, _ actions: [PolicyAction]) -> [Bool] {
        h.notifications(for: "zoom", in: actions).compactMap { if case .mutedSpeechActivity(let started) = $0 { started } else { nil } }
    }

    @Test("muted, the call's microphone is metered; speech is told once it lasts, and its end once silence lasts; unmuted, the meter stops")
    func toldOfSpeech() {
        var h = Harness()
        let voice = Self.callRecording(&h)
        #expect(!h.actions.contains(.meter(voice, true)), "not muted: no meter")
        let muted = h.send(.setInputMuted(Self.zoom, true))
        #expect(muted.contains(.meter(voice, true)), "\(muted)")
        let settings = h.state.settings
        // Someone speaks: not yet speech.
        #expect(Self.speech(h, h.hear(voice, true)).isEmpty)
        #expect(Self.speech(h, h.advance(settings.mutedSpeechStartsAfter - .milliseconds(1))).isEmpty)
        #expect(Self.speech(h, h.advance(.milliseconds(1))) == [true], "speech after mutedSpeechStartsAfter")
        #expect(h.session("zoom").mutedSpeech.hasBegun)
        // A pause between words: still speaking.
        #expect(Self.speech(h, h.hear(voice, false)).isEmpty)
        #expect(Self.speech(h, h.advance(.milliseconds(700))).isEmpty)
        #expect(Self.speech(h, h.hear(voice, true)).isEmpty, "said once per start")
        // Silence that lasts: ended (counted from the meter's last sound, said late by 100 ms).
        #expect(Self.speech(h, h.hear(voice, false, silentFor: .milliseconds(100))).isEmpty)
        #expect(Self.speech(h, h.advance(settings.mutedSpeechEndsAfter - .milliseconds(101))).isEmpty)
        #expect(Self.speech(h, h.advance(.milliseconds(1))) == [false])
        // Unmuted: the meter stops.
        let unmuted = h.send(.setInputMuted(Self.zoom, false))
        #expect(unmuted.contains(.meter(voice, false)), "\(unmuted)")
        #expect(Self.speech(h, unmuted).isEmpty, "nothing was being said")
    }

    @Test("a click, a cough or a door (sound shorter than mutedSpeechStartsAfter) is no speech; a silence longer than that between two sounds starts the count again")
    func shortSoundsAreNoSpeech() {
        var h = Harness()
        let voice = Self.callRecording(&h)
        h.send(.inputMuted(true))
        #expect(h.actions.contains(.meter(voice, true)), "the microphone muted for every app: the call's meter too")
        h.hear(voice, true)
        h.advance(.milliseconds(100))
        h.hear(voice, false)
        #expect(Self.speech(h, h.advance(h.state.settings.mutedSpeechStartsAfter)).isEmpty)
        #expect(h.session("zoom").mutedSpeech == .quiet, "the start voided")
        // A sound, then another after a long gap: the count starts with the second.
        h.hear(voice, true)
        #expect(Self.speech(h, h.advance(.milliseconds(200))).isEmpty)
        #expect(Self.speech(h, h.advance(.milliseconds(100))) == [true])
    }

    @Test("speaking when the mute is lifted, the call's capture goes: ended is told, the meter stops; the app gone, its meter stops")
    func endsWithTheMute() {
        var h = Harness()
        let voice = Self.callRecording(&h)
        h.send(.setInputMuted(Self.zoom, true))
        h.hear(voice, true)
        #expect(Self.speech(h, h.advance(.seconds(1))) == [true])
        let unmuted = h.send(.setInputMuted(Self.zoom, false))
        #expect(Self.speech(h, unmuted) == [false], "\(unmuted)")
        #expect(unmuted.contains(.meter(voice, false)))
        #expect(h.session("zoom").mutedSpeech == .quiet)
        // Muted again, speaking, and the capture goes: ended.
        h.send(.setInputMuted(Self.zoom, true))
        h.hear(voice, true)
        #expect(Self.speech(h, h.advance(.seconds(1))) == [true])
        #expect(Self.speech(h, h.send(.streamGone(voice))) == [false])
        // A new capture, speech, then the app goes away (its session with it): the meter stops.
        let again = h.play("zoom", direction: .input)
        #expect(h.actions.contains(.meter(again, true)))
        h.hear(again, true)
        #expect(Self.speech(h, h.advance(.seconds(1))) == [true])
        let gone = h.send(.remove(Self.zoom))
        #expect(gone.contains(.meter(again, false)), "\(gone)")
    }

    @Test("only a declared call's microphone is metered: not an inferred recorder's, not a muted declared app that is no call, not an inactive call")
    func onlyDeclaredCalls() {
        var h = Harness()
        h.laptop()
        let memo = h.app("recorder", SessionConfiguration(.record), direction: .input)
        h.declared("notes", SessionConfiguration(.playAndRecord, options: .mixWithOthers))
        h.send(.activate(SessionID("notes")))
        let notes = h.play("notes", direction: .input)
        h.declared("zoom", call)
        let idle = h.play("zoom", direction: .input)
        let muted = h.send(.inputMuted(true))
        for key in [memo, notes, idle] { #expect(!muted.contains(.meter(key, true)), "\(key): \(muted)") }
        #expect(h.send(.activate(Self.zoom)).contains(.meter(idle, true)), "the call active: metered")
    }

    @Test("one meter per call (its first capture); a failed meter is tried on the next capture; --no-meters meters none")
    func oneMeterPerCall() {
        var h = Harness()
        let first = Self.callRecording(&h)
        let second = h.play("zoom", direction: .input)
        let muted = h.send(.inputMuted(true))
        #expect(muted.contains(.meter(first, true)) && !muted.contains(.meter(second, true)), "\(muted)")
        let failed = h.send(.meterFailed(first))
        #expect(failed.contains(.meter(second, true)), "\(failed)")

        var off = Harness()
        off.machine = PolicyMachine(settings: { var s = PolicySettings(); s.metersStreams = false; s.metersMutedSpeech = false; return s }())
        let voice = Self.callRecording(&off)
        #expect(!off.send(.inputMuted(true)).contains(.meter(voice, true)))
    }
}

extension MutedSpeechTests {
    @Test("a report that comes after a deadline whose tick has not come yet is judged after it: sound that lasted is speech, a gap that lasted voids the start")
    func reportAfterAnOwedTick() {
        var h = Harness()
        let voice = Self.callRecording(&h)
        h.send(.setInputMuted(Self.zoom, true))
        let startsAfter = h.state.settings.mutedSpeechStartsAfter
        h.hear(voice, true)
        // Sound for longer than startsAfter, then silence reported before the tick.
        h.now += startsAfter + .milliseconds(50)
        #expect(Self.speech(h, h.hear(voice, false)) == [true], "the sound lasted: speech began")
        // Quiet again; a click, a long gap, another click reported before the tick: no speech.
        h.now += .seconds(5)
        h.send(.tick)
        #expect(h.session("zoom").mutedSpeech == .quiet)
        h.hear(voice, true)
        h.hear(voice, false)
        h.now += startsAfter + .milliseconds(50)
        #expect(Self.speech(h, h.hear(voice, true)).isEmpty, "the gap voided the first click")
        #expect(h.session("zoom").mutedSpeech != .speaking(silentSince: nil))
    }

    @Test("a call denied the microphone is not metered for speech")
    func deniedIsNotMetered() {
        var h = Harness()
        let voice = Self.callRecording(&h)
        h.send(.setMicrophone(Self.zoom, allowed: false))
        #expect(!h.send(.setInputMuted(Self.zoom, true)).contains(.meter(voice, true)))
    }
}

import AudioPolicy
import Testing

/// Issue 22: the mutes a new app's first stream brings, decided ahead of its run (`reflex`), and the
/// run after them: the same state as the run alone, the reflex's mutes not said again, and a mute the
/// run does not keep undone by it.
@Suite("policy core: the mutes a new stream brings, ahead of its run")
struct ReflexTests {
    /// A harness through `story`, then a new app `id` of `configuration` with a running stream: the
    /// reflex and the run after it in one harness, the run alone in another.
    func compare(_ story: (inout Harness) -> Void, _ id: String, _ configuration: SessionConfiguration)
        -> (reflex: [PolicyAction], after: [PolicyAction], alone: [PolicyAction], sameState: Bool) {
        var a = Harness(), b = Harness()
        story(&a)
        story(&b)
        let declaration = SessionDeclaration(SessionID(id), app: id, origin: .inferred, configuration: configuration)
        let appeared = PolicyEvent.streamAppeared(StreamKey(.output, 900), session: SessionID(id), running: true, device: "speaker")
        let reflex = a.machine.reflex(newSessionOf: configuration)
        let after = a.machine.handle(declaring: declaration, then: appeared, at: a.now)
        let alone = b.machine.handle(declaring: declaration, then: appeared, at: b.now)
        return (reflex, after, alone, a.state == b.state && a.machine.nextDeadline == b.machine.nextDeadline)
    }

    static func mutes(_ actions: [PolicyAction]) -> [PolicyAction] { actions.filter { if case .mute = $0 { true } else { false } } }

    @Test("a call beside music and a podcast: the reflex mutes both; the run after it says the rest, not the mutes again, and ends as the run alone")
    func callBesideMusic() {
        let r = compare({ h in
            h.laptop(); h.send(.devicesListed)
            h.app("player", music)
            h.play("player")
        }, "phone", call)
        #expect(r.reflex == [.mute(StreamKey(.output, 1)), .mute(StreamKey(.output, 2))], "\(r.reflex)")
        #expect(Self.mutes(r.alone) == r.reflex, "the run alone mutes the same: \(r.alone)")
        #expect(Self.mutes(r.after).isEmpty, "not said again: \(r.after)")
        #expect(r.after == r.alone.filter { !Self.mutes([$0]).contains($0) }, "\(r.after)\n\(r.alone)")
        #expect(r.sameState)
    }

    @Test("music beside a call is refused: no reflex; a voice beside music and the first app: none either")
    func nothingAhead() {
        let stories: [(String, (inout Harness) -> Void, String, SessionConfiguration)] = [
            ("music beside a call", { h in h.laptop(); h.send(.devicesListed); h.app("phone", call) }, "player", music),
            ("a voice beside music", { h in h.laptop(); h.send(.devicesListed); h.app("player", music) }, "maps", navigation),
            ("the first app", { h in h.laptop(); h.send(.devicesListed) }, "player", music),
        ]
        for (name, story, id, configuration) in stories {
            let r = compare(story, id, configuration)
            #expect(r.reflex.isEmpty, "\(name): \(r.reflex)")
            #expect(r.after == r.alone, "\(name)")
            #expect(r.sameState, "\(name)")
        }
    }

    @Test("music beside music: the reflex mutes the first player, as the run does")
    func playerBesidePlayer() {
        let r = compare({ h in h.laptop(); h.send(.devicesListed); h.app("player", music) }, "other", music)
        #expect(r.reflex == [.mute(StreamKey(.output, 1))])
        #expect(Self.mutes(r.alone) == r.reflex)
        #expect(r.sameState)
    }

    @Test("a stream the user unmuted during an earlier reason is not muted ahead")
    func userOwnsTheMute() {
        var h = Harness()
        h.laptop(); h.send(.devicesListed)
        let music1 = h.app("player", music)
        let phone = h.app("phone", call)
        h.send(.userChangedStream(music1, mute: true, volume: false))
        #expect(h.stream(music1)?.userOwnsMute == true)
        // (A second call interrupts the first, whose stream is muted ahead; the music stays the user's.)
        #expect(h.machine.reflex(newSessionOf: call) == [.mute(phone)])
    }

    @Test("a reflex the run does not keep (the stream never came) is undone by the next run")
    func undoneByTheNextRun() {
        var h = Harness()
        h.laptop(); h.send(.devicesListed)
        let music1 = h.app("player", music)
        #expect(h.machine.reflex(newSessionOf: call) == [.mute(music1)])
        let next = h.send(.tick)
        #expect(next.contains(.unmute(music1)), "\(next)")
        #expect(h.stream(music1)?.heldMute == false)
    }

    /// PipeWire's way: a new stream shown corked, its session declared and not active, started a moment later.
    @Test("a call's corked stream that starts: the reflex mutes the music; the run after it says the rest and ends as the run alone")
    func callStreamStarts() {
        var a = Harness(), b = Harness()
        func story(_ h: inout Harness) -> StreamKey {
            h.laptop(); h.send(.devicesListed)
            h.app("player", music)
            h.send(.declare(SessionDeclaration(SessionID("phone"), app: "phone", origin: .inferred, configuration: call)))
            let key = StreamKey(.output, 900)
            h.send(.streamAppeared(key, session: SessionID("phone"), running: false, device: "speaker"))
            return key
        }
        let key = story(&a)
        _ = story(&b)
        let reflex = a.machine.reflex(streamStarts: key)
        #expect(reflex == [.mute(StreamKey(.output, 1))], "\(reflex)")
        let after = a.send(.streamRunning(key, true))
        let alone = b.send(.streamRunning(key, true))
        #expect(Self.mutes(alone) == reflex, "\(alone)")
        #expect(Self.mutes(after).isEmpty, "\(after)")
        #expect(a.state == b.state)
    }

    @Test("a stream that starts of a session active already, or one running already: nothing ahead")
    func startWithNothingAhead() {
        var h = Harness()
        h.laptop(); h.send(.devicesListed)
        let music1 = h.app("player", music)
        #expect(h.machine.reflex(streamStarts: music1).isEmpty, "running already")
        let second = StreamKey(.output, 901)
        h.send(.streamAppeared(second, session: SessionID("player"), running: false, device: "speaker"))
        #expect(h.machine.reflex(streamStarts: second).isEmpty, "its session is active")
    }

    /// A declared call's `SetActive(true)`: the same mutes ahead of its run as the run alone makes.
    @Test("a declared call's activation beside a declared player's two streams: the reflex mutes both as the run does; the run after says the rest and ends as the run alone")
    func declaredCallActivates() {
        var a = Harness(), b = Harness()
        func story(_ h: inout Harness) -> [StreamKey] {
            h.laptop(); h.send(.devicesListed)
            h.declared("tune", music)
            h.send(.activate(SessionID("tune")))
            let streams = [h.play("tune"), h.play("tune")]
            h.declared("caller", call)
            return streams
        }
        let streams = story(&a)
        _ = story(&b)
        let reflex = a.machine.reflex(activating: SessionID("caller"))
        #expect(reflex == streams.sorted().map { .mute($0) }, "\(reflex)")
        let after = a.send(.activate(SessionID("caller")))
        let alone = b.send(.activate(SessionID("caller")))
        #expect(Self.mutes(alone) == reflex, "\(alone)")
        #expect(Self.mutes(after).isEmpty, "not said again: \(after)")
        #expect(after == alone.filter { !Self.mutes([$0]).contains($0) }, "\(after)\n\(alone)")
        #expect(a.state == b.state && a.machine.nextDeadline == b.machine.nextDeadline)
    }

    @Test("an activation that changes nothing or fails: nothing ahead (active already, music beside a call, a recorder with no microphone, no such session)")
    func activationWithNothingAhead() {
        var h = Harness()
        h.laptop(); h.send(.devicesListed)
        let song = h.app("player", music)
        #expect(h.machine.reflex(activating: SessionID("player")).isEmpty, "active already")
        #expect(h.machine.reflex(activating: SessionID("nobody")).isEmpty, "no such session")
        h.declared("caller", call)
        h.send(.activate(SessionID("caller")))
        #expect(h.stream(song)?.heldMute == true)
        h.declared("other", music)
        #expect(h.machine.reflex(activating: SessionID("other")).isEmpty, "music beside a call is refused")
        var bare = Harness()
        bare.send(.devicesListed)
        _ = bare.app("player", music)
        bare.declared("memo", recorder)
        #expect(bare.machine.reflex(activating: SessionID("memo")).isEmpty, "no microphone: refused")
        #expect(bare.send(.activate(SessionID("memo"))).contains { if case .reply(_, let error?) = $0 { error.code == .resourceNotAvailable } else { false } })
    }
}

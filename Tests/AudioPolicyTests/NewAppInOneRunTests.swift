import AudioPolicy
import Testing

/// Issue 22: a new app's first stream and the session it makes, in one run of the core
/// (`handle(declaring:then:at:)`), against the two runs it replaces. The actions are the same but for
/// the deadline said once rather than twice, and a hint to the new session told after the commands
/// rather than before (an inferred session hears nothing of it: its app uses no library); the
/// commands to the server in the same order; the state after the same.
@Suite("policy core: a new app's session and first stream in one run")
struct NewAppInOneRunTests {
    /// Two harnesses brought through the same story, then the new app: in two runs in one, in one run
    /// in the other. Returns the actions of each, without the deadlines, and whether the states agree.
    func compare(_ story: (inout Harness) -> Void, _ id: String, _ configuration: SessionConfiguration, running: Bool = true,
                 device: String? = "speaker", infersCalls: Bool = false) -> (two: [PolicyAction], one: [PolicyAction], sameState: Bool) {
        var a = Harness(), b = Harness()
        story(&a)
        story(&b)
        let declaration = SessionDeclaration(SessionID(id), app: id, origin: .inferred, configuration: configuration, infersCalls: infersCalls)
        let key = StreamKey(.output, 900)
        let appeared = PolicyEvent.streamAppeared(key, session: SessionID(id), running: running, device: device)
        let two = a.send(.declare(declaration)) + a.send(appeared)
        let one = b.machine.handle(declaring: declaration, then: appeared, at: b.now)
        func plain(_ actions: [PolicyAction]) -> [PolicyAction] {
            actions.filter { if case .wakeUp = $0 { false } else { true } }
        }
        return (plain(two), plain(one), a.state == b.state && a.machine.nextDeadline == b.machine.nextDeadline)
    }

    static func isNotification(_ action: PolicyAction) -> Bool { if case .notify = action { true } else { false } }

    /// The actions as a multiset.
    static func counted(_ actions: [PolicyAction]) -> [PolicyAction: Int] { actions.reduce(into: [:]) { $0[$1, default: 0] += 1 } }

    @Test("a call beside music: the music interrupted, the same route log, the same state")
    func callBesideMusic() {
        let r = compare({ h in h.laptop(); h.send(.devicesListed); h.app("player", music) }, "phone", call)
        #expect(!r.two.isEmpty)
        #expect(r.one == r.two, "\(r.one)\n\(r.two)")
        #expect(r.sameState)
    }

    @Test("music beside a call, a navigation voice beside music, a recorder, a corked player, a first app on a TV with a headset: each the same")
    func others() {
        let stories: [(String, (inout Harness) -> Void, String, SessionConfiguration, Bool)] = [
            ("music beside a call", { h in h.laptop(); h.send(.devicesListed); h.app("phone", call) }, "player", music, true),
            ("a voice beside music", { h in h.laptop(); h.send(.devicesListed); h.app("player", music) }, "maps", navigation, true),
            ("a recorder beside music", { h in h.laptop(); h.send(.devicesListed); h.app("player", music) }, "memo", SessionConfiguration(.record), true),
            ("a corked player beside music", { h in h.laptop(); h.send(.devicesListed); h.app("player", music) }, "other", music, false),
            ("a call with a TV and a headset", { h in
                h.laptop(); h.plug(.hdmi, "tv"); h.plug(.usbAudio, "usb"); h.send(.devicesListed); h.app("player", music)
            }, "phone", call, true),
            ("the first app", { h in h.laptop(); h.send(.devicesListed) }, "player", music, true),
        ]
        for (name, story, id, configuration, running) in stories {
            let r = compare(story, id, configuration, running: running)
            #expect(Self.counted(r.one) == Self.counted(r.two), "\(name):\n\(r.one)\n\(r.two)")
            #expect(r.one.filter { !Self.isNotification($0) } == r.two.filter { !Self.isNotification($0) }, "\(name):\n\(r.one)\n\(r.two)")
            #expect(r.sameState, "\(name)")
        }
    }
}

import AudioPolicy
import Testing

/// SPEC.md section 10: alarms and ringtones on the speaker and the headphones at once (`output:
/// [everywhere]`), through a sink of the agent's own that carries the sound to both (issue 23).
@Suite("routes: everywhere, the speaker too")
struct EverywhereTests {
    let alarm = SessionConfiguration(.ambient)

    func outputs(_ route: RouteDescription) -> [String] { route.outputs.map(\.uid) }
    func made(_ actions: [PolicyAction]) -> [String: [String]] {
        var found: [String: [String]] = [:]
        for case .makeCombination(let name, let outputs) in actions { found[name] = outputs }
        return found
    }
    func removed(_ actions: [PolicyAction]) -> [String] {
        actions.compactMap { if case .removeCombination(let name) = $0 { name } else { nil } }
    }
    func moves(_ actions: [PolicyAction]) -> [StreamKey: String] {
        var found: [StreamKey: String] = [:]
        for case .moveStream(let key, let device) in actions { found[key] = device }
        return found
    }
    func alarmClock(_ h: inout Harness, output: [OutputPreference] = [.everywhere]) -> StreamKey {
        h.send(.declare(SessionDeclaration(SessionID("clock"), app: "clock", origin: .inferred, configuration: alarm, preferredOutputs: output)))
        return h.play("clock")
    }
    /// The server shows the combination asked for.
    func shows(_ h: inout Harness, _ name: String) -> [PolicyAction] {
        h.send(.portAppeared(Harness.port(.virtual, name)))
    }

    @Test("an alarm with headphones plugged: routed to them and the speaker; a sink for both asked for, the stream moved onto it once it shows; the alarm over, the sink goes once it has lingered")
    func alarmOnBoth() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.send(.devicesListed)
        #expect(outputs(h.state.systemRoute) == ["jack"])
        let ring = alarmClock(&h)
        #expect(outputs(h.session("clock").route) == ["jack", "speaker"])
        let name = CombinedOutputs.name(["jack", "speaker"])
        #expect(name.hasPrefix("audiosession.everywhere.") && name.count == "audiosession.everywhere.".count + 16)
        #expect(made(h.actions) == [name: ["jack", "speaker"]], "\(h.actions)")
        #expect(moves(h.actions).isEmpty, "not before the sink is there")
        let shown = shows(&h, name)
        #expect(moves(shown) == [ring: name], "\(shown)")
        #expect(made(shown).isEmpty)
        #expect(h.state.streams[ring]?.pinned == true)
        // The alarm stops: the sink stays a while (a ringtone sounds again), then goes.
        h.stop(ring)
        #expect(removed(h.actions).isEmpty)
        #expect(h.state.combinations[name]?.unusedSince != nil)
        #expect(h.machine.nextDeadline != nil)
        let later = h.advance(h.state.settings.combinationLingers)
        #expect(removed(later) == [name], "\(later)")
        #expect(h.state.combinations.isEmpty)
        // Gone from the server: forgotten, and not asked to go again.
        #expect(removed(h.send(.portGone(name))).isEmpty)
        #expect(h.state.strayCombinations.isEmpty)
    }

    @Test("the speaker the output already: no sink; a call never (refused by the policy file, and ignored by the route); a sink found that is no one's goes at once, and once")
    func noSinkWhenNotNeeded() {
        var h = Harness()
        h.laptop()
        h.send(.devicesListed)
        _ = alarmClock(&h)
        #expect(outputs(h.session("clock").route) == ["speaker"])
        #expect(made(h.actions).isEmpty)
        h.plug(.headphones, "jack")
        h.send(.declare(SessionDeclaration(SessionID("phone"), app: "phone", origin: .inferred, configuration: call, preferredOutputs: [.everywhere])))
        _ = h.play("phone")
        #expect(outputs(h.session("phone").route) == ["jack"])
        let stray = "audiosession.everywhere.0123456789abcdef"
        let found = h.send(.portAppeared(Harness.port(.virtual, stray)))
        #expect(removed(found) == [stray])
        #expect(removed(h.send(.tick)).isEmpty, "asked once")
        #expect(removed(h.plug(.usbAudio, "usb")).isEmpty, "asked once")
    }

    @Test("the headphones go while the alarm plays through both: the stream moved to the speaker; back, through the sink again (it lingered); the stop moves the stream back to the default and removes the sink")
    func headphonesGoAndCome() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.send(.devicesListed)
        let ring = alarmClock(&h)
        let name = CombinedOutputs.name(["jack", "speaker"])
        _ = shows(&h, name)
        #expect(h.state.streams[ring]?.device == name)
        let gone = h.send(.portGone("jack"))
        #expect(outputs(h.session("clock").route) == ["speaker"])
        #expect(moves(gone) == [ring: "speaker"], "\(gone)")
        #expect(removed(gone).isEmpty, "it lingers")
        let back = h.plug(.headphones, "jack")
        #expect(outputs(h.session("clock").route) == ["jack", "speaker"])
        #expect(made(back).isEmpty, "the same sink, still there")
        #expect(moves(back) == [ring: name], "\(back)")
        let stop = h.send(.stopping)
        #expect(moves(stop) == [ring: "jack"])
        #expect(removed(stop) == [name])
    }

    @Test("a sink asked for that the server does not make: asked once, not at every event; made again if it goes while needed")
    func askedOnce() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.send(.devicesListed)
        let ring = alarmClock(&h)
        let name = CombinedOutputs.name(["jack", "speaker"])
        #expect(made(h.actions).count == 1)
        h.play("clock")
        #expect(made(h.actions).isEmpty, "not again")
        _ = shows(&h, name)
        let gone = h.send(.portGone(name))
        #expect(made(gone) == [name: ["jack", "speaker"]], "\(gone)")
        _ = ring
    }
}

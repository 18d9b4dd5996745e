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
    /// A laptop with headphones plugged, listed, and the alarm ringing (its sink asked for, not shown yet).
    func ringing() -> (Harness, StreamKey, String) {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.send(.devicesListed)
        let ring = alarmClock(&h)
        return (h, ring, CombinedOutputs.name(["jack", "speaker"]))
    }

    /// The server shows the combination asked for (`inUse`: with a stream on it already).
    func shows(_ h: inout Harness, _ name: String, inUse: Bool = false) -> [PolicyAction] {
        h.send(.combinationAppeared(name, inUse: inUse))
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
        let due = h.state.combinations[name]!.unusedSince! + h.state.settings.combinationLingers
        #expect(h.machine.nextDeadline == due, "\(String(describing: h.machine.nextDeadline))")
        #expect(removed(h.advance(due - h.now - .milliseconds(1))).isEmpty, "not a moment before")
        let later = h.advance(.milliseconds(1))
        #expect(removed(later) == [name], "\(later)")
        #expect(h.state.combinations.isEmpty)
        // Gone from the server: forgotten, and not asked to go again.
        #expect(removed(h.send(.portGone(name))).isEmpty)
        #expect(h.state.strayCombinations.isEmpty)
    }

    @Test("the speaker the output already: no sink; a call never (refused by the policy file, and ignored by the route); a sink found that is no one's is no device of the user's, and goes at once (with a stream on it, at the next tick), once")
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
        let found = h.send(.combinationAppeared(stray, inUse: false))
        #expect(removed(found) == [stray], "no stream on it: at once")
        #expect(outputs(h.state.systemRoute) == ["jack"] && h.state.userChoice[.output] == nil && h.state.recentArrivals[stray] == nil,
                "no device of the user's")
        #expect(removed(h.send(.tick)).isEmpty, "asked once")
        // One with a stream on it: at the next tick (the stream's session may need it).
        let used = "audiosession.everywhere.fedcba9876543210"
        #expect(removed(h.send(.combinationAppeared(used, inUse: true))).isEmpty)
        #expect(removed(h.advance(.nanoseconds(1))) == [used], "at the next tick")
        #expect(removed(h.plug(.usbAudio, "usb")).isEmpty, "asked once")
    }

    /// A sink that lost an output goes at once (PipeWire 0.3.65's pipewire-pulse died when the output
    /// came back to it, twice in a full suite's soak): a new one is made when the output is back.
    @Test("the headphones go while the alarm plays through both: the stream moved to the speaker and the sink removed at once; back, a new sink and the stream through it; the stop moves the stream back to the default and removes the sink")
    func headphonesGoAndCome() {
        var (h, ring, name) = ringing()
        _ = shows(&h, name)
        #expect(h.state.streams[ring]?.device == name)
        let gone = h.send(.portGone("jack"))
        #expect(outputs(h.session("clock").route) == ["speaker"])
        #expect(moves(gone) == [ring: "speaker"], "\(gone)")
        #expect(removed(gone) == [name], "it lost an output: no lingering")
        h.send(.portGone(name))  // the server removed it
        let back = h.plug(.headphones, "jack")
        #expect(outputs(h.session("clock").route) == ["jack", "speaker"])
        #expect(made(back) == [name: ["jack", "speaker"]], "a new sink: \(back)")
        let shown = shows(&h, name)
        #expect(moves(shown) == [ring: name], "\(shown)")
        let stop = h.send(.stopping)
        #expect(moves(stop) == [ring: "jack"])
        #expect(removed(stop) == [name])
    }

    @Test("a sink asked for that the server does not make: asked once, not at every event; made again if it goes while needed")
    func askedOnce() {
        var (h, ring, name) = ringing()
        #expect(made(h.actions).count == 1)
        h.play("clock")
        #expect(made(h.actions).isEmpty, "not again")
        _ = shows(&h, name)
        let gone = h.send(.portGone(name))
        #expect(made(gone) == [name: ["jack", "speaker"]], "\(gone)")
        _ = ring
    }

    @Test("the sink for both is no device of the user's: its coming and going takes no pick away and makes no churn; picked as the default in a mixer, it is no choice")
    func noDeviceOfTheUsers() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.send(.devicesListed)
        _ = h.advance(.seconds(10))
        h.send(.userSelectedPort("jack"))
        let remembered = h.state.rememberedRoutes
        _ = alarmClock(&h)
        let name = CombinedOutputs.name(["jack", "speaker"])
        _ = shows(&h, name)
        #expect(h.state.userChoice[.output] == "jack", "before, a device that came took the pick away")
        h.send(.defaultDeviceChanged(.output, to: name, previousStillThere: true))
        #expect(h.state.userChoice[.output] == "jack")
        h.send(.portGone(name))
        #expect(h.state.lastDeviceChurn == nil || h.now - h.state.lastDeviceChurn! > h.state.settings.deviceChurnSettles)
        #expect(h.state.rememberedRoutes == remembered)
    }

    @Test("a predecessor's sink found with the alarm still on it (a kill -9 while it rang): taken over, not removed and made again")
    func foundWithItsAlarm() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        let name = CombinedOutputs.name(["jack", "speaker"])
        // The listing: devices (ours among them), then the streams, then the first tick.
        var all = shows(&h, name, inUse: true)
        all += h.send(.devicesListed)
        h.send(.declare(SessionDeclaration(SessionID("clock"), app: "clock", origin: .inferred, configuration: alarm, preferredOutputs: [.everywhere])))
        all += h.actions
        all += h.send(.streamAppeared(StreamKey(.output, 7), session: SessionID("clock"), running: true, device: name, pinned: true))
        all += h.advance(.seconds(1))
        #expect(removed(all).isEmpty && made(all).isEmpty, "\(all)")
        #expect(moves(all).isEmpty, "left on it")
    }

    @Test("a sink that lingers with a stream still on it (the alarm paused, its session no longer active): the stream back to the default first, then the sink goes")
    func lingersWithAStreamOnIt() {
        var (h, ring, name) = ringing()
        _ = shows(&h, name)
        h.send(.streamRunning(ring, false))
        _ = h.advance(.seconds(1))
        let later = h.advance(h.state.settings.combinationLingers)
        #expect(moves(later) == [ring: "jack"], "\(later)")
        #expect(removed(later) == [name])
        let order = later.compactMap { action -> String? in
            switch action {
            case .moveStream: "move"
            case .removeCombination: "remove"
            default: nil
            }
        }
        #expect(order == ["move", "remove"])
        #expect(h.state.streams[ring]?.pinned == false)
    }

    @Test("a sink asked for just before the stop that shows during it goes at once")
    func madeDuringTheStop() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.send(.devicesListed)
        _ = alarmClock(&h)
        let name = CombinedOutputs.name(["jack", "speaker"])
        #expect(made(h.actions).count == 1)
        #expect(removed(h.send(.stopping)).isEmpty, "not there yet")
        #expect(removed(shows(&h, name)) == [name])
        #expect(removed(h.send(.tick)).isEmpty, "once")
    }

    @Test("the server restarts while the alarm rings: its sink is asked for again once the devices are listed, not before; the sink changing is no port; picked as the default in a mixer, the default goes back")
    func serverRestartAndMixer() {
        var (h, ring, name) = ringing()
        _ = shows(&h, name)
        h.send(.portChanged(Harness.port(.virtual, name)))
        #expect(h.state.ports[name] == nil, "no port of the core's")
        let picked = h.send(.defaultDeviceChanged(.output, to: name, previousStillThere: true))
        #expect(picked.contains(.setDefaultDevice(.output, "jack")), "\(picked)")
        h.send(.mediaServicesLost)
        h.send(.mediaServicesReset)
        #expect(made(h.actions).isEmpty, "not before the listing")
        h.laptop()
        h.plug(.headphones, "jack")
        h.send(.streamAppeared(ring, session: SessionID("clock"), running: true, device: "jack"))
        let listed = h.send(.devicesListed)
        #expect(made(listed) == [name: ["jack", "speaker"]], "asked again: \(listed)")
    }
}

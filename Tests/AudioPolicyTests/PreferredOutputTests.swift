import AudioPolicy
import Testing

/// SPEC.md section 10: a session's preferred outputs (its policy file's `output:`), and calls on
/// public outputs (issue 23).
@Suite("routes: preferred outputs, private and public")
struct PreferredOutputTests {
    func outputs(_ route: RouteDescription) -> [String] { route.outputs.map(\.uid) }

    func moves(_ actions: [PolicyAction]) -> [StreamKey: String] {
        var found: [StreamKey: String] = [:]
        for case .moveStream(let key, let device) in actions { found[key] = device }
        return found
    }

    /// The app declared as a policy file would have it, with a running stream.
    func app(_ h: inout Harness, _ id: String, _ configuration: SessionConfiguration, output: [OutputPreference]) -> StreamKey {
        h.send(.declare(SessionDeclaration(SessionID(id), app: id, origin: .inferred, configuration: configuration,
                                           preferredOutputs: output)))
        return h.play(id)
    }

    @Test("music on the USB DAC while a call plays on the headphones and the rest on the default: each stream where its session's route is")
    func twoOutputsAtOnce() {
        var h = Harness()
        h.laptop()
        h.plug(.usbAudio, "usb")
        h.plug(.headphones, "jack")
        #expect(outputs(h.state.systemRoute) == ["jack"])
        let song = app(&h, "player", music, output: [.type(.usbAudio)])
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["usb"])
        #expect(moves(h.actions) == [song: "usb"], "\(h.actions)")
        // Mixable sound with no preference stays on the default, and is not moved.
        h.app("game", SessionConfiguration(.ambient))
        #expect(outputs(h.state.sessions[SessionID("game")]!.route) == ["jack"])
        #expect(moves(h.actions).isEmpty)
        // A call on the headphones (private first), the music paused for it, still on its DAC.
        h.app("phone", call)
        #expect(outputs(h.state.sessions[SessionID("phone")]!.route) == ["jack"])
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["usb"])
        // The agent stops: the stream it moved goes back to the default (the server forgets the move).
        let stop = h.send(.stopping)
        #expect(moves(stop) == [song: "jack"], "back to the default, and not again to its route")
        #expect(h.state.streams[song]?.pinned == false)
        #expect(moves(h.send(.stopping)).isEmpty, "once")
    }

    @Test("a stream moved to its preferred output, which then becomes the default: still pinned (no move: PulseAudio ignores a move to the device a stream is on); the next default moves it; the stop moves a pinned stream on the default to it all the same")
    func pinnedStreamTheDefaultComesTo() {
        var h = Harness()
        h.laptop()
        h.plug(.usbAudio, "usb")
        h.send(.devicesListed)
        _ = h.advance(.seconds(10))
        #expect(outputs(h.state.systemRoute) == ["usb"])
        let song = app(&h, "player", music, output: [.type(.builtInSpeaker)])
        #expect(moves(h.actions) == [song: "speaker"])
        #expect(h.state.streams[song]?.pinned == true)
        // The user picks the speaker: the song is on the default now, and still pinned to it.
        let picked = h.send(.defaultDeviceChanged(.output, to: "speaker", previousStillThere: true))
        #expect(outputs(h.state.systemRoute) == ["speaker"])
        #expect(moves(picked).isEmpty, "\(picked)")
        #expect(h.state.streams[song]?.pinned == true)
        // The agent stops: moved to the default it is on (PipeWire forgets the move by it).
        #expect(moves(h.send(.stopping)) == [song: "speaker"], "before, nothing: the server kept the move")
        #expect(h.state.streams[song]?.pinned == false)
    }

    @Test("a stream that follows the default, moved by the user elsewhere, stays there when its preferred output is plugged; one that follows the default to where it went does not become the user's")
    func userMoveOfAStreamFollowingTheDefault() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.send(.devicesListed)
        let song = app(&h, "player", music, output: [.type(.hdmi)])
        #expect(moves(h.actions).isEmpty, "no TV: it follows the default")
        let other = app(&h, "radio", SessionConfiguration(.ambient), output: [.type(.hdmi)])
        // The user moves the song to the speaker in a mixer; the radio follows the default the user
        // picks, the jack again (the server moves it).
        h.send(.streamMoved(song, device: "speaker"))
        h.send(.streamMoveJudged(song, to: "speaker", byUser: true))
        #expect(h.state.streams[song]?.userOwnsDevice == true)
        h.send(.streamMoved(other, device: "jack"))
        h.send(.streamMoveJudged(other, to: "jack", byUser: true, toDefault: true))
        #expect(h.state.streams[other]?.userOwnsDevice == false)
        // Nor one the server moves to its default when that is a sink the core does not route to (a
        // filter's, EasyEffects'): the server's word, not the core's route, says where the default is.
        h.send(.streamMoved(other, device: "easyeffects_sink"))
        h.send(.streamMoveJudged(other, to: "easyeffects_sink", byUser: true, toDefault: true))
        #expect(h.state.streams[other]?.userOwnsDevice == false)
        h.send(.streamMoved(other, device: "jack"))
        h.send(.streamMoveJudged(other, to: "jack", byUser: true, toDefault: true))
        let plugged = h.plug(.hdmi, "tv")  // (guarded: the default stays)
        #expect(moves(plugged) == [other: "tv"], "before, the song too: taken back from where the user put it")
        // The user moves the song to the default while its route is the TV: the user's still, not
        // moved to the TV at once (before: taken to the TV in the same run).
        h.send(.streamMoved(song, device: "jack"))
        let judged = h.send(.streamMoveJudged(song, to: "jack", byUser: true, toDefault: true))
        #expect(h.state.streams[song]?.userOwnsDevice == true)
        #expect(moves(judged).isEmpty, "\(judged)")
        // The TV goes (its route the default again); the user moves it to the default once more: it
        // follows the default again.
        h.send(.portGone("tv"))
        h.send(.streamMoved(song, device: "speaker"))
        h.send(.streamMoveJudged(song, to: "speaker", byUser: true, toDefault: false))
        h.send(.streamMoved(song, device: "jack"))
        h.send(.streamMoveJudged(song, to: "jack", byUser: true, toDefault: true))
        #expect(h.state.streams[song]?.userOwnsDevice == false)
    }

    @Test("a preferred output not connected: the session follows the default; plugged, its streams move there, with the device's reason; the default again, moved back")
    func followsTheDefaultUntilItsDeviceComes() {
        var h = Harness()
        h.laptop()
        let song = app(&h, "player", music, output: [.device("tv-dac"), .type(.hdmi)])
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["speaker"])
        #expect(moves(h.actions).isEmpty)
        // A monitor wakes: the display-audio guard keeps the default, but the policy names it.
        let tv = h.plug(.hdmi, "tv")
        #expect(outputs(h.state.systemRoute) == ["speaker"])
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["tv"])
        #expect(moves(tv) == [song: "tv"])
        #expect(h.routeChanges(in: tv).contains { $0.sessions == [SessionID("player")] && $0.reason == .newDeviceAvailable })
        // The uid named first outranks the type named after it; plugged last, it is the default too,
        // and the stream (which no longer follows the default since we moved it) is moved there.
        let dac = h.plug(.lineOut, "tv-dac")
        #expect(outputs(h.state.systemRoute) == ["tv-dac"])
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["tv-dac"])
        #expect(moves(dac) == [song: "tv-dac"])
        #expect(h.state.streams[song]?.pinned == false, "on the default: it follows it again")
        // Gone: the next preference.
        let gone = h.send(.portGone("tv-dac"))
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["tv"])
        #expect(h.routeChanges(in: gone).contains { $0.sessions == [SessionID("player")] && $0.reason == .oldDeviceUnavailable })
    }

    @Test("an app's own override to the speaker outranks its policy's preference; a preference the category may not use is passed over")
    func overrideAndEligibility() {
        var h = Harness()
        h.laptop()
        h.plug(.usbAudio, "usb")
        h.plug(.airPlay, "living-room")
        h.send(.declare(SessionDeclaration(SessionID("phone"), app: "phone", origin: .declared, configuration: call,
                                           preferredOutputs: [.type(.airPlay), .type(.usbAudio)])))
        h.send(.activate(SessionID("phone")))
        // A call without allowAirPlay may not use AirPlay: its next preference.
        #expect(outputs(h.state.sessions[SessionID("phone")]!.route) == ["usb"])
        h.send(.overrideOutput(SessionID("phone"), toSpeaker: true))
        #expect(outputs(h.state.sessions[SessionID("phone")]!.route) == ["speaker"])
    }

    @Test("a call whose headset goes with only public outputs left: on the speaker, never the TV, and the route change says so")
    func callNeverToTheTV() {
        var h = Harness()
        h.plug(.builtInSpeaker, "speaker")
        h.plug(.hdmi, "tv")
        h.send(.userSelectedPort("tv"))
        h.plug(.usbAudio, "headset")
        h.app("phone", call)
        #expect(outputs(h.state.sessions[SessionID("phone")]!.route) == ["headset"])
        let gone = h.send(.portGone("headset"))
        #expect(outputs(h.state.sessions[SessionID("phone")]!.route) == ["speaker"])
        let change = h.routeChanges(in: gone).first { $0.sessions == [SessionID("phone")] }
        #expect(change?.cause.contains("no private output left: the call plays on a public one (builtInSpeaker speaker)") == true,
                "\(h.routeChanges(in: gone))")
        #expect(!PortType.builtInSpeaker.isPrivate && !PortType.hdmi.isPrivate && PortType.usbAudio.isPrivate && PortType.builtInReceiver.isPrivate)
    }

    @Test("a stream the user moves off its preferred output in a mixer stays where the user put it")
    func userMoveStands() {
        var h = Harness()
        h.laptop()
        h.plug(.usbAudio, "usb")
        let song = app(&h, "player", music, output: [.type(.builtInSpeaker)])
        #expect(moves(h.actions) == [song: "speaker"])
        h.send(.streamMoved(song, device: "speaker"))
        h.send(.streamMoveJudged(song, to: "speaker", byUser: false))
        // The user's move: not undone while it is judged, nor after.
        #expect(moves(h.send(.streamMoved(song, device: "usb"))).isEmpty)
        h.send(.streamMoveJudged(song, to: "usb", byUser: true))
        #expect(h.state.streams[song]?.userOwnsDevice == true)
        let plugged = h.plug(.headphones, "jack")
        #expect(moves(plugged).isEmpty, "not moved back: \(moves(plugged))")
        // Where we put it (our own move's echo) is no hand.
        let other = h.play("player")
        #expect(moves(h.actions) == [other: "speaker"])
        // The server's move (off a device that went): judged no hand, and the stream is ours to move again.
        h.send(.streamMoved(other, device: "usb"))
        let judged = h.send(.streamMoveJudged(other, to: "usb", byUser: false))
        #expect(h.state.streams[other]?.userOwnsDevice == false)
        #expect(moves(judged) == [other: "speaker"])
    }

    @Test("an output preference: a port type's name or Apple's raw value, else a device's uid")
    func words() {
        #expect(OutputPreference(word: "usbAudio") == .type(.usbAudio))
        #expect(OutputPreference(word: "USBAudio") == .type(.usbAudio))
        #expect(OutputPreference(word: "alsa_output.usb-FiiO.analog-stereo") == .device("alsa_output.usb-FiiO.analog-stereo"))
        #expect(OutputPreference.type(.bluetoothA2DP).description == "bluetoothA2DP")
    }
}

/// SPEC.md section 10: the user's route choices, remembered per set of devices (issue 23).
@Suite("routes: the user's choices per set of devices")
struct RememberedRouteTests {
    func outputs(_ route: RouteDescription) -> [String] { route.outputs.map(\.uid) }
    func kept(_ actions: [PolicyAction]) -> RememberedRoutes? {
        actions.reduce(nil) { if case .keepRoutes(let r) = $1 { r } else { $0 } }
    }

    @Test("a USB DAC plugged twice: the user's pick of the speaker with it comes back the second time; a set never seen follows the usual rules, and the route log says which")
    func pickComesBackWithItsSet() {
        var h = Harness()
        h.laptop()
        h.send(.devicesListed)
        let first = h.plug(.usbAudio, "dac")
        #expect(outputs(h.state.systemRoute) == ["dac"], "last in wins")
        #expect(h.routeChanges(in: first).first?.cause.contains("a set of devices never seen before: the usual rules apply") == true,
                "\(h.routeChanges(in: first))")
        let picked = h.send(.userSelectedPort("speaker"))
        #expect(outputs(h.state.systemRoute) == ["speaker"])
        #expect(kept(picked)?[DeviceSet(["speaker", "dac"])] == RouteChoices(output: "speaker"))
        h.send(.portGone("dac"))
        // Plugged again: the set of that pick, and the pick comes back (the DAC does not take over).
        let again = h.plug(.usbAudio, "dac")
        #expect(outputs(h.state.systemRoute) == ["speaker"], "\(h.routeChanges(in: again))")
        #expect(h.routeChanges(in: again).contains { $0.cause.contains("a set of devices seen before: the user's choices for it come back (out speaker)") })
        // Another device too: a set never seen, the usual rules (last in wins).
        h.plug(.headphones, "jack")
        #expect(outputs(h.state.systemRoute) == ["jack"])
    }

    @Test("a device that goes leaves the user's pick in force with a set never seen: remembered for that set; back to that set after its DAC went and came again, the pick comes back")
    func pickHeldThroughARemoval() {
        var h = Harness()
        h.laptop()
        h.send(.devicesListed)
        h.plug(.usbAudio, "dac")
        h.plug(.hdmi, "tv")
        h.send(.userSelectedPort("speaker"))
        #expect(outputs(h.state.systemRoute) == ["speaker"])
        // The TV goes: {speaker, dac} was never seen; the pick stays, and is kept for that set.
        h.send(.portGone("tv"))
        #expect(outputs(h.state.systemRoute) == ["speaker"])
        #expect(h.state.rememberedRoutes[DeviceSet(["speaker", "dac"])] == RouteChoices(output: "speaker"), "before: remembered with no choice")
        // The DAC goes and comes back: the set {speaker, dac} again, and its pick with it (else the DAC,
        // the last in, would take over).
        h.send(.portGone("dac"))
        let back = h.plug(.usbAudio, "dac")
        #expect(outputs(h.state.systemRoute) == ["speaker"], "before: the DAC: \(h.routeChanges(in: back))")
    }

    @Test("a Bluetooth headset's port that leaves with no word of its card is out of the set of devices once its parking is over (the tick that decides it)")
    func parkedPortLeavesTheSetAtItsTick() {
        var h = Harness()
        h.laptop()
        h.send(.devicesListed)
        let card = BluetoothCard(card: "bt", a2dpProfile: "a2dp-sink", hfpProfile: "headset-head-unit", activeProfile: "a2dp-sink")
        h.plug(.bluetoothA2DP, "bt-a2dp", bluetooth: card)
        #expect(h.state.deviceSet == DeviceSet(["speaker", "bt"]))
        h.send(.portGone("bt-a2dp"))
        #expect(h.state.deviceSet == DeviceSet(["speaker", "bt"]), "parked: a profile switch may bring it back")
        h.advance(h.state.settings.bluetoothParking + .seconds(1))
        #expect(h.state.deviceSet == DeviceSet(["speaker"]), "gone for good at the tick that decides it")
    }

    @Test("an output chosen for a category holds with its set of devices only, and comes back with it, also from the last run")
    func categoryChoice() {
        var h = Harness()
        h.laptop()
        h.plug(.usbAudio, "dac")
        h.send(.devicesListed)
        h.app("player", music)
        h.app("game", SessionConfiguration(.ambient))
        h.send(.userSelectedPort("speaker"))
        let chosen = h.send(.setUserRoute(.category(.playback), "dac"))
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["dac"])
        #expect(outputs(h.state.sessions[SessionID("game")]!.route) == ["speaker"])
        #expect(h.routeChanges(in: chosen).contains { $0.reason == .override && $0.cause == "the user chose dac for category playback" })
        let remembered = kept(chosen)
        #expect(remembered?[DeviceSet(["speaker", "dac"])]?.scoped == [.category(.playback): "dac"])
        // With headphones too, a set never seen: the choice holds no more.
        h.plug(.headphones, "jack")
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["jack"])
        h.send(.portGone("jack"))
        #expect(outputs(h.state.sessions[SessionID("player")]!.route) == ["dac"], "its set again")
        // The next run, told what this one kept: the choice is back once the devices are listed.
        var next = Harness()
        next.send(.routesRemembered(remembered!))
        next.laptop()
        next.plug(.usbAudio, "dac")
        next.app("player", music)
        #expect(outputs(next.state.sessions[SessionID("player")]!.route) == ["dac"], "the default until the devices are listed")
        next.send(.devicesListed)
        #expect(outputs(next.state.systemRoute) == ["speaker"])
        #expect(outputs(next.state.sessions[SessionID("player")]!.route) == ["dac"])
        // Dropped.
        next.send(.setUserRoute(.category(.playback), nil))
        #expect(outputs(next.state.sessions[SessionID("player")]!.route) == ["speaker"])
    }

    /// A laptop with a TV and a USB headset, all listed, and a call (an inferred session, named
    /// `appName` for the route choices) playing.
    func callBesideATVAndAHeadset(appName: String, preferredOutputs: [OutputPreference] = []) -> Harness {
        var h = Harness()
        h.laptop()
        h.plug(.hdmi, "tv")
        h.plug(.usbAudio, "headset")
        h.send(.devicesListed)
        h.send(.declare(SessionDeclaration(SessionID("phone"), app: "phone", origin: .inferred, configuration: call,
                                           preferredOutputs: preferredOutputs, appName: appName)))
        h.play("phone")
        return h
    }

    func callOutputs(_ h: Harness) -> [String] { outputs(h.state.sessions[SessionID("phone")]!.route) }

    @Test("an app's choice outranks its category's and its policy's preference; a call may be sent to a public output by the user only")
    func appChoice() {
        var h = callBesideATVAndAHeadset(appName: "linphone")
        #expect(callOutputs(h) == ["headset"])
        h.send(.setUserRoute(.category(.playAndRecord), "speaker"))
        #expect(callOutputs(h) == ["speaker"])
        h.send(.setUserRoute(.app("linphone"), "tv"))
        #expect(callOutputs(h) == ["tv"])
        #expect(h.state.rememberedRoutes.sets.last?.choices.scoped == [.category(.playAndRecord): "speaker", .app("linphone"): "tv"])
    }

    @Test("a policy's output never sends a call to a public output while a private one is there; the user may")
    func callPreferenceKeepsPrivate() {
        var h = callBesideATVAndAHeadset(appName: "softphone", preferredOutputs: [.type(.hdmi), .type(.builtInSpeaker)])
        #expect(callOutputs(h) == ["headset"])
        let chosen = h.send(.setUserRoute(.app("softphone"), "tv"))
        #expect(callOutputs(h) == ["tv"])
        #expect(!h.routeChanges(in: chosen).contains { $0.cause.contains("no private output left") }, "the user's choice: \(h.routeChanges(in: chosen))")
    }

    @Test("at most 64 choices per category or app with one set of devices")
    func scopedBound() {
        var h = Harness()
        h.laptop()
        h.send(.devicesListed)
        for i in 0..<(RouteChoices.scopedLimit + 3) { h.send(.setUserRoute(.app("app\(i)"), "speaker")) }
        #expect(h.state.userRoutes.count == RouteChoices.scopedLimit)
        h.send(.setUserRoute(.app("app0"), nil))
        h.send(.setUserRoute(.app("late"), "speaker"))
        #expect(h.state.userRoutes[.app("late")] == "speaker")
    }

    @Test("the remembered sets are bounded: the least recently seen goes first")
    func bounded() {
        var r = RememberedRoutes()
        for i in 0..<(RememberedRoutes.limit + 5) { r.remember(RouteChoices(output: "o\(i)"), for: DeviceSet(["d\(i)"])) }
        #expect(r.sets.count == RememberedRoutes.limit)
        #expect(r[DeviceSet(["d0"])] == nil && r[DeviceSet(["d5"])] != nil)
        r.touch(DeviceSet(["d5"]))
        r.remember(RouteChoices(), for: DeviceSet(["new"]))
        #expect(r[DeviceSet(["d5"])] != nil && r[DeviceSet(["d6"])] == nil)
        #expect(RouteScope(word: "category:playback") == .category(.playback) && RouteScope(word: "app:mpv") == .app("mpv"))
        #expect(RouteScope(word: "category:loud") == nil && RouteScope(word: "app:") == nil && RouteScope(word: "mpv") == nil)
    }
}

/// SPEC.md section 10: the preferred outputs per category and per app configured (`outputs.yaml`).
@Suite("routes: preferred outputs configured per category and per app")
struct ConfiguredOutputTests {
    func outputs(_ route: RouteDescription) -> [String] { route.outputs.map(\.uid) }

    @Test("a category's list sends its sessions there; an app's list outranks its policy's output:, which outranks its category's; a change of the configuration moves what plays, with categoryChange")
    func precedence() {
        var h = Harness()
        h.laptop()
        h.plug(.usbAudio, "usb")
        h.plug(.headphones, "jack")
        h.send(.devicesListed)
        h.send(.outputRoutes(OutputRoutes(categories: [.playback: [.type(.usbAudio)]], apps: ["radio": [.type(.builtInSpeaker)]])))
        h.app("player", music)
        #expect(outputs(h.session("player").route) == ["usb"], "its category's list")
        h.send(.declare(SessionDeclaration(SessionID("tuner"), app: "tuner", origin: .inferred, configuration: music,
                                           preferredOutputs: [.type(.headphones)], appName: "tuner")))
        h.play("tuner")
        #expect(outputs(h.session("tuner").route) == ["jack"], "its policy's own output:")
        h.send(.declare(SessionDeclaration(SessionID("radio"), app: "radio", origin: .inferred, configuration: music,
                                           preferredOutputs: [.type(.headphones)], appName: "radio")))
        h.play("radio")
        #expect(outputs(h.session("radio").route) == ["speaker"], "its app's list in the configuration")
        // The configuration changes: the player follows the default again.
        let changed = h.send(.outputRoutes(OutputRoutes()))
        #expect(outputs(h.session("player").route) == ["jack"])
        #expect(h.routeChanges(in: changed).contains { $0.sessions.contains(SessionID("player")) && $0.reason == .categoryChange }, "\(h.routeChanges(in: changed))")
        #expect(h.send(.outputRoutes(OutputRoutes())).isEmpty || h.routeChanges().isEmpty, "no change: nothing moves")
    }
}

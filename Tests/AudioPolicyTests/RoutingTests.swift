import AudioPolicy
import Testing

/// SPEC.md section 6, "Routing rules" and the route-change reasons.
struct RoutingTests {
    func outputs(_ r: RouteDescription) -> [String] { r.outputs.map(\.uid) }
    func inputs(_ r: RouteDescription) -> [String] { r.inputs.map(\.uid) }

    @Test("last in wins, and unplugging falls back through the history (newDeviceAvailable, oldDeviceUnavailable)")
    func lastInWins() {
        var h = Harness()
        h.laptop()
        #expect(outputs(h.state.systemRoute) == ["speaker"])
        let usb = h.plug(.usbAudio, "usb")
        #expect(outputs(h.state.systemRoute) == ["usb"])
        #expect(usb.contains(.setDefaultDevice(.output, "usb")))
        #expect(h.routeChanges(in: usb).first?.reason == .newDeviceAvailable)
        h.plug(.bluetoothA2DP, "bt")
        #expect(outputs(h.state.systemRoute) == ["bt"])
        let gone = h.send(.portGone("bt"))
        let change = h.routeChanges(in: gone).first
        #expect(change?.reason == .oldDeviceUnavailable)
        #expect(change.map { outputs($0.previousRoute) } == ["bt"])
        #expect(change.map { outputs($0.route) } == ["usb"])
        h.send(.portGone("usb"))
        #expect(outputs(h.state.systemRoute) == ["speaker"])
    }

    @Test("a default the server changed, not at our request: the user's choice, but for the server's own move to a device just come or after one just went, put back to the route (issues 21, 23)")
    func defaultDeviceChangesJudged() {
        var h = Harness()
        h.laptop()
        h.plug(.usbAudio, "usb")
        h.send(.devicesListed)
        // Devices listed and none came or went since: the user's hand.
        let chosen = h.send(.defaultDeviceChanged(.output, to: "speaker", previousStillThere: true))
        #expect(h.state.userChoice[.output] == "speaker")
        #expect(h.routeChanges(in: chosen).first?.reason == .override)
        // A monitor just woken: the server moving to it by itself (its priority), and the route stays ours.
        h.plug(.hdmi, "hdmi")
        #expect(outputs(h.state.systemRoute) == ["speaker"], "the display-audio guard")
        let server = h.send(.defaultDeviceChanged(.output, to: "hdmi", previousStillThere: true))
        #expect(server.contains(.setDefaultDevice(.output, "speaker")), "\(server)")
        #expect(h.state.userChoice[.output] == "speaker")
        // A device just plugged in, and the user picks another at once (issue 23: one second after a USB
        // DAC came, the pick was taken back): the user's.
        h.plug(.headphones, "jack")
        #expect(outputs(h.state.systemRoute) == ["jack"])
        let soon = h.send(.defaultDeviceChanged(.output, to: "usb", previousStillThere: true))
        #expect(h.state.userChoice[.output] == "usb")
        #expect(outputs(h.state.systemRoute) == ["usb"])
        #expect(!soon.contains { if case .setDefaultDevice(_, let uid) = $0 { uid != "usb" } else { false } }, "not put back: \(soon)")
        // The device it replaced gone: a fallback, and the route stays ours.
        h.now += h.state.settings.deviceChurnSettles + .milliseconds(1)
        let gone = h.send(.defaultDeviceChanged(.output, to: "jack", previousStillThere: false))
        #expect(gone.contains(.setDefaultDevice(.output, "usb")))
        #expect(h.state.userChoice[.output] == "usb")
        // A device just gone (the server falling back while the devices settle): the route stays ours.
        h.send(.portGone("hdmi"))
        let fallback = h.send(.defaultDeviceChanged(.output, to: "speaker", previousStillThere: true))
        #expect(fallback.contains(.setDefaultDevice(.output, "usb")), "\(fallback)")
        h.now += h.state.settings.deviceChurnSettles + .milliseconds(1)
        // Settled and the previous still there: the user's.
        let later = h.send(.defaultDeviceChanged(.output, to: "jack", previousStillThere: true))
        #expect(h.state.userChoice[.output] == "jack")
        #expect(!later.contains { if case .setDefaultDevice(_, let uid) = $0 { uid != "jack" } else { false } }, "not put back")
        // A device the routes do not know is nobody's choice.
        #expect(h.send(.defaultDeviceChanged(.output, to: "nowhere", previousStillThere: true)).isEmpty)
    }

    @Test("headphones unplugged during playback: oldDeviceUnavailable with the previous route, and the player pauses")
    func headphonesUnplugged() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.app("spotify", music)
        #expect(outputs(h.session("spotify").route) == ["jack"])
        let gone = h.send(.portGone("jack"))
        #expect(h.notifications(for: "spotify", in: gone).contains { n in
            if case .routeChange(.oldDeviceUnavailable, let previous) = n { return outputs(previous) == ["jack"] }
            return false
        })
        #expect(gone.contains(.pausePlayer(SessionID("spotify"), why: .privateListeningEnded)))
        #expect(outputs(h.session("spotify").route) == ["speaker"])
        // Exactly one reason per change, with its previous route.
        for change in h.routeChanges(in: gone) { #expect(change.previousRoute != change.route) }
    }

    @Test("headphones unplugged during a call that interrupted the music: the call's end does not start it out loud")
    func headphonesUnpluggedDuringAnInterruption() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.app("spotify", music)
        let phone = h.app("softphone", call)
        #expect(h.session("spotify").status == .interrupted(by: SessionID("softphone")))
        h.send(.portGone("jack"))
        h.send(.streamGone(phone))
        let ended = h.advance(.seconds(2))
        #expect(!ended.contains(.resumePlayer(SessionID("spotify"))), "\(ended)")
        #expect(h.notifications(for: "spotify", in: ended).contains(.ended), "ended without shouldResume")
    }

    @Test("a USB headset plugged in: newDeviceAvailable for the playing session")
    func usbHeadsetPlugged() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        let plugged = h.plug(.usbAudio, "usb-headset")
        #expect(h.notifications(for: "spotify", in: plugged).contains { n in
            if case .routeChange(.newDeviceAvailable, let previous) = n { return outputs(previous) == ["speaker"] }
            return false
        })
        #expect(!plugged.contains(.pausePlayer(SessionID("spotify"), why: .privateListeningEnded)))
    }

    @Test("the agent starts while a TV is the server's default (announced last, as the shell does): the TV stays the default route, unguarded; a headset that goes later leaves it there, and a call on the speaker")
    func startOnATV() {
        var h = Harness()
        h.plug(.builtInSpeaker, "speaker")
        h.plug(.usbAudio, "headset")
        h.plug(.hdmi, "tv")
        let listed = h.send(.devicesListed)
        #expect(outputs(h.state.systemRoute) == ["tv"], "before, the headset: the guard moved everything off the TV at the start")
        #expect(!listed.contains(.setDefaultDevice(.output, "headset")), "\(listed)")
        #expect(!h.state.guardedPorts.contains("tv"))
        h.app("phone", SessionConfiguration(.playAndRecord, mode: .voiceChat))
        #expect(outputs(h.session("phone").route) == ["headset"])
        h.send(.portGone("headset"))
        #expect(outputs(h.state.systemRoute) == ["tv"])
        #expect(outputs(h.session("phone").route) == ["speaker"], "a call never to the TV by a rule")
        // A TV that is not the default at the start stays guarded.
        var other = Harness()
        other.plug(.hdmi, "tv")
        other.plug(.builtInSpeaker, "speaker")
        other.send(.devicesListed)
        #expect(outputs(other.state.systemRoute) == ["speaker"])
        #expect(other.state.guardedPorts.contains("tv"))
    }

    @Test("a monitor waking up does not steal the route, and is logged; choosing it moves the route (override)")
    func displayAudioGuard() {
        var h = Harness()
        h.laptop()
        let woke = h.plug(.hdmi, "monitor")
        #expect(outputs(h.state.systemRoute) == ["speaker"])
        #expect(!woke.contains(.setDefaultDevice(.output, "monitor")))
        let logged = h.routeChanges(in: woke)
        #expect(logged.count == 1 && logged[0].reason == .newDeviceAvailable && logged[0].cause.contains("guard"))
        let chosen = h.send(.userSelectedPort("monitor"))
        #expect(outputs(h.state.systemRoute) == ["monitor"])
        #expect(h.routeChanges(in: chosen).first?.reason == .override)
        // Only display audio is left: it is used.
        var k = Harness()
        k.plug(.hdmi, "monitor")
        #expect(outputs(k.state.systemRoute) == ["monitor"])
    }

    @Test("category-aware routes: no input for output-only categories, no output for record")
    func categoryAware() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        #expect(inputs(h.session("spotify").route).isEmpty)
        #expect(outputs(h.session("spotify").route) == ["speaker"])
        h.app("arecord", recorder, direction: .input)
        #expect(outputs(h.session("arecord").route).isEmpty)
        #expect(inputs(h.session("arecord").route) == ["mic"])
    }

    @Test("calls prefer headset-class devices; receiver over speaker unless defaultToSpeaker")
    func callsPreferHeadsets() {
        var h = Harness()
        h.plug(.builtInSpeaker, "speaker")
        h.plug(.builtInReceiver, "earpiece")
        h.plug(.builtInMic, "mic", .input)
        h.plug(.hdmi, "monitor")
        h.app("voice", call)
        #expect(outputs(h.session("voice").route) == ["earpiece"])
        h.app("video", SessionConfiguration(.playAndRecord, mode: .videoChat))
        #expect(outputs(h.session("video").route) == ["speaker"], "videoChat implies defaultToSpeaker")
        h.plug(.headphones, "jack")
        h.plug(.headsetMic, "jack-mic", .input)
        #expect(outputs(h.session("video").route) == ["jack"])
        #expect(inputs(h.session("video").route) == ["jack-mic"])
    }

    @Test("AirPlay and network sinks only where the category allows them")
    func airPlayWhereAllowed() {
        var h = Harness()
        h.laptop()
        h.plug(.airPlay, "kitchen")
        h.app("spotify", music)
        #expect(outputs(h.session("spotify").route) == ["kitchen"])
        h.declared("chat", SessionConfiguration(.playAndRecord))
        #expect(outputs(h.session("chat").route) == ["speaker"])
        h.declared("chat2", SessionConfiguration(.playAndRecord, options: .allowAirPlay))
        #expect(outputs(h.session("chat2").route) == ["kitchen"])
    }

    @Test("Bluetooth A2DP for recording sessions only with allowBluetoothA2DP or allowBluetooth")
    func bluetoothForRecordingSessions() {
        var h = Harness()
        h.laptop()
        h.plug(.bluetoothA2DP, "bt")
        h.declared("plain", SessionConfiguration(.playAndRecord))
        #expect(outputs(h.session("plain").route) == ["speaker"])
        h.declared("a2dp", SessionConfiguration(.playAndRecord, options: .allowBluetoothA2DP))
        #expect(outputs(h.session("a2dp").route) == ["bt"])
        #expect(inputs(h.session("a2dp").route) == ["mic"])
    }

    /// A Bluetooth headset's card with both kinds of profile, in A2DP.
    let headsetInA2DP = BluetoothCard(card: "bluez_card.AC", a2dpProfile: "a2dp-sink", hfpProfile: "headset-head-unit",
                                      activeProfile: "a2dp-sink")

    @Test("a call on Bluetooth switches the headset to hands-free after the debounce, and back after the call")
    func bluetoothHandsFreeSwitch() {
        var h = Harness()
        h.laptop()
        let a2dp = headsetInA2DP
        h.plug(.bluetoothA2DP, "bt-a2dp", bluetooth: a2dp)
        let voice = h.app("zoom", call)
        #expect(outputs(h.session("zoom").route) == ["bt-a2dp"])
        #expect(h.actions.contains(.wakeUp(at: h.now + .milliseconds(500))))
        #expect(h.advance(.milliseconds(200)).allSatisfy { if case .setCardProfile = $0 { return false }; return true })
        let switched = h.advance(.milliseconds(300))
        #expect(switched.contains(.setCardProfile(card: "bluez_card.AC", profile: "headset-head-unit", from: "a2dp-sink")))

        // The server replaces the A2DP sink with the hands-free sink and source.
        var hfp = a2dp
        hfp.activeProfile = "headset-head-unit"
        let gone = h.send(.portGone("bt-a2dp"))
        #expect(h.routeChanges(in: gone).isEmpty, "nothing moves until the card shows why its port went")
        #expect(!gone.contains { if case .setDefaultDevice = $0 { true } else { false } },
                "the server falls back by itself until the card's new ports come")
        let hfpOut = h.plug(.bluetoothHFP, "bt-hfp", bluetooth: hfp)
        #expect(hfpOut.contains(.setDefaultDevice(.output, "bt-hfp")))
        // One change, from A2DP to hands-free (not A2DP to the speaker, then to hands-free).
        let change = h.routeChanges(in: hfpOut).first { $0.isSystemRoute }
        #expect(change?.reason == .categoryChange)
        #expect(change.map { outputs($0.previousRoute) } == ["bt-a2dp"])
        #expect(change.map { outputs($0.route) } == ["bt-hfp"])
        #expect(h.routeChanges(in: hfpOut).filter { outputs($0.previousRoute) == ["speaker"] }.isEmpty)
        let mic = h.plug(.bluetoothHFP, "bt-hfp-mic", .input, bluetooth: hfp)
        #expect(outputs(h.session("zoom").route) == ["bt-hfp"])
        #expect(inputs(h.session("zoom").route) == ["bt-hfp-mic"], "hands-free input and output move together")
        #expect(h.routeChanges(in: mic).allSatisfy { $0.reason == .categoryChange })

        // The call ends: back to A2DP two seconds later.
        h.send(.streamGone(voice))
        h.advance(.seconds(1))
        #expect(h.advance(.milliseconds(500)).allSatisfy { if case .setCardProfile = $0 { return false }; return true })
        let back = h.advance(.seconds(2))
        #expect(back.contains(.setCardProfile(card: "bluez_card.AC", profile: "a2dp-sink")))
    }

    @Test("a card switched by someone else: its ports going and coming are a category change, and a port leaving once the new ones came is the device leaving")
    func profileSwitchedByTheServer() {
        var h = Harness()
        h.laptop()
        let a2dp = headsetInA2DP
        h.plug(.bluetoothA2DP, "bt", bluetooth: a2dp)
        h.app("player", SessionConfiguration(.playback))
        // WirePlumber's autoswitch, say: the port goes, the card shows a new profile, its new port comes.
        let gone = h.send(.portGone("bt")) + h.send(.cardProfileChanged("bluez_card.AC"))
        #expect(h.routeChanges(in: gone).isEmpty)
        #expect(!gone.contains { if case .setDefaultDevice = $0 { true } else { false } })
        #expect(!gone.contains(.pausePlayer(SessionID("player"), why: .privateListeningEnded)), "private listening did not end")
        var hfp = a2dp
        hfp.activeProfile = "headset-head-unit"
        let came = h.plug(.bluetoothHFP, "bt", bluetooth: hfp)
        #expect(!h.routeChanges(in: came).isEmpty)
        #expect(h.routeChanges(in: came).allSatisfy { $0.reason == .categoryChange })
        // (The same device name: the server's configured default is it still.)
        #expect(!came.contains(.pausePlayer(SessionID("player"), why: .privateListeningEnded)), "private listening did not end")
        // Disconnected a moment later: its port goes, then the card.
        let left = h.send(.portGone("bt")) + h.send(.cardGone("bluez_card.AC"))
        #expect(h.routeChanges(in: left).contains { $0.reason == .oldDeviceUnavailable })
        #expect(left.contains(.pausePlayer(SessionID("player"), why: .privateListeningEnded)))
        #expect(left.contains(.setDefaultDevice(.output, "speaker")))
    }

    @Test("a card whose port went while the card stays, and no new port came: after the parking time, a category change to the fallback")
    func portGoneAndNoNewOne() {
        var h = Harness()
        h.laptop()
        h.plug(.bluetoothA2DP, "bt", bluetooth: headsetInA2DP)
        h.app("player", SessionConfiguration(.playback))
        let gone = h.send(.portGone("bt"))
        #expect(h.routeChanges(in: gone).isEmpty)
        #expect(h.actions.contains(.wakeUp(at: h.now + .seconds(1))))
        let decided = h.advance(.seconds(1))
        #expect(h.routeChanges(in: decided).contains { $0.reason == .categoryChange && outputs($0.route) == ["speaker"] })
        #expect(decided.contains(.setDefaultDevice(.output, "speaker")))
        #expect(!decided.contains(.pausePlayer(SessionID("player"), why: .privateListeningEnded)), "a switch to off is not private listening ending")
        #expect(h.state.departed.isEmpty)
        h.advance(.seconds(5))
        #expect(h.state.cards.isEmpty, "the card is steady once its switch window has passed")
    }

    @Test("a call shorter than the debounce never switches the headset")
    func bluetoothDebounce() {
        var h = Harness()
        h.laptop()
        h.plug(.bluetoothA2DP, "bt", bluetooth: BluetoothCard(card: "c", a2dpProfile: "a2dp-sink", hfpProfile: "hfp",
                                                              activeProfile: "a2dp-sink"))
        let voice = h.app("zoom", call)
        h.send(.streamGone(voice))
        h.advance(.milliseconds(100))
        h.advance(.seconds(1))
        h.advance(.seconds(3))
        #expect(h.state.bluetoothSwitches.isEmpty)
    }

    @Test("multiRoute uses every eligible output, the speaker only alone, and never moves its streams")
    func multiRoute() {
        var h = Harness()
        h.laptop()
        h.declared("dj", SessionConfiguration(.multiRoute))
        #expect(outputs(h.session("dj").route) == ["speaker"])
        h.plug(.usbAudio, "usb")
        h.plug(.headphones, "jack")
        #expect(Set(outputs(h.session("dj").route)) == ["usb", "jack"])
        #expect(inputs(h.session("dj").route).count == 1)
        h.send(.activate(SessionID("dj")))
        h.send(.streamAppeared(StreamKey(.output, 9), session: SessionID("dj"), running: true, device: "speaker"))
        #expect(!h.actions.contains { if case .moveStream = $0 { return true }; return false })
    }

    @Test("override to speaker, and the preferred input (override)")
    func overrideAndPreferredInput() {
        var h = Harness()
        h.laptop()
        h.plug(.headphones, "jack")
        h.plug(.usbAudio, "usb-mic", .input)
        h.declared("app", SessionConfiguration(.playAndRecord))
        #expect(outputs(h.session("app").route) == ["jack"])
        let over = h.send(.overrideOutput(SessionID("app"), toSpeaker: true))
        #expect(outputs(h.session("app").route) == ["speaker"])
        #expect(h.notifications(for: "app", in: over).contains { if case .routeChange(.override, _) = $0 { return true }; return false })
        h.send(.overrideOutput(SessionID("app"), toSpeaker: false))
        #expect(outputs(h.session("app").route) == ["jack"])
        #expect(inputs(h.session("app").route) == ["usb-mic"])
        h.send(.setPreferredInput(SessionID("app"), "mic"))
        #expect(inputs(h.session("app").route) == ["mic"])
    }

    @Test("no input left for a recorder: noSuitableRouteForCategory")
    func noSuitableRoute() {
        var h = Harness()
        h.laptop()
        h.app("arecord", recorder, direction: .input)
        let gone = h.send(.portGone("mic"))
        #expect(h.notifications(for: "arecord", in: gone).contains {
            if case .routeChange(.noSuitableRouteForCategory, _) = $0 { return true }; return false
        })
    }

    @Test("a call keeps to the headset while the user's chosen output is the monitor; its streams are moved there")
    func callStreamsAreMoved() {
        var h = Harness()
        h.plug(.builtInSpeaker, "speaker")
        h.plug(.builtInMic, "mic", .input)
        h.plug(.headphones, "jack")
        h.plug(.hdmi, "monitor")
        h.send(.userSelectedPort("monitor"))
        #expect(outputs(h.state.systemRoute) == ["monitor"])
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let appeared = h.send(.streamAppeared(StreamKey(.output, 5), session: SessionID("zoom"), running: true, device: "monitor"))
        #expect(outputs(h.session("zoom").route) == ["jack"])
        #expect(appeared.contains(.moveStream(StreamKey(.output, 5), toDevice: "jack")))
        h.send(.portGone("jack"))
        #expect(outputs(h.session("zoom").route) == ["monitor"], "no headset left: the user's choice")
    }

    @Test("a call's stream on a role sink of the server's own role-based policy is left there, not moved to the call's route")
    func streamOnAServerRoleTargetIsNotMoved() {
        var h = Harness()
        h.plug(.builtInSpeaker, "speaker")
        h.plug(.builtInMic, "mic", .input)
        h.plug(.headphones, "jack")
        h.plug(.hdmi, "monitor")
        h.send(.portAppeared(Port(PortDescription(type: .virtual, name: "Communication", uid: "loopback.sink.role.communication"),
                                  direction: .output, isServerRoleTarget: true)))
        h.send(.userSelectedPort("monitor"))
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let onRoleSink = h.send(.streamAppeared(StreamKey(.output, 5), session: SessionID("zoom"), running: true,
                                                device: "loopback.sink.role.communication"))
        #expect(outputs(h.session("zoom").route) == ["jack"])
        #expect(!onRoleSink.contains { if case .moveStream = $0 { true } else { false } }, "WirePlumber linked it there: not fought")
        let elsewhere = h.send(.streamAppeared(StreamKey(.output, 6), session: SessionID("zoom"), running: true, device: "monitor"))
        #expect(elsewhere.contains(.moveStream(StreamKey(.output, 6), toDevice: "jack")), "a stream on a device is still moved")
    }

    @Test("a device that comes back while waking from sleep gives wakeFromSleep")
    func wakeFromSleep() {
        var h = Harness()
        h.laptop()
        h.plug(.usbAudio, "dock")
        h.app("spotify", music)
        h.send(.sleep)
        h.send(.portGone("dock"))
        #expect(h.routeChanges().first?.reason == .wakeFromSleep)
        h.send(.wake)
        #expect(h.routeChanges().isEmpty, "waking alone moves nothing")
        h.now += .seconds(1)
        let back = h.plug(.usbAudio, "dock")
        #expect(h.routeChanges(in: back).first?.reason == .wakeFromSleep)
        h.now += .seconds(10)
        h.send(.portGone("dock"))
        #expect(h.routeChanges().first?.reason == .oldDeviceUnavailable)
    }

    @Test("the wake-up lasts the settings' window: a device just inside it is the wake's, just after it the user's")
    func wakeWindowFromSettings() {
        var settings = PolicySettings()
        settings.wakeWindow = .seconds(8)
        var h = Harness(machine: PolicyMachine(settings: settings))
        h.laptop()
        h.send(.sleep)
        h.send(.wake)
        h.now += .seconds(8)
        #expect(h.routeChanges(in: h.plug(.usbAudio, "dock")).first?.reason == .wakeFromSleep)
        h.now += .milliseconds(1)
        #expect(h.routeChanges(in: h.plug(.usbAudio, "headset")).first?.reason == .newDeviceAvailable)
    }
}

/// SPEC.md section 7: hardware values in force, and media services lost and reset.
struct HardwareAndMediaServicesTests {
    @Test("the values in force come from the devices on the route; preferences are requests")
    func hardwareValuesInForce() throws {
        var h = Harness()
        h.send(.portAppeared(Port(PortDescription(type: .usbAudio, name: "USB", uid: "usb"), direction: .output,
                                  format: DeviceFormat(sampleRate: 44_100, channels: 2, latency: 0.020, volume: 0.5))))
        h.send(.portAppeared(Port(PortDescription(type: .builtInMic, name: "Mic", uid: "mic"), direction: .input,
                                  format: DeviceFormat(sampleRate: 48_000, channels: 1, latency: 0.010))))
        h.declared("daw", SessionConfiguration(.playAndRecord))
        let values = try #require(h.machine.hardwareValues(
            for: SessionID("daw"), preferences: HardwarePreferences(sampleRate: 96_000, ioBufferDuration: 0.005, inputChannels: 2)))
        #expect(values.sampleRate == 44_100, "the device's rate, not the preferred 96 kHz")
        #expect(values.ioBufferDuration == 0.020)
        #expect(values.outputLatency == 0.020 && values.inputLatency == 0.010)
        #expect(values.inputChannels == 1, "a preference for more channels than the device has is not met")
        #expect(values.outputChannels == 2)
        #expect(values.outputVolume == 0.5)
        #expect(values.isInputAvailable)
        #expect(values.preferences.sampleRate == 96_000)
    }

    @Test("media services lost and reset: sessions are told, and holds are applied again to the streams that come back")
    func mediaServicesLostAndReset() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        h.declared("zoom", call)
        h.send(.activate(SessionID("zoom")))
        let lost = h.send(.mediaServicesLost)
        #expect(h.notifications(for: "spotify", in: lost).contains(.mediaServicesWereLost))
        #expect(h.notifications(for: "zoom", in: lost).contains(.mediaServicesWereLost))
        #expect(h.state.streams.isEmpty)
        let reset = h.send(.mediaServicesReset)
        #expect(h.notifications(for: "zoom", in: reset).contains(.mediaServicesWereReset))
        // The server announces its devices and streams again: the default device is set anew and the
        // interrupted music is muted again.
        let back = h.plug(.builtInSpeaker, "speaker")
        #expect(back.contains(.setDefaultDevice(.output, "speaker")))
        let again = h.send(.streamAppeared(StreamKey(.output, 40), session: SessionID("spotify"), running: true, device: "speaker"))
        #expect(again.contains(.mute(StreamKey(.output, 40))))
    }

    @Test("a call known only by its streams, lost with the server, ends after the grace period unless it comes back")
    func inferredCallLostWithTheServer() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        h.app("softphone", SessionConfiguration(.playAndRecord, mode: .voiceChat))
        #expect(h.status("spotify") == .interrupted(by: SessionID("softphone")))
        h.send(.mediaServicesLost)
        h.send(.mediaServicesReset)
        h.laptop()
        // Within the grace period the call still holds: the music app's new stream stays silent.
        let back = h.send(.streamAppeared(StreamKey(.output, 40), session: SessionID("spotify"), running: true, device: "speaker"))
        #expect(back.contains(.mute(StreamKey(.output, 40))))
        #expect(h.status("softphone") == .active)
        // No stream of the call came back: it ends, and the music resumes.
        let ended = h.advance(.seconds(5))
        #expect(h.status("softphone") == nil, "ended, and with no stream left forgotten")
        #expect(ended.contains(.sessionEnded(SessionID("softphone"))))
        #expect(ended.contains(.unmute(StreamKey(.output, 40))))
        #expect(h.nothingHeld)
    }

    /// Found by the suite under load: a grace period that ended while another event came first (the
    /// loop's batch held a device event, then the tick) was dropped from the deadlines, so no tick came
    /// for it and the call that had ended held the music muted for good.
    @Test("a deadline that passed while another event came first is still asked for, and served by the tick")
    func deadlinePassedBeforeItsTick() {
        var h = Harness()
        h.laptop()
        h.app("spotify", music)
        let call = h.app("softphone", SessionConfiguration(.playAndRecord, mode: .voiceChat))
        h.send(.streamGone(call))
        let due = h.now + h.machine.state.settings.gracePeriod
        #expect(h.machine.nextDeadline == due)
        h.now = due + .milliseconds(300)
        h.plug(.hdmi, "hdmi")
        #expect(h.machine.nextDeadline == due, "owed a tick though the clock passed it")
        let ended = h.send(.tick)
        #expect(h.status("softphone") == nil, "ended, and with no stream left forgotten")
        #expect(ended.contains(.sessionEnded(SessionID("softphone"))))
        #expect(ended.contains { if case .unmute = $0 { return true }; return false })
        #expect(h.machine.nextDeadline == nil)
    }
}

struct DataSourceTests {
    @Test("the preferred data source is selected on the input the session uses")
    func preferredDataSource() {
        var h = Harness()
        h.plug(.builtInSpeaker, "speaker")
        var mic = PortDescription(type: .builtInMic, name: "Built-in Audio", uid: "alsa_input.pci.analog-stereo",
                                  dataSources: [DataSourceDescription(id: "analog-input-internal-mic", name: "Internal Microphone"),
                                                DataSourceDescription(id: "analog-input-headset-mic", name: "Headset Microphone")],
                                  selectedDataSource: "analog-input-internal-mic")
        h.send(.portAppeared(Port(mic, direction: .input)))
        h.declared("recorder", recorder)
        h.send(.activate(SessionID("recorder")))
        let chosen = h.send(.setPreferredDataSource(SessionID("recorder"), port: mic.uid, dataSource: "analog-input-headset-mic"))
        #expect(chosen.contains(.setActivePort(device: mic.uid, port: "analog-input-headset-mic")))
        // The server confirms: the route's configuration changed, nothing is asked again.
        mic.selectedDataSource = "analog-input-headset-mic"
        let confirmed = h.send(.portChanged(Port(mic, direction: .input)))
        #expect(!confirmed.contains { if case .setActivePort = $0 { return true }; return false })
        #expect(h.notifications(for: "recorder", in: confirmed).contains {
            if case .routeChange(.routeConfigurationChange, _) = $0 { return true }; return false
        })
        // An unknown data source is ignored.
        let unknown = h.send(.setPreferredDataSource(SessionID("recorder"), port: mic.uid, dataSource: "nope"))
        #expect(!unknown.contains { if case .setActivePort = $0 { return true }; return false })
    }
}

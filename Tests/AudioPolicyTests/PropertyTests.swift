import AudioPolicy
import PropertyBased
import Testing

/// Invariants of the policy core over random event sequences (thousands of them in CI).
struct PropertyTests {
    static let configurations: [SessionConfiguration] = [
        music, call, navigation, game, podcast, recorder, screenReader, SessionConfiguration(.soloAmbient),
        SessionConfiguration(.playAndRecord, options: .mixWithOthers), SessionConfiguration(.playAndRecord, mode: .videoChat),
        SessionConfiguration(.multiRoute), SessionConfiguration(.playback, mode: .measurement),
    ]
    static let ports: [Port] = [
        Harness.port(.builtInSpeaker, "speaker"), Harness.port(.builtInMic, "mic", .input),
        Harness.port(.headphones, "jack"), Harness.port(.usbAudio, "usb"), Harness.port(.hdmi, "hdmi"),
        Harness.port(.bluetoothA2DP, "bt", bluetooth: BluetoothCard(card: "bt", a2dpProfile: "a2dp-sink",
                                                                    hfpProfile: "headset-head-unit", activeProfile: "a2dp-sink")),
        Harness.port(.bluetoothHFP, "bt-mic", .input), Harness.port(.airPlay, "airplay"),
    ]

    /// Turns a number into an event of a small world: 5 sessions, 8 streams, 8 ports. Codes from 8000 on
    /// are the meters' reports and apps whose calls are inferred, from 12000 on the microphone's mutes and
    /// its meters' reports (the codes below keep their meaning, so that the counterexamples kept as tests
    /// stay what they were).
    static func event(_ code: Int) -> PolicyEvent {
        if code >= 12000 {
            let c = code - 12000
            let i = (c / 4) % 5
            let flag = (c / 20) % 2 == 0
            switch c % 4 {
            case 0: return .inputMuted(flag)
            case 1: return .setInputMuted(SessionID("s\(i)"), flag)
            case 2: return .appInputMuted("app\(i)", flag)
            default: return .streamHeard(StreamKey(.input, UInt32((c / 40) % 8)), flag, silentFor: .milliseconds(Int64((c / 320) % 3) * 100))
            }
        }
        if code >= 8000 {
            let c = code - 8000
            let stream = StreamKey(c % 3 == 0 ? .input : .output, UInt32((c / 3) % 8))
            switch (c / 24) % 4 {
            case 0: return .streamHeard(stream, true)
            case 1: return .streamHeard(stream, false)
            case 2: return .meterFailed(stream)
            default:
                let i = (c / 96) % 5
                return .declare(SessionDeclaration(SessionID("s\(i)"), app: "app\(i)", origin: .inferred,
                                                   configuration: configurations[(c / 480) % configurations.count], infersCalls: true))
            }
        }
        let kind = code % 20
        let i = (code / 20) % 5
        let session = SessionID("s\(i)")
        let configuration = configurations[(code / 100) % configurations.count]
        let stream = StreamKey((code / 100) % 3 == 0 ? .input : .output, UInt32((code / 20) % 8))
        let port = ports[(code / 100) % ports.count]
        let flag = (code / 2000) % 2 == 0
        switch kind {
        case 0, 1:
            var declaration = SessionDeclaration(session, app: "app\(i)", origin: kind == 0 ? .inferred : .declared, configuration: configuration)
            declaration.names = ["app\(i)"]
            return .declare(declaration)
        case 2: return .activate(session)
        case 3: return .deactivate(session, .notifyOthersOnDeactivation)
        case 4: return .deactivate(session, [])
        case 5, 6: return .streamAppeared(stream, session: SessionID("s\((code / 100) % 5)"), running: flag || kind == 5, device: nil)
        case 7: return .streamRunning(stream, flag)
        case 8: return .streamGone(stream)
        case 9: return .userChangedStream(stream, mute: flag, volume: !flag || (code / 4000) % 2 == 0)
        case 10:
            // (From 4000 on: the shell's word on a pause sent because headphones went away.)
            if code >= 4000 { return flag ? .pauseOnItsWay(session) : .pauseShown(session) }
            return flag ? .userPaused(session) : .userPlayed(session)
        case 11: return .portAppeared(port)
        case 12: return .portGone(port.uid)
        case 13: return .userSelectedPort(port.uid)
        case 14: return .silentMode(flag)
        case 15: return .screenLocked(flag)
        case 16: return .tick
        case 17: return flag ? .mediaServicesLost : .mediaServicesReset
        case 18: return .setCategory(session, configuration)
        default: return flag ? .remove(session) : .setMicrophone(session, allowed: (code / 4000) % 2 == 0)
        }
    }

    /// What the shell would have on the server if it carried out every action: per stream, muted and ducked.
    struct Shadow {
        var muted: Set<StreamKey> = []
        var ducked: [StreamKey: Double] = [:]
    }

    /// Runs a sequence, checking the invariants after every event; returns the harness at the end.
    static func run(_ codes: [Int]) -> Harness {
        var h = Harness()
        var shadow = Shadow()
        for code in codes {
            let event = event(code)
            h.now += .milliseconds(200 * Int64((code / 20) % 5))
            let actions = h.send(event)
            // The shell forgets what the server lost with a stream or with itself; everything else the
            // core's actions say (what the user took over, what a removed session left).
            switch event {
            case .streamGone(let key):
                shadow.muted.remove(key); shadow.ducked[key] = nil
            case .mediaServicesLost:
                shadow = Shadow()
            default: break
            }
            var routeNotices: [SessionID: Int] = [:]
            for action in actions {
                switch action {
                case .mute(let key):
                    #expect(!shadow.muted.contains(key), "muted \(key) twice")
                    shadow.muted.insert(key)
                case .unmute(let key):
                    #expect(shadow.muted.contains(key), "unmuted \(key), which we had not muted")
                    shadow.muted.remove(key)
                case .duck(let key, let level, let ramp):
                    #expect(level > 0 && level < 1)
                    // One rule for the ramp: up to a milder duck as an unduck goes up, else down.
                    let up = shadow.ducked[key].map { level > $0 } ?? false
                    #expect(ramp == (up ? h.state.settings.duckRampUp : h.state.settings.duckRampDown), "\(key) ducked to \(level) over \(ramp)")
                    #expect(shadow.ducked[key] != level, "ducked \(key) to the level it had")
                    shadow.ducked[key] = level
                case .unduck(let key, _):
                    #expect(shadow.ducked[key] != nil, "unducked \(key), which we had not ducked")
                    shadow.ducked[key] = nil
                case .letGo(let key, let mute, let volume):
                    #expect(mute || volume)
                    #expect(!mute || shadow.muted.contains(key), "let go of a mute on \(key), which we had not muted")
                    #expect(!volume || shadow.ducked[key] != nil, "let go of a duck on \(key), which we had not ducked")
                    if mute { shadow.muted.remove(key) }
                    if volume { shadow.ducked[key] = nil }
                case .notify(let id, .routeChange(let reason, let previous)):
                    routeNotices[id, default: 0] += 1
                    #expect(previous != h.state.sessions[id]?.route, "a route change to the same route (\(reason))")
                case .logRouteChange(let change):
                    #expect(change.previousRoute != change.route || change.cause.contains("guard"))
                default: break
                }
            }
            #expect(routeNotices.values.allSatisfy { $0 == 1 }, "one reason per route change")
            // Time: a tick serves every deadline it is due for (none is left behind for a tick that then
            // never comes, nor asked for again and again).
            if event == .tick { #expect(h.machine.nextDeadline.map { $0 > h.now } ?? true, "a deadline left behind by the tick") }
            // Calls always win: a call is interrupted only by another call.
            for session in h.state.sessions.values {
                if case .interrupted(let by) = session.status, session.isCall {
                    #expect(h.state.sessions[by]?.isCall == true, "call \(session.id) interrupted by \(by)")
                }
            }
            // A session is interrupted only by one that still plays, or waits to (a chain of interruptions),
            // or was played again and is awaited a while (`resumeAwaitedUntil`, until its tick).
            for session in h.state.sessions.values {
                if case .interrupted(let by) = session.status {
                    let status = h.state.sessions[by]?.status
                    let waits = if case .interrupted = status { true } else { false }
                    let awaited = status == .inactive && h.state.sessions[by]?.resumeAwaitedUntil != nil
                    #expect(status == .active || waits || awaited, "\(session.id) interrupted by \(by), which is \(status.map { "\($0)" } ?? "gone")")
                }
            }
            // Meters: asked for exactly the streams whose sound counts, and only running outputs of
            // inferred sessions are metered; a capture's (its microphone's) only for a declared call,
            // active, allowed the microphone, whose input is muted, one capture per call.
            var speechMeters: [SessionID: Int] = [:]
            for stream in h.state.streams.values where stream.meterAsked {
                let session = h.state.sessions[stream.session]
                if stream.key.direction == .input {
                    #expect(session.map { $0.origin == .declared && $0.status.isActive && $0.activeConfiguration.isCall && $0.microphoneAllowed
                                          && h.machine.isInputMuted($0.id) } == true, "\(stream.key)'s microphone metered in \(stream.session)")
                    speechMeters[stream.session, default: 0] += 1
                } else {
                    #expect(stream.isRunning && session?.origin == .inferred,
                            "\(stream.key) metered while \(stream.isRunning ? "running" : "corked") in \(stream.session)")
                }
            }
            #expect(speechMeters.values.allSatisfy { $0 == 1 }, "one microphone meter per call: \(speechMeters)")
            // Speech while muted only where the microphone is metered.
            for session in h.state.sessions.values where session.mutedSpeech != .quiet {
                #expect(speechMeters[session.id] == 1, "\(session.id): \(session.mutedSpeech) with no meter")
            }
            // One action per change: what the shell was told is what the core asked last.
            var told: [StreamKey: Bool] = [:]
            for action in actions { if case .meter(let key, let on) = action { told[key] = on } }
            for (key, on) in told where h.state.streams[key] != nil { #expect(h.state.streams[key]?.meterAsked == on) }
            // An inferred call is a call, standing for a classification that is not one.
            for session in h.state.sessions.values where session.inferredCall != nil {
                #expect(session.configuration.isCall && session.origin == .inferred && session.infersCalls
                        && session.inferredCall?.classified.isCall == false, "\(session.id): inferred call")
            }
            // Inferred sessions with nothing left are forgotten (after any event but a declaration), and
            // said so.
            if case .declare = event {} else {
                let withStreams = Set(h.state.streams.values.map(\.session))
                for session in h.state.sessions.values where session.origin == .inferred && session.status == .inactive
                    && session.deactivatesAt == nil && !withStreams.contains(session.id) {
                    Issue.record("\(session.id) kept with nothing left")
                }
            }
            for case .sessionEnded(let id) in actions { #expect(h.state.sessions[id] == nil, "\(id) said ended and kept") }
            // What we hold is what we told the shell to do, and nothing is left held where the core
            // keeps no record.
            for stream in h.state.streams.values {
                #expect(stream.heldMute == shadow.muted.contains(stream.key), "\(stream.key) mute bookkeeping")
                #expect(stream.heldDuck == shadow.ducked[stream.key], "\(stream.key) duck bookkeeping")
            }
            for key in shadow.muted where h.state.streams[key] == nil { Issue.record("\(key) left muted, with no record") }
            for key in shadow.ducked.keys where h.state.streams[key] == nil { Issue.record("\(key) left ducked, with no record") }
        }
        return h
    }

    @Test("invariants hold after every event of random sequences")
    func invariantsHold() async {
        await propertyCheck(count: 2000, input: Gen.int(in: 0...13999).array(of: 0...60)) { codes in
            _ = Self.run(codes)
        }
    }

    @Test("after every interrupter and ducker has ended, nothing is muted or ducked by us")
    func nothingLeftHeld() async {
        await propertyCheck(count: 2000, input: Gen.int(in: 0...13999).array(of: 0...60)) { codes in
            Self.checkNothingLeftHeld(codes)
        }
    }

    /// Found in CI by `nothingLeftHeld`: a player (s4) interrupted by a declared session (s2), which a
    /// call (s1) then interrupts; s2 asks to be active again during the call and is refused. It used to
    /// become `refused` and stop waiting, and s4, interrupted by it, was left muted for good.
    @Test("a refused activation of an interrupted session keeps the chain of interruptions (CI's counterexample)")
    func refusedActivationKeepsTheChain() {
        let h = Self.checkNothingLeftHeld([1841, 2380, 3558, 7320, 925, 542, 4185, 1942])
        #expect(h.state.sessions[SessionID("s4")] == nil || h.state.sessions[SessionID("s4")]?.status != .interrupted(by: SessionID("s2")))
    }

    /// The microphone's mutes end too (for every app, each app's by name, each session's own): they
    /// hold captures as long as the user or the app wants.
    static func unmuteMicrophones(_ h: inout Harness) {
        h.send(.inputMuted(false))
        for i in 0..<5 { h.send(.appInputMuted("app\(i)", false)) }
        for id in h.state.sessions.keys.sorted() { h.send(.setInputMuted(id, false)) }
    }

    /// Runs the codes, then ends every interrupter and ducker, and checks that nothing is held.
    @discardableResult
    static func checkNothingLeftHeld(_ codes: [Int]) -> Harness {
        var h = Self.run(codes)
        if !h.state.mediaServicesAvailable { h.send(.mediaServicesReset) }
        h.send(.silentMode(false))
        h.send(.screenLocked(false))
        Self.unmuteMicrophones(&h)
        for id in h.state.sessions.keys.sorted() {
            // (One removed may end others with it: those left with nothing to wait for.)
            guard let session = h.state.sessions[id] else { continue }
            let c = session.configuration
            if !c.isMixable || c.effectiveOptions.contains(.duckOthers) || c.category == .record
                || !session.activeConfiguration.isMixable || session.activeConfiguration.effectiveOptions.contains(.duckOthers) {
                h.send(.remove(id))
            } else {
                h.send(.setMicrophone(id, allowed: true))
            }
        }
        h.now += .seconds(5)
        h.send(.tick)
        #expect(h.nothingHeld, "\(h.state.streams.values.filter { $0.heldMute || $0.heldDuck != nil })")
        return h
    }

    @Test("after the streams of every interrupter and ducker have gone, nothing is muted or ducked by us (the shell's way)")
    func nothingLeftHeldOnceTheirStreamsAreGone() async {
        await propertyCheck(count: 2000, input: Gen.int(in: 0...13999).array(of: 0...60)) { codes in
            Self.checkNothingLeftHeldOnceTheirStreamsAreGone(codes)
        }
    }

    /// Found by `nothingLeftHeldOnceTheirStreamsAreGone`: a screen reader's app recording while it
    /// played (an inferred call) lost its streams; at the tick that ended its grace, the call ended
    /// first and gave it back its ducking classification while still active, which pushed its grace
    /// back and ducked another app's stream for another half second.
    @Test("an inferred call whose app has gone ends inactive, ducking no one (a local run's counterexample)")
    func inferredCallEndsInactive() {
        // (8004: the output heard, as a call is inferred only from a meter's word now.)
        let codes = [9320, 5305, 4845, 8004, 4820, 7126, 2720]
        #expect(Self.run(Array(codes.prefix(4))).state.sessions.values.contains { $0.inferredCall != nil }, "the counterexample's call begins")
        Self.checkNothingLeftHeldOnceTheirStreamsAreGone(codes)
    }

    static func checkNothingLeftHeldOnceTheirStreamsAreGone(_ codes: [Int]) {
        do {
            // What the shell sends: no activation, deactivation or category of its own (kinds 2-4, 18).
            var h = Self.run(codes.filter { $0 >= 8000 || ![2, 3, 4, 18].contains($0 % 20) })
            if !h.state.mediaServicesAvailable { h.send(.mediaServicesReset) }
            h.send(.silentMode(false))
            h.send(.screenLocked(false))
            Self.unmuteMicrophones(&h)
            // Declared sessions end as apps end them; inferred ones only by their streams going.
            for id in h.state.sessions.keys.sorted() where h.state.sessions[id]?.origin == .declared { h.send(.remove(id)) }
            for (key, stream) in h.state.streams.sorted(by: { $0.key < $1.key }) {
                guard let session = h.state.sessions[stream.session] else { continue }
                let c = session.configuration
                if !c.isMixable || c.effectiveOptions.contains(.duckOthers) || c.category == .record
                    || !session.activeConfiguration.isMixable || session.activeConfiguration.effectiveOptions.contains(.duckOthers) {
                    h.send(.streamGone(key))
                } else {
                    h.send(.setMicrophone(stream.session, allowed: true))
                }
            }
            h.now += .seconds(5)
            h.send(.tick)
            #expect(h.nothingHeld, "\(h.state.streams.values.filter { $0.heldMute || $0.heldDuck != nil })")
        }
    }

    @Test("every action undoes to exactly the state before: interrupt then end leaves the streams as they were")
    func interruptionUndoes() async {
        await propertyCheck(count: 1000, input: Gen.int(in: 0...13999).array(of: 0...40)) { codes in
            var h = Self.run(codes)
            guard h.state.mediaServicesAvailable else { return }
            // A category set while active waits for the next activation, which resuming after the
            // call is: then the streams may rightly change. Judge only sequences without one.
            guard h.state.sessions.values.allSatisfy({ $0.configuration == $0.activeConfiguration }) else { return }
            // An inferred session active with no running stream is on its way out (its grace period):
            // resumed after the call it ends, and whom it interrupted resume, which may rightly hold
            // other streams (a recorder silencing playback). Judge only sequences without one (a local
            // run's counterexample [2231, 1021, 7625, 1740, 1745, 0, 3902] was one such).
            guard h.state.sessions.values.allSatisfy({ session in
                session.origin != .inferred || !session.status.isActive || h.machine.isPlaying(session.id)
            }) else { return }
            // A session waiting on a declared one that the call interrupts waits no more once the call
            // ends: the declared app activates again by itself or not at all, and the waiter resumes,
            // which may rightly hold other streams (a recorder silencing playback). Judge only sequences
            // without one (counterexample [4911, 4941, 6280, 10760, 4445, 4305, 2442]).
            guard !h.state.sessions.values.contains(where: { session in
                if case .interrupted(let by) = session.status { h.state.sessions[by]?.origin == .declared } else { false }
            }) else { return }
            let before = h.state.streams.mapValues { ($0.heldMute, $0.heldDuck) }
            h.send(.declare(SessionDeclaration(SessionID("caller"), app: "caller", origin: .declared, configuration: call)))
            h.send(.activate(SessionID("caller")))
            h.send(.deactivate(SessionID("caller"), .notifyOthersOnDeactivation))
            h.send(.remove(SessionID("caller")))
            let after = h.state.streams.mapValues { ($0.heldMute, $0.heldDuck) }
            // Streams of sessions the call interrupted and that resumed are as before; nothing new is held.
            for (key, held) in after where before[key] != nil {
                #expect(!held.0 || before[key]!.0, "\(key) left muted by the call")
                #expect(held.1 == nil || before[key]!.1 != nil, "\(key) left ducked by the call")
            }
        }
    }
}


import AudioPolicy

/// Drives the policy machine through a story, with a clock the test moves.
struct Harness {
    /// Meters asked for at a stream's start (`meterAfter` zero), so that a story's streams are heard at
    /// once; `ActivityTests` tells the wait before a meter on its own.
    var machine = PolicyMachine(settings: {
        var settings = PolicySettings()
        settings.meterAfter = .zero
        settings.callMeterAfter = .zero
        return settings
    }())
    var now: Duration = .seconds(100)
    var actions: [PolicyAction] = []
    var nextStream: UInt32 = 1

    @discardableResult
    mutating func send(_ event: PolicyEvent) -> [PolicyAction] {
        actions = machine.handle(event, at: now)
        return actions
    }

    /// Moves the clock and delivers the tick the machine asked for, if it is due.
    @discardableResult
    mutating func advance(_ duration: Duration) -> [PolicyAction] {
        now += duration
        return send(.tick)
    }

    var state: PolicyState { machine.state }

    func session(_ id: String) -> Session { machine.state.sessions[SessionID(id)]! }
    /// nil: the core has no such session (never declared, or an inferred one that ended and was forgotten).
    func status(_ id: String) -> SessionStatus? { machine.state.sessions[SessionID(id)]?.status }
    func stream(_ key: StreamKey) -> StreamRecord? { machine.state.streams[key] }

    // MARK: building the world

    static func port(_ type: PortType, _ uid: String, _ direction: StreamKey.Direction = .output,
                     bluetooth: BluetoothCard? = nil) -> Port {
        Port(PortDescription(type: type, name: uid, uid: uid), direction: direction, bluetooth: bluetooth)
    }

    @discardableResult
    mutating func plug(_ type: PortType, _ uid: String, _ direction: StreamKey.Direction = .output,
                       bluetooth: BluetoothCard? = nil) -> [PolicyAction] {
        send(.portAppeared(Self.port(type, uid, direction, bluetooth: bluetooth)))
    }

    /// A laptop: speaker and internal microphone.
    mutating func laptop() {
        plug(.builtInSpeaker, "speaker")
        plug(.builtInMic, "mic", .input)
    }

    /// An app that does not use the library: its session, inferred from a stream's classification,
    /// and a running stream. Returns the stream.
    @discardableResult
    mutating func app(_ id: String, _ configuration: SessionConfiguration, duckLevel: Double? = nil,
                      direction: StreamKey.Direction = .output, heard: Bool = true, infersCalls: Bool = false) -> StreamKey {
        send(.declare(SessionDeclaration(SessionID(id), app: id, origin: .inferred, configuration: configuration,
                                         duckLevel: duckLevel, infersCalls: infersCalls)))
        return play(id, direction: direction, heard: heard)
    }

    /// Starts another running stream of the session. `heard`: it plays sound (its meter, if the core
    /// asks for one, says so at once); false for a stream that writes silence.
    @discardableResult
    mutating func play(_ id: String, direction: StreamKey.Direction = .output, heard: Bool = true) -> StreamKey {
        let key = StreamKey(direction, nextStream)
        nextStream += 1
        let appeared = send(.streamAppeared(key, session: SessionID(id), running: true, device: nil))
        if appeared.contains(.meter(key, true)) {
            // (What the shell would do: the meter's first block, in the same instant.)
            let first = send(.streamHeard(key, heard))
            actions = appeared + first
        }
        return key
    }

    /// A stream's meter says it is heard (true) or silent (false).
    @discardableResult
    mutating func hear(_ key: StreamKey, _ heard: Bool, silentFor: Duration = .zero) -> [PolicyAction] {
        send(.streamHeard(key, heard, silentFor: silentFor))
    }

    /// An app that uses the library and declares its session.
    mutating func declared(_ id: String, _ configuration: SessionConfiguration) {
        send(.declare(SessionDeclaration(SessionID(id), app: id, origin: .declared, configuration: configuration)))
    }

    /// Stops a stream, and lets the grace period pass.
    mutating func stop(_ key: StreamKey) {
        send(.streamGone(key))
        advance(.seconds(1))
    }

    func notifications(for id: String, in actions: [PolicyAction]? = nil) -> [SessionNotification] {
        (actions ?? self.actions).compactMap {
            if case .notify(let who, let n) = $0, who == SessionID(id) { return n }
            return nil
        }
    }

    func routeChanges(in actions: [PolicyAction]? = nil) -> [RouteChange] {
        (actions ?? self.actions).compactMap { if case .logRouteChange(let c) = $0 { return c }; return nil }
    }

    /// Every stream is exactly as the user left it: nothing muted or ducked by us.
    var nothingHeld: Bool {
        machine.state.streams.values.allSatisfy { !$0.heldMute && $0.heldDuck == nil }
    }
}

extension SessionNotification {
    static let began = SessionNotification.interruption(type: .began, options: [], reason: .default)
    static let endedResume = SessionNotification.interruption(type: .ended, options: .shouldResume, reason: .default)
    static let ended = SessionNotification.interruption(type: .ended, options: [], reason: .default)
}

let music = SessionConfiguration(.playback)
let call = SessionConfiguration(.playAndRecord, mode: .voiceChat)
let navigation = SessionConfiguration(.playback, mode: .spokenAudio, options: .duckOthers)
let game = SessionConfiguration(.ambient)
let podcast = SessionConfiguration(.playback, mode: .spokenAudio)
let recorder = SessionConfiguration(.record)
let screenReader = SessionConfiguration(.playback, mode: .spokenAudio, options: [.duckOthers, .interruptSpokenAudioAndMixWithOthers])

public import AudioPolicy
import AudioSessionWire
import DBus
import Synchronization

/// An app's audio session, as AVAudioSession's: a category, a mode and options, activated and
/// deactivated, and told what happens to it (interruptions, route changes, the sound server lost and
/// back). `audiosessiond` arbitrates between the apps of the desktop; this talks to it on the session
/// bus (`org.audiosession.Agent1`).
///
///     let session = AudioSession.shared
///     try await session.setCategory(.playback)
///     try await session.setActive(true)
///     for await interruption in session.interruptions() { ... }
///
/// Without an agent on the session bus every call throws `AudioSession.Error` with the code
/// `mediaServicesFailed` ("no audiosessiond on the session bus"): nothing arbitrates, and the app may
/// play as it would without a session. The notification streams then stay silent. The first call after
/// an agent appears declares the session.
public final class AudioSession: Sendable {
    /// The app's session on the user's session bus.
    public static let shared = AudioSession()

    private let address: String?
    private struct State {
        var connection: DBusConnection?
        var path: String?
        var listeners: [Int: AsyncStream<SessionNotification>.Continuation] = [:]
        var nextListener = 0
    }
    private let state = Mutex(State())

    /// A session on the bus at `busAddress` (nil: the session bus of the environment, as `shared`).
    public init(busAddress: String? = nil) { address = busAddress }

    deinit { state.withLock { $0.connection?.close() } }

    // MARK: what the app asks

    public func setCategory(_ category: AudioPolicy.Category, mode: Mode = .default, options: CategoryOptions = []) async throws(Error) {
        _ = try await call("SetCategory", Wire.setCategoryArguments(SessionConfiguration(category, mode: mode, options: options)))
    }

    public func setActive(_ active: Bool, options: SetActiveOptions = []) async throws(Error) {
        _ = try await call("SetActive", [.bool(active), .array(elementSignature: "s", SessionWords.setActiveOptionNames(options).map(DBusValue.string))])
    }

    /// `.speaker` sends the output to the built-in speaker while the session is active; `.none` undoes it.
    public enum PortOverride: String, Sendable { case none, speaker }

    public func overrideOutputAudioPort(_ port: PortOverride) async throws(Error) {
        _ = try await call("OverrideOutputAudioPort", [.string(port.rawValue)])
    }

    /// An input port by its uid (`availableInputs`); nil for no preference.
    public func setPreferredInput(_ uid: String?) async throws(Error) {
        _ = try await call("SetPreferredInput", [.string(uid ?? "")])
    }

    /// A data source of an input by its id; nil for no preference.
    public func setPreferredDataSource(_ id: String?) async throws(Error) {
        _ = try await call("SetPreferredDataSource", [.string(id ?? "")])
    }

    public func setPreferredSampleRate(_ hertz: Double) async throws(Error) {
        _ = try await call("SetPreferredSampleRate", [.double(hertz)])
    }

    public func setPreferredIOBufferDuration(_ seconds: Double) async throws(Error) {
        _ = try await call("SetPreferredIOBufferDuration", [.double(seconds)])
    }

    /// Asks whether the app may record: what the user decided (`audiosessionctl permission APP ...`, or
    /// the desktop portal's store for a Flatpak app); undetermined is allowed. Denied, the app records
    /// silence.
    public func requestRecordPermission() async throws(Error) -> Bool {
        try await call("RequestRecordPermission", []).first?.bool ?? false
    }

    /// What the app plays (title, artists, album, length, cover, and where it is: `elapsed`, said again
    /// when it pauses, plays or seeks), for the desktop's media controls while its session is now
    /// playing (the agent's MPRIS player shows it): MPNowPlayingInfoCenter's.
    public func setNowPlayingInfo(_ info: NowPlayingInfo) async throws(Error) {
        _ = try await call("SetNowPlayingInfo", [.dictionary(keySignature: "s", valueSignature: "v", Wire.metadata(info))])
    }

    /// Mutes the app's own input (its capture streams), or no longer: AVAudioApplication's input mute.
    /// Its input is muted also while the user mutes the microphone for every app (`isInputMuted`).
    public func setInputMuted(_ muted: Bool) async throws(Error) {
        _ = try await call("SetInputMuted", [.bool(muted)])
    }

    // MARK: what the app reads

    public var category: AudioPolicy.Category { get async throws(Error) { AudioPolicy.Category(rawValue: try await property("Category").string ?? "") } }
    public var mode: Mode { get async throws(Error) { Mode(rawValue: try await property("Mode").string ?? "") } }
    public var categoryOptions: CategoryOptions {
        get async throws(Error) {
            let names = try await property("Options").array?.compactMap(\.string) ?? []
            return names.reduce(into: CategoryOptions()) { set, name in CategoryOptions(name: name).map { set.formUnion($0) } }
        }
    }
    public var isActive: Bool { get async throws(Error) { try await property("IsActive").bool ?? false } }
    public var isOtherAudioPlaying: Bool { get async throws(Error) { try await property("IsOtherAudioPlaying").bool ?? false } }
    public var secondaryAudioShouldBeSilencedHint: Bool {
        get async throws(Error) { try await property("SecondaryAudioShouldBeSilencedHint").bool ?? false }
    }
    public var currentRoute: RouteDescription { get async throws(Error) { Wire.route(from: try await property("CurrentRoute")) } }
    public var availableInputs: [PortDescription] { get async throws(Error) { Wire.ports(from: try await property("AvailableInputs")) } }
    public var sampleRate: Double { get async throws(Error) { try await property("SampleRate").double ?? 0 } }
    public var ioBufferDuration: Double { get async throws(Error) { try await property("IOBufferDuration").double ?? 0 } }
    public var outputVolume: Double { get async throws(Error) { try await property("OutputVolume").double ?? 0 } }
    /// Seconds, of the devices on the session's route.
    public var inputLatency: Double { get async throws(Error) { try await property("InputLatency").double ?? 0 } }
    public var outputLatency: Double { get async throws(Error) { try await property("OutputLatency").double ?? 0 } }

    /// Its input is muted: by its own `setInputMuted`, or the microphone for every app.
    public var isInputMuted: Bool { get async throws(Error) { try await property("InputMuted").bool ?? false } }

    /// What the user decided about the app recording.
    public enum RecordPermission: String, Sendable { case undetermined, denied, granted }
    public var recordPermission: RecordPermission {
        get async throws(Error) { RecordPermission(rawValue: try await property("RecordPermission").string ?? "") ?? .undetermined }
    }

    // MARK: what the app is told

    /// Interruptions of this session: began (pause), ended (play again only with `.shouldResume`).
    public func interruptions() -> AsyncStream<Interruption> {
        notifications { if case .interruption(let type, let options, let reason) = $0 { Interruption(type: type, options: options, reason: reason) } else { nil } }
    }

    /// The session's route changed, with why, and the route before.
    public func routeChanges() -> AsyncStream<RouteChange> {
        notifications { if case .routeChange(let reason, let previous) = $0 { RouteChange(reason: reason, previousRoute: previous) } else { nil } }
    }

    public func silenceSecondaryAudioHints() -> AsyncStream<SilenceSecondaryAudioHintType> {
        notifications { if case .silenceSecondaryAudioHint(let type) = $0 { type } else { nil } }
    }

    /// The sound server went away: what the session had is gone until `mediaServicesWereReset`.
    public func mediaServicesWereLost() -> AsyncStream<Void> {
        notifications { if case .mediaServicesWereLost = $0 { () } else { nil } }
    }

    public func mediaServicesWereReset() -> AsyncStream<Void> {
        notifications { if case .mediaServicesWereReset = $0 { () } else { nil } }
    }

    /// A media key (or `audiosessionctl play-pause` ...) while the session is now playing: the session
    /// that last started non-mixable playback and has not ended, interrupted or paused included.
    public enum RemoteCommand: String, Sendable, Hashable {
        case play, pause, stop, next, previous
        case togglePlayPause = "play-pause"
    }

    /// The media keys' commands for this session, while it is now playing; unknown ones are skipped.
    public func remoteCommands() -> AsyncStream<RemoteCommand> {
        notifications { if case .remoteCommand(let word) = $0 { RemoteCommand(rawValue: word) } else { nil } }
    }

    /// Its input's mute changed (while its category records): true once muted, false once not.
    public func inputMuteChanges() -> AsyncStream<Bool> {
        notifications { if case .inputMuteChanged(let muted) = $0 { muted } else { nil } }
    }

    /// Someone speaking into the microphone while the session's input is muted (a call, active): said
    /// when speech starts (true) and when it ends (false), so that the app can say "you are muted".
    public func mutedSpeechActivity() -> AsyncStream<Bool> {
        notifications { if case .mutedSpeechActivity(let started) = $0 { started } else { nil } }
    }

    public struct Interruption: Sendable, Hashable {
        public var type: InterruptionType
        public var options: InterruptionOptions
        public var reason: InterruptionReason
        public init(type: InterruptionType, options: InterruptionOptions = [], reason: InterruptionReason = .default) {
            self.type = type; self.options = options; self.reason = reason
        }
    }

    public struct RouteChange: Sendable, Hashable {
        public var reason: RouteChangeReason
        public var previousRoute: RouteDescription
        public init(reason: RouteChangeReason, previousRoute: RouteDescription) { self.reason = reason; self.previousRoute = previousRoute }
    }

    /// A refusal, with Apple's code (`SessionError.Code`: `insufficientPriority`, `incompatibleCategory`
    /// ...) and a message a person can read.
    public struct Error: Swift.Error, Sendable, Hashable, CustomStringConvertible {
        public var code: SessionError.Code
        public var message: String
        public init(code: SessionError.Code, message: String) { self.code = code; self.message = message }
        public var description: String { "\(code): \(message)" }
    }

    // MARK: the bus

    static let agent = Wire.busName
    static let interface = Wire.sessionInterface

    /// The connection and the session's object, made on first use (and again after the agent or the
    /// bus went away).
    private func session() async throws(Error) -> (DBusConnection, String) {
        if let ready = state.withLock({ state in state.connection.flatMap { c in state.path.map { (c, $0) } } }) { return ready }
        let connection: DBusConnection
        do {
            connection = try DBusConnection.connect(.session, address: address, name: "audiosession")
        } catch {
            throw Error(code: .mediaServicesFailed, message: "no session bus: \(error)")
        }
        do {
            guard try await connection.callDaemon("NameHasOwner", [.string(Self.agent)]).first?.bool == true else {
                connection.close()
                throw Error(code: .mediaServicesFailed, message: "no audiosessiond on the session bus (nobody owns \(Self.agent))")
            }
            guard let path = try await connection.call(Self.agent, Wire.agentPath, Wire.agentInterface, "GetSession").first?.string else {
                connection.close()
                throw Error(code: .unspecified, message: "the agent gave no session")
            }
            // Its signals, in order, to every listener.
            let signals = connection.signals(matching: "type='signal',sender='\(Self.agent)',interface='\(Self.interface)',path='\(path)'")
            Task { [weak self] in
                for await signal in signals {
                    guard let notification = Wire.notification(member: signal.member, body: signal.body) else { continue }
                    guard let self else { return }
                    for listener in self.state.withLock({ Array($0.listeners.values) }) { listener.yield(notification) }
                }
            }
            let kept = state.withLock { state -> (DBusConnection, String) in
                if let c = state.connection, let p = state.path { return (c, p) }  // (made meanwhile by another call)
                state.connection = connection
                state.path = path
                return (connection, path)
            }
            if kept.0 !== connection { connection.close() }
            return kept
        } catch let error as Error {
            throw error
        } catch {
            connection.close()
            throw Self.error(error)
        }
    }

    private func call(_ member: String, _ arguments: [DBusValue]) async throws(Error) -> [DBusValue] {
        let (connection, path) = try await session()
        do {
            return try await connection.call(Self.agent, path, Self.interface, member, arguments)
        } catch {
            if case DBusError.remote(let name, _) = error, name.hasPrefix("org.freedesktop.DBus.Error.") { forget(connection) }
            throw Self.error(error)
        }
    }

    private func property(_ name: String) async throws(Error) -> DBusValue {
        let (connection, path) = try await session()
        do {
            guard let value = try await connection.call(Self.agent, path, "org.freedesktop.DBus.Properties", "Get",
                                                        [.string(Self.interface), .string(name)]).first else {
                throw Error(code: .unspecified, message: "no value for \(name)")
            }
            if case .variant(let inner) = value { return inner }
            return value
        } catch let error as Error {
            throw error
        } catch {
            throw Self.error(error)
        }
    }

    /// The agent or the bus went away: the next call declares the session again.
    private func forget(_ connection: DBusConnection) {
        let gone = state.withLock { state -> Bool in
            guard state.connection === connection else { return false }
            state.connection = nil
            state.path = nil
            return true
        }
        if gone { connection.close() }
    }

    private func notifications<T: Sendable>(_ pick: @escaping @Sendable (SessionNotification) -> T?) -> AsyncStream<T> {
        let (raw, rawContinuation) = AsyncStream.makeStream(of: SessionNotification.self)
        let id = state.withLock { state in
            defer { state.nextListener += 1 }
            state.listeners[state.nextListener] = rawContinuation
            return state.nextListener
        }
        rawContinuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.listeners.removeValue(forKey: id) } }
        return AsyncStream { continuation in
            let task = Task {
                for await notification in raw { if let value = pick(notification) { continuation.yield(value) } }
                continuation.finish()
            }
            continuation.onTermination = { _ in
                task.cancel()
                rawContinuation.finish()
            }
        }
    }

    // MARK: the wire

    static func error(_ error: any Swift.Error) -> Error {
        guard case DBusError.remote(let name, let message) = error else {
            return Error(code: .mediaServicesFailed, message: "\(error)")
        }
        if let code = Wire.errorCode(named: name) { return Error(code: code, message: message) }
        if name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NoReply" {
            return Error(code: .mediaServicesFailed, message: "\(name): \(message)")
        }
        return Error(code: .unspecified, message: "\(name): \(message)")
    }
}

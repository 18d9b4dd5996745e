import CLibPulse
import FoundationEssentials
import Glibc

/// A connection to a PulseAudio-protocol sound server (PulseAudio itself, or PipeWire through
/// pipewire-pulse): a complete snapshot of the server as value types, every server event as an
/// `AsyncStream`, and commands as `async throws` functions that report the server's own error text.
///
/// After `connect`, losing the server is an event of its own (`.disconnected`); the client then
/// reconnects by itself, with backoff, and announces the fresh, complete snapshot with `.connected`.
public final class PulseClient: Sendable {
    public struct Configuration: Sendable {
        /// The server address (`unix:/path`, `tcp:host:port`); nil for libpulse's default, which honours
        /// `PULSE_SERVER`.
        public var server: String?
        public var applicationName: String
        /// The client's `application.id`; nil for none. (pipewire-pulse gives a client's properties to its
        /// streams, and WirePlumber remembers a stream by its application.id before its name: a client
        /// that writes an app's memory through streams of its own must have none.)
        public var applicationID: String?
        /// More properties of the client.
        public var clientProperties: [String: String]
        /// Reconnect after losing the server (not for the first connection, whose failure is thrown).
        public var reconnects: Bool
        /// First and longest wait between reconnection attempts (the wait doubles each time).
        public var reconnectDelay: ClosedRange<Duration>
        /// How long a connection may take before it counts as failed (the first one's failure is
        /// thrown; a reconnection's is tried again).
        public var connectTimeout: Duration
        /// A server that leaves a command unanswered this long is taken as lost (`.disconnected`, then
        /// reconnected as after any loss): a server that stalls, or stops serving the connection without
        /// closing it, is not waited on for libpulse's 30 s per command. nil: libpulse's timeout alone
        /// (which, when it strikes, is taken as a loss as well).
        public var answerWithin: Duration?

        public init(
            server: String? = nil, applicationName: String = "audiosession",
            applicationID: String? = "org.audiosession", clientProperties: [String: String] = [:], reconnects: Bool = true,
            reconnectDelay: ClosedRange<Duration> = .milliseconds(50) ... .seconds(2),
            connectTimeout: Duration = .seconds(10), answerWithin: Duration? = nil
        ) {
            self.server = server; self.applicationName = applicationName; self.applicationID = applicationID
            self.clientProperties = clientProperties
            self.reconnects = reconnects; self.reconnectDelay = reconnectDelay; self.connectTimeout = connectTimeout
            self.answerWithin = answerWithin
        }
    }

    let connection: Connection
    let meters: Meters

    private init(configuration: Configuration, loop: PulseLoop) {
        connection = Connection(configuration: configuration, loop: loop)
        meters = Meters(connection: connection)
    }

    /// Connects and returns once the snapshot is complete, or throws `PulseError.noServer` with the
    /// reason ("Connection refused", "Access denied" ...). Never waits longer than `connectTimeout`.
    /// On `loop` (an actor's executor, say: its events and commands then need no thread hop), or on a
    /// loop of its own.
    public static func connect(_ configuration: Configuration = Configuration(), on loop: PulseLoop? = nil) async throws -> PulseClient {
        let client = PulseClient(configuration: configuration, loop: loop ?? PulseLoop())
        do {
            try await client.connection.start()
        } catch {
            client.close()
            throw error
        }
        return client
    }

    public static func connect(server: String?) async throws -> PulseClient {
        try await connect(Configuration(server: server))
    }

    deinit { close() }

    /// Disconnects for good: pending operations fail, event streams finish, meters stop.
    public func close() {
        meters.stopAll()
        connection.close()
    }

    /// The server as it is now (complete once `connect` has returned, empty while reconnecting).
    public var snapshot: Snapshot { connection.snapshot }
    /// True while connected and synchronised.
    public var isConnected: Bool { connection.isReady }
    /// How many times the client has connected and synchronised (1 after `connect`, more after reconnections).
    public var connectionCount: Int { connection.connections }

    /// Every event from now on. A subscriber that arrives while connected first receives `.connected`
    /// with the current snapshot, so it always starts from a complete picture.
    public func events() -> AsyncStream<PulseEvent> { connection.events() }

    /// Every event from now on, handed to `deliver` on libpulse's own thread the moment it is known,
    /// with no task in between; `deliver` must only queue them (it runs under the lock). A consumer
    /// keeps its own copy of the server with `Snapshot.apply(_:)`. Starts with `.connected` if
    /// connected. Lasts as long as the client.
    public func forwardEvents(_ deliver: @escaping @Sendable (PulseEvent) -> Void) { connection.forwardEvents(deliver) }
    /// The same, the events that go together in one call, in order: a new app's client news held while
    /// its stream's info is asked comes with that info (for a consumer that takes one call as one batch).
    public func forwardEventGroups(_ deliver: @escaping @Sendable ([PulseEvent]) -> Void) { connection.forwardEventGroups(deliver) }

    /// Tracing: `stamp` is called with each stream a subscription event names, as it comes (on
    /// libpulse's thread, before the stream's info is asked for and its event forwarded).
    public func stampSubscriptions(_ stamp: @escaping @Sendable (StreamReference) -> Void) { connection.stampSubscriptions(stamp) }

    // MARK: streams

    public func setMute(_ muted: Bool, stream: AudioStream) async throws {
        try await setMute(muted, streamIndex: stream.id, direction: stream.direction)
    }

    public func setMute(_ muted: Bool, streamIndex index: UInt32, direction: Direction) async throws {
        try await perform(.setStreamMute(StreamReference(direction, index), muted))
    }

    /// Sets a stream's volume, one value per channel.
    public func setVolume(_ volume: ChannelVolumes, streamIndex index: UInt32, direction: Direction) async throws {
        try await perform(.setStreamVolume(StreamReference(direction, index), volume))
    }

    /// Sets every channel of a stream to one volume.
    public func setVolume(_ volume: Volume, streamIndex index: UInt32, direction: Direction) async throws {
        let channels = connection.read { direction == .output ? $0.sinkInputs[index] : $0.sourceOutputs[index] }?
            .volume.values.count
        guard let channels, channels > 0 else {
            throw PulseError.noSuchEntity("\(direction == .output ? "sink input" : "source output") #\(index)")
        }
        try await setVolume(ChannelVolumes(channels: channels, volume: volume), streamIndex: index, direction: direction)
    }

    /// Moves a playback stream to a sink, or a capture stream to a source.
    public func move(streamIndex index: UInt32, direction: Direction, toDevice device: UInt32) async throws {
        let name = connection.read { (direction == .output ? $0.sinks[device] : $0.sources[device])?.name }
        guard let name else { throw PulseError.noSuchEntity("\(direction == .output ? "sink" : "source") #\(device)") }
        try await perform(.moveStream(StreamReference(direction, index), toDevice: name))
    }

    /// Ends a stream (the application sees it killed).
    public func kill(streamIndex index: UInt32, direction: Direction) async throws {
        try await perform(.killStream(StreamReference(direction, index)))
    }

    // MARK: devices

    public func setMute(_ muted: Bool, deviceIndex index: UInt32, direction: Direction) async throws {
        let what = "mute \(direction == .output ? "sink" : "source") #\(index)"
        _ = try await connection.perform(what) { ctx, ud in
            direction == .output
                ? pa_context_set_sink_mute_by_index(ctx, index, muted ? 1 : 0, operationSuccessCallback, ud)
                : pa_context_set_source_mute_by_index(ctx, index, muted ? 1 : 0, operationSuccessCallback, ud)
        }
    }

    public func setVolume(_ volume: ChannelVolumes, deviceIndex index: UInt32, direction: Direction) async throws {
        guard !volume.values.isEmpty, volume.values.count <= Int(PA_CHANNELS_MAX) else {
            throw PulseError.badArgument("a volume needs 1 to \(PA_CHANNELS_MAX) channels, not \(volume.values.count)")
        }
        var cv = cVolume(volume)
        let what = "set volume of \(direction == .output ? "sink" : "source") #\(index)"
        _ = try await connection.perform(what) { ctx, ud in
            direction == .output
                ? pa_context_set_sink_volume_by_index(ctx, index, &cv, operationSuccessCallback, ud)
                : pa_context_set_source_volume_by_index(ctx, index, &cv, operationSuccessCallback, ud)
        }
    }

    /// Makes the named sink or source the server's default.
    public func setDefault(deviceName name: String, direction: Direction) async throws {
        try await perform(.setDefaultDevice(name, direction))
        connection.refreshServerInfo()
    }

    /// Activates a port of a sink or source.
    public func setActivePort(_ port: String, deviceIndex index: UInt32, direction: Direction) async throws {
        let name = connection.read { (direction == .output ? $0.sinks[index] : $0.sources[index])?.name }
        guard let name else { throw PulseError.noSuchEntity("\(direction == .output ? "sink" : "source") #\(index)") }
        try await perform(.setActivePort(device: name, direction, port: port))
    }

    /// Switches a card to a profile (`a2dp-sink`, `headset-head-unit`, `off` ...).
    public func setCardProfile(_ profile: String, cardIndex index: UInt32) async throws {
        guard let name = connection.read({ $0.cards[index]?.name }) else { throw PulseError.noSuchEntity("card #\(index)") }
        try await perform(.setCardProfile(card: name, profile: profile))
    }

    // MARK: modules

    /// Loads a server module and returns its index.
    @discardableResult
    public func loadModule(_ name: String, arguments: String = "") async throws -> UInt32 {
        guard case .index(let index) = try await perform(.loadModule(name: name, arguments: arguments)) else {
            preconditionFailure("load-module answers with an index")
        }
        return index
    }

    public func unloadModule(_ index: UInt32) async throws {
        try await perform(.unloadModule(index))
    }

    // MARK: remembered stream settings (ext-stream-restore)

    /// Everything the server remembers about streams, keyed by app or role.
    public func readStreamRestore() async throws -> [StreamRestoreEntry] {
        guard case .restoreEntries(let entries) = try await perform(.readStreamRestore) else {
            preconditionFailure("read answers with entries")
        }
        return entries
    }

    /// Writes entries. With `applyImmediately`, running streams that match take the values at once.
    public func writeStreamRestore(
        _ entries: [StreamRestoreEntry], mode: StreamRestoreWriteMode = .replace, applyImmediately: Bool = false
    ) async throws {
        try await perform(.writeStreamRestore(entries, mode: mode, applyImmediately: applyImmediately))
    }

    public func deleteStreamRestore(names: [String]) async throws {
        try await perform(.deleteStreamRestore(names))
    }
}

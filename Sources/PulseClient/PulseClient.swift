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
        public var applicationID: String
        /// Reconnect after losing the server (not for the first connection, whose failure is thrown).
        public var reconnects: Bool
        /// First and longest wait between reconnection attempts (the wait doubles each time).
        public var reconnectDelay: ClosedRange<Duration>
        /// How long the first connection may take before it counts as failed.
        public var connectTimeout: Duration

        public init(
            server: String? = nil, applicationName: String = "audiosession",
            applicationID: String = "org.audiosession", reconnects: Bool = true,
            reconnectDelay: ClosedRange<Duration> = .milliseconds(50) ... .seconds(2),
            connectTimeout: Duration = .seconds(10)
        ) {
            self.server = server; self.applicationName = applicationName; self.applicationID = applicationID
            self.reconnects = reconnects; self.reconnectDelay = reconnectDelay; self.connectTimeout = connectTimeout
        }
    }

    let connection: Connection

    private init(configuration: Configuration) {
        connection = Connection(configuration: configuration)
    }

    /// Connects and returns once the snapshot is complete, or throws `PulseError.noServer` with the
    /// reason ("Connection refused", "Access denied" ...). Never waits longer than `connectTimeout`.
    public static func connect(_ configuration: Configuration = Configuration()) async throws -> PulseClient {
        let client = PulseClient(configuration: configuration)
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

    deinit { connection.close() }

    /// Disconnects for good: pending operations fail, event streams finish.
    public func close() { connection.close() }

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
    /// with no task in between, together with the snapshot as it is with that event (so the consumer
    /// need not take the connection's lock to read it); `deliver` must only queue them (it runs under
    /// the lock). Starts with `.connected` if connected. Lasts as long as the client.
    public func forwardEvents(_ deliver: @escaping @Sendable (PulseEvent, Snapshot) -> Void) { connection.forwardEvents(deliver) }

    // MARK: streams

    public func setMute(_ muted: Bool, stream: AudioStream) async throws {
        try await setMute(muted, streamIndex: stream.id, direction: stream.direction)
    }

    public func setMute(_ muted: Bool, streamIndex index: UInt32, direction: Direction) async throws {
        let what = "mute \(direction == .output ? "sink input" : "source output") #\(index)"
        _ = try await connection.perform(what) { ctx, ud in
            direction == .output
                ? pa_context_set_sink_input_mute(ctx, index, muted ? 1 : 0, operationSuccessCallback, ud)
                : pa_context_set_source_output_mute(ctx, index, muted ? 1 : 0, operationSuccessCallback, ud)
        }
    }

    /// Sends a mute and returns at once, without waiting for the server's answer: commands on one
    /// connection are carried out in the order sent, so what follows sees it done. `failed` is called
    /// (on libpulse's thread; it must not block) if the server refuses or the connection is lost.
    public func sendMute(_ muted: Bool, streamIndex index: UInt32, direction: Direction,
                         failed: @escaping @Sendable (PulseError) -> Void) {
        let what = "\(muted ? "mute" : "unmute") \(direction == .output ? "sink input" : "source output") #\(index)"
        connection.send(what, whenDone: { if case .failure(let error) = $0 { failed(error) } }) { ctx, ud in
            direction == .output
                ? pa_context_set_sink_input_mute(ctx, index, muted ? 1 : 0, operationSuccessCallback, ud)
                : pa_context_set_source_output_mute(ctx, index, muted ? 1 : 0, operationSuccessCallback, ud)
        }
    }

    /// Sets a stream's volume, one value per channel.
    public func setVolume(_ volume: ChannelVolumes, streamIndex index: UInt32, direction: Direction) async throws {
        guard !volume.values.isEmpty, volume.values.count <= Int(PA_CHANNELS_MAX) else {
            throw PulseError.badArgument("a volume needs 1 to \(PA_CHANNELS_MAX) channels, not \(volume.values.count)")
        }
        var cv = cVolume(volume)
        let what = "set volume of \(direction == .output ? "sink input" : "source output") #\(index)"
        _ = try await connection.perform(what) { ctx, ud in
            direction == .output
                ? pa_context_set_sink_input_volume(ctx, index, &cv, operationSuccessCallback, ud)
                : pa_context_set_source_output_volume(ctx, index, &cv, operationSuccessCallback, ud)
        }
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
        let what = "move \(direction == .output ? "sink input" : "source output") #\(index) to #\(device)"
        _ = try await connection.perform(what) { ctx, ud in
            direction == .output
                ? pa_context_move_sink_input_by_index(ctx, index, device, operationSuccessCallback, ud)
                : pa_context_move_source_output_by_index(ctx, index, device, operationSuccessCallback, ud)
        }
    }

    /// Ends a stream (the application sees it killed).
    public func kill(streamIndex index: UInt32, direction: Direction) async throws {
        let what = "kill \(direction == .output ? "sink input" : "source output") #\(index)"
        _ = try await connection.perform(what) { ctx, ud in
            direction == .output
                ? pa_context_kill_sink_input(ctx, index, operationSuccessCallback, ud)
                : pa_context_kill_source_output(ctx, index, operationSuccessCallback, ud)
        }
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
        let what = "set default \(direction == .output ? "sink" : "source") to \(name)"
        _ = try await connection.perform(what) { ctx, ud in
            direction == .output
                ? pa_context_set_default_sink(ctx, name, operationSuccessCallback, ud)
                : pa_context_set_default_source(ctx, name, operationSuccessCallback, ud)
        }
        connection.refreshServerInfo()
    }

    /// Activates a port of a sink or source.
    public func setActivePort(_ port: String, deviceIndex index: UInt32, direction: Direction) async throws {
        let what = "set port of \(direction == .output ? "sink" : "source") #\(index) to \(port)"
        _ = try await connection.perform(what) { ctx, ud in
            direction == .output
                ? pa_context_set_sink_port_by_index(ctx, index, port, operationSuccessCallback, ud)
                : pa_context_set_source_port_by_index(ctx, index, port, operationSuccessCallback, ud)
        }
    }

    /// Switches a card to a profile (`a2dp-sink`, `headset-head-unit`, `off` ...).
    public func setCardProfile(_ profile: String, cardIndex index: UInt32) async throws {
        _ = try await connection.perform("set profile of card #\(index) to \(profile)") { ctx, ud in
            pa_context_set_card_profile_by_index(ctx, index, profile, operationSuccessCallback, ud)
        }
    }

    // MARK: modules

    /// Loads a server module and returns its index.
    @discardableResult
    public func loadModule(_ name: String, arguments: String = "") async throws -> UInt32 {
        let result = try await connection.perform("load \(name)") { ctx, ud in
            pa_context_load_module(ctx, name, arguments, operationIndexCallback, ud)
        }
        guard case .index(let index) = result else { preconditionFailure("load-module answers with an index") }
        return index
    }

    public func unloadModule(_ index: UInt32) async throws {
        _ = try await connection.perform("unload module #\(index)") { ctx, ud in
            pa_context_unload_module(ctx, index, operationSuccessCallback, ud)
        }
    }

    // MARK: remembered stream settings (ext-stream-restore)

    /// Everything the server remembers about streams, keyed by app or role.
    public func readStreamRestore() async throws -> [StreamRestoreEntry] {
        let result = try await connection.perform("read the stream-restore database") { ctx, ud in
            pa_ext_stream_restore_read(ctx, restoreReadCallback, ud)
        }
        guard case .restoreEntries(let entries) = result else { preconditionFailure("read answers with entries") }
        return entries
    }

    /// A read of the stream-restore database sent and not yet answered (`readStreamRestoreNow`).
    public struct PendingRead: Sendable { let operation: UInt64 }

    /// Sends a read of the stream-restore database at once and returns without waiting: a command sent
    /// after it (a mute, say) is carried out after the read, so the read sees the server's memory as it
    /// was before. Every pending read must be finished with `entries(of:)`.
    public func readStreamRestoreNow() -> PendingRead {
        PendingRead(operation: connection.send("read the stream-restore database") { ctx, ud in
            pa_ext_stream_restore_read(ctx, restoreReadCallback, ud)
        })
    }

    /// The answer to a read sent with `readStreamRestoreNow`.
    public func entries(of read: PendingRead) async throws -> [StreamRestoreEntry] {
        guard case .restoreEntries(let entries) = try await connection.answer(to: read.operation) else {
            preconditionFailure("read answers with entries")
        }
        return entries
    }

    /// Writes entries. With `applyImmediately`, running streams that match take the values at once.
    public func writeStreamRestore(
        _ entries: [StreamRestoreEntry], mode: StreamRestoreWriteMode = .replace, applyImmediately: Bool = false
    ) async throws {
        var maps: [pa_channel_map] = []
        for entry in entries {
            var map = pa_channel_map()
            map.channels = UInt8(min(entry.channelMap.count, Int(PA_CHANNELS_MAX)))
            var bad: String?
            withUnsafeMutableBytes(of: &map.map) { raw in
                let slots = raw.bindMemory(to: pa_channel_position_t.self)
                for (i, name) in entry.channelMap.prefix(Int(map.channels)).enumerated() {
                    let position = pa_channel_position_from_string(name)
                    if position == PA_CHANNEL_POSITION_INVALID { bad = name }
                    slots[i] = position
                }
            }
            if let bad { throw PulseError.badArgument("unknown channel position '\(bad)' in entry \(entry.name)") }
            maps.append(map)
        }
        let cMode: pa_update_mode_t =
            switch mode {
            case .set: PA_UPDATE_SET
            case .merge: PA_UPDATE_MERGE
            case .replace: PA_UPDATE_REPLACE
            }
        // The C strings live until the call has copied them into its request.
        let names = entries.map { strdup($0.name) }
        let devices = entries.map { $0.device.map { strdup($0) } ?? nil }
        defer { (names + devices).forEach { free($0) } }
        var infos: [pa_ext_stream_restore_info] = entries.indices.map { i in
            var info = pa_ext_stream_restore_info()
            info.name = UnsafePointer(names[i])
            info.channel_map = maps[i]
            info.volume = entries[i].volume.map(cVolume) ?? pa_cvolume()
            info.device = UnsafePointer(devices[i])
            info.mute = entries[i].isMuted ? 1 : 0
            return info
        }
        let count = UInt32(infos.count)
        _ = try await connection.perform("write the stream-restore database") { ctx, ud in
            pa_ext_stream_restore_write(ctx, cMode, &infos, count, applyImmediately ? 1 : 0, operationSuccessCallback, ud)
        }
    }

    public func deleteStreamRestore(names: [String]) async throws {
        let cNames: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) } + [nil]
        defer { cNames.forEach { free($0) } }
        var constNames = cNames.map { $0.map { UnsafePointer($0) } }
        _ = try await connection.perform("delete from the stream-restore database") { ctx, ud in
            pa_ext_stream_restore_delete(ctx, &constNames, operationSuccessCallback, ud)
        }
    }
}



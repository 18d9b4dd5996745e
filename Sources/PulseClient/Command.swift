import CLibPulse
import FoundationEssentials
import Glibc

extension PulseClient {
    /// Sends a command now and returns at once; `whenDone` is called with the answer (on libpulse's
    /// thread: it must not block). Commands on one connection are carried out in the order sent.
    public func send(_ command: ServerCommand, whenDone: @escaping @Sendable (Result<ServerAnswer, PulseError>) -> Void) {
        do { try Self.validate(command) } catch {
            return whenDone(.failure(error as? PulseError ?? .badArgument("\(error)")))
        }
        if case .writeMemoryThroughStream = command {
            // Several steps, each waiting on the server: a task of its own, answered like the others.
            Task {
                do { whenDone(.success(try await perform(command))) } catch {
                    whenDone(.failure(error as? PulseError ?? .failed(operation: command.description, reason: "\(error)")))
                }
            }
            return
        }
        let connection = self.connection
        connection.send(command.description, whenDone: { result in
            if case .setDefaultDevice(let name, let direction) = command, case .success = result { connection.defaultAsked(name, direction) }
            whenDone(result.map(ServerAnswer.init))
        }) { ctx, ud in
            try Self.start(command, ctx, ud)
        }
    }

    /// Sends a command and waits for the answer; throws the server's own words if it refuses.
    @discardableResult
    public func perform(_ command: ServerCommand) async throws -> ServerAnswer {
        try Self.validate(command)
        if case .writeMemoryThroughStream(let entry, let device) = command {
            try await writeMemoryThroughStream(entry)
            if case .set(let name) = device { try await writeDeviceThroughStream(entry.name, device: name, channels: entry.channelMap) }
            return .done
        }
        let answer = ServerAnswer(try await connection.perform(command.description) { ctx, ud in try Self.start(command, ctx, ud) })
        if case .setDefaultDevice(let name, let direction) = command { connection.defaultAsked(name, direction) }
        return answer
    }

    /// Catches what libpulse would take badly before it is sent.
    static func validate(_ command: ServerCommand) throws {
        if case .setStreamVolume(_, let volume) = command, volume.values.isEmpty || volume.values.count > Int(PA_CHANNELS_MAX) {
            throw PulseError.badArgument("a volume needs 1 to \(PA_CHANNELS_MAX) channels, not \(volume.values.count)")
        }
        if case .writeStreamRestore(let entries, _, _) = command {
            for entry in entries { _ = try channelMap(entry) }
        }
    }

    /// Starts the libpulse operation of a command, under the lock, with an operation callback and its userdata.
    static func start(_ command: ServerCommand, _ ctx: OpaquePointer, _ ud: UnsafeMutableRawPointer) throws -> OpaquePointer? {
        switch command {
        case .setStreamMute(let s, let muted):
            return s.direction == .output
                ? pa_context_set_sink_input_mute(ctx, s.index, muted ? 1 : 0, operationSuccessCallback, ud)
                : pa_context_set_source_output_mute(ctx, s.index, muted ? 1 : 0, operationSuccessCallback, ud)
        case .setStreamVolume(let s, let volume):
            var cv = cVolume(volume)
            return s.direction == .output
                ? pa_context_set_sink_input_volume(ctx, s.index, &cv, operationSuccessCallback, ud)
                : pa_context_set_source_output_volume(ctx, s.index, &cv, operationSuccessCallback, ud)
        case .moveStream(let s, let device):
            return s.direction == .output
                ? pa_context_move_sink_input_by_name(ctx, s.index, device, operationSuccessCallback, ud)
                : pa_context_move_source_output_by_name(ctx, s.index, device, operationSuccessCallback, ud)
        case .killStream(let s):
            return s.direction == .output
                ? pa_context_kill_sink_input(ctx, s.index, operationSuccessCallback, ud)
                : pa_context_kill_source_output(ctx, s.index, operationSuccessCallback, ud)
        case .setDefaultDevice(let name, let direction):
            return direction == .output
                ? pa_context_set_default_sink(ctx, name, operationSuccessCallback, ud)
                : pa_context_set_default_source(ctx, name, operationSuccessCallback, ud)
        case .setCardProfile(let card, let profile):
            return pa_context_set_card_profile_by_name(ctx, card, profile, operationSuccessCallback, ud)
        case .setActivePort(let device, let direction, let port):
            return direction == .output
                ? pa_context_set_sink_port_by_name(ctx, device, port, operationSuccessCallback, ud)
                : pa_context_set_source_port_by_name(ctx, device, port, operationSuccessCallback, ud)
        case .loadModule(let name, let arguments):
            return pa_context_load_module(ctx, name, arguments, operationIndexCallback, ud)
        case .unloadModule(let index):
            return pa_context_unload_module(ctx, index, operationSuccessCallback, ud)
        case .readStreamRestore:
            return pa_ext_stream_restore_read(ctx, restoreReadCallback, ud)
        case .writeStreamRestore(let entries, let mode, let applyImmediately):
            return try writeStreamRestore(entries, mode: mode, applyImmediately: applyImmediately, ctx, ud)
        case .writeMemoryThroughStream:
            throw PulseError.badArgument("writing the memory through a stream takes several operations: `send` runs it as a task")
        case .deleteStreamRestore(let names):
            let cNames: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) } + [nil]
            defer { cNames.forEach { free($0) } }
            var constNames = cNames.map { $0.map { UnsafePointer($0) } }
            return pa_ext_stream_restore_delete(ctx, &constNames, operationSuccessCallback, ud)
        case .updateClientProperties(let properties):
            guard let list = pa_proplist_new() else { throw PulseError.badArgument("out of memory for a property list") }
            defer { pa_proplist_free(list) }
            for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
                guard pa_proplist_sets(list, key, value) == 0 else { throw PulseError.badArgument("bad property name '\(key)'") }
            }
            return pa_context_proplist_update(ctx, PA_UPDATE_REPLACE, list, operationSuccessCallback, ud)
        }
    }

    static func channelMap(_ entry: StreamRestoreEntry) throws -> pa_channel_map {
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
        return map
    }

    static func writeStreamRestore(_ entries: [StreamRestoreEntry], mode: StreamRestoreWriteMode, applyImmediately: Bool,
                                   _ ctx: OpaquePointer, _ ud: UnsafeMutableRawPointer) throws -> OpaquePointer? {
        let maps = try entries.map(channelMap)
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
        return pa_ext_stream_restore_write(ctx, cMode, &infos, UInt32(infos.count), applyImmediately ? 1 : 0, operationSuccessCallback, ud)
    }
}

extension ServerAnswer {
    init(_ result: Connection.OperationResult) {
        switch result {
        case .done: self = .done
        case .index(let index): self = .index(index)
        case .restoreEntries(let entries): self = .restoreEntries(entries)
        }
    }
}

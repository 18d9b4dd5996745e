import CLibPulse
import FoundationEssentials
import Glibc

/// Writing the server's memory of an app or role through a stream of our own, where the memory can be
/// neither read, written nor deleted through ext-stream-restore (pipewire-pulse 1.x: WirePlumber 0.5
/// keeps it, and answers those requests without touching it).
///
/// WirePlumber gives every new stream what it remembers under the stream's key (its media.role, else
/// its application.id, application.name, media.name), and saves under that key every volume and mute
/// set on such a stream. So: a stream with the key's properties, opened corked (it plays nothing), is
/// given the volume and mute wanted; a second one, opened while the first is still there, shows what
/// the memory holds now; both are closed, and the write is done once that is what was wanted.
extension PulseClient {
    /// The property our probe streams carry, so that they can be told from apps' streams.
    public static let probeProperty = ProbeProperty.key

    /// The properties that give a stream the memory key `name` (pipewire-pulse's
    /// `module-stream-restore.id`: "sink-input-by-media-role:music" and the like), and its direction.
    public static func probeProperties(forMemoryKey name: String) -> (Direction, Properties)? {
        let direction: Direction
        let rest: Substring
        if name.hasPrefix("sink-input-by-") {
            direction = .output
            rest = name.dropFirst("sink-input-by-".count)
        } else if name.hasPrefix("source-output-by-") {
            direction = .input
            rest = name.dropFirst("source-output-by-".count)
        } else {
            return nil
        }
        guard let colon = rest.firstIndex(of: ":") else { return nil }
        let value = String(rest[rest.index(after: colon)...])
        let property: String
        switch rest[..<colon] {
        case "media-role": property = "media.role"
        case "application-id": property = "application.id"
        case "application-name": property = "application.name"
        case "media-name": property = "media.name"
        default: return nil
        }
        guard !value.isEmpty else { return nil }
        return (direction, [property: value, probeProperty: "memory"])
    }

    /// Makes the server remember `entry` (its mute, and its volume if it has one) under its key, through
    /// streams of our own; tries up to `attempts` times, each time checking with a fresh stream.
    public func writeMemoryThroughStream(_ entry: StreamRestoreEntry, attempts: Int = 3, timeout: Duration = .seconds(3)) async throws {
        let channels = entry.channelMap.isEmpty ? ["front-left", "front-right"] : entry.channelMap
        // The volume wanted, on the probe's channels.
        let wanted = entry.volume.flatMap { volume in
            volume.values.isEmpty ? nil
                : volume.values.count == channels.count ? volume : ChannelVolumes(channels: channels.count, volume: volume.overall)
        }
        let holds: @Sendable (AudioStream) -> Bool = { s in
            s.isMuted == entry.isMuted && (wanted.map { $0.isClose(to: s.volume, within: Self.probeTolerance) } ?? true)
        }
        try await writeThroughStreams("write the memory of \(entry.name) through a stream", key: entry.name, channels: channels,
                                      movable: false, attempts: attempts, timeout: timeout) { writer in
            if let volume = wanted {
                try await perform(.setStreamVolume(StreamReference(writer.direction, writer.id), volume))
            }
            try await perform(.setStreamMute(StreamReference(writer.direction, writer.id), entry.isMuted))
            _ = try await waitForStream(writer.direction, writer.id, "the memory probe to show what was set", timeout: timeout, holds)
        } shows: { shown, _ in
            holds(shown) ? nil : "gets muted=\(shown.isMuted) volume=\(shown.volume)"
        }
    }

    /// Makes the server remember `device` (nil: none) as where the streams of the memory key `name` go,
    /// through a stream of our own moved there: pipewire-pulse turns a move into the stream's target in
    /// the "default" metadata (-1 for a move to the default device), and WirePlumber saves that under
    /// the stream's key (0.4 and 0.5 alike; neither takes a device from ext-stream-restore). A fresh
    /// stream then shows where the next one goes; up to `attempts` times. A device the server does not
    /// list is none: the key's streams follow the default.
    public func writeDeviceThroughStream(_ name: String, device: String?, channels: [String] = [],
                                         attempts: Int = 3, timeout: Duration = .seconds(3)) async throws {
        let operation = "write where \(name) goes through a stream"
        try await writeThroughStreams(operation, key: name, channels: channels.isEmpty ? ["front-left", "front-right"] : channels,
                                      movable: true, attempts: attempts, timeout: timeout) { mover in
            let now = snapshot
            let fallback = now.server?.defaultDeviceName(mover.direction)
            guard let target = (device.flatMap { now.device(named: $0, mover.direction) } ?? fallback.flatMap { now.device(named: $0, mover.direction) }) else {
                throw PulseError.failed(operation: operation, reason: "no default device")
            }
            try await perform(.moveStream(StreamReference(mover.direction, mover.id), toDevice: target.name))
            _ = try await waitForStream(mover.direction, mover.id, "the memory probe on \(target.name)", timeout: timeout) { $0.device == target.id }
            return target.id
        } shows: { shown, target in
            shown.device == target ? nil : "goes to \(shown.device.map { "device #\($0)" } ?? "no device")"
        }
    }

    /// Writes the server's memory of the key `name` through streams of our own until a fresh one shows
    /// it: each attempt opens a writer (corked, `movable` or not), `write`s through it, then opens a
    /// reader while the writer is still there (WirePlumber takes the writer's change before it links the
    /// reader, its events in order; a writer closed at once could be gone before a busy WirePlumber got
    /// to the change: the memory then kept the hold, seen at an agent's stop, under load, on WirePlumber
    /// 0.5) and asks `shows` what the reader has that was not written (nil: nothing). Up to `attempts`.
    private func writeThroughStreams<T>(_ operation: String, key name: String, channels: [String], movable: Bool,
                                        attempts: Int, timeout: Duration,
                                        write: (AudioStream) async throws -> T,
                                        shows: (AudioStream, T) -> String?) async throws {
        guard let (direction, properties) = Self.probeProperties(forMemoryKey: name) else {
            throw PulseError.badArgument("no stream can be given the memory key '\(name)'")
        }
        var last = "nothing"
        for _ in 0..<max(1, attempts) {
            let writer = try await openProbe(direction, properties, channels: channels, movable: movable, timeout: timeout)
            let shown: AudioStream
            let written: T
            do {
                defer { closeProbe(writer) }
                written = try await write(writer.stream)
                let reader = try await openProbe(direction, properties, channels: channels, movable: movable, timeout: timeout)
                closeProbe(reader)
                shown = reader.stream
            }
            guard let wrong = shows(shown, written) else { return }
            last = wrong
        }
        throw PulseError.failed(operation: operation, reason: "a fresh stream still \(last)")
    }

    /// How far (1 %) what a probe shows may be from what was written: WirePlumber keeps volumes as
    /// floats of the linear amplitude.
    static let probeTolerance = Int64(Volume.norm.rawValue) / 100

    /// A corked stream of ours with these properties, once the server has linked it (and so given it
    /// what it remembers under its key).
    private func openProbe(_ direction: Direction, _ properties: Properties, channels: [String], movable: Bool = false,
                           timeout: Duration) async throws -> OpenProbe {
        let probe = ProbeStream()
        let index = try await connection.openCorkedStream(probe, direction, properties, channels: channels, movable: movable)
        do {
            let stream = try await waitForStream(direction, index, "the memory probe to be linked", timeout: timeout) { s in s.device != nil }
            return OpenProbe(probe: probe, stream: stream)
        } catch {
            connection.closeStream(probe)
            throw error
        }
    }

    private func closeProbe(_ open: OpenProbe) { connection.closeStream(open.probe) }

    private struct OpenProbe {
        let probe: ProbeStream
        let stream: AudioStream
    }

    /// Waits until our model shows the stream satisfying the predicate.
    private func waitForStream(_ direction: Direction, _ index: UInt32, _ what: String, timeout: Duration,
                               _ predicate: @escaping @Sendable (AudioStream) -> Bool) async throws -> AudioStream {
        try await wait(for: what, timeout: timeout) { s in
            s.stream(direction, index).flatMap { predicate($0) ? $0 : nil }
        }
    }
}

/// One stream of ours on the connection (a pa_stream).
///
/// `@unchecked Sendable` rule: `stream` and `waiter` are read and written only under the connection's
/// mainloop lock (inside `Connection.withContext` or in the stream's state callback, which libpulse
/// runs on the loop thread with the lock held).
final class ProbeStream: @unchecked Sendable {
    var stream: OpaquePointer?
    var waiter: CheckedContinuation<UInt32, any Error>?
    var settled = false

    func settle(_ result: Result<UInt32, PulseError>) {
        guard !settled, let waiter else { return }
        settled = true
        self.waiter = nil
        waiter.resume(with: result.mapError { $0 as any Error })
    }
}

extension Connection {
    /// Opens a corked stream (it plays or records nothing) and returns its index once the server has it.
    /// Not `movable`, the server keeps it where it linked it.
    func openCorkedStream(_ probe: ProbeStream, _ direction: Direction, _ properties: Properties, channels: [String],
                          movable: Bool = false) async throws -> UInt32 {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<UInt32, any Error>) in
            withContext { ctx in
                probe.waiter = continuation
                guard let ctx else { return probe.settle(.failure(.notConnected)) }
                var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: 48000, channels: UInt8(min(channels.count, Int(PA_CHANNELS_MAX))))
                let entry = StreamRestoreEntry(name: "", channelMap: channels, volume: nil, device: nil, isMuted: false)
                guard var map = try? PulseClient.channelMap(entry) else {
                    return probe.settle(.failure(.badArgument("unknown channel positions \(channels)")))
                }
                guard let list = pa_proplist_new() else { return probe.settle(.failure(.badArgument("out of memory"))) }
                defer { pa_proplist_free(list) }
                for (key, value) in properties.sorted(by: { $0.key < $1.key }) { pa_proplist_sets(list, key, value) }
                let name = properties["media.name"] ?? "audiosessiond memory"
                guard let stream = pa_stream_new_with_proplist(ctx, name, &spec, &map, list) else {
                    return probe.settle(.failure(.failed(operation: "open a memory probe", reason: errorText(ctx))))
                }
                probe.stream = stream
                pa_stream_set_state_callback(stream, probeStateCallback, Unmanaged.passUnretained(probe).toOpaque())
                let flags = pa_stream_flags_t(rawValue: PA_STREAM_START_CORKED.rawValue | (movable ? 0 : PA_STREAM_DONT_MOVE.rawValue))
                let started = direction == .output
                    ? pa_stream_connect_playback(stream, nil, nil, flags, nil, nil)
                    : pa_stream_connect_record(stream, nil, nil, flags)
                if started < 0 { probe.settle(.failure(.failed(operation: "open a memory probe", reason: errorText(ctx)))) }
            }
        }
    }

    /// Disconnects and frees the stream.
    func closeStream(_ probe: ProbeStream) {
        withContext { _ in
            guard let stream = probe.stream else { return }
            probe.stream = nil
            pa_stream_set_state_callback(stream, nil, nil)
            probe.settle(.failure(.notConnected))
            if pa_stream_get_state(stream) == PA_STREAM_READY || pa_stream_get_state(stream) == PA_STREAM_CREATING {
                pa_stream_disconnect(stream)
            }
            pa_stream_unref(stream)
        }
    }
}

private let probeStateCallback: pa_stream_notify_cb_t = { stream, userdata in
    guard let stream, let userdata else { return }
    let probe = Unmanaged<ProbeStream>.fromOpaque(userdata).takeUnretainedValue()
    switch pa_stream_get_state(stream) {
    case PA_STREAM_READY: probe.settle(.success(pa_stream_get_index(stream)))
    case PA_STREAM_FAILED, PA_STREAM_TERMINATED: probe.settle(.failure(.failed(operation: "open a memory probe", reason: "the server closed it")))
    default: break
    }
}

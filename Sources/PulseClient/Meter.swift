import CLibPulse
import Glibc

extension PulseClient {
    /// The property our meter streams carry (with our process id, like the memory probes), so that they
    /// can be told from the apps' own captures.
    public static let meterPropertyValue = ProbeProperty.meterValue

    /// Every meter's report from now on, handed to `deliver` on libpulse's thread as it happens; it
    /// must only queue it (it runs under the lock). One receiver: a later call replaces it.
    public func forwardSound(_ deliver: @escaping @Sendable (SoundReport) -> Void) { meters.setReceiver(deliver) }

    /// Starts (or stops) metering a playback stream: a peak-detecting capture of that sink input alone,
    /// at a low rate, as mixers' level meters do. Its reports go to `forwardSound`'s receiver.
    public func meter(_ stream: UInt32, _ on: Bool, settings: MeterSettings = MeterSettings()) {
        meter(StreamReference(.output, stream), on, settings: settings)
    }

    /// Starts (or stops) metering a stream: a playback stream alone (its sink input's monitor), or
    /// the microphone a capture stream records from (the source it is linked to, followed when the
    /// stream moves: the capture's own mute does not silence it).
    public func meter(_ stream: StreamReference, _ on: Bool, settings: MeterSettings = MeterSettings()) {
        if on { meters.start(stream, settings) } else { meters.stop(stream) }
    }

    /// The playback streams being metered now (for tests and benchmarks).
    public var meteredStreams: Set<UInt32> { Set(meters.metered.filter { $0.direction == .output }.map(\.index)) }

    /// Every stream being metered now, playback and capture.
    public var meteredTargets: Set<StreamReference> { meters.metered }
}

/// The meters of one client, by the stream each one listens to (a sink input, or a source output's
/// microphone).
///
/// `@unchecked Sendable` rule: `receiver` and `meters` (and every `Meter`'s state) are read and
/// written only under the connection's mainloop lock: inside `Connection.withContext`, or in a
/// stream callback, which libpulse runs on the loop thread with the lock held.
final class Meters: @unchecked Sendable {
    private let connection: Connection
    private var receiver: (@Sendable (SoundReport) -> Void)?
    private var meters: [StreamReference: Meter] = [:]
    /// Once a second while meters run: those that got no block for a while hear silence.
    private var watch: OpaquePointer?
    static let watchPeriod: pa_usec_t = 1_000_000

    init(connection: Connection) {
        self.connection = connection
        connection.forwardEvents { [weak self] event in
            guard let self else { return }
            switch event {
            case .removed(.sinkInput(let stream)), .removed(.sourceOutput(let stream)):
                // A meter ends with its stream: PulseAudio ends it by itself, PipeWire leaves it
                // standing, unlinked, for WirePlumber to link elsewhere (a microphone, say).
                meters.removeValue(forKey: StreamReference(stream.direction, stream.id))?.close()
            case .changed(_, .sinkInput(let stream)), .added(.sinkInput(let stream)),
                 .changed(_, .sourceOutput(let stream)), .added(.sourceOutput(let stream)):
                guard let meter = meters[StreamReference(stream.direction, stream.id)] else { break }
                // A meter waiting for its stream to be linked opens now; a microphone's meter follows
                // its capture to another source.
                if meter.target.direction == .input, meter.stream != nil, let device = stream.device, device != meter.source {
                    meter.release()
                }
                if stream.device != nil, meter.stream == nil {
                    connection.withContext { ctx in open(meter, ctx) }
                }
            default:
                break
            }
        }
    }

    func setReceiver(_ deliver: @escaping @Sendable (SoundReport) -> Void) {
        connection.withContext { _ in receiver = deliver }
    }

    var metered: Set<StreamReference> { connection.withContext { _ in Set(meters.keys) } }

    /// Starts metering a sink input (or a source output's microphone), at once if the server has linked
    /// it to a device, else as soon as it has. (pipewire-pulse 1.4 answers a capture of a stream that is not linked yet with no device,
    /// which libpulse takes for a protocol error and drops the whole connection: seen with a meter
    /// asked for at a stream's first report, which on PipeWire comes before it is linked.)
    func start(_ target: StreamReference, _ settings: MeterSettings) {
        connection.withContext { ctx in
            guard meters[target] == nil else { return }
            let meter = Meter(target: target, settings: settings, owner: self)
            meters[target] = meter
            if isLinked(target) { open(meter, ctx) }
        }
    }

    /// The stream is there and linked to a device (under the lock).
    private func isLinked(_ target: StreamReference) -> Bool {
        connection.read { $0.stream(target.direction, target.index)?.device != nil }
    }

    func stop(_ target: StreamReference) {
        connection.withContext { _ in
            guard let meter = meters.removeValue(forKey: target) else { return }
            meter.close()
        }
    }

    func stopAll() {
        connection.withContext { _ in
            let all = meters.values
            meters = [:]
            for meter in all { meter.close() }
            if let watch { connection.mainloopAPI.pointee.time_free(watch) }
            watch = nil
        }
    }

    /// Arms the watch while meters run (under the lock).
    private func armWatch(_ ctx: OpaquePointer) {
        guard watch == nil, !meters.isEmpty else { return }
        watch = pa_context_rttime_new(ctx, pa_rtclock_now() + Self.watchPeriod, meterWatchCallback, Unmanaged.passUnretained(self).toOpaque())
    }

    /// The watch fired: a meter that got no block for `silentWithoutBlocks` hears silence.
    fileprivate func watchFired(_ event: OpaquePointer) {
        guard event == watch else { return }
        let now = pa_rtclock_now()
        for meter in meters.values where meter.stream != nil && meter.audible != false {
            let silentFor = elapsed(from: meter.lastBlock, to: now)
            if silentFor > meter.settings.silentWithoutBlocks {
                meter.audible = false
                report(.silent(stream: meter.target.index, for: silentFor, direction: meter.target.direction))
            }
        }
        let restarted = connection.withContext { ctx -> Bool in
            guard let ctx, !meters.isEmpty else { return false }
            pa_context_rttime_restart(ctx, event, now + Self.watchPeriod)
            return true
        }
        if !restarted {
            connection.mainloopAPI.pointee.time_free(event)
            watch = nil
        }
    }

    /// Opens the meter's stream on the context (under the lock); a failure is reported at once.
    private func open(_ meter: Meter, _ ctx: OpaquePointer?) {
        guard let ctx else { return fail(meter, "not connected") }
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: meter.settings.rate, channels: 1)
        guard let list = pa_proplist_new() else { return fail(meter, "out of memory") }
        defer { pa_proplist_free(list) }
        pa_proplist_sets(list, PulseClient.probeProperty, PulseClient.meterPropertyValue)
        pa_proplist_sets(list, "media.name", "audiosessiond meter of \(meter.target)")
        // A capture's meter listens to the source the capture is linked to (a sink input's, to the
        // monitor of its sink: the server picks it when no source is named).
        var source: String?
        if meter.target.direction == .input {
            let linked = connection.read { model in
                model.sourceOutputs[meter.target.index]?.device.flatMap { id in model.sources[id].map { (id, $0.name) } }
            }
            guard let linked else { return }
            meter.source = linked.0
            source = linked.1
        }
        guard let stream = pa_stream_new_with_proplist(ctx, nil, &spec, nil, list) else {
            return fail(meter, connection.errorText(ctx))
        }
        meter.stream = stream
        meter.ready = false
        meter.lastBlock = pa_rtclock_now()
        let userdata = Unmanaged.passUnretained(meter).toOpaque()
        pa_stream_set_state_callback(stream, meterStateCallback, userdata)
        pa_stream_set_read_callback(stream, meterReadCallback, userdata)
        if meter.target.direction == .output, pa_stream_set_monitor_stream(stream, meter.target.index) != 0 {
            return fail(meter, connection.errorText(ctx))
        }
        // Blocks come `blocksPerRead` at a time (one block's peak is one sample): PipeWire sends them as
        // they come in fragments of that size (measured: 25 a second at 25 Hz on 1.4, 46 on 0.3.65 whatever
        // the rate, halved with two to a fragment), PulseAudio one by one whatever the fragment.
        let perCycle = connection.read { $0.server?.sendsMeterBlocksPerGraphCycle == true }
        let blocks = perCycle ? meter.settings.blocksPerReadPerGraphCycle : meter.settings.blocksPerRead
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max,
                                        fragsize: UInt32(MemoryLayout<Float>.size * max(1, blocks)))
        let flags = pa_stream_flags_t(rawValue: PA_STREAM_DONT_MOVE.rawValue | PA_STREAM_PEAK_DETECT.rawValue
                                      | PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_DONT_INHIBIT_AUTO_SUSPEND.rawValue)
        if pa_stream_connect_record(stream, source, &attributes, flags) < 0 { return fail(meter, connection.errorText(ctx)) }
        armWatch(ctx)
    }

    /// The meter's stream ended or failed: opened again while its stream is still there, a few times
    /// in a row; reported as failed after that.
    fileprivate func ended(_ meter: Meter, reason: String) {
        guard meters[meter.target] === meter else { return }
        meter.release()
        let stillThere = connection.withContext { ctx in ctx != nil && connection.read { $0.stream(meter.target.direction, meter.target.index) != nil } }
        guard stillThere else {
            // (The stream went away, or the server did: the agent hears of that on its own.)
            meters[meter.target] = nil
            return
        }
        meter.reopened += 1
        guard meter.reopened <= meter.settings.reopenAttempts else { return fail(meter, reason) }
        // (Moving, a stream may be between two sinks a moment: it opens again once linked.)
        if isLinked(meter.target) { connection.withContext { ctx in open(meter, ctx) } }
    }

    private func fail(_ meter: Meter, _ reason: String) {
        meter.release()
        meters[meter.target] = nil
        receiver?(.failed(stream: meter.target.index, reason: reason, direction: meter.target.direction))
    }

    fileprivate func report(_ report: SoundReport) { receiver?(report) }
}

/// One meter: a record stream on the monitor of one sink input, or on the source a capture records
/// from, peak-detecting.
final class Meter {
    let target: StreamReference
    /// The source a capture's meter is opened on (nil for a sink input's).
    var source: UInt32?
    let settings: MeterSettings
    unowned let owner: Meters
    var stream: OpaquePointer?
    var ready = false
    /// What was said last (nil: nothing yet, so the first block is said whatever it is).
    var audible: Bool?
    /// Times opened again in a row without a block received.
    var reopened = 0
    /// When its last block came (or it was opened), on libpulse's real-time clock.
    var lastBlock: pa_usec_t = 0

    init(target: StreamReference, settings: MeterSettings, owner: Meters) {
        self.target = target; self.settings = settings; self.owner = owner
    }

    /// Disconnects and frees the stream, with no callback after.
    func release() {
        guard let stream else { return }
        self.stream = nil
        pa_stream_set_state_callback(stream, nil, nil)
        pa_stream_set_read_callback(stream, nil, nil)
        let state = pa_stream_get_state(stream)
        if state == PA_STREAM_READY || state == PA_STREAM_CREATING { pa_stream_disconnect(stream) }
        pa_stream_unref(stream)
    }

    func close() { release() }

    /// Takes every block that came and reports each change between audible and silent (heard, then
    /// silent, when a sound began and ended within the read), with how long it had been silent.
    func read(_ stream: OpaquePointer) {
        var blocks = Audibility(threshold: settings.threshold)
        while pa_stream_readable_size(stream) > 0 {
            var data: UnsafeRawPointer?
            var length = 0
            guard pa_stream_peek(stream, &data, &length) == 0 else { return }
            if length == 0 { break }
            if let data {
                let samples = data.bindMemory(to: Float.self, capacity: length / MemoryLayout<Float>.size)
                for i in 0..<(length / MemoryLayout<Float>.size) { blocks.take(samples[i]) }
            }
            pa_stream_drop(stream)
        }
        guard blocks.tookAny else { return }
        reopened = 0
        let now = pa_rtclock_now()
        let previous = lastBlock
        lastBlock = now
        for heard in blocks.changes(after: audible) {
            // (From what was heard to silent: the sound ended in this read or just before it; at most a
            // block's time per block: a reopened meter's first read came long after its opening.)
            let silentFor = audible == true ? blocks.silentFor(over: elapsed(from: previous, to: now), blockAtMost: settings.block) : .zero
            audible = heard
            owner.report(heard ? .heard(stream: target.index, direction: target.direction)
                               : .silent(stream: target.index, for: silentFor, direction: target.direction))
        }
    }
}

private let meterStateCallback: pa_stream_notify_cb_t = { stream, userdata in
    guard let stream, let userdata else { return }
    let meter = Unmanaged<Meter>.fromOpaque(userdata).takeUnretainedValue()
    guard meter.stream == stream else { return }
    switch pa_stream_get_state(stream) {
    case PA_STREAM_READY:
        meter.ready = true
    case PA_STREAM_FAILED, PA_STREAM_TERMINATED:
        let reason = pa_stream_get_context(stream).map { String(cString: pa_strerror(pa_context_errno($0))) } ?? "ended"
        meter.owner.ended(meter, reason: reason)
    default:
        break
    }
}

private let meterReadCallback: pa_stream_request_cb_t = { stream, _, userdata in
    guard let stream, let userdata else { return }
    let meter = Unmanaged<Meter>.fromOpaque(userdata).takeUnretainedValue()
    guard meter.stream == stream else { return }
    meter.read(stream)
}

private let meterWatchCallback: pa_time_event_cb_t = { _, event, _, userdata in
    guard let event, let userdata else { return }
    Unmanaged<Meters>.fromOpaque(userdata).takeUnretainedValue().watchFired(event)
}

/// The time between two readings of libpulse's monotonic clock.
private func elapsed(from earlier: pa_usec_t, to later: pa_usec_t) -> Duration {
    .microseconds(Int64(clamping: later > earlier ? later - earlier : 0))
}

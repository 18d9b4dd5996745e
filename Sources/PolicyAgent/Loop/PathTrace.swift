import ServerModel
import Synchronization
import Logging

/// The event path, stamped (issue 22): where the time goes between an input's arrival and the commands
/// it caused being on the server's socket. Kept at the debug level (`--verbose`), or on its own with
/// AUDIOSESSION_PATH_TRACE=1 (then said at the notice level, the rest of the log as it is): off, nothing
/// here runs and a push into the inbox reads no clock. One line per batch that sent a command, after
/// the batch's own log lines, so the line costs the path nothing.
struct PathTrace {
    /// The batch's first input taken by the bus thread, for an app's call (nil for other inputs): the
    /// D-Bus side, before the call is pushed into the inbox.
    var received: Duration?
    /// The batch's first input pushed into the inbox, on the pushing thread (libpulse's, for a server event).
    var arrived: Duration
    /// The loop has the batch.
    var taken: Duration
    /// The tower has decided: its effects are known.
    var decided: Duration
    /// The journal is written and the commands are handed to libpulse.
    var performed: Duration
    /// Of `performed - decided`, the journal's writes.
    var journal: Duration
    /// The loop's next turn: libpulse has written the commands to the socket.
    var sent: Duration
    /// The log lines and the route log are written.
    var told: Duration
    /// The first commands were the mutes a new stream brings, decided ahead of the batch's run
    /// (`ControlTower.reflex`): the stamps are theirs, the run came after `sent`.
    var ahead = false
    /// A server event's word to its push: the loop's work on other batches meanwhile, and how many.
    var between: (busy: Duration, batches: Int)?

    /// The line: each stage in microseconds, and what the batch held.
    func log(_ logger: Logger, batch: [TowerInput], sends: Int) {
        func micros(_ from: Duration, _ to: Duration) -> Logger.MetadataValue {
            "\(Int(((to - from) / .microseconds(1)).rounded()))"
        }
        var metadata: Logger.Metadata = [
            "inputs": "\(batch.map(\.kind).joined(separator: ","))", "sends": "\(sends)",
            "waited_us": micros(arrived, taken), "decided_us": micros(taken, decided), "journal_us": micros(.zero, journal),
            "queued_us": micros(decided + journal, performed), "socket_us": micros(performed, sent),
            "to_socket_us": micros(arrived, sent), "told_us": micros(sent, told),
        ]
        // (An app's call: from the bus thread to the inbox, straight or through its caller's lane.)
        // (A server event: from the server's word of it to its info in hand, pushed.)
        if let received { metadata[batch.first?.isServerEvent == true ? "info_us" : "bus_us"] = micros(received, arrived) }
        if ahead { metadata["ahead"] = "1" }
        if let between, received != nil {
            metadata["info_busy_us"] = micros(.zero, between.busy)
            metadata["info_busy_batches"] = "\(between.batches)"
        }
        logger.log(level: logger.logLevel <= .debug ? .debug : .notice, "event path", metadata: metadata)
    }
}

/// When the server told of each stream's event (its subscription event), until the event comes with its
/// info (tracing only).
final class SubscriptionStamps: Sendable {
    private struct State {
        /// Per stream, the word's time and the loop's work done by then.
        var stamps: [StreamReference: (at: Duration, busy: Duration, batches: Int)] = [:]
        /// The loop's work on its batches so far, and how many.
        var busy = Duration.zero
        var batches = 0
        /// For the first event taken since the last look: the loop's work between its word and its push.
        var between: (busy: Duration, batches: Int)?
    }
    private let state = Mutex(State())

    func note(_ stream: StreamReference, at now: Duration) {
        state.withLock { state in
            if state.stamps[stream] == nil { state.stamps[stream] = (now, state.busy, state.batches) }
        }
    }

    /// The loop worked on a batch this long (its own thread, libpulse's: the words and infos wait meanwhile).
    func loopWorked(_ duration: Duration) {
        state.withLock { state in
            state.busy += duration
            state.batches += 1
        }
    }

    /// The first word of the event's stream since its last event, forgotten with it.
    func take(_ event: PulseEvent) -> Duration? {
        let stream: AudioStream
        switch event {
        case .added(.sinkInput(let s)), .added(.sourceOutput(let s)), .changed(_, .sinkInput(let s)), .changed(_, .sourceOutput(let s)),
             .removed(.sinkInput(let s)), .removed(.sourceOutput(let s)): stream = s
        default: return nil
        }
        return state.withLock { state in
            guard let stamp = state.stamps.removeValue(forKey: StreamReference(stream.direction, stream.id)) else { return nil }
            if state.between == nil { state.between = (state.busy - stamp.busy, state.batches - stamp.batches) }
            return stamp.at
        }
    }

    /// The loop's work between the word of the first event taken since the last look and its push; forgotten.
    func takeBetween() -> (busy: Duration, batches: Int)? {
        state.withLock { state in
            defer { state.between = nil }
            return state.between
        }
    }
}

extension TowerInput {
    var isServerEvent: Bool { if case .server = self { true } else { false } }

    /// What kind of input, in a word or two ("server newStream", "answered", "tick").
    var kind: String {
        switch self {
        case .server(let event): "server " + "\(event)".prefix { $0 != "(" }
        case .answered: "answered"
        case .tick: "tick"
        case .policies: "policies"
        case .recovered: "recovered"
        case .journal: "journal"
        case .stop: "stop"
        case .players: "players"
        case .desktop: "desktop"
        case .playerAnswered: "playerAnswered"
        case .app(let event): "app " + "\(event)".prefix { $0 != "(" }
        case .sound: "sound"
        case .kept: "kept"
        }
    }
}

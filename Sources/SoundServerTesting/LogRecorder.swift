public import Logging
public import Synchronization

/// A log that keeps every event it is given, for tests to read and count what the agent said (behind
/// `EscapingLogHandler` too: `Handler` is a plain `LogHandler`).
public final class LogRecorder: Sendable {
    public struct Event: Sendable {
        public var level: Logger.Level
        public var message: String
        /// The handler's metadata and the event's, the event's winning.
        public var metadata: Logger.Metadata
        /// "level message key=value ...", keys in order.
        public var line: String {
            ([level.rawValue, message] + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }).joined(separator: " ")
        }
    }

    public let events = Mutex<[Event]>([])

    public init() {}

    /// A logger that records here, every level.
    public var logger: Logger { Logger(label: "recorded") { _ in Handler(recorder: self) } }

    public var lines: [String] { events.withLock { $0.map(\.line) } }

    public func count(containing text: String) -> Int { lines.filter { $0.contains(text) }.count }

    public struct Handler: LogHandler {
        let recorder: LogRecorder
        public var metadata: Logger.Metadata = [:]
        public var logLevel: Logger.Level = .trace
        public init(recorder: LogRecorder) { self.recorder = recorder }
        public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        public func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            recorder.events.withLock { $0.append(Event(level: event.level, message: event.message.description, metadata: merged)) }
        }
    }
}

public import Logging

/// The agent's log sink: hands every event to another handler (the daemon's stderr handler, the tests'
/// one) with its message, its metadata (keys and values, nested ones too, the handler's own and the
/// metadata provider's) and its error escaped by `Escape.forDisplay`. What an app puts in its stream
/// properties reaches the log through metadata (`session`, `app` ...); escaped here, at the sink, it
/// can neither split one event into several lines nor forge a line, nor send escape sequences to a
/// terminal, whichever log call it came through.
///
/// And shortened (`Escape.forLog`): what an app controls can be as long as the server lets it (a 64 KB
/// stream name made 6.7 MB of log for 50 streams), so a metadata value keeps its first
/// `valueLimit` characters, and a message, an error or a reason (sentences of ours that may quote an
/// app, a file or a path) its first `sentenceLimit`, each then an ellipsis and the whole length.
public struct EscapingLogHandler: LogHandler {
    /// How much of a metadata value a line shows.
    public static let valueLimit = 200
    /// How much of a message, an error or a reason a line shows.
    public static let sentenceLimit = 1_000
    /// The metadata keys whose values are sentences.
    static let sentenceKeys: Set<String> = ["error", "reason", "error.message", "errors"]

    private var wrapped: any LogHandler

    public init(wrapping handler: any LogHandler) {
        wrapped = handler
        if let provider = handler.metadataProvider { wrapped.metadataProvider = Self.escaping(provider) }
    }

    public var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    public var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = Self.escape(newValue) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: Escape.forLog(key)] }
        set { wrapped[metadataKey: Escape.forLog(key)] = newValue.map { Self.escape($0, limit: Self.limit(for: key)) } }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue.map(Self.escaping) }
    }

    public func log(event: LogEvent) {
        var event = event
        event.message = "\(Escape.forLog(event.message.description, limit: Self.sentenceLimit))"
        var metadata = event.metadata.map(Self.escape)
        // An error's text can quote what an app or a file holds: shown under the keys swift-log's own
        // handlers use, escaped.
        if let error = event.error {
            metadata = metadata ?? [:]
            metadata?["error.message"] = .string(Escape.forLog("\(error)", limit: Self.sentenceLimit))
            metadata?["error.type"] = .string(Escape.forDisplay(String(reflecting: type(of: error))))
            event.error = nil
        }
        event.metadata = metadata
        wrapped.log(event: event)
    }

    static func escape(_ metadata: Logger.Metadata) -> Logger.Metadata {
        var result: Logger.Metadata = [:]
        for (key, value) in metadata { result[Escape.forLog(key)] = escape(value, limit: limit(for: key)) }
        return result
    }

    static func limit(for key: String) -> Int { sentenceKeys.contains(key) ? sentenceLimit : valueLimit }

    /// Metadata nests only as deep as the code that logs builds it (no app controls the shape), so
    /// recursion is bounded here.
    static func escape(_ value: Logger.Metadata.Value, limit: Int) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(Escape.forLog(text, limit: limit))
        case .stringConvertible(let item): .string(Escape.forLog(item.description, limit: limit))
        case .array(let items): .array(items.map { escape($0, limit: limit) })
        case .dictionary(let entries): .dictionary(escape(entries))
        }
    }

    static func escaping(_ provider: Logger.MetadataProvider) -> Logger.MetadataProvider {
        Logger.MetadataProvider { escape(provider.get()) }
    }
}

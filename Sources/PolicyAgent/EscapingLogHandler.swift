public import Logging

/// The agent's log sink: hands every event to another handler (the daemon's stderr handler, the tests'
/// one) with its message, its metadata (keys and values, nested ones too, the handler's own and the
/// metadata provider's) and its error escaped by `Escape.forDisplay`. What an app puts in its stream
/// properties reaches the log through metadata (`session`, `app` ...); escaped here, at the sink, it
/// can neither split one event into several lines nor forge a line, nor send escape sequences to a
/// terminal, whichever log call it came through.
public struct EscapingLogHandler: LogHandler {
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
        get { wrapped[metadataKey: Escape.forDisplay(key)] }
        set { wrapped[metadataKey: Escape.forDisplay(key)] = newValue.map(Self.escape) }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue.map(Self.escaping) }
    }

    public func log(event: LogEvent) {
        var event = event
        event.message = "\(Escape.forDisplay(event.message.description))"
        var metadata = event.metadata.map(Self.escape)
        // An error's text can quote what an app or a file holds: shown under the keys swift-log's own
        // handlers use, escaped.
        if let error = event.error {
            metadata = metadata ?? [:]
            metadata?["error.message"] = .string(Escape.forDisplay("\(error)"))
            metadata?["error.type"] = .string(Escape.forDisplay(String(reflecting: type(of: error))))
            event.error = nil
        }
        event.metadata = metadata
        wrapped.log(event: event)
    }

    static func escape(_ metadata: Logger.Metadata) -> Logger.Metadata {
        var result: Logger.Metadata = [:]
        for (key, value) in metadata { result[Escape.forDisplay(key)] = escape(value) }
        return result
    }

    /// Metadata nests only as deep as the code that logs builds it (no app controls the shape), so
    /// recursion is bounded here.
    static func escape(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(Escape.forDisplay(text))
        case .stringConvertible(let item): .string(Escape.forDisplay(item.description))
        case .array(let items): .array(items.map(escape))
        case .dictionary(let entries): .dictionary(escape(entries))
        }
    }

    static func escaping(_ provider: Logger.MetadataProvider) -> Logger.MetadataProvider {
        Logger.MetadataProvider { escape(provider.get()) }
    }
}

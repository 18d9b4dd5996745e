/// Errors from the sound-server layer, each with the server's own words where it gave any.
public enum PulseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No server answered at the address.
    case noServer(address: String, reason: String)
    /// The client is not connected now (the server went away, or `close()` was called).
    case notConnected
    /// The connection broke while the operation was under way.
    case connectionLost(operation: String, reason: String)
    /// The server refused the operation.
    case failed(operation: String, reason: String)
    /// The server did not answer in time (libpulse's timeout): it may still carry the operation out.
    case timedOut(operation: String)
    /// The named object does not exist (any more).
    case noSuchEntity(String)
    /// A bad argument, caught before it reached the server.
    case badArgument(String)

    /// Whether the server may have carried the operation out all the same: it did not answer in time,
    /// or the connection broke after it was sent.
    public var outcomeUnknown: Bool {
        switch self {
        case .timedOut, .connectionLost: true
        default: false
        }
    }

    /// Whether the server never answered: not connected, the connection lost, or no answer in time. No
    /// refusal: what was asked may still be carried out, or be asked again on the next connection.
    public var isUnanswered: Bool { outcomeUnknown || self == .notConnected }

    public var description: String {
        switch self {
        case .noServer(let address, let reason): "no sound server at \(address): \(reason)"
        case .notConnected: "not connected to the sound server"
        case .connectionLost(let op, let reason): "\(op): the connection to the sound server was lost (\(reason))"
        case .failed(let op, let reason): "\(op) failed: \(reason)"
        case .timedOut(let op): "\(op): the sound server did not answer in time"
        case .noSuchEntity(let what): "no such \(what)"
        case .badArgument(let what): what
        }
    }
}

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
    /// The named object does not exist (any more).
    case noSuchEntity(String)
    /// A bad argument, caught before it reached the server.
    case badArgument(String)

    public var description: String {
        switch self {
        case .noServer(let address, let reason): "no sound server at \(address): \(reason)"
        case .notConnected: "not connected to the sound server"
        case .connectionLost(let op, let reason): "\(op): the connection to the sound server was lost (\(reason))"
        case .failed(let op, let reason): "\(op) failed: \(reason)"
        case .noSuchEntity(let what): "no such \(what)"
        case .badArgument(let what): what
        }
    }
}

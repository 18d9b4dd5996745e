/// One object the server reports, of whichever facility.
public enum Entity: Sendable, Hashable {
    case server(ServerInfo)
    case card(Card)
    case sink(Device)
    case source(Device)
    case client(Client)
    case sinkInput(AudioStream)
    case sourceOutput(AudioStream)
    case module(Module)

    public var facility: Facility {
        switch self {
        case .server: .server
        case .card: .card
        case .sink: .sink
        case .source: .source
        case .client: .client
        case .sinkInput: .sinkInput
        case .sourceOutput: .sourceOutput
        case .module: .module
        }
    }

    public var index: UInt32? {
        switch self {
        case .server: nil
        case .card(let c): c.id
        case .sink(let d), .source(let d): d.id
        case .client(let c): c.id
        case .sinkInput(let s), .sourceOutput(let s): s.id
        case .module(let m): m.id
        }
    }
}

/// The server's object kinds ("facilities" in libpulse's subscription API).
public enum Facility: String, Sendable, Hashable, Codable, CaseIterable {
    case sink
    case source
    case sinkInput = "sink-input"
    case sourceOutput = "source-output"
    case module
    case client
    case sampleCache = "sample-cache"
    case server
    case card
}

/// What happened on the server, in the order it happened.
public enum PulseEvent: Sendable, Hashable {
    /// Connected (or reconnected) and synchronised: the snapshot is complete.
    case connected(Snapshot)
    /// The connection to the server was lost; the client reconnects by itself.
    case disconnected(reason: String)
    /// An object appeared.
    case added(Entity)
    /// An object changed; `old` is what it was before.
    case changed(old: Entity, new: Entity)
    /// An object went away; this is what it last was.
    case removed(Entity)
    /// A change of a facility the client does not model (the sample cache).
    case other(facility: Facility, index: UInt32, kind: String)
}

extension PulseEvent {
    /// The event's kind as a word: connected, disconnected, new, change, remove.
    public var kind: String {
        switch self {
        case .connected: "connected"
        case .disconnected: "disconnected"
        case .added: "new"
        case .changed: "change"
        case .removed: "remove"
        case .other(_, _, let kind): kind
        }
    }

    /// The entity the event is about (the new value for a change).
    public var entity: Entity? {
        switch self {
        case .added(let e), .removed(let e), .changed(_, let e): e
        default: nil
        }
    }
}

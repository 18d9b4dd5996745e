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

    /// A client appeared or changed (not a client gone).
    public var isClientNews: Bool {
        switch self {
        case .added(.client), .changed(_, .client): true
        default: false
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

/// What a meter says: what its first block was (audible or silent), then each change between the two;
/// or that it cannot be metered. A playback stream's meter listens to that stream alone; a capture
/// stream's (`direction` .input) listens to the microphone it records from, whatever the stream's own
/// mute (the agent's microphone mute mutes the capture, not the microphone).
public enum SoundReport: Hashable, Sendable {
    case heard(stream: UInt32, direction: Direction = .output)
    /// Silent, and already for this long when said (blocks come several a read: the last sound was
    /// in one of the read's first blocks, or in the read before).
    case silent(stream: UInt32, for: Duration = .zero, direction: Direction = .output)
    /// The meter could not be opened, or was lost again and again: nothing more comes from it.
    case failed(stream: UInt32, reason: String, direction: Direction = .output)

    public var stream: UInt32 {
        switch self {
        case .heard(let s, _), .silent(let s, _, _), .failed(let s, _, _): s
        }
    }

    public var direction: Direction {
        switch self {
        case .heard(_, let d), .silent(_, _, let d), .failed(_, _, let d): d
        }
    }
}

extension Snapshot {
    /// The snapshot after an event: a consumer of `forwardEvents` keeps its own copy of the server this
    /// way (no snapshot travels with each event: a queue of events each holding its own copy of a busy
    /// server's model is what made memory grow under load).
    public mutating func apply(_ event: PulseEvent) {
        switch event {
        case .connected(let snapshot): self = snapshot
        case .disconnected: self = Snapshot()
        case .added(let entity), .changed(_, let entity): _ = replace(entity)
        case .removed(let entity): if let index = entity.index { _ = remove(entity.facility, index) }
        case .other: break
        }
    }

    /// Stores the entity, returning what it replaced.
    package mutating func replace(_ entity: Entity) -> Entity? {
        switch entity {
        case .server(let s):
            defer { server = s }
            return server.map(Entity.server)
        case .card(let c): return cards.updateValue(c, forKey: c.id).map(Entity.card)
        case .sink(let d): return sinks.updateValue(d, forKey: d.id).map(Entity.sink)
        case .source(let d): return sources.updateValue(d, forKey: d.id).map(Entity.source)
        case .client(let c): return clients.updateValue(c, forKey: c.id).map(Entity.client)
        case .sinkInput(let s): return sinkInputs.updateValue(s, forKey: s.id).map(Entity.sinkInput)
        case .sourceOutput(let s): return sourceOutputs.updateValue(s, forKey: s.id).map(Entity.sourceOutput)
        case .module(let m): return modules.updateValue(m, forKey: m.id).map(Entity.module)
        }
    }

    /// Removes the entity of that facility and index, returning what it last was.
    package mutating func remove(_ facility: Facility, _ index: UInt32) -> Entity? {
        switch facility {
        case .card: cards.removeValue(forKey: index).map(Entity.card)
        case .sink: sinks.removeValue(forKey: index).map(Entity.sink)
        case .source: sources.removeValue(forKey: index).map(Entity.source)
        case .client: clients.removeValue(forKey: index).map(Entity.client)
        case .sinkInput: sinkInputs.removeValue(forKey: index).map(Entity.sinkInput)
        case .sourceOutput: sourceOutputs.removeValue(forKey: index).map(Entity.sourceOutput)
        case .module: modules.removeValue(forKey: index).map(Entity.module)
        case .server, .sampleCache: nil
        }
    }
}

/// The properties by which the agent's own streams (memory probes, meters) are told from the apps'.
public enum ProbeProperty {
    /// The property our probe and meter streams carry.
    public static let key = "audiosession.probe"
    /// Its value on a meter's stream.
    public static let meterValue = "meter"
}

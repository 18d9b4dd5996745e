/// A stream on the server: a playback stream (sink input) or a capture stream (source output).
public struct StreamReference: Sendable, Hashable, CustomStringConvertible {
    public var direction: Direction
    public var index: UInt32
    public init(_ direction: Direction, _ index: UInt32) { self.direction = direction; self.index = index }
    public var description: String { "\(direction == .output ? "sink input" : "source output") #\(index)" }
}

/// Something the server is asked to do, as a value: what the agent's executor sends without waiting,
/// and what the `async` functions of `PulseClient` send and wait for. Devices and cards are named,
/// not numbered, so that a command decided on a name still means that device when it is carried out.
public enum ServerCommand: Sendable, Hashable {
    case setStreamMute(StreamReference, Bool)
    case setStreamVolume(StreamReference, ChannelVolumes)
    case moveStream(StreamReference, toDevice: String)
    case killStream(StreamReference)
    case setDefaultDevice(String, Direction)
    case setCardProfile(card: String, profile: String)
    case setActivePort(device: String, Direction, port: String)
    case loadModule(name: String, arguments: String)
    case unloadModule(UInt32)
    /// Everything the server remembers about streams (ext-stream-restore).
    case readStreamRestore
    /// Writes remembered entries, overwriting those of the same names.
    case writeStreamRestore([StreamRestoreEntry], mode: StreamRestoreWriteMode = .replace, applyImmediately: Bool = false)
    case deleteStreamRestore([String])
    /// Makes the server remember the entry through streams of our own (`writeMemoryThroughStream`): its
    /// mute and volume, and, when `device` says so, the device the key's streams go to.
    case writeMemoryThroughStream(StreamRestoreEntry, device: RememberedDevice = .untouched)
    /// Replaces properties of our own client (what `pactl list clients` shows of us).
    case updateClientProperties(Properties)

    /// In words, for errors and logs.
    public var description: String {
        switch self {
        case .setStreamMute(let s, let muted): "\(muted ? "mute" : "unmute") \(s)"
        case .setStreamVolume(let s, let v): "set volume of \(s) to \(v)"
        case .moveStream(let s, let device): "move \(s) to \(device)"
        case .killStream(let s): "kill \(s)"
        case .setDefaultDevice(let name, let d): "set default \(d == .output ? "sink" : "source") to \(name)"
        case .setCardProfile(let card, let profile): "set profile of \(card) to \(profile)"
        case .setActivePort(let device, _, let port): "set port of \(device) to \(port)"
        case .loadModule(let name, _): "load \(name)"
        case .unloadModule(let index): "unload module #\(index)"
        case .readStreamRestore: "read the stream-restore database"
        case .writeStreamRestore: "write the stream-restore database"
        case .deleteStreamRestore: "delete from the stream-restore database"
        case .writeMemoryThroughStream(let entry, _): "write the memory of \(entry.name) through a stream"
        case .updateClientProperties: "update our client's properties"
        }
    }
}

/// What a write of the server's memory through streams does to the device it remembers for the key.
/// (Both servers remember where an app's or role's stream was last moved, and send its next stream
/// there: PulseAudio's stream-restore with its default `restore_device`, WirePlumber as the key's
/// `target`. A move to the default device makes both forget it.)
public enum RememberedDevice: Sendable, Hashable {
    /// Left as it is.
    case untouched
    /// Set to the device named (nil: none, the key's streams follow the default).
    case set(String?)
}

/// What the server answered.
public enum ServerAnswer: Sendable, Hashable {
    case done
    /// A loaded module's index.
    case index(UInt32)
    case restoreEntries([StreamRestoreEntry])
}

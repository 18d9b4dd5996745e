/// One entry of the server's memory of per-app / per-role stream settings: PulseAudio's
/// module-stream-restore database, which pipewire-pulse also serves from WirePlumber's
/// restore-stream state. Keys look like `sink-input-by-media-role:music` or
/// `sink-input-by-application-name:Firefox`.
public struct StreamRestoreEntry: Sendable, Hashable, Codable {
    public var name: String
    public var channelMap: [String]
    /// nil when the entry remembers no volume.
    public var volume: ChannelVolumes?
    public var device: String?
    public var isMuted: Bool

    public init(name: String, channelMap: [String], volume: ChannelVolumes?, device: String?, isMuted: Bool) {
        self.name = name; self.channelMap = channelMap; self.volume = volume; self.device = device
        self.isMuted = isMuted
    }
}

/// How `writeStreamRestore` combines the entries with what the server has (PulseAudio's meaning;
/// pipewire-pulse ignores the mode and always writes every entry).
public enum StreamRestoreWriteMode: Sendable {
    /// Replace the whole database with the entries.
    case set
    /// Add the entries whose names are new; leave existing entries as they are.
    case merge
    /// Add the entries, overwriting those that exist.
    case replace
}

/// What is playing, as MPRIS players say it in `Metadata` (xesam and mpris keys) and declared apps with
/// `SetNowPlayingInfo(a{sv})`: the title, artists, album, length and cover, each bounded (an app says
/// what it likes: at most `textLimit` characters a text and `artistLimit` artists are kept).
public struct NowPlayingInfo: Hashable, Sendable {
    public var title: String?
    public var artists: [String] = []
    public var album: String?
    /// In microseconds (`mpris:length`).
    public var length: Int64?
    /// `mpris:artUrl`.
    public var artURL: String?
    /// Where it is in it when it says so, in microseconds (`audiosession:elapsed`: Apple's elapsed
    /// playback time); it moves on from then while the session plays. At most a thousand days.
    public var elapsed: Int64?

    public static let textLimit = 512
    public static let artistLimit = 16

    public static let elapsedLimit: Int64 = 86_400_000_000_000

    /// A time in microseconds, as MPRIS says positions and lengths (wrapping far beyond a thousand days).
    public static func microseconds(_ d: Duration) -> Int64 {
        d.components.seconds &* 1_000_000 &+ d.components.attoseconds / 1_000_000_000_000
    }

    public init(title: String? = nil, artists: [String] = [], album: String? = nil, length: Int64? = nil, artURL: String? = nil,
                elapsed: Int64? = nil) {
        self.elapsed = elapsed.map { min(max(0, $0), Self.elapsedLimit) }
        self.title = title.map(Self.bounded)
        self.artists = artists.prefix(Self.artistLimit).map(Self.bounded)
        self.album = album.map(Self.bounded)
        self.length = length.map { max(0, $0) }
        self.artURL = artURL.map(Self.bounded)
    }

    static func bounded(_ text: String) -> String { text.count > textLimit ? String(text.prefix(textLimit)) : text }

    public var isEmpty: Bool { title == nil && artists.isEmpty && album == nil && length == nil && artURL == nil && elapsed == nil }
}

/// A specialisation of a category (SPEC.md section 3).
public struct Mode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    /// The known mode, nil for any other (as `Category.known`).
    let known: Known?
    enum Known: String { case `default`, voiceChat, videoChat, gameChat, videoRecording, moviePlayback, spokenAudio, measurement }

    public init(rawValue: String) {
        self.rawValue = rawValue
        known = Known(rawValue: rawValue)
    }

    public static func == (a: Mode, b: Mode) -> Bool { a.known == b.known && (a.known != nil || a.rawValue == b.rawValue) }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
    public init(from decoder: any Decoder) throws { self.init(rawValue: try decoder.singleValueContainer().decode(String.self)) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public static let `default` = Mode(rawValue: "default")
    /// A voice call: implies allowBluetooth, prefers headset-class devices.
    public static let voiceChat = Mode(rawValue: "voiceChat")
    /// A video call: implies allowBluetooth and defaultToSpeaker.
    public static let videoChat = Mode(rawValue: "videoChat")
    /// Game chat: routed like videoChat.
    public static let gameChat = Mode(rawValue: "gameChat")
    /// Recording video: prefers a camera or USB microphone.
    public static let videoRecording = Mode(rawValue: "videoRecording")
    public static let moviePlayback = Mode(rawValue: "moviePlayback")
    /// Podcasts, audiobooks, screen readers: paused, not ducked, by interruptSpokenAudioAndMixWithOthers.
    public static let spokenAudio = Mode(rawValue: "spokenAudio")
    /// No signal processing, and never ducked.
    public static let measurement = Mode(rawValue: "measurement")

    public static let allCases: [Mode] = [
        .default, .voiceChat, .videoChat, .gameChat, .videoRecording, .moviePlayback, .spokenAudio, .measurement,
    ]

    /// The categories that accept this mode (SPEC.md section 3); nil for "all".
    public var acceptedCategories: [Category]? {
        switch self {
        case .default: nil
        case .voiceChat, .videoChat, .gameChat: [.playAndRecord]
        case .videoRecording: [.playAndRecord, .record]
        case .moviePlayback, .spokenAudio: [.playback]
        case .measurement: [.playAndRecord, .record, .playback]
        default: []
        }
    }

    /// voiceChat, videoChat and gameChat make a session a call (SPEC.md 5.1).
    public var isCallMode: Bool { known == .voiceChat || known == .videoChat || known == .gameChat }

    public var description: String { rawValue }
}

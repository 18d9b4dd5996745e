/// A specialisation of a category (SPEC.md section 3).
public struct Mode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

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
    public var isCallMode: Bool { self == .voiceChat || self == .videoChat || self == .gameChat }

    public var description: String { rawValue }
}

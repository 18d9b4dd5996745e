/// What a session does with audio (SPEC.md section 2). A struct with static members, so that new
/// categories never break users; the raw value is the name used in policy files.
public struct Category: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Background sound that mixes with everything; silenced by silent mode and screen lock.
    public static let ambient = Category(rawValue: "ambient")
    /// iOS's default: like ambient, but interrupts non-mixable sessions.
    public static let soloAmbient = Category(rawValue: "soloAmbient")
    /// Playback that matters (music, video); keeps playing when locked.
    public static let playback = Category(rawValue: "playback")
    /// Recording; silences all other output (calls excepted) while active.
    public static let record = Category(rawValue: "record")
    /// Recording and playback at once: calls, voice chat.
    public static let playAndRecord = Category(rawValue: "playAndRecord")
    /// Output to several devices at once, one input.
    public static let multiRoute = Category(rawValue: "multiRoute")
    /// Offline processing: neither plays nor records.
    public static let audioProcessing = Category(rawValue: "audioProcessing")

    public static let allCases: [Category] = [
        .ambient, .soloAmbient, .playback, .record, .playAndRecord, .multiRoute, .audioProcessing,
    ]

    /// Silenced by silent mode and the screen lock (SPEC.md 5.10).
    public var isSilencedBySilentMode: Bool { self == .ambient || self == .soloAmbient }
    /// Captures audio.
    public var hasInput: Bool { [.record, .playAndRecord, .multiRoute].contains(self) }
    /// Plays audio.
    public var hasOutput: Bool { [.ambient, .soloAmbient, .playback, .playAndRecord, .multiRoute].contains(self) }

    public var description: String { rawValue }
}

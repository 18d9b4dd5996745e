/// What a session does with audio (SPEC.md section 2). A struct with static members, so that new
/// categories never break users; the raw value is the name used in policy files.
public struct Category: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    /// The known category, nil for any other: what the core compares, many times per event (comparing
    /// the names was a good part of its time).
    let known: Known?
    enum Known: String { case ambient, soloAmbient, playback, record, playAndRecord, multiRoute, audioProcessing }

    public init(rawValue: String) {
        self.rawValue = rawValue
        known = Known(rawValue: rawValue)
    }

    public static func == (a: Category, b: Category) -> Bool { a.known == b.known && (a.known != nil || a.rawValue == b.rawValue) }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
    public init(from decoder: any Decoder) throws { self.init(rawValue: try decoder.singleValueContainer().decode(String.self)) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

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
    public var isSilencedBySilentMode: Bool { known == .ambient || known == .soloAmbient }
    /// Captures audio.
    public var hasInput: Bool { known == .record || known == .playAndRecord || known == .multiRoute }
    /// Plays audio.
    public var hasOutput: Bool {
        switch known {
        case .ambient, .soloAmbient, .playback, .playAndRecord, .multiRoute: true
        case .record, .audioProcessing, nil: false
        }
    }

    public var description: String { rawValue }
}

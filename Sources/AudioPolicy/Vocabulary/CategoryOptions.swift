/// Options that modify a category (SPEC.md section 4). Raw values are Apple's
/// (`AVAudioSession.CategoryOptions`).
public struct CategoryOptions: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Does not interrupt others; not interrupted by non-mixable sessions. The corresponding Apple value is 0x1.
    public static let mixWithOthers = CategoryOptions(rawValue: 0x1)
    /// Lowers other output while active; implies mixWithOthers. Apple value 0x2.
    public static let duckOthers = CategoryOptions(rawValue: 0x2)
    /// May use Bluetooth hands-free (HFP/HSP), switching the card's profile. Apple value 0x4.
    public static let allowBluetooth = CategoryOptions(rawValue: 0x4)
    /// With no headset, the built-in speaker rather than the receiver. Apple value 0x8.
    public static let defaultToSpeaker = CategoryOptions(rawValue: 0x8)
    /// Interrupts spoken audio, mixes with the rest; includes mixWithOthers. Apple value 0x11.
    public static let interruptSpokenAudioAndMixWithOthers = CategoryOptions(rawValue: 0x11)
    /// May play to Bluetooth A2DP while recording elsewhere. Apple value 0x20.
    public static let allowBluetoothA2DP = CategoryOptions(rawValue: 0x20)
    /// May use AirPlay and network sinks. Apple value 0x40.
    public static let allowAirPlay = CategoryOptions(rawValue: 0x40)

    /// Every option with its policy-file name, in a stable order.
    public static let named: [(name: String, option: CategoryOptions)] = [
        ("mixWithOthers", .mixWithOthers), ("duckOthers", .duckOthers),
        ("interruptSpokenAudioAndMixWithOthers", .interruptSpokenAudioAndMixWithOthers),
        ("allowBluetooth", .allowBluetooth), ("allowBluetoothA2DP", .allowBluetoothA2DP),
        ("allowAirPlay", .allowAirPlay), ("defaultToSpeaker", .defaultToSpeaker),
    ]

    public init?(name: String) {
        guard let match = Self.named.first(where: { $0.name == name }) else { return nil }
        self = match.option
    }

    /// The names of the options in the set; `interruptSpokenAudioAndMixWithOthers` covers the
    /// mixWithOthers bit it includes.
    public var names: [String] {
        Self.named.compactMap { name, option in
            guard isSuperset(of: option) else { return nil }
            if option == .mixWithOthers && contains(.interruptSpokenAudioAndMixWithOthers) { return nil }
            return name
        }
    }

    public var description: String { "[" + names.joined(separator: ", ") + "]" }

    /// The categories that accept the option (SPEC.md section 4).
    public static func acceptedCategories(of option: CategoryOptions) -> [Category] {
        switch option {
        case .mixWithOthers: [.playback, .playAndRecord, .multiRoute]
        case .duckOthers: [.ambient, .playback, .playAndRecord, .multiRoute]
        case .interruptSpokenAudioAndMixWithOthers: [.playback, .playAndRecord, .multiRoute]
        case .allowBluetooth: [.record, .playAndRecord]
        case .allowBluetoothA2DP, .allowAirPlay, .defaultToSpeaker: [.playAndRecord]
        default: []
        }
    }
}

extension CategoryOptions: Codable {
    public init(from decoder: any Decoder) throws {
        let names = try decoder.singleValueContainer().decode([String].self)
        self = []
        for name in names {
            guard let option = CategoryOptions(name: name) else {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: decoder.codingPath,
                    debugDescription: "unknown option '\(name)' (accepted: \(Self.named.map(\.name).joined(separator: ", ")))"))
            }
            insert(option)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(names)
    }
}

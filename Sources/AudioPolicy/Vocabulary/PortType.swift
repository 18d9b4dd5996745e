/// The kind of an audio input or output, as AVAudioSession names them (SPEC.md section 6).
///
/// A struct with static members rather than an enum, so that new kinds never break users. The raw
/// value is Apple's string (`"USBAudio"`); `name` is the Swift member name (`"usbAudio"`), which is
/// also how a port type is written in JSON.
public struct PortType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The built-in speaker of a laptop or desktop. The corresponding Apple value is "Speaker".
    public static let builtInSpeaker = PortType(rawValue: "Speaker")
    /// A handset/earpiece speaker. The corresponding Apple value is "Receiver".
    public static let builtInReceiver = PortType(rawValue: "Receiver")
    /// Wired headphones, or the output side of a wired headset. Apple value "Headphones".
    public static let headphones = PortType(rawValue: "Headphones")
    /// The microphone of a wired headset, or a microphone jack. Apple value "MicrophoneWired".
    public static let headsetMic = PortType(rawValue: "MicrophoneWired")
    /// The built-in (internal or webcam) microphone. Apple value "MicrophoneBuiltIn".
    public static let builtInMic = PortType(rawValue: "MicrophoneBuiltIn")
    /// Line-level input. Apple value "LineIn".
    public static let lineIn = PortType(rawValue: "LineIn")
    /// Line-level output, S/PDIF included. Apple value "LineOut".
    public static let lineOut = PortType(rawValue: "LineOut")
    /// HDMI output (a monitor or TV). Apple value "HDMI".
    public static let hdmi = PortType(rawValue: "HDMI")
    /// DisplayPort output. Apple value "DisplayPort".
    public static let displayPort = PortType(rawValue: "DisplayPort")
    /// A USB audio device, USB headsets included. Apple value "USBAudio".
    public static let usbAudio = PortType(rawValue: "USBAudio")
    /// Bluetooth in the A2DP (high-quality, output-only) profile. Apple value "BluetoothA2DPOutput".
    public static let bluetoothA2DP = PortType(rawValue: "BluetoothA2DPOutput")
    /// Bluetooth in a hands-free profile (HFP/HSP), input and output. Apple value "BluetoothHFP".
    public static let bluetoothHFP = PortType(rawValue: "BluetoothHFP")
    /// Bluetooth LE audio (BAP). Apple value "BluetoothLE".
    public static let bluetoothLE = PortType(rawValue: "BluetoothLE")
    /// A car's audio system. Apple value "CarAudio".
    public static let carAudio = PortType(rawValue: "CarAudio")
    /// AirPlay (RAOP) receivers. Apple value "AirPlay".
    public static let airPlay = PortType(rawValue: "AirPlay")
    /// Null sinks, loopbacks, filters and monitors: no device of their own. Apple value "Virtual".
    public static let virtual = PortType(rawValue: "Virtual")
    /// Desktop extra: network sinks and sources (PulseAudio tunnels, RTP, Snapcast).
    public static let network = PortType(rawValue: "Network")
    /// A PCI card whose port kind cannot be told (Apple value "PCI").
    public static let pci = PortType(rawValue: "PCI")
    /// A FireWire audio interface (Apple value "Firewire").
    public static let fireWire = PortType(rawValue: "Firewire")

    /// Every type this version knows, with its member name.
    public static let known: [(name: String, type: PortType)] = [
        ("builtInSpeaker", .builtInSpeaker), ("builtInReceiver", .builtInReceiver), ("headphones", .headphones),
        ("headsetMic", .headsetMic), ("builtInMic", .builtInMic), ("lineIn", .lineIn), ("lineOut", .lineOut),
        ("hdmi", .hdmi), ("displayPort", .displayPort), ("usbAudio", .usbAudio), ("bluetoothA2DP", .bluetoothA2DP),
        ("bluetoothHFP", .bluetoothHFP), ("bluetoothLE", .bluetoothLE), ("carAudio", .carAudio), ("airPlay", .airPlay),
        ("virtual", .virtual), ("network", .network), ("pci", .pci), ("fireWire", .fireWire),
    ]

    /// The Swift member name (`usbAudio`), or the raw value for a type this version does not know.
    public var name: String { PortType.known.first { $0.type == self }?.name ?? rawValue }

    /// The type with this member name or raw value.
    public init?(name: String) {
        guard let match = PortType.known.first(where: { $0.name == name || $0.type.rawValue == name }) else { return nil }
        self = match.type
    }

    public var description: String { name }

    /// Bluetooth of any profile.
    public var isBluetooth: Bool { [.bluetoothA2DP, .bluetoothHFP, .bluetoothLE].contains(self) }
    /// Outputs that a display brings with it (the display-audio guard of SPEC.md section 6).
    public var isDisplayAudio: Bool { self == .hdmi || self == .displayPort }
}

extension PortType: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        self = PortType(name: text) ?? PortType(rawValue: text)
    }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}

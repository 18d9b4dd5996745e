/// Where a session's sound would rather go (SPEC.md section 10): a kind of port (`usbAudio`: any USB
/// device), or one device by its uid (`alsa_output.usb-FiiO_K3-00.analog-stereo`). A session's
/// preferences are a list: the first that a connected port answers wins; with none connected, the
/// session follows the default.
///
/// `everywhere` is no place but a wish, for alarms and ringtones: besides the output the session would
/// use, the built-in speaker too, at once, as a phone rings through its headphones and out loud (never
/// for a call: a rule sends no call to a public output).
public enum OutputPreference: Hashable, Sendable, CustomStringConvertible {
    case type(PortType)
    case device(String)
    case everywhere

    /// A port type's name (`usbAudio`, or Apple's raw value `USBAudio`), `everywhere`, else a device's uid.
    public init(word: String) {
        if word == "everywhere" { self = .everywhere }
        else if let type = PortType(name: word) { self = .type(type) } else { self = .device(word) }
    }

    public var description: String {
        switch self {
        case .type(let type): type.name
        case .device(let uid): uid
        case .everywhere: "everywhere"
        }
    }

    /// Whether the port answers this preference.
    public func matches(_ port: PortDescription) -> Bool {
        switch self {
        case .type(let type): port.type == type
        case .device(let uid): port.uid == uid
        case .everywhere: false
        }
    }
}

/// The user's preferred outputs per category and per app, from the configuration (`outputs.yaml`):
/// an app's list outranks its policy file's `output:`, which outranks its category's list.
public struct OutputRoutes: Hashable, Sendable {
    public var categories: [Category: [OutputPreference]]
    public var apps: [String: [OutputPreference]]
    public init(categories: [Category: [OutputPreference]] = [:], apps: [String: [OutputPreference]] = [:]) {
        self.categories = categories
        self.apps = apps
    }
    public var isEmpty: Bool { categories.isEmpty && apps.isEmpty }
}

/// The outputs of one session that plays on several at once (`OutputPreference.everywhere`): a sink of
/// the agent's own that carries its sound to each (the server's module-combine-sink), named after them
/// so that a successor knows one a predecessor left.
public enum CombinedOutputs {
    /// Every such sink's name starts so (and no other sink's may be taken for one).
    public static let prefix = "audiosession.everywhere."

    /// The sink's name for these outputs (in the session's order): the prefix, then a hash of their names.
    public static func name(_ outputs: [String]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a, 64 bits: the same in every run
        for byte in outputs.joined(separator: "\n").utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return prefix + String(repeating: "0", count: 16 - hex.count) + hex
    }

    public static func isCombination(_ uid: String) -> Bool { uid.hasPrefix(prefix) }
}

extension PortType {
    /// Outputs only their wearer (or the one holding the handset) hears: headphones, headsets, Bluetooth,
    /// USB (USB headsets: a USB device's kind is not told apart), the built-in receiver, a car's system.
    /// The others (speakers, HDMI and DisplayPort, line out, network and AirPlay sinks) are public: a rule
    /// never moves a call to one of those, only the user does (SPEC.md section 10).
    public var isPrivate: Bool {
        switch self {
        case .headphones, .headsetMic, .bluetoothA2DP, .bluetoothHFP, .bluetoothLE, .usbAudio, .builtInReceiver, .carAudio: true
        default: false
        }
    }
}

/// Where a session's sound would rather go (SPEC.md section 10): a kind of port (`usbAudio`: any USB
/// device), or one device by its uid (`alsa_output.usb-FiiO_K3-00.analog-stereo`). A session's
/// preferences are a list: the first that a connected port answers wins; with none connected, the
/// session follows the default.
public enum OutputPreference: Hashable, Sendable, CustomStringConvertible {
    case type(PortType)
    case device(String)

    /// A port type's name (`usbAudio`, or Apple's raw value `USBAudio`), else a device's uid.
    public init(word: String) {
        if let type = PortType(name: word) { self = .type(type) } else { self = .device(word) }
    }

    public var description: String {
        switch self {
        case .type(let type): type.name
        case .device(let uid): uid
        }
    }

    /// Whether the port answers this preference.
    public func matches(_ port: PortDescription) -> Bool {
        switch self {
        case .type(let type): port.type == type
        case .device(let uid): port.uid == uid
        }
    }
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

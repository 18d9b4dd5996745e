public import ServerModel

/// What the sound server says about one sink or source, reduced to the facts that tell its port type.
/// The shell fills it from the server's snapshot; the policy core never sees libpulse types.
public struct PortFacts: Hashable, Sendable {
    public typealias Direction = ServerModel.Direction

    /// The active port of the device (ALSA's `analog-output-headphones`, UCM's `[Out] Speaker` ...).
    public struct ActivePort: Hashable, Sendable {
        public var name: String
        public var description: String
        /// PulseAudio's port type word: `speaker`, `headphones`, `hdmi`, `mic`, `headset`, `handset`,
        /// `earpiece`, `line`, `spdif`, `tv`, `usb`, `bluetooth`, `handsfree`, `car`, `unknown` ...
        public var type: String
        public init(name: String, description: String = "", type: String = "unknown") {
            self.name = name; self.description = description; self.type = type
        }
    }

    public var direction: Direction
    /// The device's name (`alsa_output.pci-0000_00_1f.3.hdmi-stereo`, `bluez_sink.XX.a2dp_sink` ...).
    public var deviceName: String
    public var description: String
    /// The server module or node factory that made it (`module-null-sink.c`, `PipeWire` ...).
    public var driver: String
    public var activePort: ActivePort?
    /// The active profile of the device's card, if it has one.
    public var cardProfile: String?
    /// True for a monitor source (the audio a sink plays).
    public var isMonitor: Bool
    /// The device's property list, with its card's properties under it (the device's win).
    public var properties: [String: String]

    public init(
        direction: Direction, deviceName: String, description: String = "", driver: String = "",
        activePort: ActivePort? = nil, cardProfile: String? = nil, isMonitor: Bool = false,
        properties: [String: String] = [:]
    ) {
        self.direction = direction; self.deviceName = deviceName; self.description = description
        self.driver = driver; self.activePort = activePort; self.cardProfile = cardProfile
        self.isMonitor = isMonitor; self.properties = properties
    }
}

/// A port type with the fact that decided it, for `audiosessionctl` to explain.
public struct PortClassification: Hashable, Sendable {
    public var type: PortType
    /// The deciding fact, e.g. `device.bus=usb` or `port type hdmi`.
    public var fact: String
    public init(_ type: PortType, because fact: String) { self.type = type; self.fact = fact }
}

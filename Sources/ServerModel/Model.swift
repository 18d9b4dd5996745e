import FoundationEssentials
import Glibc

/// Swift value types for everything the sound server reports. They hold no libpulse pointers and are
/// safe to keep, compare and send anywhere.

/// A property list as the server reports it (`device.bus`, `application.name`, `media.role` ...).
public typealias Properties = [String: String]

/// Whether a device or stream plays (output) or captures (input).
public enum Direction: String, Sendable, Hashable, Codable, CaseIterable {
    case output
    case input
}

/// A volume on PulseAudio's scale, where `norm` (0x10000) is 100 % and 0 is silence.
public struct Volume: RawRepresentable, Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// 100 %, 0 dB.
    public static let norm = Volume(rawValue: 0x10000)
    /// Silence.
    public static let muted = Volume(rawValue: 0)

    /// The volume as a fraction of `norm` (1.0 is 100 %), on the server's cubic scale.
    public var fraction: Double { Double(rawValue) / Double(Volume.norm.rawValue) }
    public init(fraction: Double) {
        self.rawValue = UInt32((max(0, fraction) * Double(Volume.norm.rawValue)).rounded())
    }

    /// The amplitude factor this volume applies (PulseAudio's software volume is cubic).
    public var amplitude: Double { let f = fraction; return f * f * f }
    public init(amplitude: Double) { self.init(fraction: cbrt(max(0, amplitude))) }

    public static func < (a: Volume, b: Volume) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "\(Int((fraction * 100).rounded()))%" }
}

/// One volume per channel, in channel-map order.
public struct ChannelVolumes: Sendable, Hashable, Codable, CustomStringConvertible {
    public var values: [Volume]
    public init(_ values: [Volume]) { self.values = values }
    public init(channels: Int, volume: Volume) { self.values = Array(repeating: volume, count: channels) }

    /// The loudest channel, which is what PulseAudio calls the overall volume.
    public var overall: Volume { values.max() ?? .muted }
    public var description: String { values.map(\.description).joined(separator: " ") }

    /// The same volume give or take `tolerance` raw units per channel (servers round volumes through
    /// floats); never, with another number of channels.
    public func isClose(to other: ChannelVolumes, within tolerance: Int64) -> Bool {
        values.count == other.values.count
            && zip(values, other.values).allSatisfy { abs(Int64($0.rawValue) - Int64($1.rawValue)) <= tolerance }
    }
}

/// Format, rate and channel count of a device or stream.
public struct SampleSpec: Sendable, Hashable, Codable, CustomStringConvertible {
    public var format: String
    public var rate: UInt32
    public var channels: UInt8
    public init(format: String, rate: UInt32, channels: UInt8) {
        self.format = format; self.rate = rate; self.channels = channels
    }
    public var description: String { "\(format) \(channels)ch \(rate)Hz" }
}

/// Whether a port can be used now: a jack with something plugged in, a Bluetooth profile connected.
public enum PortAvailability: String, Sendable, Hashable, Codable {
    case unknown
    case no
    case yes
}

/// The kind of port, as PulseAudio (14+) and pipewire-pulse report it.
public struct DevicePortType: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let unknown = DevicePortType(rawValue: 0)
    public static let aux = DevicePortType(rawValue: 1)
    public static let speaker = DevicePortType(rawValue: 2)
    public static let headphones = DevicePortType(rawValue: 3)
    public static let line = DevicePortType(rawValue: 4)
    public static let mic = DevicePortType(rawValue: 5)
    public static let headset = DevicePortType(rawValue: 6)
    public static let handset = DevicePortType(rawValue: 7)
    public static let earpiece = DevicePortType(rawValue: 8)
    public static let spdif = DevicePortType(rawValue: 9)
    public static let hdmi = DevicePortType(rawValue: 10)
    public static let tv = DevicePortType(rawValue: 11)
    public static let radio = DevicePortType(rawValue: 12)
    public static let video = DevicePortType(rawValue: 13)
    public static let usb = DevicePortType(rawValue: 14)
    public static let bluetooth = DevicePortType(rawValue: 15)
    public static let portable = DevicePortType(rawValue: 16)
    public static let handsfree = DevicePortType(rawValue: 17)
    public static let car = DevicePortType(rawValue: 18)
    public static let hifi = DevicePortType(rawValue: 19)
    public static let phone = DevicePortType(rawValue: 20)
    public static let network = DevicePortType(rawValue: 21)
    public static let analog = DevicePortType(rawValue: 22)

    static let names = [
        "unknown", "aux", "speaker", "headphones", "line", "mic", "headset", "handset", "earpiece",
        "spdif", "hdmi", "tv", "radio", "video", "usb", "bluetooth", "portable", "handsfree", "car",
        "hifi", "phone", "network", "analog",
    ]
    public var description: String {
        rawValue < DevicePortType.names.count ? DevicePortType.names[Int(rawValue)] : "type\(rawValue)"
    }
}

/// A port of a sink or source (what a jack, a speaker or a profile offers).
public struct DevicePort: Sendable, Hashable, Codable {
    public var name: String
    public var description: String
    public var priority: UInt32
    public var availability: PortAvailability
    public var type: DevicePortType
    public var availabilityGroup: String?
    public init(
        name: String, description: String, priority: UInt32, availability: PortAvailability,
        type: DevicePortType, availabilityGroup: String? = nil
    ) {
        self.name = name; self.description = description; self.priority = priority
        self.availability = availability; self.type = type; self.availabilityGroup = availabilityGroup
    }
}

/// A card profile (`output:analog-stereo`, `a2dp-sink`, `headset-head-unit` ...).
public struct CardProfile: Sendable, Hashable, Codable {
    public var name: String
    public var description: String
    public var sinks: UInt32
    public var sources: UInt32
    public var priority: UInt32
    public var isAvailable: Bool

    public init(
        name: String, description: String, sinks: UInt32, sources: UInt32, priority: UInt32, isAvailable: Bool
    ) {
        self.name = name
        self.description = description
        self.sinks = sinks
        self.sources = sources
        self.priority = priority
        self.isAvailable = isAvailable
    }
}

/// A port of a card, with the profiles it belongs to.
public struct CardPort: Sendable, Hashable, Codable {
    public var port: DevicePort
    public var direction: Direction
    public var profiles: [String]
    public var latencyOffset: Int64
    public var properties: Properties

    public init(
        port: DevicePort, direction: Direction, profiles: [String], latencyOffset: Int64, properties: Properties
    ) {
        self.port = port
        self.direction = direction
        self.profiles = profiles
        self.latencyOffset = latencyOffset
        self.properties = properties
    }
}

/// A sound card: the hardware (or Bluetooth device) behind sinks and sources.
public struct Card: Sendable, Hashable, Codable, Identifiable {
    public var id: UInt32
    public var name: String
    public var driver: String
    public var ownerModule: UInt32?
    public var profiles: [CardProfile]
    public var activeProfile: String?
    public var ports: [CardPort]
    public var properties: Properties

    public init(
        id: UInt32, name: String, driver: String, ownerModule: UInt32? = nil, profiles: [CardProfile],
        activeProfile: String? = nil, ports: [CardPort], properties: Properties
    ) {
        self.id = id
        self.name = name
        self.driver = driver
        self.ownerModule = ownerModule
        self.profiles = profiles
        self.activeProfile = activeProfile
        self.ports = ports
        self.properties = properties
    }
}

/// What a device is doing now.
public enum DeviceState: String, Sendable, Hashable, Codable {
    case running
    case idle
    case suspended
    case invalid
}

/// A sink (output) or source (input).
public struct Device: Sendable, Hashable, Codable, Identifiable {
    public var id: UInt32
    public var direction: Direction
    public var name: String
    public var description: String
    public var driver: String
    public var ownerModule: UInt32?
    public var card: UInt32?
    public var ports: [DevicePort]
    public var activePort: String?
    public var sampleSpec: SampleSpec
    public var channelMap: [String]
    public var volume: ChannelVolumes
    public var baseVolume: Volume
    public var isMuted: Bool
    /// Latency now and as configured, in microseconds.
    public var latency: UInt64
    public var configuredLatency: UInt64
    public var state: DeviceState
    /// For a source: the sink it monitors. For a sink: its monitor source.
    public var monitorOf: UInt32?
    public var monitorSource: UInt32?
    public var properties: Properties

    /// A monitor source (the audio a sink plays), not a device of its own.
    public var isMonitor: Bool { direction == .input && monitorOf != nil }
    public var activeDevicePort: DevicePort? { ports.first { $0.name == activePort } }

    public init(
        id: UInt32, direction: Direction, name: String, description: String, driver: String,
        ownerModule: UInt32? = nil, card: UInt32? = nil, ports: [DevicePort], activePort: String? = nil,
        sampleSpec: SampleSpec, channelMap: [String], volume: ChannelVolumes, baseVolume: Volume, isMuted: Bool,
        latency: UInt64, configuredLatency: UInt64, state: DeviceState, monitorOf: UInt32? = nil,
        monitorSource: UInt32? = nil, properties: Properties
    ) {
        self.id = id
        self.direction = direction
        self.name = name
        self.description = description
        self.driver = driver
        self.ownerModule = ownerModule
        self.card = card
        self.ports = ports
        self.activePort = activePort
        self.sampleSpec = sampleSpec
        self.channelMap = channelMap
        self.volume = volume
        self.baseVolume = baseVolume
        self.isMuted = isMuted
        self.latency = latency
        self.configuredLatency = configuredLatency
        self.state = state
        self.monitorOf = monitorOf
        self.monitorSource = monitorSource
        self.properties = properties
    }
}

/// A client connection to the server (one per application process, usually).
public struct Client: Sendable, Hashable, Codable, Identifiable {
    public var id: UInt32
    public var name: String
    public var driver: String
    public var ownerModule: UInt32?
    public var properties: Properties

    public init(
        id: UInt32, name: String, driver: String, ownerModule: UInt32? = nil, properties: Properties
    ) {
        self.id = id
        self.name = name
        self.driver = driver
        self.ownerModule = ownerModule
        self.properties = properties
    }
}

/// A playback stream (sink input) or a capture stream (source output).
public struct AudioStream: Sendable, Hashable, Codable, Identifiable {
    public var id: UInt32
    public var direction: Direction
    public var name: String
    public var client: UInt32?
    public var ownerModule: UInt32?
    /// The sink (playback) or source (capture) the stream is connected to.
    public var device: UInt32?
    public var sampleSpec: SampleSpec
    public var channelMap: [String]
    public var volume: ChannelVolumes
    public var isMuted: Bool
    public var isCorked: Bool
    public var hasVolume: Bool
    public var isVolumeWritable: Bool
    public var driver: String
    public var properties: Properties

    public init(
        id: UInt32, direction: Direction, name: String, client: UInt32? = nil, ownerModule: UInt32? = nil,
        device: UInt32? = nil, sampleSpec: SampleSpec, channelMap: [String], volume: ChannelVolumes, isMuted: Bool,
        isCorked: Bool, hasVolume: Bool, isVolumeWritable: Bool, driver: String, properties: Properties
    ) {
        self.id = id
        self.direction = direction
        self.name = name
        self.client = client
        self.ownerModule = ownerModule
        self.device = device
        self.sampleSpec = sampleSpec
        self.channelMap = channelMap
        self.volume = volume
        self.isMuted = isMuted
        self.isCorked = isCorked
        self.hasVolume = hasVolume
        self.isVolumeWritable = isVolumeWritable
        self.driver = driver
        self.properties = properties
    }
}

/// A loaded server module (null sinks, protocol modules, policy modules ...).
public struct Module: Sendable, Hashable, Codable, Identifiable {
    public var id: UInt32
    public var name: String
    public var argument: String
    public var properties: Properties

    public init(
        id: UInt32, name: String, argument: String, properties: Properties
    ) {
        self.id = id
        self.name = name
        self.argument = argument
        self.properties = properties
    }
}

/// The server itself.
public struct ServerInfo: Sendable, Hashable, Codable {
    public var name: String
    public var version: String
    public var userName: String
    public var hostName: String
    public var defaultSinkName: String?
    public var defaultSourceName: String?
    public var sampleSpec: SampleSpec
    public var channelMap: [String]
    public var cookie: UInt32

    /// The default sink's name (`.output`) or the default source's (`.input`).
    public func defaultDeviceName(_ direction: Direction) -> String? { direction == .output ? defaultSinkName : defaultSourceName }

    /// True when the server is PipeWire's PulseAudio protocol server (pipewire-pulse).
    public var isPipeWire: Bool { name.contains("PipeWire") }

    /// pipewire-pulse before 1.0 ("PulseAudio (on PipeWire 0.3.65)"): a peak meter's blocks come one
    /// per graph cycle (~47 a second), whatever rate is asked.
    public var sendsMeterBlocksPerGraphCycle: Bool { name.contains("on PipeWire 0.") }

    public init(
        name: String, version: String, userName: String, hostName: String, defaultSinkName: String? = nil,
        defaultSourceName: String? = nil, sampleSpec: SampleSpec, channelMap: [String], cookie: UInt32
    ) {
        self.name = name
        self.version = version
        self.userName = userName
        self.hostName = hostName
        self.defaultSinkName = defaultSinkName
        self.defaultSourceName = defaultSourceName
        self.sampleSpec = sampleSpec
        self.channelMap = channelMap
        self.cookie = cookie
    }
}

/// Everything the server reports, complete and consistent at one moment.
public struct Snapshot: Sendable, Hashable, Codable {
    public var server: ServerInfo?
    public var cards: [UInt32: Card] = [:]
    public var sinks: [UInt32: Device] = [:]
    public var sources: [UInt32: Device] = [:]
    public var clients: [UInt32: Client] = [:]
    public var sinkInputs: [UInt32: AudioStream] = [:]
    public var sourceOutputs: [UInt32: AudioStream] = [:]
    public var modules: [UInt32: Module] = [:]

    public init() {}

    public var defaultSink: Device? { sinks.values.first { $0.name == server?.defaultSinkName } }
    public var defaultSource: Device? { sources.values.first { $0.name == server?.defaultSourceName } }
    public func sink(named name: String) -> Device? { sinks.values.first { $0.name == name } }
    public func source(named name: String) -> Device? { sources.values.first { $0.name == name } }
    public func device(named name: String, _ direction: Direction) -> Device? {
        direction == .output ? sink(named: name) : source(named: name)
    }
    public func card(named name: String) -> Card? { cards.values.first { $0.name == name } }
    public func devices(_ direction: Direction) -> [Device] {
        (direction == .output ? sinks : sources).values.sorted { $0.id < $1.id }
    }
    public func streams(_ direction: Direction) -> [AudioStream] {
        (direction == .output ? sinkInputs : sourceOutputs).values.sorted { $0.id < $1.id }
    }
    /// The stream of that direction and index, if it is there.
    public func stream(_ direction: Direction, _ index: UInt32) -> AudioStream? {
        direction == .output ? sinkInputs[index] : sourceOutputs[index]
    }
    public func client(of stream: AudioStream) -> Client? { stream.client.flatMap { clients[$0] } }
    public func device(of stream: AudioStream) -> Device? {
        stream.device.flatMap { stream.direction == .output ? sinks[$0] : sources[$0] }
    }
}

// MARK: making values (for servers other than libpulse's: an in-memory one in tests)

extension AudioStream {
    public init(id: UInt32, direction: Direction, name: String, client: UInt32?, device: UInt32?,
                channelMap: [String] = ["front-left", "front-right"], volume: ChannelVolumes? = nil, isMuted: Bool = false,
                isCorked: Bool = false, properties: Properties = [:]) {
        self.init(id: id, direction: direction, name: name, client: client, ownerModule: nil, device: device,
                  sampleSpec: SampleSpec(format: "s16le", rate: 48000, channels: UInt8(channelMap.count)), channelMap: channelMap,
                  volume: volume ?? ChannelVolumes(channels: channelMap.count, volume: .norm), isMuted: isMuted,
                  isCorked: isCorked, hasVolume: true, isVolumeWritable: true, driver: "", properties: properties)
    }
}

extension Device {
    public init(id: UInt32, direction: Direction, name: String, description: String, card: UInt32? = nil,
                ports: [DevicePort] = [], activePort: String? = nil, monitorOf: UInt32? = nil, properties: Properties = [:]) {
        self.init(id: id, direction: direction, name: name, description: description, driver: "", ownerModule: nil, card: card,
                  ports: ports, activePort: activePort, sampleSpec: SampleSpec(format: "s16le", rate: 48000, channels: 2),
                  channelMap: ["front-left", "front-right"], volume: ChannelVolumes(channels: 2, volume: .norm),
                  baseVolume: .norm, isMuted: false, latency: 0, configuredLatency: 20000, state: .running,
                  monitorOf: monitorOf, monitorSource: nil, properties: properties)
    }
}

extension Client {
    public init(id: UInt32, name: String, properties: Properties = [:]) {
        self.init(id: id, name: name, driver: "", ownerModule: nil, properties: properties)
    }
}

extension Card {
    public init(id: UInt32, name: String, profiles: [String], activeProfile: String?, properties: Properties = [:]) {
        self.init(id: id, name: name, driver: "", ownerModule: nil,
                  profiles: profiles.map { CardProfile(name: $0, description: $0, sinks: 1, sources: 1, priority: 0, isAvailable: true) },
                  activeProfile: activeProfile, ports: [], properties: properties)
    }
}

extension Module {
    public init(id: UInt32, name: String, argument: String) {
        self.init(id: id, name: name, argument: argument, properties: [:])
    }
}

extension ServerInfo {
    public init(name: String, version: String, defaultSinkName: String?, defaultSourceName: String?) {
        self.init(name: name, version: version, userName: "", hostName: "", defaultSinkName: defaultSinkName,
                  defaultSourceName: defaultSourceName, sampleSpec: SampleSpec(format: "s16le", rate: 48000, channels: 2),
                  channelMap: ["front-left", "front-right"], cookie: 0)
    }
}

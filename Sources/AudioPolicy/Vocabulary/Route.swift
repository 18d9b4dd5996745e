/// Why a route changed (SPEC.md section 6). Raw values are Apple's.
public struct RouteChangeReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let unknown = RouteChangeReason(rawValue: 0)
    /// A device appeared and the route moved to it.
    public static let newDeviceAvailable = RouteChangeReason(rawValue: 1)
    /// The device the route used went away; the route fell back.
    public static let oldDeviceUnavailable = RouteChangeReason(rawValue: 2)
    /// A category, mode or option change moved the route.
    public static let categoryChange = RouteChangeReason(rawValue: 3)
    /// An override or the user's explicit choice.
    public static let override = RouteChangeReason(rawValue: 4)
    /// The route changed while waking from sleep.
    public static let wakeFromSleep = RouteChangeReason(rawValue: 6)
    /// No eligible device for the category.
    public static let noSuitableRouteForCategory = RouteChangeReason(rawValue: 7)
    /// Same devices; a port, profile, rate or layout changed.
    public static let routeConfigurationChange = RouteChangeReason(rawValue: 8)

    public static let named: [(name: String, reason: RouteChangeReason)] = [
        ("unknown", .unknown), ("newDeviceAvailable", .newDeviceAvailable), ("oldDeviceUnavailable", .oldDeviceUnavailable),
        ("categoryChange", .categoryChange), ("override", .override), ("wakeFromSleep", .wakeFromSleep),
        ("noSuitableRouteForCategory", .noSuitableRouteForCategory), ("routeConfigurationChange", .routeConfigurationChange),
    ]

    /// SPEC.md's name (`newDeviceAvailable`), which the route-change log uses.
    public var name: String { Self.named.first { $0.reason == self }?.name ?? "reason\(rawValue)" }
    public var description: String { name }
}

extension RouteChangeReason: Codable {
    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let match = Self.named.first(where: { $0.name == name }) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown reason \(name)"))
        }
        self = match.reason
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(name)
    }
}

/// A source of an input port (e.g. "Internal Microphone" vs "Headset Microphone").
public struct DataSourceDescription: Hashable, Sendable, Codable {
    public var id: String
    public var name: String
    public init(id: String, name: String) { self.id = id; self.name = name }
}

/// One input or output of a route.
public struct PortDescription: Hashable, Sendable, Codable, CustomStringConvertible {
    public var type: PortType
    public var name: String
    /// Stable across plugging: the server's device name.
    public var uid: String
    public var channels: Int
    public var dataSources: [DataSourceDescription]
    public var selectedDataSource: String?

    public init(type: PortType, name: String, uid: String, channels: Int = 2, dataSources: [DataSourceDescription] = [],
                selectedDataSource: String? = nil) {
        self.type = type; self.name = name; self.uid = uid; self.channels = channels
        self.dataSources = dataSources; self.selectedDataSource = selectedDataSource
    }

    public var description: String { "\(type.name)(\(uid))" }

    enum CodingKeys: String, CodingKey { case type, name, uid, channels, dataSources, selectedDataSource }
}

/// The inputs and outputs a session uses.
public struct RouteDescription: Hashable, Sendable, Codable, CustomStringConvertible {
    public var inputs: [PortDescription]
    public var outputs: [PortDescription]
    public init(inputs: [PortDescription] = [], outputs: [PortDescription] = []) {
        self.inputs = inputs; self.outputs = outputs
    }
    public static let none = RouteDescription()
    public var isEmpty: Bool { inputs.isEmpty && outputs.isEmpty }
    public var description: String { "out \(outputs.map(\.description)) in \(inputs.map(\.description))" }
}

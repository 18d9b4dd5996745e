public import PulseClient

/// Who a stream belongs to, from its own properties with its client's beneath them: what SPEC.md
/// section 8 matches policy files against.
public struct StreamIdentity: Hashable, Sendable, Codable {
    /// `application.process.binary`, e.g. `firefox-esr`, `paplay`.
    public var binary: String?
    /// `application.name`, e.g. `Firefox`.
    public var name: String?
    /// The Flatpak or application id: `application.id`, else PipeWire's portal app id, else Flatpak's.
    public var appID: String?
    /// `media.role`, e.g. `music`, `phone`.
    public var role: String?
    /// `application.process.id`.
    public var processID: Int?

    public init(binary: String? = nil, name: String? = nil, appID: String? = nil, role: String? = nil, processID: Int? = nil) {
        self.binary = binary; self.name = name; self.appID = appID; self.role = role; self.processID = processID
    }

    public init(_ stream: AudioStream, client: Client?) {
        var props = client?.properties ?? [:]
        props.merge(stream.properties) { _, own in own }
        func value(_ key: String) -> String? { props[key].flatMap { $0.isEmpty ? nil : $0 } }
        self.init(
            binary: value("application.process.binary"),
            name: value("application.name"),
            appID: value("application.id") ?? value("pipewire.access.portal.app_id") ?? value("application.flatpak.id"),
            role: value("media.role"),
            processID: value("application.process.id").flatMap { Int($0) })
    }
}

extension Snapshot {
    public func identity(of stream: AudioStream) -> StreamIdentity { StreamIdentity(stream, client: client(of: stream)) }
}

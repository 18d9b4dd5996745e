public import AudioPolicy
public import ServerModel

extension AppIdentity {
    /// Who a stream belongs to, from its own properties with its client's beneath them.
    public init(_ stream: AudioStream, client: Client?) {
        self.init(properties: stream.properties, clientProperties: client?.properties ?? [:])
    }

    /// Who a stream belongs to, from its properties as the server lists them (`pactl list sink-inputs`):
    /// the stream's own, with its client's beneath them (a key the stream has wins; an empty value is none).
    public init(properties: Properties, clientProperties: Properties = [:]) {
        // (Looked up in each rather than merged: a stream has dozens of properties, and the identity
        // is worked out on every change of a stream.)
        func value(_ key: String) -> String? { (properties[key] ?? clientProperties[key]).flatMap { $0.isEmpty ? nil : $0 } }
        self.init(
            binary: value("application.process.binary"),
            name: value("application.name"),
            appID: value("application.id") ?? value("pipewire.access.portal.app_id") ?? value("application.flatpak.id"),
            role: value("media.role"),
            processID: value("application.process.id").flatMap { Int($0) })
    }
}

extension Snapshot {
    public func identity(of stream: AudioStream) -> AppIdentity { AppIdentity(stream, client: client(of: stream)) }
}

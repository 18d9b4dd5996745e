public import AudioPolicy
public import ServerModel

extension PortFacts {
    /// The facts of a sink or source as the server reports them, with its card's properties beneath
    /// the device's own.
    public init(_ device: Device, in snapshot: Snapshot) {
        let card = device.card.flatMap { snapshot.cards[$0] }
        var props = card?.properties ?? [:]
        props.merge(device.properties) { _, own in own }
        self.init(
            direction: device.direction,
            deviceName: device.name, description: device.description, driver: device.driver,
            activePort: device.activeDevicePort.map {
                ActivePort(name: $0.name, description: $0.description, type: $0.type.description)
            },
            cardProfile: card?.activeProfile, isMonitor: device.isMonitor, properties: props)
    }
}

extension Snapshot {
    /// The port type of a sink or source, with the fact that decided it.
    public func portType(of device: Device) -> PortClassification {
        PortClassifier.classify(PortFacts(device, in: self))
    }
}

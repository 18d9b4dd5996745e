public import AudioPolicy
public import ServerModel

/// How the agent sees the server: which devices are ports, which app a stream belongs to.
extension Snapshot {
    /// Sinks and sources that routes may use (monitors are not devices of their own).
    public var routableDevices: [Device] {
        (devices(.output) + devices(.input)).filter { !$0.isMonitor && !isImpostorCombination($0) }
    }

    /// The policy core's view of a sink or source.
    public func port(of device: Device) -> Port {
        let description = PortDescription(
            type: portType(of: device).type, name: device.description, uid: device.name,
            channels: Int(device.sampleSpec.channels),
            dataSources: device.direction == .input ? device.ports.map { DataSourceDescription(id: $0.name, name: $0.description) } : [],
            selectedDataSource: device.direction == .input ? device.activePort : nil)
        let format = DeviceFormat(
            sampleRate: Double(device.sampleSpec.rate), channels: Int(device.sampleSpec.channels),
            latency: Double(device.configuredLatency) / 1_000_000, volume: device.volume.overall.amplitude)
        return Port(description, direction: device.direction,
                    bluetooth: bluetoothCard(of: device), format: format, isServerRoleTarget: Self.isServerRoleTarget(device))
    }

    /// A sink (or source) that the server's own role-based policy links streams to: WirePlumber 0.5's
    /// role sinks (`media-role-nodes`, loopbacks named `loopback.sink.role.*`) carry their priority and
    /// the roles they take.
    public static func isServerRoleTarget(_ device: Device) -> Bool {
        device.properties["policy.role-based.priority"] != nil || device.properties["policy.role-based.target"] == "true"
    }

    /// The Bluetooth card a sink or source belongs to (see `bluetoothCard(_:)`).
    public func bluetoothCard(of device: Device) -> BluetoothCard? {
        device.card.flatMap { cards[$0] }.flatMap(bluetoothCard)
    }

    /// A Bluetooth card with its A2DP and hands-free profiles, if it has A2DP (nil: not Bluetooth).
    /// PulseAudio names them a2dp_sink and handsfree_head_unit (or headset_head_unit, HSP); PipeWire
    /// a2dp-sink and headset-head-unit, and reports the active one with its codec (a2dp-sink-sbc,
    /// headset-head-unit-cvsd): such a profile counts as the one it extends. The audio-gateway
    /// profiles (the computer as a headset, for a phone) are not hands-free for a call here.
    public func bluetoothCard(_ card: Card) -> BluetoothCard? {
        let names = card.profiles.map(\.name).filter { !$0.contains("gateway") }
        guard let a2dp = names.first(where: { $0.contains("a2dp") && $0.contains("sink") }) ?? names.first(where: { $0.contains("a2dp") })
        else { return nil }
        let hfp = names.first { $0.contains("headset") || $0.contains("handsfree") || $0.contains("hfp") || $0.contains("hsp") }
        var active = card.activeProfile ?? a2dp
        if let hfp, active != hfp, active.hasPrefix(hfp + "-") { active = hfp }
        return BluetoothCard(card: card.name, a2dpProfile: a2dp, hfpProfile: hfp, activeProfile: active)
    }
}

extension StreamKey {
    public init(_ stream: AudioStream) {
        self.init(stream.direction, stream.id)
    }
}

extension Snapshot {
    /// A capture stream recording what a sink plays (its monitor): not microphone use. pipewire-pulse
    /// 1.x says so (`stream.capture.sink`) from the first report, before the stream has a source.
    public func isMonitorCapture(_ stream: AudioStream) -> Bool {
        stream.direction == .input && (device(of: stream)?.isMonitor == true || stream.properties["stream.capture.sink"] == "true")
    }

    /// The server's own plumbing: one half of a loopback inside PipeWire (WirePlumber's role sinks, a
    /// filter chain, echo cancellation), with no client of the PulseAudio protocol (an app always has
    /// one, so no app can pass for it). It carries the sound of apps whose own streams are held: holding
    /// it too would hold them twice, and everything else that goes through it.
    func isServerPlumbing(_ stream: AudioStream) -> Bool {
        stream.client == nil && (stream.properties["node.link-group"] != nil || isOfOurCombination(stream))
    }

    /// One of the streams that a sink of ours for several outputs (`CombinedOutputs`) plays to each of
    /// them (PulseAudio's, which no link group marks): made by that sink's module, with no client.
    /// (PulseAudio tells of the module after its sink and streams: its sink's name says it until then.)
    func isOfOurCombination(_ stream: AudioStream) -> Bool {
        guard stream.client == nil, let index = stream.ownerModule else { return false }
        if let module = modules[index] { return module.isOurCombineSink(named: nil) }
        return sinks.values.contains { $0.ownerModule == index && CombinedOutputs.isCombination($0.name) }
    }

    /// Our sink for several outputs of that name (made by our combine sink), if there.
    func ourCombination(named name: String) -> Device? {
        sinks.values.first { $0.name == name && !isImpostorCombination($0) }
    }

    /// A sink named as one of ours for several outputs (`CombinedOutputs`) that is not a combine sink
    /// (module-combine-sink): someone else's, never taken for ours (the alarm is not moved onto it, it
    /// is not removed).
    func isImpostorCombination(_ device: Device) -> Bool {
        guard CombinedOutputs.isCombination(device.name) else { return false }
        return device.ownerModule.flatMap { modules[$0] }.map { !$0.isOurCombineSink(named: device.name) } ?? true
    }

    /// The output half of a role sink of WirePlumber's role-based policy (`output.loopback.sink.role.*`):
    /// pipewire-pulse 1.4 does not list the role sinks themselves, only this.
    func isServerRoleLoopback(_ stream: AudioStream) -> Bool {
        isServerPlumbing(stream) && stream.properties["node.name"]?.hasPrefix("output.loopback.sink.role.") == true
    }

    /// A stream on a device the server does not list (pipewire-pulse 1.4 shows a stream on one of
    /// WirePlumber's role sinks so): where it is, is the server's business.
    func isOnAnUnlistedDevice(_ stream: AudioStream) -> Bool {
        stream.device != nil && device(of: stream) == nil
    }
}

extension Module {
    /// The module that makes a sink of ours for several outputs: module-combine-sink, with these arguments.
    static let combineSink = "module-combine-sink"
    static func combineSinkArguments(name: String, outputs: [String]) -> String {
        "sink_name=\(name) slaves=\(outputs.joined(separator: ","))"
    }

    /// A combine sink loaded as ours (`combineSinkArguments`): for the sink `name`, or any of ours (nil).
    func isOurCombineSink(named name: String?) -> Bool {
        self.name == Self.combineSink && argument.hasPrefix("sink_name=\(name.map { $0 + " " } ?? CombinedOutputs.prefix)")
    }
}

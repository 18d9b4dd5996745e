import CLibPulse

// Turning libpulse's C structures into the value types of Model.swift. Called only from libpulse
// callbacks, where the pointers are valid; nothing here keeps a pointer.

func string(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
func optionalString(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }
func optionalIndex(_ i: UInt32) -> UInt32? { i == CLibPulse_INVALID_INDEX ? nil : i }

func convertProperties(_ list: OpaquePointer?) -> Properties {
    guard let list else { return [:] }
    // (Sized once: a stream's info, converted at each of its changes, has dozens of properties.)
    var result = Properties(minimumCapacity: Int(pa_proplist_size(list)))
    var state: UnsafeMutableRawPointer? = nil
    while let key = pa_proplist_iterate(list, &state) {
        if let value = pa_proplist_gets(list, key) {
            result[String(cString: key)] = String(cString: value)
        }
    }
    return result
}

func convertSampleSpec(_ s: pa_sample_spec) -> SampleSpec {
    let format = Int(s.format.rawValue)
    return SampleSpec(format: sampleFormatNames.indices.contains(format) ? sampleFormatNames[format] : string(pa_sample_format_to_string(s.format)),
                      rate: s.rate, channels: s.channels)
}

func convertChannelMap(_ m: pa_channel_map) -> [String] {
    withUnsafeBytes(of: m.map) { raw in
        raw.bindMemory(to: pa_channel_position_t.self).prefix(Int(m.channels)).map {
            let position = Int($0.rawValue)
            return channelPositionNames.indices.contains(position) ? channelPositionNames[position] : string(pa_channel_position_to_string($0))
        }
    }
}

/// libpulse's names of the sample formats and the channel positions, made once (not a string per stream
/// and channel at every change of a stream).
private let sampleFormatNames: [String] = (0..<Int(PA_SAMPLE_MAX.rawValue)).map {
    string(pa_sample_format_to_string(pa_sample_format_t(rawValue: Int32($0))))
}
private let channelPositionNames: [String] = (0..<Int(PA_CHANNEL_POSITION_MAX.rawValue)).map {
    string(pa_channel_position_to_string(pa_channel_position_t(rawValue: Int32($0))))
}

func channelVolumes(_ v: pa_cvolume) -> ChannelVolumes {
    withUnsafeBytes(of: v.values) { raw in
        ChannelVolumes(raw.bindMemory(to: pa_volume_t.self).prefix(Int(v.channels)).map(Volume.init(rawValue:)))
    }
}

func cVolume(_ v: ChannelVolumes) -> pa_cvolume {
    var c = pa_cvolume()
    c.channels = UInt8(min(v.values.count, Int(PA_CHANNELS_MAX)))
    withUnsafeMutableBytes(of: &c.values) { raw in
        let slots = raw.bindMemory(to: pa_volume_t.self)
        for (i, volume) in v.values.prefix(Int(c.channels)).enumerated() { slots[i] = volume.rawValue }
    }
    return c
}

func availability(_ a: Int32) -> PortAvailability {
    switch a {
    case Int32(PA_PORT_AVAILABLE_NO.rawValue): .no
    case Int32(PA_PORT_AVAILABLE_YES.rawValue): .yes
    default: .unknown
    }
}

func devicePort(
    name: UnsafePointer<CChar>?, description: UnsafePointer<CChar>?, priority: UInt32, available: Int32,
    type: UInt32, group: UnsafePointer<CChar>?
) -> DevicePort {
    DevicePort(
        name: string(name), description: string(description), priority: priority,
        availability: availability(available), type: DevicePortType(rawValue: type),
        availabilityGroup: optionalString(group))
}

extension Device {
    init(_ i: pa_sink_info) {
        var ports: [DevicePort] = []
        for n in 0..<Int(i.n_ports) {
            guard let p = i.ports[n]?.pointee else { continue }
            ports.append(devicePort(
                name: p.name, description: p.description, priority: p.priority, available: p.available,
                type: p.type, group: p.availability_group))
        }
        let state: DeviceState =
            switch i.state {
            case PA_SINK_RUNNING: .running
            case PA_SINK_IDLE: .idle
            case PA_SINK_SUSPENDED: .suspended
            default: .invalid
            }
        self.init(
            id: i.index, direction: .output, name: string(i.name), description: string(i.description),
            driver: string(i.driver), ownerModule: optionalIndex(i.owner_module), card: optionalIndex(i.card),
            ports: ports, activePort: optionalString(i.active_port?.pointee.name),
            sampleSpec: convertSampleSpec(i.sample_spec), channelMap: convertChannelMap(i.channel_map),
            volume: channelVolumes(i.volume), baseVolume: Volume(rawValue: i.base_volume), isMuted: i.mute != 0,
            latency: i.latency, configuredLatency: i.configured_latency, state: state, monitorOf: nil,
            monitorSource: optionalIndex(i.monitor_source), properties: convertProperties(i.proplist))
    }

    init(_ i: pa_source_info) {
        var ports: [DevicePort] = []
        for n in 0..<Int(i.n_ports) {
            guard let p = i.ports[n]?.pointee else { continue }
            ports.append(devicePort(
                name: p.name, description: p.description, priority: p.priority, available: p.available,
                type: p.type, group: p.availability_group))
        }
        let state: DeviceState =
            switch i.state {
            case PA_SOURCE_RUNNING: .running
            case PA_SOURCE_IDLE: .idle
            case PA_SOURCE_SUSPENDED: .suspended
            default: .invalid
            }
        self.init(
            id: i.index, direction: .input, name: string(i.name), description: string(i.description),
            driver: string(i.driver), ownerModule: optionalIndex(i.owner_module), card: optionalIndex(i.card),
            ports: ports, activePort: optionalString(i.active_port?.pointee.name),
            sampleSpec: convertSampleSpec(i.sample_spec), channelMap: convertChannelMap(i.channel_map),
            volume: channelVolumes(i.volume), baseVolume: Volume(rawValue: i.base_volume), isMuted: i.mute != 0,
            latency: i.latency, configuredLatency: i.configured_latency, state: state,
            monitorOf: optionalIndex(i.monitor_of_sink), monitorSource: nil, properties: convertProperties(i.proplist))
    }
}

extension Card {
    init(_ i: pa_card_info) {
        var profiles: [CardProfile] = []
        for n in 0..<Int(i.n_profiles) {
            guard let p = i.profiles2?[n]?.pointee else { continue }
            profiles.append(CardProfile(
                name: string(p.name), description: string(p.description), sinks: p.n_sinks,
                sources: p.n_sources, priority: p.priority, isAvailable: p.available != 0))
        }
        var ports: [CardPort] = []
        for n in 0..<Int(i.n_ports) {
            guard let p = i.ports?[n]?.pointee else { continue }
            var portProfiles: [String] = []
            for k in 0..<Int(p.n_profiles) {
                if let profile = p.profiles2?[k]?.pointee { portProfiles.append(string(profile.name)) }
            }
            ports.append(CardPort(
                port: devicePort(
                    name: p.name, description: p.description, priority: p.priority, available: p.available,
                    type: p.type, group: p.availability_group),
                direction: p.direction == Int32(PA_DIRECTION_INPUT.rawValue) ? .input : .output,
                profiles: portProfiles, latencyOffset: p.latency_offset, properties: convertProperties(p.proplist)))
        }
        self.init(
            id: i.index, name: string(i.name), driver: string(i.driver), ownerModule: optionalIndex(i.owner_module),
            profiles: profiles, activeProfile: optionalString(i.active_profile2?.pointee.name), ports: ports,
            properties: convertProperties(i.proplist))
    }
}

extension Client {
    init(_ i: pa_client_info) {
        self.init(
            id: i.index, name: string(i.name), driver: string(i.driver), ownerModule: optionalIndex(i.owner_module),
            properties: convertProperties(i.proplist))
    }
}

extension Module {
    init(_ i: pa_module_info) {
        self.init(id: i.index, name: string(i.name), argument: string(i.argument), properties: convertProperties(i.proplist))
    }
}

extension AudioStream {
    init(_ i: pa_sink_input_info) {
        self.init(
            id: i.index, direction: .output, name: string(i.name), client: optionalIndex(i.client),
            ownerModule: optionalIndex(i.owner_module), device: optionalIndex(i.sink),
            sampleSpec: convertSampleSpec(i.sample_spec), channelMap: convertChannelMap(i.channel_map),
            volume: channelVolumes(i.volume), isMuted: i.mute != 0, isCorked: i.corked != 0,
            hasVolume: i.has_volume != 0, isVolumeWritable: i.volume_writable != 0, driver: string(i.driver),
            properties: convertProperties(i.proplist))
    }

    init(_ i: pa_source_output_info) {
        self.init(
            id: i.index, direction: .input, name: string(i.name), client: optionalIndex(i.client),
            ownerModule: optionalIndex(i.owner_module), device: optionalIndex(i.source),
            sampleSpec: convertSampleSpec(i.sample_spec), channelMap: convertChannelMap(i.channel_map),
            volume: channelVolumes(i.volume), isMuted: i.mute != 0, isCorked: i.corked != 0,
            hasVolume: i.has_volume != 0, isVolumeWritable: i.volume_writable != 0, driver: string(i.driver),
            properties: convertProperties(i.proplist))
    }
}

extension ServerInfo {
    init(_ i: pa_server_info) {
        self.init(
            name: string(i.server_name), version: string(i.server_version), userName: string(i.user_name),
            hostName: string(i.host_name), defaultSinkName: optionalString(i.default_sink_name),
            defaultSourceName: optionalString(i.default_source_name), sampleSpec: convertSampleSpec(i.sample_spec),
            channelMap: convertChannelMap(i.channel_map), cookie: i.cookie)
    }
}

extension StreamRestoreEntry {
    init(_ i: pa_ext_stream_restore_info) {
        self.init(
            name: string(i.name), channelMap: convertChannelMap(i.channel_map),
            volume: i.volume.channels == 0 ? nil : channelVolumes(i.volume),
            device: optionalString(i.device), isMuted: i.mute != 0)
    }
}

/// SPEC.md section 6, "Port types and where to read them on Linux": a pure function from what the
/// server says about a device to its port type.
///
/// Real devices carry many facts at once (ALSA and BlueZ set the bus, the form factor, the profile,
/// port names and types), so the rules run from the most specific fact to the most general:
/// what the device *is* (monitor, Bluetooth, AirPlay, network, USB), then its active port, then the
/// profile and form factor it announces, then the bus. The first rule that applies decides.
public enum PortClassifier {
    public static func classify(_ facts: PortFacts) -> PortClassification {
        for rule in rules {
            if let found = rule(facts) { return found }
        }
        return PortClassification(.virtual, because: "no device facts")
    }

    typealias Rule = @Sendable (PortFacts) -> PortClassification?

    static let rules: [Rule] = [
        monitor, bluetooth, airPlay, network, usb, activePortType, activePortName, profileName, formFactor,
        virtualDevice, internalCard,
    ]

    // MARK: what the device is

    static let monitor: Rule = { f in
        if f.isMonitor || f.properties["device.class"] == "monitor" {
            return PortClassification(.virtual, because: "monitor source")
        }
        return nil
    }

    /// Bluetooth, told by bus or API, then split by profile: HFP/HSP, LE audio (BAP), A2DP.
    static let bluetooth: Rule = { f in
        let p = f.properties
        let fact: String
        if p["device.bus"] == "bluetooth" { fact = "device.bus=bluetooth" }
        else if p["device.api"] == "bluez5" { fact = "device.api=bluez5" }
        else if p.keys.contains(where: { $0.hasPrefix("api.bluez5.") || $0.hasPrefix("bluez.") }) { fact = "api.bluez5 properties" }
        else { return nil }
        let profileFacts: [(String, String?)] = [
            ("bluetooth.protocol", p["bluetooth.protocol"]), ("api.bluez5.profile", p["api.bluez5.profile"]),
            ("card profile", f.cardProfile), ("device.profile.name", p["device.profile.name"]),
            ("port", f.activePort?.name), ("device name", f.deviceName),
        ]
        for (key, value) in profileFacts {
            guard let value = value?.lowercased(), !value.isEmpty else { continue }
            if hfpMarkers.contains(where: value.contains) {
                return PortClassification(.bluetoothHFP, because: "\(fact), \(key)=\(value)")
            }
            if leMarkers.contains(where: value.contains) {
                return PortClassification(.bluetoothLE, because: "\(fact), \(key)=\(value)")
            }
            if value.contains("a2dp") {
                return PortClassification(.bluetoothA2DP, because: "\(fact), \(key)=\(value)")
            }
        }
        // No profile said: A2DP has no microphone, so an input is hands-free.
        return f.direction == .input
            ? PortClassification(.bluetoothHFP, because: "\(fact), input with no profile")
            : PortClassification(.bluetoothA2DP, because: "\(fact), output with no profile")
    }

    static let hfpMarkers = ["headset_head_unit", "handsfree_head_unit", "headset-head-unit", "handsfree-head-unit",
                             "headset_audio_gateway", "handsfree_audio_gateway", "audio-gateway", "hsp", "hfp", "hsp_hs",
                             "hfp_hf", "headset-head-unit-cvsd", "headset-head-unit-msbc"]
    static let leMarkers = ["bap", "le-audio", "le_audio", "bap-sink", "bap_sink", "bap-duplex"]

    static let airPlay: Rule = { f in
        if f.properties["device.api"] == "raop" || f.driver.contains("raop")
            || f.properties.keys.contains(where: { $0.hasPrefix("raop.") }) {
            return PortClassification(.airPlay, because: "RAOP device")
        }
        return nil
    }

    static let network: Rule = { f in
        let p = f.properties
        if f.driver.contains("tunnel") || f.driver.contains("rtp") {
            return PortClassification(.network, because: "driver \(f.driver)")
        }
        for prefix in ["tunnel.", "rtp.", "snapcast."] where p.keys.contains(where: { $0.hasPrefix(prefix) }) {
            return PortClassification(.network, because: "\(prefix)* properties")
        }
        if p["device.bus"] == "network" { return PortClassification(.network, because: "device.bus=network") }
        return nil
    }

    /// USB devices are `usbAudio` whatever they are (headsets included), as on iOS.
    static let usb: Rule = { f in
        f.properties["device.bus"] == "usb" ? PortClassification(.usbAudio, because: "device.bus=usb") : nil
    }

    // MARK: the active port

    static let activePortType: Rule = { f in
        guard let port = f.activePort else { return nil }
        let output = f.direction == .output
        let type: PortType? =
            switch port.type {
            case "speaker": output ? .builtInSpeaker : nil
            case "handset", "earpiece": output ? .builtInReceiver : .headsetMic
            case "headphones": output ? .headphones : nil
            case "headset": output ? .headphones : .headsetMic
            case "mic": isInternal(port) ? .builtInMic : .headsetMic
            case "line", "aux": output ? .lineOut : .lineIn
            case "spdif": output ? .lineOut : .lineIn
            case "hdmi", "tv": isDisplayPort(port, f) ? .displayPort : .hdmi
            case "car": .carAudio
            case "usb": .usbAudio
            case "bluetooth": output ? .bluetoothA2DP : .bluetoothHFP
            case "handsfree": .bluetoothHFP
            case "network": .network
            default: nil
            }
        return type.map { PortClassification($0, because: "port \(port.name) of type \(port.type)") }
    }

    /// Port names when the type is not reported: ALSA's profile-set names and UCM's.
    static let activePortName: Rule = { f in
        guard let port = f.activePort else { return nil }
        let name = port.name.lowercased()
        let output = f.direction == .output
        let type: PortType? =
            if name.contains("hdmi") { isDisplayPort(port, f) ? .displayPort : .hdmi }
            else if name.contains("displayport") { .displayPort }
            else if name.contains("iec958") || name.contains("spdif") { output ? .lineOut : .lineIn }
            else if name.contains("headset-mic") || name.contains("headset mic") || name.contains("[in] headset") { .headsetMic }
            else if name.contains("internal-mic") || name.contains("[in] mic1") || name.contains("internal mic") { .builtInMic }
            else if name.contains("headphone") { .headphones }
            else if name.contains("earpiece") || name.contains("handset") { .builtInReceiver }
            else if name.contains("speaker") { .builtInSpeaker }
            else if name.contains("linein") || name.contains("line-in") || name.contains("[in] line") { .lineIn }
            else if name.contains("lineout") || name.contains("line-out") || name.contains("[out] line") { .lineOut }
            else if name.contains("analog-input-mic") || name.contains("[in] mic") { .headsetMic }
            else { nil }
        return type.map { PortClassification($0, because: "port \(port.name)") }
    }

    static func isInternal(_ port: PortFacts.ActivePort) -> Bool {
        let text = (port.name + " " + port.description).lowercased()
        return text.contains("internal") || text.contains("built-in") || text.contains("mic1")
    }

    static func isDisplayPort(_ port: PortFacts.ActivePort?, _ f: PortFacts) -> Bool {
        let text = [port?.name, port?.description, f.description, f.properties["device.product.name"]]
            .compactMap { $0?.lowercased() }.joined(separator: " ")
        return text.contains("displayport") || text.contains("display port")
    }

    // MARK: announced profile and form factor

    static let profileName: Rule = { f in
        for (key, value) in [("device.profile.name", f.properties["device.profile.name"]), ("card profile", f.cardProfile),
                             ("device name", Optional(f.deviceName))] {
            guard let value = value?.lowercased() else { continue }
            if value.contains("hdmi") {
                return PortClassification(isDisplayPort(f.activePort, f) ? .displayPort : .hdmi, because: "\(key)=\(value)")
            }
            if value.contains("iec958") {
                return PortClassification(f.direction == .output ? .lineOut : .lineIn, because: "\(key)=\(value)")
            }
        }
        return nil
    }

    static let formFactor: Rule = { f in
        guard let form = f.properties["device.form_factor"] else { return nil }
        let output = f.direction == .output
        let type: PortType? =
            switch form {
            case "car": .carAudio
            case "headphone": output ? .headphones : .headsetMic
            case "headset", "hands-free": output ? .headphones : .headsetMic
            case "handset": output ? .builtInReceiver : .headsetMic
            case "internal": output ? .builtInSpeaker : .builtInMic
            case "speaker": output ? .builtInSpeaker : nil
            case "microphone", "webcam": output ? nil : .builtInMic
            case "tv", "hdmi": .hdmi
            default: nil
            }
        return type.map { PortClassification($0, because: "device.form_factor=\(form)") }
    }

    // MARK: what is left

    /// Null sinks, loopbacks and filters with no device facts of their own.
    static let virtualDevice: Rule = { f in
        let p = f.properties
        if let cls = p["device.class"], ["filter", "abstract", "monitor"].contains(cls) {
            return PortClassification(.virtual, because: "device.class=\(cls)")
        }
        if p["device.bus"] == nil && p["device.api"] == nil && p["device.form_factor"] == nil {
            return PortClassification(.virtual, because: "no bus, API or form factor")
        }
        return nil
    }

    /// An analog device of an internal card with nothing more specific: the built-in speaker or mic.
    static let internalCard: Rule = { f in
        let p = f.properties
        guard let bus = p["device.bus"] ?? (p["device.api"] == "alsa" ? "alsa" : nil) else { return nil }
        if bus == "firewire" { return PortClassification(.fireWire, because: "device.bus=firewire") }
        guard ["pci", "platform", "isa", "alsa", "soundwire", "sdw"].contains(bus) else {
            return PortClassification(.pci, because: "device.bus=\(bus), not an internal bus")
        }
        return PortClassification(f.direction == .output ? .builtInSpeaker : .builtInMic,
                                  because: "analog device on an internal card (\(bus))")
    }
}

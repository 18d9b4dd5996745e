import AudioPolicy
import Testing

/// SPEC.md section 6, "Port types and where to read them on Linux", row by row. Each case is a set of
/// facts modelled on what ALSA, BlueZ, PulseAudio and PipeWire put on a real device.
struct PortTypeTableTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var label: String
        var facts: PortFacts
        var expected: PortType
        var testDescription: String { "\(label) → \(expected.name)" }
    }

    static let pciCard: [String: String] = [
        "device.api": "alsa", "device.bus": "pci", "device.class": "sound", "alsa.card_name": "HDA Intel PCH",
        "device.bus_path": "pci-0000:00:1f.3",
    ]

    static func alsa(
        _ direction: PortFacts.Direction, port: String? = nil, type: String = "unknown", description: String = "",
        profile: String = "analog-stereo", extra: [String: String] = [:]
    ) -> PortFacts {
        var props = pciCard
        props["device.profile.name"] = profile
        props.merge(extra) { _, new in new }
        let kind = direction == .output ? "alsa_output" : "alsa_input"
        return PortFacts(
            direction: direction, deviceName: "\(kind).pci-0000_00_1f.3.\(profile)", description: "Built-in Audio",
            driver: "module-alsa-card.c",
            activePort: port.map { PortFacts.ActivePort(name: $0, description: description, type: type) },
            cardProfile: "output:\(profile)+input:analog-stereo", properties: props)
    }

    static func bluez(
        _ direction: PortFacts.Direction, properties: [String: String], cardProfile: String? = nil,
        port: PortFacts.ActivePort? = nil, name: String = "bluez_output.38_18_4C_11_22_33.1"
    ) -> PortFacts {
        var props = ["device.api": "bluez5", "device.bus": "bluetooth", "device.form_factor": "headset",
                     "api.bluez5.address": "38:18:4C:11:22:33"]
        props.merge(properties) { _, new in new }
        return PortFacts(direction: direction, deviceName: name, description: "WH-1000XM4", driver: "module-bluez5-device.c",
                         activePort: port, cardProfile: cardProfile, properties: props)
    }

    static let rows: [Row] = [
        // builtInSpeaker
        Row(label: "ALSA speaker port", facts: alsa(.output, port: "analog-output-speaker", type: "speaker"), expected: .builtInSpeaker),
        Row(label: "UCM [Out] Speaker port, type not reported", facts: alsa(.output, port: "[Out] Speaker"), expected: .builtInSpeaker),
        Row(label: "internal card, analog output, no port", facts: alsa(.output, extra: ["device.form_factor": "internal"]),
            expected: .builtInSpeaker),
        Row(label: "platform card (SoC), no form factor", facts: PortFacts(
            direction: .output, deviceName: "alsa_output.platform-sound.HiFi", properties: ["device.api": "alsa", "device.bus": "platform"]),
            expected: .builtInSpeaker),
        // builtInReceiver
        Row(label: "handset port", facts: alsa(.output, port: "[Out] Handset", type: "handset"), expected: .builtInReceiver),
        Row(label: "earpiece port", facts: alsa(.output, port: "[Out] Earpiece", type: "earpiece"), expected: .builtInReceiver),
        Row(label: "earpiece port, type not reported", facts: alsa(.output, port: "[Out] Earpiece"), expected: .builtInReceiver),
        Row(label: "form factor handset", facts: PortFacts(direction: .output, deviceName: "x",
            properties: ["device.bus": "pci", "device.form_factor": "handset"]), expected: .builtInReceiver),
        // headphones
        Row(label: "ALSA headphones port", facts: alsa(.output, port: "analog-output-headphones", type: "headphones"), expected: .headphones),
        Row(label: "headset port on the output side", facts: alsa(.output, port: "[Out] Headset", type: "headset"), expected: .headphones),
        Row(label: "UCM [Out] Headphones, type not reported", facts: alsa(.output, port: "[Out] Headphones"), expected: .headphones),
        Row(label: "form factor headphone", facts: PortFacts(direction: .output, deviceName: "x",
            properties: ["device.api": "alsa", "device.bus": "pci", "device.form_factor": "headphone"]), expected: .headphones),
        // headsetMic
        Row(label: "analog-input-headset-mic", facts: alsa(.input, port: "analog-input-headset-mic", type: "headset"), expected: .headsetMic),
        Row(label: "analog-input-mic (the jack)", facts: alsa(.input, port: "analog-input-mic", type: "mic", description: "Microphone"),
            expected: .headsetMic),
        Row(label: "headset-mic name, type not reported", facts: alsa(.input, port: "analog-input-headset-mic"), expected: .headsetMic),
        Row(label: "headset form factor on an internal card", facts: alsa(.input, extra: ["device.form_factor": "headset"]),
            expected: .headsetMic),
        // builtInMic
        Row(label: "analog-input-internal-mic", facts: alsa(.input, port: "analog-input-internal-mic", type: "mic",
            description: "Internal Microphone"), expected: .builtInMic),
        Row(label: "internal mic name, type not reported", facts: alsa(.input, port: "analog-input-internal-mic"), expected: .builtInMic),
        Row(label: "form factor internal, input", facts: alsa(.input, extra: ["device.form_factor": "internal"]), expected: .builtInMic),
        Row(label: "form factor webcam", facts: PortFacts(direction: .input, deviceName: "alsa_input.usb-cam",
            properties: ["device.api": "alsa", "device.bus": "pci", "device.form_factor": "webcam"]), expected: .builtInMic),
        Row(label: "form factor microphone", facts: PortFacts(direction: .input, deviceName: "x",
            properties: ["device.api": "alsa", "device.bus": "pci", "device.form_factor": "microphone"]), expected: .builtInMic),
        // lineIn / lineOut
        Row(label: "line-in port", facts: alsa(.input, port: "analog-input-linein", type: "line"), expected: .lineIn),
        Row(label: "line-in name, type not reported", facts: alsa(.input, port: "analog-input-linein"), expected: .lineIn),
        Row(label: "line-out port", facts: alsa(.output, port: "analog-output-lineout", type: "line"), expected: .lineOut),
        Row(label: "S/PDIF port", facts: alsa(.output, port: "iec958-stereo-output", type: "spdif"), expected: .lineOut),
        Row(label: "S/PDIF profile, no port", facts: alsa(.output, profile: "iec958-stereo"), expected: .lineOut),
        // hdmi / displayPort
        Row(label: "HDMI port", facts: alsa(.output, port: "hdmi-output-0", type: "hdmi", profile: "hdmi-stereo"), expected: .hdmi),
        Row(label: "TV port", facts: alsa(.output, port: "[Out] TV", type: "tv"), expected: .hdmi),
        Row(label: "hdmi port name, type not reported", facts: alsa(.output, port: "hdmi-output-1", profile: "hdmi-stereo-extra1"),
            expected: .hdmi),
        Row(label: "hdmi profile, no port (PipeWire node)", facts: alsa(.output, profile: "hdmi-stereo-extra1"), expected: .hdmi),
        Row(label: "hdmi in the device name only", facts: PortFacts(direction: .output,
            deviceName: "alsa_output.pci-0000_01_00.1.hdmi-stereo", properties: ["device.api": "alsa"]), expected: .hdmi),
        Row(label: "DisplayPort port description", facts: alsa(.output, port: "hdmi-output-2", type: "hdmi",
            description: "DisplayPort 2", profile: "hdmi-stereo-extra2"), expected: .displayPort),
        Row(label: "DisplayPort product name", facts: alsa(.output, profile: "hdmi-stereo",
            extra: ["device.product.name": "DisplayPort Audio"]), expected: .displayPort),
        // usbAudio
        Row(label: "USB headset (bus usb wins over form factor)", facts: PortFacts(direction: .output,
            deviceName: "alsa_output.usb-Logitech_USB_Headset-00.analog-stereo", activePort: .init(name: "analog-output", type: "headset"),
            properties: ["device.api": "alsa", "device.bus": "usb", "device.form_factor": "headset"]), expected: .usbAudio),
        Row(label: "USB headset microphone", facts: PortFacts(direction: .input, deviceName: "alsa_input.usb-Logitech.mono-fallback",
            properties: ["device.api": "alsa", "device.bus": "usb", "device.form_factor": "headset"]), expected: .usbAudio),
        Row(label: "USB DAC with an HDMI-looking profile", facts: PortFacts(direction: .output, deviceName: "alsa_output.usb-dac",
            properties: ["device.bus": "usb", "device.profile.name": "iec958-stereo"]), expected: .usbAudio),
        // bluetoothA2DP
        Row(label: "PulseAudio bluetooth.protocol=a2dp_sink", facts: bluez(.output, properties: ["bluetooth.protocol": "a2dp_sink"],
            cardProfile: "a2dp_sink", port: .init(name: "headphone-output", type: "headphones")), expected: .bluetoothA2DP),
        Row(label: "PipeWire api.bluez5.profile=a2dp-sink", facts: bluez(.output, properties: ["api.bluez5.profile": "a2dp-sink",
            "api.bluez5.codec": "aac"]), expected: .bluetoothA2DP),
        Row(label: "card profile a2dp-sink only", facts: bluez(.output, properties: [:], cardProfile: "a2dp-sink"), expected: .bluetoothA2DP),
        Row(label: "bluetooth output with no profile", facts: bluez(.output, properties: [:]), expected: .bluetoothA2DP),
        Row(label: "device.api=bluez5 without a bus", facts: PortFacts(direction: .output, deviceName: "bluez_output.x",
            properties: ["device.api": "bluez5", "api.bluez5.profile": "a2dp-sink"]), expected: .bluetoothA2DP),
        // bluetoothHFP
        Row(label: "PulseAudio headset_head_unit", facts: bluez(.output, properties: ["bluetooth.protocol": "headset_head_unit"]),
            expected: .bluetoothHFP),
        Row(label: "PulseAudio handsfree_head_unit, input", facts: bluez(.input, properties: ["bluetooth.protocol": "handsfree_head_unit"]),
            expected: .bluetoothHFP),
        Row(label: "PipeWire headset-head-unit", facts: bluez(.output, properties: ["api.bluez5.profile": "headset-head-unit"]),
            expected: .bluetoothHFP),
        Row(label: "card profile headset-head-unit-msbc", facts: bluez(.input, properties: [:], cardProfile: "headset-head-unit-msbc"),
            expected: .bluetoothHFP),
        Row(label: "bluetooth input with no profile", facts: bluez(.input, properties: [:]), expected: .bluetoothHFP),
        Row(label: "HFP wins over an a2dp-looking device name", facts: bluez(.output, properties: ["bluetooth.protocol": "handsfree_head_unit"],
            name: "bluez_sink.38_18_4C.a2dp_sink"), expected: .bluetoothHFP),
        // bluetoothLE
        Row(label: "PipeWire bap-sink", facts: bluez(.output, properties: ["api.bluez5.profile": "bap-sink"]), expected: .bluetoothLE),
        Row(label: "card profile bap-duplex, input", facts: bluez(.input, properties: [:], cardProfile: "bap-duplex"), expected: .bluetoothLE),
        // carAudio
        Row(label: "car port", facts: alsa(.output, port: "[Out] Car", type: "car"), expected: .carAudio),
        Row(label: "form factor car", facts: PortFacts(direction: .output, deviceName: "x",
            properties: ["device.bus": "pci", "device.form_factor": "car"]), expected: .carAudio),
        // airPlay
        Row(label: "PulseAudio RAOP sink", facts: PortFacts(direction: .output, deviceName: "raop_output.Kitchen.local",
            driver: "module-raop-sink.c", properties: ["device.description": "Kitchen"]), expected: .airPlay),
        Row(label: "PipeWire RAOP sink", facts: PortFacts(direction: .output, deviceName: "raop_sink.Kitchen.local",
            driver: "PipeWire", properties: ["raop.ip": "192.0.2.10", "raop.port": "7000"]), expected: .airPlay),
        // network
        Row(label: "PulseAudio tunnel sink", facts: PortFacts(direction: .output, deviceName: "tunnel.desk.local",
            driver: "module-tunnel-sink-new.c", properties: ["tunnel.remote.server": "desk.local"]), expected: .network),
        Row(label: "RTP sink", facts: PortFacts(direction: .output, deviceName: "rtp_sink", driver: "PipeWire",
            properties: ["rtp.destination.ip": "224.0.0.56"]), expected: .network),
        // virtual
        Row(label: "null sink with no device facts", facts: PortFacts(direction: .output, deviceName: "null",
            driver: "module-null-sink.c", properties: ["device.description": "Null Output", "device.class": "abstract"]),
            expected: .virtual),
        Row(label: "monitor source", facts: PortFacts(direction: .input, deviceName: "alsa_output.pci.analog-stereo.monitor",
            isMonitor: true, properties: ["device.class": "monitor", "device.bus": "pci"]), expected: .virtual),
        Row(label: "filter sink (echo cancel, virtual surround)", facts: PortFacts(direction: .output, deviceName: "echo-cancel-sink",
            properties: ["device.class": "filter"]), expected: .virtual),
        Row(label: "PipeWire null sink, bare", facts: PortFacts(direction: .output, deviceName: "my-null", driver: "PipeWire",
            properties: ["media.class": "Audio/Sink", "factory.name": "support.null-audio-sink"]), expected: .virtual),
        // pci / fireWire (desktop extras)
        Row(label: "FireWire interface", facts: PortFacts(direction: .output, deviceName: "firewire",
            properties: ["device.bus": "firewire"]), expected: .fireWire),
        Row(label: "unknown bus", facts: PortFacts(direction: .output, deviceName: "thunderbolt",
            properties: ["device.bus": "thunderbolt"]), expected: .pci),
    ]

    @Test("every row of the port-type table", arguments: rows)
    func portTypeRow(_ row: Row) {
        let found = PortClassifier.classify(row.facts)
        #expect(found.type == row.expected, "\(row.label): got \(found.type.name) because \(found.fact)")
        #expect(!found.fact.isEmpty)
    }

    @Test("every port type of SPEC.md section 6 is reachable from some facts")
    func everyTypeIsCovered() {
        let reached = Set(Self.rows.map { PortClassifier.classify($0.facts).type })
        for (name, type) in PortType.known {
            #expect(reached.contains(type), "no row yields \(name)")
        }
    }

    @Test("raw values are Apple's, names are the Swift members")
    func rawValuesAndNames() {
        #expect(PortType.builtInSpeaker.rawValue == "Speaker")
        #expect(PortType.builtInReceiver.rawValue == "Receiver")
        #expect(PortType.headsetMic.rawValue == "MicrophoneWired")
        #expect(PortType.builtInMic.rawValue == "MicrophoneBuiltIn")
        #expect(PortType.bluetoothA2DP.rawValue == "BluetoothA2DPOutput")
        #expect(PortType.usbAudio.name == "usbAudio")
        #expect(PortType(name: "bluetoothHFP") == .bluetoothHFP)
        #expect(PortType(name: "BluetoothHFP") == .bluetoothHFP)
        #expect(PortType(rawValue: "Future").name == "Future")
        #expect(Set(PortType.known.map(\.name)).count == PortType.known.count)
        #expect(Set(PortType.known.map(\.type.rawValue)).count == PortType.known.count)
    }
}

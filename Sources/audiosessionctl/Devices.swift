import ArgumentParser
import AudioPolicy
import PolicyAgent
import PulseClient

/// One row of `audiosessionctl devices`.
struct DeviceReport: Encodable {
    var index: UInt32
    var direction: String
    var name: String
    var description: String
    var portType: PortType
    /// The fact the port type was read from.
    var portTypeFact: String
    var bus: String?
    var formFactor: String?
    var profile: String?
    var activePort: String?
    var isDefault: Bool
    var card: String?
    var state: String
    var muted: Bool
    var volume: String
}

extension DeviceReport {
    init(_ device: Device, in snapshot: Snapshot) {
        let type = snapshot.portType(of: device)
        let card = device.card.flatMap { snapshot.cards[$0] }
        index = device.id
        direction = device.direction.rawValue
        name = device.name
        description = device.description
        portType = type.type
        portTypeFact = type.fact
        bus = device.properties["device.bus"] ?? card?.properties["device.bus"]
        formFactor = device.properties["device.form_factor"] ?? card?.properties["device.form_factor"]
        profile = card?.activeProfile ?? device.properties["device.profile.name"]
            ?? device.properties["api.bluez5.profile"] ?? device.properties["bluetooth.protocol"]
        activePort = device.activePort
        let defaultName = snapshot.server?.defaultDeviceName(device.direction)
        isDefault = device.name == defaultName
        self.card = card?.name
        state = device.state.rawValue
        muted = device.isMuted
        volume = device.volume.description
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every output and input with its port type, bus, profile and default flag.")

    @OptionGroup var options: ServerOptions

    @Flag(name: .long, help: "Also list monitor sources (the sound each output plays).")
    var monitors = false

    func run() async throws {
        try await reporting {
            let client = try await options.connect()
            defer { client.close() }
            let snapshot = client.snapshot
            let devices = snapshot.devices(.output) + snapshot.devices(.input).filter { monitors || !$0.isMonitor }
            let reports = devices.map { DeviceReport($0, in: snapshot) }
            if options.json { return try printJSON(reports) }
            for line in Self.table(reports) { print(line) }
        }
    }

    /// The human output: one row per device, escaped.
    static func table(_ reports: [DeviceReport]) -> [String] {
        escapedTable(
            ["", "DIR", "TYPE", "NAME", "BUS", "PROFILE", "DESCRIPTION"],
            reports.map {
                [$0.isDefault ? "*" : "", $0.direction == "output" ? "out" : "in", $0.portType.name, $0.name,
                 $0.bus ?? "-", $0.profile ?? "-", $0.description]
            })
    }
}

import AudioSessionWire
import ArgumentParser
import AudioPolicy
import DBus
import Foundation
import PolicyAgent

/// `audiosessionctl route [--category C | --app APP | --input] [DEVICE | --clear]`: the user's choice of
/// where sound goes, remembered by the agent with the set of devices connected (SPEC.md section 10);
/// with nothing, the choices in force.
struct Route: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Choose where sound goes: the default output (or --input), or a category's or an app's output; remembered with the devices connected now.",
        discussion: "With no device, shows the choices in force. DEVICE is a device's name, as `audiosessionctl devices` shows it. A choice comes back when the same devices are connected again.")

    @Option(name: .long, help: "Only the sessions of this category (playback, playAndRecord, ambient, soloAmbient, multiRoute).")
    var category: String?

    @Option(name: .long, help: "Only this app: its policy file's name, else its program's (as `audiosessionctl status` shows).")
    var app: String?

    @Flag(name: .long, help: "The default input rather than the default output.")
    var input = false

    @Flag(name: .long, help: "Drop the choice for the category or app: the usual rules apply again.")
    var clear = false

    @Argument(help: "The device.")
    var device: String?

    @Option(name: .long, help: "The session bus's address. Default: $DBUS_SESSION_BUS_ADDRESS.")
    var bus: String?

    func validate() throws {
        if [category != nil, app != nil, input].filter({ $0 }).count > 1 { throw ValidationError("route takes one of --category, --app and --input") }
        if clear && device != nil { throw ValidationError("route takes a device or --clear, not both") }
        if clear && category == nil && app == nil { throw ValidationError("--clear drops a category's or an app's choice: name one") }
        if let category, RouteScope(word: "category:\(category)") == nil {
            throw ValidationError("no category '\(Escape.forDisplay(String(category.prefix(40))))' (accepted: \(AudioPolicy.Category.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        if let app, app.isEmpty || app.utf8.count > RouteScope.nameLimit { throw ValidationError("--app takes an app's name (1 to \(RouteScope.nameLimit) bytes)") }
        if (category != nil || app != nil || input) && device == nil && !clear { throw ValidationError("name a device, or --clear") }
    }

    func run() async throws {
        try await reporting {
            guard device != nil || clear else {
                let report = try await Status.report(bus: bus).get()
                print(Escape.forDisplay("devices: \(report.deviceSet ?? "not listed yet")"))
                let choices = report.routeChoices ?? []
                print(Escape.forDisplay(choices.isEmpty ? "choices: none (the usual rules)" : "choices: \(choices.joined(separator: "; "))"))
                return
            }
            let scope = category.map { "category:\($0)" } ?? app.map { "app:\($0)" } ?? (input ? "default-input" : "default")
            let connection: DBusConnection
            do { connection = try DBusConnection.connect(.session, address: bus, name: "audiosessionctl") } catch {
                throw Failure("no session bus: \(error)")
            }
            defer { connection.close() }
            do {
                let said = try await connection.call(Wire.busName, Wire.agentPath, Wire.agentInterface, "SetRoute", [.string(scope), .string(device ?? "")])
                    .first?.string ?? "?"
                print(Escape.forDisplay(said))
            } catch DBusError.remote(let name, let message) {
                throw Failure(name == "org.freedesktop.DBus.Error.ServiceUnknown" ? "no audiosessiond on the session bus" : message)
            }
        }
    }
}

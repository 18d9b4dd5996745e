import Foundation
public import PulseClient

/// The sound servers every integration test runs against (the raw value is `scripts/private-server`'s kind).
public enum ServerKind: String, CaseIterable, Sendable, CustomStringConvertible {
    /// PulseAudio 16.1 (Debian 12).
    case pulseaudio
    /// PipeWire 0.3.65 with WirePlumber 0.4.13 (Debian 12).
    case pipewire
    /// PipeWire 1.4.2 with WirePlumber 0.5.8 (Debian 13's, from bookworm-backports, unpacked beside 0.3.65
    /// by `scripts/fetch-pipewire-1.4`).
    case pipewire14 = "pipewire-1.4"

    public var description: String {
        switch self {
        case .pulseaudio: "PulseAudio"
        case .pipewire: "PipeWire"
        case .pipewire14: "PipeWire 1.4"
        }
    }

    /// Either PipeWire: clients talk to pipewire-pulse, and WirePlumber makes the policy.
    public var isPipeWire: Bool { self != .pulseaudio }
}

/// An imitation device of `scripts/private-server` (null sinks and sources with real property sets).
public struct ImitationDevice: RawRepresentable, Hashable, Sendable, CaseIterable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Built-in analog speaker (pci, form factor internal).
    public static let speaker = ImitationDevice(rawValue: "speaker")
    /// Built-in internal microphone.
    public static let internalMic = ImitationDevice(rawValue: "internal-mic")
    /// Headset microphone on the internal card's jack.
    public static let headsetMic = ImitationDevice(rawValue: "headset-mic")
    /// HDMI monitor output.
    public static let hdmi = ImitationDevice(rawValue: "hdmi")
    /// USB headset: an output and a microphone.
    public static let usbHeadset = ImitationDevice(rawValue: "usb-headset")
    /// Bluetooth headphones in A2DP.
    public static let bluetoothA2DP = ImitationDevice(rawValue: "bt-a2dp")
    /// Bluetooth headset in HFP: an output and a microphone.
    public static let bluetoothHFP = ImitationDevice(rawValue: "bt-hfp")

    /// A Bluetooth headset (A2DP and hands-free) made into a card by the server itself, from the imitation
    /// BlueZ: needs a server started with `bluez: true`.
    public static let bluezHeadset = ImitationDevice(rawValue: "bluez-headset")
    /// Bluetooth headphones (A2DP only) from the imitation BlueZ.
    public static let bluezHeadphones = ImitationDevice(rawValue: "bluez-headphones")

    /// The null-sink devices (the imitation BlueZ's are left out: they need `bluez: true`).
    public static let allCases: [ImitationDevice] = [
        .speaker, .internalMic, .headsetMic, .hdmi, .usbHeadset, .bluetoothA2DP, .bluetoothHFP,
    ]

    /// The sink and source names the device brings.
    public var nodeNames: [String] {
        switch self {
        case .speaker: ["builtin_speaker"]
        case .internalMic: ["builtin_mic"]
        case .headsetMic: ["headset_mic"]
        case .hdmi: ["hdmi_monitor"]
        case .usbHeadset: ["usb_headset", "usb_headset_mic"]
        case .bluetoothA2DP: ["bt_a2dp_headphones"]
        case .bluetoothHFP: ["bt_hfp_headset", "bt_hfp_headset_mic"]
        default: []
        }
    }
}

/// An isolated PulseAudio, or PipeWire stack (dbus-daemon, pipewire, wireplumber, pipewire-pulse) of either version,
/// started by `scripts/private-server`. A watchdog stops it when the test process exits or after
/// `maxSeconds`, so nothing outlives a crashed or hung test; `stop()` stops it at once.
public final class PrivateServer: Sendable {
    public let kind: ServerKind
    /// The folder that holds its sockets, state and logs.
    public let directory: String
    /// The address for `PULSE_SERVER` / `PulseClient.Configuration.server`.
    public let address: String

    static let script = repositoryRoot.appendingPathComponent("scripts/private-server").path

    private init(kind: ServerKind, directory: String, address: String) {
        self.kind = kind; self.directory = directory; self.address = address
    }

    /// Starts a server with the given imitation devices plugged in; with `bluez`, the server also gets
    /// Bluetooth from an imitation BlueZ on a private system bus (`scripts/fake-bluez`), and its own
    /// Bluetooth policy as shipped (switching headsets to hands-free by itself) unless not `serverAutoswitch`.
    /// With `roleSinks` (PipeWire 1.4 only), WirePlumber's role-based policy is configured.
    public static func start(
        _ kind: ServerKind, devices: [ImitationDevice] = ImitationDevice.allCases, bluez: Bool = false,
        serverAutoswitch: Bool = true, roleSinks: Bool = false, maxSeconds: Int = 900
    ) async throws -> PrivateServer {
        let list = devices.isEmpty ? "none" : devices.map(\.rawValue).joined(separator: ",")
        let command = [
            script, "start", kind.rawValue, "--watch", "\(getpid())", "--max-seconds", "\(maxSeconds)",
            "--devices", list,
        ] + (bluez ? ["--bluez"] : []) + (bluez && !serverAutoswitch ? ["--no-bluetooth-autoswitch"] : [])
          + (roleSinks ? ["--role-sinks"] : [])
        let output: CommandOutput
        do {
            output = try await runCommand(command)
        } catch let error as CommandError where error.output.stderr.contains("wireplumber did not start") {
            // Seen once in a full suite on two busy cores (WirePlumber 0.4 not a client of its server
            // 20 s after its start): said, with the logs the script printed, and tried once more.
            FileHandle.standardError.write(Data("private server: \(error)\n: starting it once more\n".utf8))
            output = try await runCommand(command)
        }
        var values: [String: String] = [:]
        for line in output.stdout.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        guard let dir = values["DIR"], let address = values["PULSE_SERVER"] else {
            throw CommandError(command: [script, "start"], output: output)
        }
        return PrivateServer(kind: kind, directory: dir, address: address)
    }

    /// The server's own processes (pulseaudio; or pipewire, wireplumber and pipewire-pulse), for
    /// measuring what they cost.
    public func processIDs() -> [Int32] {
        let names = kind == .pulseaudio ? ["pulseaudio"] : ["pipewire", "wireplumber", "pipewire-pulse"]
        return names.compactMap(processID)
    }

    /// The process that serves the PulseAudio protocol: pulseaudio, or pipewire-pulse.
    public var protocolServerProcessID: Int32? { processID(kind == .pulseaudio ? "pulseaudio" : "pipewire-pulse") }

    private func processID(_ name: String) -> Int32? {
        (try? String(contentsOfFile: "\(directory)/pid.\(name)", encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Stops every process of the server and removes its folder. Safe to call twice.
    public func stop() {
        if let child = try? ChildProcess.spawn([PrivateServer.script, "stop", directory]) { _ = child.blockingWait() }
    }

    deinit { stop() }

    public func plug(_ device: ImitationDevice) async throws {
        try await runCommand([PrivateServer.script, "plug", directory, device.rawValue])
    }

    public func unplug(_ device: ImitationDevice) async throws {
        try await runCommand([PrivateServer.script, "unplug", directory, device.rawValue])
    }

    /// Kills the server clients talk to (pulseaudio or pipewire-pulse) and starts it again at the
    /// same address, with the same devices.
    public func restart() async throws {
        try await runCommand([PrivateServer.script, "restart", directory])
    }

    /// The same, but the server stays down until `body` has run (it is given the server's absence to
    /// act in); then it comes back, and this returns once it answers.
    public func restart(whileDown body: () async throws -> Void) async throws {
        let fifo = "\(directory)/restart-hold"
        unlink(fifo)
        guard mkfifo(fifo, 0o600) == 0 else { throw CommandError(command: ["mkfifo", fifo], output: CommandOutput(status: errno, stdout: "", stderr: "mkfifo failed")) }
        let restart = Task { try await runCommand([PrivateServer.script, "restart", directory, "--hold", fifo]) }
        do {
            try await body()
        } catch {
            release(fifo)
            _ = try? await restart.value
            throw error
        }
        release(fifo)
        _ = try await restart.value
    }

    /// Lets a held restart go on (the script reads one line from the FIFO).
    private func release(_ fifo: String) {
        let fd = open(fifo, O_WRONLY)
        guard fd >= 0 else { return }
        _ = write(fd, "go\n", 3)
        close(fd)
    }

    /// What the server thinks, for a failed test's message: its defaults and, on PipeWire, the default
    /// metadata, the audio nodes with their ports and the last lines of WirePlumber's log.
    public func diagnosis() async -> String {
        guard let output = try? await runCommand([PrivateServer.script, "diagnose", directory], check: false) else {
            return "(private-server diagnose did not run)"
        }
        return output.stdout + output.stderr
    }

    /// Runs `pactl` against this server.
    @discardableResult
    public func pactl(_ arguments: String...) async throws -> String {
        try await runCommand(["pactl"] + arguments, environment: ["PULSE_SERVER": address]).stdout
    }

    /// The server's default sink, asked through a connection of its own (`pactl get-default-sink`).
    /// A long-lived connection to pipewire-pulse (the observer's, the agent's) can miss a change of the
    /// default, and says the old one until the next change: PipeWire's daemon passes a change of an
    /// exported metadata object ("default", WirePlumber's) only to the clients binding it at that
    /// moment while any bind is waiting for WirePlumber's answer (module-metadata's `metadata_property`,
    /// the same in 0.3.65, 1.4 and master), and every new pulse client binds it. A fresh connection
    /// reads it whole.
    public func defaultSinkName() async throws -> String {
        try await pactl("get-default-sink").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `pactl -f json list WHAT`, decoded.
    public func pactlList(_ what: String) async throws -> [[String: Any]] {
        let text = try await runCommand(["pactl", "-f", "json", "list", what], environment: ["PULSE_SERVER": address]).stdout
        guard let list = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] else {
            throw CommandError(command: ["pactl", "-f", "json", "list", what],
                               output: CommandOutput(status: 0, stdout: text, stderr: "not a JSON list"))
        }
        return list
    }

    /// Connects a `PulseClient` to this server.
    public func connect(reconnects: Bool = true) async throws -> PulseClient {
        try await PulseClient.connect(.init(server: address, applicationName: "audiosession-tests", reconnects: reconnects))
    }
}

/// A write to a pipe or socket whose reader is gone (a program the test started, killed; a server
/// stopped under a client) must come back as an error, not end the test process: SIGPIPE ignored once,
/// as libpulse asks of its clients.
private let pipeSignalIgnored: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

/// Starts a server, runs the body, and always stops the server (the watchdog covers crashes).
public func withPrivateServer<R>(
    _ kind: ServerKind, devices: [ImitationDevice] = ImitationDevice.allCases, bluez: Bool = false,
    serverAutoswitch: Bool = true, roleSinks: Bool = false, _ body: (PrivateServer) async throws -> R
) async throws -> R {
    _ = pipeSignalIgnored
    let server = try await PrivateServer.start(kind, devices: devices, bluez: bluez, serverAutoswitch: serverAutoswitch, roleSinks: roleSinks)
    defer { server.stop() }
    return try await body(server)
}

/// One entry of WirePlumber's stream memory (PipeWire 0.3 and 1.4): what it gives the next stream of
/// that key. Volumes are PipeWire's linear factors (the cube of PulseAudio's fraction: 40 % is 0.064).
public struct WirePlumberStreamEntry: Sendable, Equatable {
    public var isMuted: Bool?
    public var channelVolumes: [Double]?
    /// The device a stream of that key is sent to (saved when a stream is moved).
    public var target: String?
}

extension PrivateServer {
    /// WirePlumber's stream memory as it last saved it, by key: `Output/Audio:media.role:Music`,
    /// `Output/Audio:application.name:Rhythmbox`, ... (the first of media.role, application.id,
    /// application.name, media.name, node.name that the stream has; pipewire-pulse gives the roles
    /// their PipeWire names: music Music, video Movie, phone Communication, event Notification ...).
    /// WirePlumber keeps the memory in its own process and applies it at once; it writes the file
    /// about a second after the last change, so tests read the file to know a change was taken
    /// (a stream gone before WirePlumber saw its mute leaves the volume remembered without it).
    /// WirePlumber 0.5 writes `$XDG_STATE_HOME/wireplumber/stream-properties`, a JSON object per key
    /// (ext-stream-restore shows none of it but the Notification entry); WirePlumber 0.4 writes
    /// `restore-stream`, one `key:field=value` line per field. Empty for PulseAudio.
    public func wirePlumberStreamMemory() -> [String: WirePlumberStreamEntry] {
        switch kind {
        case .pulseaudio: return [:]
        case .pipewire14: return wirePlumber05Memory()
        case .pipewire: return wirePlumber04Memory()
        }
    }

    private func wirePlumber05Memory() -> [String: WirePlumberStreamEntry] {
        guard let text = try? String(contentsOfFile: "\(directory)/state/wireplumber/stream-properties", encoding: .utf8)
        else { return [:] }
        var entries: [String: WirePlumberStreamEntry] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("[") {
            // key={json}: the key itself has colons, but no "=".
            guard let equals = line.firstIndex(of: "="),
                  let object = try? JSONSerialization.jsonObject(with: Data(line[line.index(after: equals)...].utf8)) as? [String: Any]
            else { continue }
            entries[String(line[..<equals])] = WirePlumberStreamEntry(
                isMuted: object["mute"] as? Bool, channelVolumes: object["channelVolumes"] as? [Double],
                target: object["target"] as? String)
        }
        return entries
    }

    private func wirePlumber04Memory() -> [String: WirePlumberStreamEntry] {
        guard let text = try? String(contentsOfFile: "\(directory)/state/wireplumber/restore-stream", encoding: .utf8)
        else { return [:] }
        var entries: [String: WirePlumberStreamEntry] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("[") {
            // key:field=value, the key with colons of its own; arrays are "a;b;".
            guard let equals = line.firstIndex(of: "="), let colon = line[..<equals].lastIndex(of: ":") else { continue }
            let key = String(line[..<colon])
            let field = line[line.index(after: colon)..<equals]
            let value = String(line[line.index(after: equals)...])
            var entry = entries[key] ?? WirePlumberStreamEntry()
            switch field {
            case "mute": entry.isMuted = value == "true" ? true : value == "false" ? false : nil
            case "channelVolumes": entry.channelVolumes = value.split(separator: ";").compactMap { Double($0) }
            case "target": entry.target = value
            default: break
            }
            entries[key] = entry
        }
        return entries
    }

    /// Waits until an agent process has handled everything this server told it so far: a display
    /// monitor appears (the display-audio guard keeps it off the route, so nothing moves), and the agent
    /// writes its arrival to its route log after every earlier event. The marker goes again before this
    /// returns.
    public func settleAgent(routeLog: String, timeout: Duration = .seconds(30)) async throws {
        let name = "settle_\(UInt32.random(in: 0...UInt32.max))"
        let index = try await pactl("load-module", "module-null-sink", "sink_name=\(name)",
                                    "sink_properties=\"device.profile.name=hdmi-stereo device.class=sound device.description=Settle\"")
        let deadline = ContinuousClock.now + timeout
        var logged = false
        while !logged && ContinuousClock.now < deadline {
            logged = ((try? String(contentsOfFile: routeLog, encoding: .utf8)) ?? "").contains(name)
            if !logged { try await Task.sleep(for: .milliseconds(5)) }  // a file gives no event to wait on
        }
        _ = try? await pactl("unload-module", index.filter(\.isNumber))
        guard logged else { throw TimeoutError(what: "the agent to log \(name) in \(routeLog)") }
    }

    /// Waits until WirePlumber has saved an entry for `key` that satisfies the predicate (the file is
    /// read again every 50 ms: it gives no event), and returns it.
    @discardableResult
    public func waitForWirePlumberMemory(
        _ key: String, timeout: Duration = .seconds(3), _ predicate: (WirePlumberStreamEntry) -> Bool
    ) async throws -> WirePlumberStreamEntry {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let entry = wirePlumberStreamMemory()[key], predicate(entry) { return entry }
            guard ContinuousClock.now < deadline else {
                throw TimeoutError(what: "WirePlumber's memory of \(key); it has \(wirePlumberStreamMemory()[key].map { "\($0)" } ?? "none")")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

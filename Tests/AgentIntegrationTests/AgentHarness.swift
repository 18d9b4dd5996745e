import AudioPolicy
import Foundation
import Logging
import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing

/// A private server, an agent running on it in this process, and an observing client to check the
/// server's state through events (no sleeps).
struct AgentWorld {
    let server: PrivateServer
    let agent: Agent
    let observer: PulseClient
    let directory: String
    let running: Task<Void, any Error>

    /// Stops the agent (it undoes what it holds) and waits until it has.
    func stopAgent() async throws {
        agent.send(.stop)
        try await running.value
    }
    var routeLog: String { "\(directory)/routes.jsonl" }
    var stateDirectory: String { "\(directory)/state" }
    var policyDirectory: String { "\(directory)/policies" }

    /// The stream of a client, once the agent has classified it and the server reports it running.
    func running(_ stream: ClientStream, timeout: Duration = .seconds(10)) async throws -> AudioStream {
        try await observer.wait(for: stream, timeout: timeout)
    }

    /// Waits until the stream's mute is as expected (the agent acted, or not).
    @discardableResult
    func waitMuted(_ stream: ClientStream, _ muted: Bool, _ what: String = "") async throws -> AudioStream {
        try await observer.wait(for: "\(what) pacat \(stream.processID) muted=\(muted)") { s in
            stream.find(in: s).flatMap { $0.isMuted == muted ? $0 : nil }
        }
    }

    /// Waits until every channel of the stream's volume is within 1 % of `fraction`.
    @discardableResult
    func waitVolume(_ stream: ClientStream, _ fraction: Double) async throws -> AudioStream {
        try await observer.wait(for: "pacat \(stream.processID) at \(Int(fraction * 100)) %") { s in
            stream.find(in: s).flatMap { st in
                st.volume.values.allSatisfy { abs($0.fraction - fraction) < 0.01 } ? st : nil
            }
        }
    }

    /// Waits for a Bluetooth card the imitation BlueZ brings, as the predicate wants it. The card comes
    /// over D-Bus, and on WirePlumber through its Bluetooth monitor: under a whole suite's load that has
    /// taken longer than the usual ten seconds (CI), so up to 30 s; a timeout says the cards, sinks and
    /// the agent's routes.
    func waitForBluetoothCard<T: Sendable>(_ what: String, _ predicate: @escaping @Sendable (Snapshot) -> T?) async throws -> T {
        do {
            return try await observer.wait(for: what, timeout: .seconds(30), predicate)
        } catch {
            let cards = (try? await server.pactl("list", "short", "cards")) ?? ""
            let sinks = (try? await server.pactl("list", "short", "sinks")) ?? ""
            let info = (try? await server.pactl("info")) ?? ""
            let routes = (try? routeLogEntries().map { "\($0.reason.name): \($0.cause)" }) ?? []
            // And what this client was told (the same PulseClient the agent uses): where it differs from
            // pactl's fresh answers, an event was missed.
            let s = observer.snapshot
            let told = "cards " + s.cards.values.map { "\($0.id) \($0.name) \($0.activeProfile ?? "no profile")" }.joined(separator: ", ")
                + "; sinks " + s.sinks.values.map { "\($0.id) \($0.name) card \($0.card.map(String.init) ?? "none")" }.joined(separator: ", ")
                + "; default sink \(s.server?.defaultSinkName ?? "none")"
            Issue.record("\(error); cards: \(cards); sinks: \(sinks); server: \(info); the agent's routes: \(routes); the observer was told: \(told)")
            throw error
        }
    }

    /// Waits until the agent has handled everything the server has told it so far, so that "nothing
    /// happened" can be asserted: a marker module's appearance goes through the same queue.
    func settle() async throws {
        let name = "settle_\(UInt32.random(in: 0...UInt32.max))"
        let index = try await observer.loadModule("module-null-sink", arguments: "sink_name=\(name)")
        try await waitForAgent { $0.ports[name] != nil }
        try await observer.unloadModule(index)
        try await waitForAgent { $0.ports[name] == nil }
    }

    /// Waits until the agent's core state satisfies the predicate, checking after each input it handles.
    func waitForAgent(_ what: String = "the agent", timeout: Duration = .seconds(10), _ predicate: @escaping @Sendable (PolicyState) -> Bool) async throws {
        try await waitForAgent(what, timeout: timeout, agent: { predicate(await $0.state) })
    }

    /// Waits until what is now playing is a session of the process `pid` (its session ids carry it).
    func waitNowPlaying(_ what: String, pid: Int32) async throws {
        try await waitForAgent(what) { $0.nowPlaying?.rawValue.contains("[\(pid)]") == true }
    }

    /// The same, for anything the agent can be asked.
    func waitForAgent(_ what: String, timeout: Duration = .seconds(10), agent predicate: @escaping @Sendable (Agent) async -> Bool) async throws {
        let agent = self.agent
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await _ in await agent.watch() where await predicate(agent) { return true }
                return false
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TimeoutError(what: what)
            }
            defer { group.cancelAll() }
            guard try await group.next() == true else { throw TimeoutError(what: "\(what) (the agent stopped)") }
        }
    }

    func routeLogEntries() throws -> [RouteLogEntry] {
        let text = (try? String(contentsOfFile: routeLog, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { try JSONDecoder().decode(RouteLogEntry.self, from: Data($0.utf8)) }
    }

    /// Music playing, then a call that the agent has muted it for.
    func musicMutedByCall() async throws -> (song: ClientStream, call: ClientStream) {
        let song = try play(["media.role": "music"])
        _ = try await running(song)
        let call = try play(["media.role": "phone"], name: "Call")
        try await waitMuted(song, true, "the call interrupts the music")
        return (song, call)
    }

    /// A music player playing, then a second one, which interrupts it (the agent has muted the first).
    func secondPlayerInterruptsTheFirst() async throws -> (first: ClientStream, second: ClientStream) {
        let first = try play(["media.role": "music"], name: "First")
        _ = try await running(first)
        let second = try play(["media.role": "music"], name: "Second")
        try await waitMuted(first, true, "the second player interrupts the first")
        return (first, second)
    }

    /// `pactl list sink-inputs` without the streams the agent opens for a moment to write the server's
    /// memory (on PipeWire; they carry `PulseClient.probeProperty`).
    func appSinkInputs() async throws -> String {
        let text = try await server.pactl("list", "sink-inputs")
        return text.components(separatedBy: "Sink Input #").filter { !$0.contains(PulseClient.probeProperty) }.joined(separator: "Sink Input #")
    }

    /// Starts a pacat with these properties.
    func play(_ properties: [String: String], direction: Direction = .output, name: String = "Test Player",
              device: String? = nil) throws -> ClientStream {
        try ClientStream.start(on: server, direction: direction, applicationName: name, properties: properties, device: device)
    }
}

/// Whether the stream plays on the device (by name), for `PulseClient.wait(for:)`.
func on(_ stream: ClientStream, _ device: String) -> @Sendable (Snapshot) -> Bool? {
    { s in stream.find(in: s).flatMap { s.device(of: $0)?.name == device ? true : nil } }
}

/// A logger that keeps the agent's lines (debug and up) in `recorder`, for a test that reads them.
func recordingLogger(_ recorder: LogRecorder) -> Logger {
    Logger(label: "agent-test") { _ in
        var handler = EscapingLogHandler(wrapping: LogRecorder.Handler(recorder: recorder))
        handler.logLevel = .debug
        return handler
    }
}

extension AgentWorld {
    /// Plugs the USB headset, and waits until it is the default route for the agent and for the server
    /// (the last device in wins, by the agent's rule).
    func plugTheHeadsetAsDefault() async throws {
        try await server.plug(.usbHeadset)
        try await waitForAgent("the headset as the default route", timeout: .seconds(30)) { $0.systemRoute.outputs.first?.uid == "usb_headset" }
        try await observer.wait(for: "the headset the server's default", timeout: .seconds(30)) { $0.defaultSink?.name == "usb_headset" ? true : nil }
    }
}

/// The agent's log in tests: silent, or on standard error with AUDIOSESSION_TEST_LOG=1 (to see why a
/// test failed; `trace` adds every command sent).
let quietLogger = Logger(label: "agent-test") { label in
    let level = ProcessInfo.processInfo.environment["AUDIOSESSION_TEST_LOG"]
    guard level == "1" || level == "trace" else { return SwiftLogNoOpLogHandler() }
    var handler = EscapingLogHandler(wrapping: StreamLogHandler.standardError(label: label))
    handler.logLevel = level == "trace" ? .trace : .debug
    return handler
}

/// Starts a private server of the kind, an agent with the given extra policy files, and always stops both.
func withAgent<R>(
    _ kind: ServerKind, devices: [ImitationDevice] = [.speaker, .internalMic, .hdmi, .bluetoothA2DP],
    bluez: Bool = false, serverAutoswitch: Bool = true, roleSinks: Bool = false, policies: [String: String] = [:], outputs: String? = nil,
    sessionBus: String? = nil, systemBus: PrivateSessionBus? = nil, settings: AgentSettings = AgentSettings(),
    logger: Logger? = nil,
    _ body: (AgentWorld) async throws -> R
) async throws -> R {
    // Without a logger of the test's own (or AUDIOSESSION_TEST_LOG), the agent's log is kept and
    // printed if the test throws: a flake seen once in CI then says what the agent saw and did.
    let kept = LogRecorder()
    let logger = logger ?? (["1", "trace"].contains(ProcessInfo.processInfo.environment["AUDIOSESSION_TEST_LOG"]) ? quietLogger
        : Logger(label: "agent-test") { _ in
            var handler = EscapingLogHandler(wrapping: LogRecorder.Handler(recorder: kept))
            handler.logLevel = .debug
            return handler
        })
    return try await withPrivateServer(kind, devices: devices, bluez: bluez, serverAutoswitch: serverAutoswitch, roleSinks: roleSinks) { server in
        let directory = server.directory + "/agent"
        try FileManager.default.createDirectory(atPath: "\(directory)/policies", withIntermediateDirectories: true)
        for (name, text) in policies {
            try text.write(toFile: "\(directory)/policies/\(name).yaml", atomically: true, encoding: .utf8)
        }
        // (Beside the policies directory, as in the configuration's layers.)
        try outputs?.write(toFile: "\(directory)/\(OutputRoutesFile.fileName)", atomically: true, encoding: .utf8)
        let agent = Agent(
            configuration: AgentConfiguration(
                server: server.address, policyLayers: ["\(directory)/policies"] + PolicyFiles.shippedDirectories,
                routeLog: "\(directory)/routes.jsonl", stateDirectory: "\(directory)/state", settings: settings,
                sessionBus: sessionBus.map { .address($0) } ?? .none,
                systemBus: systemBus.map { .address($0.address) } ?? .none),
            logger: logger)
        let running = Task { try await agent.run() }
        let observer = try await server.connect()
        defer { observer.close() }
        let world = AgentWorld(server: server, agent: agent, observer: observer, directory: directory, running: running)
        do {
            // The agent is up once it has announced the server's devices.
            try await world.waitForAgent("the agent to start") { !$0.ports.isEmpty }
            let result = try await body(world)
            agent.send(.stop)
            try await running.value
            return result
        } catch {
            // What the core holds and what the players said, before the stop undoes it: a flake that
            // left a session in the wrong state says which.
            let state = await agent.state
            let sessions = state.sessions.keys.sorted { "\($0)" < "\($1)" }.map { "  \($0): \(state.sessions[$0].map { "\($0)" } ?? "")\n" }.joined()
            let players = await agent.playerStatuses.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value.map { "\($0)" } ?? "unknown")\n" }.joined()
            FileHandle.standardError.write(Data("the core's sessions (\(kind), \(error)):\n\(sessions)the players (\(kind)):\n\(players)".utf8))
            agent.send(.stop)
            _ = try? await running.value
            let lines = kept.lines
            if !lines.isEmpty {
                let body: String = lines.map { (line: String) -> String in "  \(line)\n" }.joined()
                let text = "the agent's log (\(kind), \(error)):\n\(body)"
                FileHandle.standardError.write(Data(text.utf8))
            }
            // And the server's view, for a flake that is the server's (WirePlumber not choosing a default).
            let diagnosis = await server.diagnosis()
            FileHandle.standardError.write(Data("the server's view (\(kind), \(error)):\n\(diagnosis)".utf8))
            throw error
        }
    }
}

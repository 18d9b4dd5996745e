import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PolicyAgent

@main
struct AudioSessionD: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audiosessiond",
        abstract: "The audio-session agent: gives every app on the desktop's sound server its session.",
        discussion: "Stops cleanly on SIGTERM and SIGINT, undoing everything it holds; reloads policies on SIGHUP.",
        version: Release.version)

    @Option(name: .long, help: "Sound server address (unix:/path). Default: $PULSE_SERVER, then the user's server.")
    var server: String?

    @Option(name: .long, help: "A policy directory of the highest precedence (repeatable).")
    var policies: [String] = []

    @Option(name: .customLong("route-log"), help: "Append every route change to this file (JSON lines).")
    var routeLog: String?

    @Option(name: .customLong("state-dir"), help: "Where the journal of held changes lives (made 0700; refused if others may write it). Default: $XDG_STATE_HOME/audiosession, else ~/.local/state/audiosession, else $XDG_RUNTIME_DIR/audiosession.")
    var stateDir: String?

    @Flag(name: .long, help: "Log every decision in detail.")
    var verbose = false

    @Flag(name: .customLong("keep-server-modules"), help: "Leave PulseAudio's role-cork, role-ducking, switch-on-connect and bluetooth-policy as they are.")
    var keepServerModules = false

    @Flag(name: .customLong("no-meters"), help: ArgumentHelp(
        "Meter no stream: an app counts as playing while its stream runs (is uncorked), heard or not; a muted call is not told of speech.",
        discussion: "By default the streams whose sound decides (their app would interrupt, duck or silence others, or is in a call) are metered, and a stream that stays open writing silence activates nothing; and while a declared call's input is muted, its microphone is metered to tell it when someone speaks."))
    var noMeters = false

    @Option(name: .customLong("duck-fade"), help: ArgumentHelp(
        "How long a duck takes to lower the other apps, in milliseconds (0 to 10000; default 150).",
        valueName: "ms"))
    var duckFade: Int?

    @Option(name: .customLong("unduck-fade"), help: ArgumentHelp(
        "How long the other apps take to come back up after a duck, in milliseconds (0 to 10000; default 500).",
        valueName: "ms"))
    var unduckFade: Int?

    @Option(name: .customLong("run-after-mute"), help: ArgumentHelp(
        "After the mutes a new app's stream brings are on their way to the server, how long the agent leaves the CPU to the server and the apps before it decides the rest, in milliseconds (0 to 100; default 1).",
        valueName: "ms"))
    var runAfterMute: Int?

    @Option(name: .customLong("session-bus"), help: ArgumentHelp(
        "The D-Bus session bus where media players are paused through MPRIS (an address, or 'none': players are then muted only).",
        discussion: "Default: $DBUS_SESSION_BUS_ADDRESS, then $XDG_RUNTIME_DIR/bus."))
    var sessionBus: String?

    @Option(name: .customLong("system-bus"), help: ArgumentHelp(
        "The D-Bus system bus where logind tells sleep and the screen lock (an address, or 'none').",
        discussion: "Default: $DBUS_SYSTEM_BUS_ADDRESS, then /run/dbus/system_bus_socket."))
    var systemBus: String?

    func validate() throws {
        for (name, value) in [("--duck-fade", duckFade), ("--unduck-fade", unduckFade)] {
            if let value, !(0...10_000).contains(value) {
                throw ValidationError("\(name) \(value): a fade lasts 0 to 10000 milliseconds")
            }
        }
        if let runAfterMute, !(0...100).contains(runAfterMute) {
            throw ValidationError("--run-after-mute \(runAfterMute): 0 to 100 milliseconds")
        }
    }

    func run() async throws {
        let level: Logger.Level = verbose ? (ProcessInfo.processInfo.environment["AUDIOSESSION_TRACE"] == "1" ? .trace : .debug) : .info
        // Through EscapingLogHandler: what apps put in their stream properties reaches the log as metadata,
        // and must neither split a line nor reach the terminal as escape sequences.
        LoggingSystem.bootstrap { label in
            var handler = EscapingLogHandler(wrapping: StreamLogHandler.standardError(label: label))
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "audiosessiond")
        if !Heap.keepLargeBlocksApart() { logger.debug("glibc did not take a fixed threshold for large blocks (mallopt)") }
        // No shared fallback such as /tmp: another user could plant links there.
        var state = stateDir ?? ""
        if stateDir == nil { do { state = try StateDirectory.defaultPath(environment: ProcessInfo.processInfo.environment) } catch {
            let line = "audiosessiond: \(Escape.forDisplay(error.description))\n"
            _ = line.withCString { write(2, $0, strlen($0)) }
            throw ExitCode.failure
        } }
        var settings = AgentSettings()
        settings.policy.metersStreams = !noMeters
        settings.policy.metersMutedSpeech = !noMeters
        if let duckFade { settings.policy.duckRampDown = .milliseconds(duckFade) }
        if let unduckFade { settings.policy.duckRampUp = .milliseconds(unduckFade) }
        if let runAfterMute { settings.runAfterAhead = .milliseconds(runAfterMute) }
        let agent = Agent(
            configuration: AgentConfiguration(
                server: server, policyLayers: PolicyFiles.layers(extra: policies), routeLog: routeLog,
                stateDirectory: state, takeOverServerModules: !keepServerModules, settings: settings,
                sessionBus: sessionBus == "none" ? .none : sessionBus.map { .address($0) } ?? .environment,
                systemBus: systemBus == "none" ? .none : systemBus.map { .address($0) } ?? .environment),
            logger: logger)

        // Signals are taken from here on, before anything connects (a SIGTERM that came before the
        // handlers were set up would kill the agent with nothing undone): SIGTERM and SIGINT stop the
        // agent, which undoes everything it holds before `run` returns (what the server has not confirmed
        // by the stop's deadlines stays in the journal); SIGHUP reloads the policies.
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGHUP, SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number)
            source.setEventHandler { agent.send(number == SIGHUP ? .reload : .stop) }
            source.resume()
            sources.append(source)
        }
        defer { sources.forEach { $0.cancel() } }
        do {
            try await agent.run()
        } catch {
            let line = "audiosessiond: \(Escape.forDisplay("\(error)"))\n"
            _ = line.withCString { write(2, $0, strlen($0)) }
            throw ExitCode.failure
        }
    }
}

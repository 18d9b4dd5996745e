import FoundationEssentials
import Logging

/// Where the tower's effects go: the sound server, the journal, the players and the apps on the session
/// bus, the route log and the log. `perform` carries out, in the tower's order, what the server and the
/// journal must have (the journal before the command it records) and hands back the rest, which `tell`
/// writes once the commands are on the socket. Every answer (a command's, a player's) comes back as an
/// input in the inbox. Used on the agent's actor only.
final class Executors {
    let inbox: Inbox<TowerInput>
    let logger: Logger
    let journal: Journal
    let routeLog: RouteLogWriter
    let appBus: AppBus
    let sessionBus: KeptBus?
    let systemBus: KeptBus?
    let settings: AgentSettings
    /// The server's lock on the session bus (one agent per server).
    let serverLock = ServerLock()
    /// Nil until the first connection: a command sent before is answered `notConnected`.
    var server: (any SoundServer)?
    /// Tracing the event path (`PathTrace`): the time now, and the journal's share of the last `perform`.
    var stamp: (() -> Duration)?
    private(set) var journalTime = Duration.zero

    /// The journal and the route log of `configuration`, and its buses, kept (tried again while they
    /// are away): the session bus for players and apps, the system bus for logind.
    init(_ configuration: AgentConfiguration, stateDirectory: StateDirectory?, unusable: String?, inbox: Inbox<TowerInput>, logger: Logger,
         sleep: @escaping @Sendable (Duration) async -> Void) {
        self.inbox = inbox
        self.logger = logger
        self.settings = configuration.settings
        journal = Journal(directory: stateDirectory, unusable: unusable)
        routeLog = RouteLogWriter(path: configuration.routeLog)
        let deliver: @Sendable (TowerInput) -> Void = { [inbox] in inbox.push($0) }
        let settings = configuration.settings
        let appBus = AppBus(stateDirectory: stateDirectory, portalAnswer: settings.portalAnswer)
        self.appBus = appBus
        let serverLock = self.serverLock
        sessionBus = KeptBus.start(.session, configuration.sessionBus, retry: settings.busRetry, sleep: sleep,
                                   watch: { bus in
                                       MediaPlayers.watchSessionBus(bus, settings: settings, deliver)
                                       appBus.serve(bus, deliver, call: { [inbox] in inbox.push($0, received: $1) })
                                       // (A bus that came back: the server's lock is asked for again; if
                                       // another agent took it meanwhile, this one gives way.)
                                       Task {
                                           guard let taken = await serverLock.retake(on: bus) else { return }
                                           logger.error("another agent manages this sound server: this one stops", metadata: ["reason": "\(taken)"])
                                           deliver(.stop)
                                       }
                                   },
                                   absent: { deliver(.players(.busGone(reason: $0))) })
        systemBus = KeptBus.start(.system, configuration.systemBus, retry: settings.busRetry, sleep: sleep,
                                  watch: { Logind.watch($0, deliver) }, absent: { deliver(.desktop(.unavailable(reason: $0))) })
    }

    /// What closes the buses (Sendable: a `defer` may call it after the loop has had the executors).
    var closing: @Sendable () -> Void {
        { [appBus, sessionBus, systemBus] in
            appBus.close()
            systemBus?.close()
            sessionBus?.close()
        }
    }

    /// Carries out what the server and the journal must have, in order, and returns the rest for `tell`,
    /// once the commands are on the socket: the answers and signals to apps, the players' commands, the
    /// route log, the log lines. (Each of those is work for another thread, woken on two cores while
    /// libpulse has not written the mute yet: an app's SetActive answered before its call's mute was
    /// written put the mute ~0.1 ms later.)
    func perform(_ effects: [TowerEffect]) -> [TowerEffect] {
        var told: [TowerEffect] = []
        journalTime = .zero
        // (The journal's changes up to the next command are written together, before it.)
        var changes: [JournalChange] = []
        func writeJournal() {
            guard !changes.isEmpty else { return }
            let start = stamp?()
            if let health = journal.apply(changes) { inbox.push(.journal(health)) }
            if let start, let stamp { journalTime += stamp() - start }
            changes.removeAll(keepingCapacity: true)
        }
        for effect in effects {
            switch effect {
            case .send(let id, let command):
                writeJournal()
                logger.trace("send", metadata: ["command": "\(id) \(command.description)"])
                guard let server else { inbox.push(.answered(id, .failure(.notConnected))); continue }
                server.send(command) { [inbox] result in inbox.push(.answered(id, result)) }
            case .journal(let change):
                changes.append(change)
            case .finished:
                break
            case .routeLog, .log, .player, .appReply, .appSignal, .meter, .remote, .nowPlayingChanged, .nowPlayingSeeked, .keep:
                told.append(effect)
            }
        }
        writeJournal()
        return told
    }

    /// Carries out what `perform` handed back, in the order decided: the apps' answers and signals, the
    /// players' commands, what the user set kept, the route log and the log lines, the meters.
    func tell(_ told: [TowerEffect]) {
        for effect in told {
            switch effect {
            case .routeLog(let change):
                routeLog.write(RouteLogEntry(change, at: Date()))
            case .log(let line):
                // A line the log would drop is not built (its metadata can be dear: a trace line per event).
                guard line.level >= logger.logLevel else { continue }
                let (message, metadata) = line.said
                logger.log(level: line.level, "\(message)", metadata: metadata)
            case .player(let name, let command):
                let bus = sessionBus?.connection
                Task { [inbox] in inbox.push(.playerAnswered(name: name, command, error: await MediaPlayers.send(command, to: name, on: bus))) }
            case .appReply(let token, let reply):
                appBus.reply(token, reply)
            case .appSignal(let path, let notification):
                appBus.signal(path, notification)
            case .meter(let stream, let on):
                // (After the commands are on the socket: opening a meter is work for libpulse and the
                // server that must not come before a call's mute. Measured: 1.26 against 0.70 ms on
                // PulseAudio with the meters opened in line.)
                server?.meter(stream, on, settings: stream.direction == .output ? settings.meter : settings.speechMeter)
            case .remote(let name, let command):
                let bus = sessionBus?.connection
                Task { [logger] in
                    guard let error = await MediaPlayers.send(command, to: name, on: bus) else { return }
                    logger.warning("a player did not take the media key", metadata: ["player": "\(name)", "command": "\(command.rawValue)", "error": "\(error)"])
                }
            case .nowPlayingChanged(let shown):
                appBus.nowPlayingChanged(shown)
            case .nowPlayingSeeked(let position):
                appBus.nowPlayingSeeked(position)
            case .keep(let kept):
                // (Rare, and the user's.)
                guard let directory = journal.directory else { break }
                do { try KeptSettingsFile.write(kept, in: directory) } catch {
                    logger.warning("what the user set cannot be kept for the next run", metadata: ["error": "\(error.description)"])
                }
            case .send, .journal, .finished:
                break
            }
        }
    }
}

extension TowerEffect {
    var isSend: Bool { if case .send = self { true } else { false } }
}

extension TowerInput {
    var isStop: Bool { if case .stop = self { true } else { false } }
    var isConnection: Bool {
        switch self {
        case .server(.connected), .server(.disconnected): true
        default: false
        }
    }
}

import DBus
import Synchronization

/// The media players on the session bus (MPRIS), as events for the control tower, and the executor of
/// its commands to them. No session bus, or one that goes away, is an event too: the agent runs on,
/// muting where it would have paused.
final class MediaPlayers: Sendable {
    private let bus: DBusConnection
    /// Each player's owner on the bus (its unique name) → its well-known name: a status change comes
    /// from the owner.
    private let owners = Mutex<[String: String]>([:])

    static let prefix = "org.mpris.MediaPlayer2."
    static let path = "/org/mpris/MediaPlayer2"
    static let playerInterface = "org.mpris.MediaPlayer2.Player"

    private init(bus: DBusConnection) { self.bus = bus }

    /// Connects to the session bus (`address`, else the environment's) and starts telling `deliver`
    /// about players; nil (and `.busGone` delivered) when there is no bus.
    static func start(address: String?, deliver: @escaping @Sendable (TowerInput) -> Void) -> MediaPlayers? {
        let bus: DBusConnection
        do {
            bus = try DBusConnection.connect(.session, address: address, name: "audiosessiond")
        } catch {
            deliver(.players(.busGone(reason: "\(error)")))
            return nil
        }
        deliver(.players(.busConnected(address: bus.address)))
        let players = MediaPlayers(bus: bus)
        players.watch(deliver)
        return players
    }

    func close() { bus.close() }

    /// Returns once the connection has ended (lost, or closed).
    func ended() async {
        for await _ in bus.lost() {}
    }

    /// Sends a command to a player; nil when it went through, else why not.
    func send(_ command: PlayerCommand, to name: String) async -> String? {
        do {
            _ = try await bus.call(name, Self.path, Self.playerInterface, command.rawValue)
            return nil
        } catch {
            return "\(error)"
        }
    }

    private func watch(_ deliver: @escaping @Sendable (TowerInput) -> Void) {
        // One stream for both signals, in the bus's order, subscribed before the names are listed (the
        // bus thread takes jobs in order): a player that comes in between is told twice, never missed,
        // and what one task handles in order reaches the tower in order (a status never before its
        // player, a player never after it went).
        let signals = bus.signals(matching: [
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',"
                + "arg0namespace='org.mpris.MediaPlayer2'",
            "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',path='\(Self.path)',"
                + "arg0='\(Self.playerInterface)'",
        ])
        let lost = bus.lost()
        Task {
            if let names = try? await bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListNames")
                .first?.array?.compactMap(\.string) {
                for name in names where name.hasPrefix(Self.prefix) {
                    guard let owner = try? await bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                          "GetNameOwner", [.string(name)]).first?.string else { continue }
                    await appeared(name, owner: owner, deliver)
                }
            }
            for await signal in signals {
                switch signal.member {
                case "NameOwnerChanged":
                    guard signal.body.count == 3, let name = signal.body[0].string, let old = signal.body[1].string,
                          let new = signal.body[2].string, name.hasPrefix(Self.prefix) else { continue }
                    if !old.isEmpty {
                        owners.withLock { $0[old] = nil }
                        deliver(.players(.vanished(name: name)))
                    }
                    if !new.isEmpty { await appeared(name, owner: new, deliver) }
                case "PropertiesChanged":
                    guard signal.body.count >= 2, let changed = signal.body[1].stringDictionary,
                          let status = changed["PlaybackStatus"]?.string.flatMap(PlaybackStatus.init(rawValue:)),
                          let name = owners.withLock({ $0[signal.sender] }) else { continue }
                    deliver(.players(.statusChanged(name: name, status)))
                default:
                    continue
                }
            }
        }
        Task {
            for await _ in lost { deliver(.players(.busGone(reason: "the session bus went away"))) }
        }
    }

    /// A player on the bus: its process and status are asked of its owner, then told.
    private func appeared(_ name: String, owner: String, _ deliver: @Sendable (TowerInput) -> Void) async {
        owners.withLock { $0[owner] = name }
        let pid = try? await bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                      "GetConnectionUnixProcessID", [.string(owner)], timeout: .seconds(1)).first?.integer
        let status = try? await bus.call(owner, Self.path, "org.freedesktop.DBus.Properties", "Get",
                                         [.string(Self.playerInterface), .string("PlaybackStatus")], timeout: .seconds(1))
            .first?.string.flatMap(PlaybackStatus.init(rawValue:))
        // (Gone while it was asked: its vanishing comes next in the stream, after this.)
        deliver(.players(.appeared(name: name, processID: pid.map { Int($0) }, status: status)))
    }
}

/// The session bus as the agent keeps it: connected when it can be, and again after it went away (tried
/// every second at first, then less often, up to every 30 s), like the sound server's connection.
final class PlayerLink: Sendable {
    private let current = Mutex<MediaPlayers?>(nil)
    private let stopped = Atomic<Bool>(false)
    private let keeper = Mutex<Task<Void, Never>?>(nil)

    static func start(address: String?, deliver: @escaping @Sendable (TowerInput) -> Void) -> PlayerLink {
        let link = PlayerLink()
        link.keeper.withLock { $0 = Task { await link.keep(address: address, deliver) } }
        return link
    }

    private func keep(address: String?, _ deliver: @escaping @Sendable (TowerInput) -> Void) async {
        var delay = Duration.seconds(1)
        while !stopped.load(ordering: .relaxed) {
            if let players = MediaPlayers.start(address: address, deliver: deliver) {
                current.withLock { $0 = players }
                if stopped.load(ordering: .relaxed) { players.close() }
                delay = .seconds(1)
                await players.ended()
                current.withLock { $0 = nil }
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(30))
        }
    }

    /// Sends a command to a player through the connection that is up; nil when it went through.
    func send(_ command: PlayerCommand, to name: String) async -> String? {
        guard let players = current.withLock({ $0 }) else { return "no session bus" }
        return await players.send(command, to: name)
    }

    func close() {
        stopped.store(true, ordering: .relaxed)
        keeper.withLock { $0?.cancel() }
        current.withLock { $0 }?.close()
    }
}

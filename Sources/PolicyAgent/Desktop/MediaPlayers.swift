import DBus
import FoundationEssentials
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

    init(bus: DBusConnection) { self.bus = bus }

    /// A sandboxed process's Flatpak app id: `name=` in the [Application] group of /.flatpak-info as
    /// the process sees its root (for a player behind xdg-dbus-proxy, the proxy's, which is the app's).
    static func flatpakAppID(ofProcess pid: Int, root: String = "/proc") -> String? {
        guard let text = try? String(contentsOfFile: "\(root)/\(pid)/root/.flatpak-info", encoding: .utf8) else { return nil }
        var group = ""
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = String(line.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
            if trimmed.hasPrefix("[") { group = trimmed; continue }
            if group == "[Application]", trimmed.hasPrefix("name=") {
                let id = String(trimmed.dropFirst("name=".count))
                return id.isEmpty ? nil : id
            }
        }
        return nil
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

    func watch(_ deliver: @escaping @Sendable (TowerInput) -> Void) {
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
        let appID = pid.flatMap { Self.flatpakAppID(ofProcess: Int($0)) }
        deliver(.players(.appeared(name: name, processID: pid.map { Int($0) }, appID: appID, status: status)))
    }
}

/// A bus the agent keeps: connected when it can be, and again after it went away (tried every second at
/// first, then less often, up to every 30 s), like the sound server's connection. `watch` is given each
/// new connection; `absent` is told when there is none (at start, or after a loss).
final class KeptBus: Sendable {
    private let current = Mutex<DBusConnection?>(nil)
    private let stopped = Atomic<Bool>(false)
    private let keeper = Mutex<Task<Void, Never>?>(nil)

    static func start(_ kind: DBusConnection.Kind, address: String?, watch: @escaping @Sendable (DBusConnection) -> Void,
                      absent: @escaping @Sendable (String) -> Void) -> KeptBus {
        let kept = KeptBus()
        kept.keeper.withLock { $0 = Task { await kept.keep(kind, address: address, watch, absent) } }
        return kept
    }

    private func keep(_ kind: DBusConnection.Kind, address: String?, _ watch: @escaping @Sendable (DBusConnection) -> Void,
                      _ absent: @escaping @Sendable (String) -> Void) async {
        var delay = Duration.seconds(1)
        while !stopped.load(ordering: .relaxed) {
            do {
                let bus = try DBusConnection.connect(kind, address: address, name: "audiosessiond")
                current.withLock { $0 = bus }
                if stopped.load(ordering: .relaxed) { bus.close() }
                watch(bus)
                delay = .seconds(1)
                var lost = false
                for await _ in bus.lost() { lost = true }
                current.withLock { $0 = nil }
                if lost { absent("the \(kind == .session ? "session" : "system") bus went away") }
            } catch {
                absent("\(error)")
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(30))
        }
    }

    /// The connection that is up, if any.
    var connection: DBusConnection? { current.withLock { $0 } }

    func close() {
        stopped.store(true, ordering: .relaxed)
        keeper.withLock { $0?.cancel() }
        current.withLock { $0 }?.close()
    }
}

/// The session bus, kept: its players watched on each connection (and the desktop's screen saver), sent
/// commands through the one that is up.
final class PlayerLink: Sendable {
    private let kept: KeptBus

    init(address: String?, deliver: @escaping @Sendable (TowerInput) -> Void) {
        kept = KeptBus.start(.session, address: address, watch: { bus in
            deliver(.players(.busConnected(address: bus.address)))
            // (The screen saver's match first: the bus thread makes matches and sends calls in order, so
            // once a player is listed, the match is in place.)
            ScreenSaver.watch(bus, deliver)
            MediaPlayers(bus: bus).watch(deliver)
        }, absent: { reason in deliver(.players(.busGone(reason: reason))) })
    }

    /// Sends a command to a player; nil when it went through, else why not.
    func send(_ command: PlayerCommand, to name: String) async -> String? {
        guard let bus = kept.connection else { return "no session bus" }
        return await MediaPlayers(bus: bus).send(command, to: name)
    }

    func close() { kept.close() }
}

import AudioPolicy
import AudioSessionWire
import DBus
import FoundationEssentials
import Synchronization

/// The media players on the session bus (MPRIS), as events for the control tower, and the executor of
/// its commands to them. No session bus, or one that goes away, is an event too: the agent runs on,
/// muting where it would have paused.
final class MediaPlayers: Sendable {
    private let bus: DBusConnection
    /// Each player's owner on the bus (its unique name) → its well-known names, the one the tower
    /// knows it by first: a status change comes from the owner. One connection is one player: told as
    /// one player per name, it was sent every pause twice, and its status was said under its last name
    /// only, the others' left stale. Its other names are aliases the tower never hears of. (VLC's two
    /// names are on two connections of its own: the tower joins those, `Players.onePerPlayer`.)
    private let owners = Mutex<[String: [String]]>([:])
    /// Owners whose status came in a PropertiesChanged: a late answer to our first question is older
    /// than that and is dropped.
    private let statusTold = Mutex<Set<String>>([])
    /// Per owner, the reads of its position: one at a time (a player that floods signals is asked
    /// once more after the read under way, not once per signal), and what was said after a read began
    /// (its `Seeked`, a newer read) makes its answer stale.
    private let positionReads = Mutex<[String: PositionReads]>([:])
    struct PositionReads {
        var generation = 0
        var inFlight = false
        var again = false
    }

    static let prefix = "org.mpris.MediaPlayer2."
    static let path = "/org/mpris/MediaPlayer2"
    static let playerInterface = "org.mpris.MediaPlayer2.Player"

    /// How long a player's first answers are waited for (AgentSettings.playerAnswer, playerLateAnswer).
    private let answer: Duration, lateAnswer: Duration

    init(bus: DBusConnection, settings: AgentSettings) {
        self.bus = bus
        answer = settings.playerAnswer
        lateAnswer = settings.playerLateAnswer
    }

    /// A sandboxed process's Flatpak app id: `name=` in the [Application] group of /.flatpak-info as
    /// the process sees its root (for a player behind xdg-dbus-proxy, the proxy's, which is the app's).
    static func flatpakAppID(ofProcess pid: Int, root: String = "/proc") -> String? {
        guard let text = try? String(contentsOfFile: "\(root)/\(pid)/root/.flatpak-info", encoding: .utf8) else { return nil }
        return flatpakAppID(inInfo: text)
    }

    /// The app id a /.flatpak-info's text names (nil: none, or not the shape of one).
    static func flatpakAppID(inInfo text: String) -> String? {
        var group = ""
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = String(line.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
            if trimmed.hasPrefix("[") { group = trimmed; continue }
            if group == "[Application]", trimmed.hasPrefix("name=") {
                let id = String(trimmed.dropFirst("name=".count))
                return isAppID(id) ? id : nil
            }
        }
        return nil
    }

    /// Whether `id` has the shape of a Flatpak app id (reverse DNS: two elements or more of letters,
    /// digits, `_` and `-`, 255 characters at most). Anything else is no app id: the file is not
    /// Flatpak's, and its text goes nowhere (session names, the portal's store).
    static func isAppID(_ id: String) -> Bool {
        let elements = id.split(separator: ".", omittingEmptySubsequences: false)
        return id.utf8.count <= 255 && elements.count >= 2 && elements.allSatisfy { element in
            guard let first = element.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
            return element.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" || $0 == "-") }
        }
    }

    /// Sends a command to a player through the session bus that is up; nil when it went through, else why not.
    static func send(_ command: PlayerCommand, to name: String, on bus: DBusConnection?) async -> String? {
        guard let bus else { return "no session bus" }
        do {
            _ = try await bus.call(name, path, playerInterface, command.rawValue)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// What the agent follows on each connection to the session bus: its players, and the desktop's
    /// screen saver (its match first: the bus thread makes matches and sends calls in order, so once a
    /// player is listed, that match is in place).
    static func watchSessionBus(_ bus: DBusConnection, settings: AgentSettings, _ deliver: @escaping @Sendable (TowerInput) -> Void) {
        deliver(.players(.busConnected(address: bus.address)))
        ScreenSaver.watch(bus, deliver)
        MediaPlayers(bus: bus, settings: settings).watch(deliver)
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
            "type='signal',interface='\(Self.playerInterface)',member='Seeked',path='\(Self.path)'",
        ], fromOthersOnly: true)  // (The agent's own player's changes at each interruption: not a player of an app.)
        Task {
            if let names = try? await bus.callDaemon("ListNames")
                .first?.array?.compactMap(\.string) {
                // (Sorted: of one owner's names, the shortest comes first: "...foo" before "...foo.instance42".)
                for name in names.sorted() where name.hasPrefix(Self.prefix) && name != AppBus.playerName {
                    guard let owner = try? await bus.callDaemon("GetNameOwner", [.string(name)]).first?.string else { continue }
                    await appeared(name, owner: owner, deliver)
                }
            }
            for await signal in signals {
                switch signal.member {
                case "NameOwnerChanged":
                    guard signal.body.count == 3, let name = signal.body[0].string, let old = signal.body[1].string,
                          let new = signal.body[2].string, name.hasPrefix(Self.prefix), name != AppBus.playerName else { continue }
                    if !old.isEmpty { await released(name, by: old, deliver) }
                    if !new.isEmpty { await appeared(name, owner: new, deliver) }
                case "Seeked":
                    guard signal.body.count == 1, let micros = signal.body[0].integer,
                          let name = owners.withLock({ $0[signal.sender]?.first }) else { continue }
                    positionReads.withLock { $0[signal.sender, default: PositionReads()].generation += 1 }
                    deliver(.players(.positionSaid(name: name, Self.position(micros), seeked: true)))
                case "PropertiesChanged":
                    guard signal.body.count >= 2, let changed = signal.body[1].stringDictionary,
                          let name = owners.withLock({ $0[signal.sender]?.first }) else { continue }
                    if let metadata = changed["Metadata"] { deliver(.players(.metadataChanged(name: name, Wire.nowPlayingInfo(from: metadata)))) }
                    // (Where it is then: a new track starts elsewhere, a pause or a play stops or starts it.)
                    if changed["Metadata"] != nil || changed["PlaybackStatus"] != nil { readPosition(of: signal.sender, name, deliver) }
                    guard let status = changed["PlaybackStatus"]?.string.flatMap(PlaybackStatus.init(rawValue:)) else { continue }
                    // (Told under the lock: a late first answer cannot come between.)
                    statusTold.withLock {
                        $0.insert(signal.sender)
                        deliver(.players(.statusChanged(name: name, status)))
                    }
                default:
                    continue
                }
            }
        }
    }

    /// A player on the bus: its process and status are asked of its owner, then told. A player too busy
    /// to answer in time (one starting up on a loaded machine) holds up the others no longer than that:
    /// it is told with its status unknown, and asked again apart, for longer.
    /// A second name of an owner already known is an alias: nothing is told.
    private func appeared(_ name: String, owner: String, _ deliver: @escaping @Sendable (TowerInput) -> Void) async {
        let alias = owners.withLock { owners -> Bool in
            guard var names = owners[owner], !names.isEmpty else {
                owners[owner] = [name]
                return false
            }
            if !names.contains(name) { names.append(name) }
            owners[owner] = names
            return true
        }
        guard !alias else { return }
        await tell(name, owner: owner, deliver)
    }

    /// Tells the tower of a player under the name it will know it by.
    private func tell(_ name: String, owner: String, _ deliver: @escaping @Sendable (TowerInput) -> Void) async {
        let pid = try? await bus.callDaemon("GetConnectionUnixProcessID", [.string(owner)], timeout: answer).first?.integer
        let status = await playbackStatus(of: owner, timeout: answer)
        // (Gone while it was asked: its vanishing comes next in the stream, after this.)
        let appID = pid.flatMap { Self.flatpakAppID(ofProcess: Int($0)) }
        deliver(.players(.appeared(name: name, processID: pid.map { Int($0) }, appID: appID, status: status)))
        // What it plays, apart (for the agent's MPRIS player only: nothing waits on it); told while it
        // is still this name's owner (a change since comes after, with PropertiesChanged).
        Task {
            guard let metadata = try? await bus.call(owner, Self.path, "org.freedesktop.DBus.Properties", "Get",
                                                     [.string(Self.playerInterface), .string("Metadata")], timeout: lateAnswer).first else { return }
            if owners.withLock({ $0[owner]?.first == name }) { deliver(.players(.metadataChanged(name: name, Wire.nowPlayingInfo(from: metadata)))) }
        }
        readPosition(of: owner, name, deliver)
        guard status == nil else { return }
        Task {
            guard let late = await playbackStatus(of: owner, timeout: lateAnswer) else { return }
            // Still its owner, and no newer status told meanwhile: else this answer is stale.
            statusTold.withLock { told in
                if !told.contains(owner), owners.withLock({ $0[owner]?.first == name }) { deliver(.players(.statusChanged(name: name, late))) }
            }
        }
    }

    /// An owner let go of a name (or left the bus: one change per name). An alias goes unsaid; the name
    /// the tower knows the player by vanishes, and if the owner keeps another name, the player is told
    /// again under that one (asked anew: what the tower held of it went with the old name).
    private func released(_ name: String, by owner: String, _ deliver: @escaping @Sendable (TowerInput) -> Void) async {
        let (known, next) = owners.withLock { owners -> (Bool, String?) in
            guard var names = owners[owner], let at = names.firstIndex(of: name) else { return (false, nil) }
            names.remove(at: at)
            owners[owner] = names.isEmpty ? nil : names
            return (at == 0, at == 0 ? names.first : nil)
        }
        guard known else { return }
        positionReads.withLock { _ = $0.removeValue(forKey: owner) }
        statusTold.withLock { _ = $0.remove(owner) }
        deliver(.players(.vanished(name: name)))
        // The next name still its owner's: a connection that leaves lets go of its names one by one, and a
        // departed owner answers nothing. One gone already is forgotten here (its own change, coming next,
        // then says nothing).
        var candidate = next
        while let name = candidate {
            if (try? await bus.callDaemon("GetNameOwner", [.string(name)]).first?.string) == owner {
                await tell(name, owner: owner, deliver)
                return
            }
            candidate = owners.withLock { owners -> String? in
                owners[owner]?.removeAll { $0 == name }
                if owners[owner]?.isEmpty == true { owners[owner] = nil }
                return owners[owner]?.first
            }
        }
    }

    /// Asks a player where it is (`Position`, apart: nothing waits on it), and tells it while the name is
    /// still that owner's. A player with no position says nothing.
    private func readPosition(of owner: String, _ name: String, _ deliver: @escaping @Sendable (TowerInput) -> Void) {
        let generation: Int? = positionReads.withLock { reads in
            var read = reads[owner, default: PositionReads()]
            defer { reads[owner] = read }
            if read.inFlight { read.again = true; return nil }
            read.inFlight = true
            read.generation += 1
            return read.generation
        }
        guard let generation else { return }
        Task {
            let micros = try? await bus.call(owner, Self.path, "org.freedesktop.DBus.Properties", "Get",
                                             [.string(Self.playerInterface), .string("Position")], timeout: lateAnswer).first?.integer
            let (current, again) = positionReads.withLock { reads -> (Bool, Bool) in
                guard var read = reads[owner] else { return (false, false) }
                defer { reads[owner] = read }
                read.inFlight = false
                let again = read.again
                read.again = false
                return (read.generation == generation, again)
            }
            if let micros, current, owners.withLock({ $0[owner]?.first == name }) {
                deliver(.players(.positionSaid(name: name, Self.position(micros), seeked: false)))
            }
            if again { readPosition(of: owner, name, deliver) }
        }
    }

    /// A position in microseconds as a player says it, within sense (0 to a thousand days: what a player
    /// says is not trusted to be a time).
    static func position(_ micros: Int64) -> Duration {
        .microseconds(min(max(micros, 0), NowPlayingInfo.elapsedLimit))
    }

    private func playbackStatus(of owner: String, timeout: Duration) async -> PlaybackStatus? {
        try? await bus.call(owner, Self.path, "org.freedesktop.DBus.Properties", "Get",
                            [.string(Self.playerInterface), .string("PlaybackStatus")], timeout: timeout)
            .first?.string.flatMap(PlaybackStatus.init(rawValue:))
    }
}

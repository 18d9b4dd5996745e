public import AudioPolicy
import Logging

/// An MPRIS player's playback status (`org.mpris.MediaPlayer2.Player.PlaybackStatus`).
public enum PlaybackStatus: String, Sendable, Hashable {
    case playing = "Playing"
    case paused = "Paused"
    case stopped = "Stopped"
}

/// What the session bus says about media players (the D-Bus source feeds these to the tower).
public enum PlayerEvent: Sendable, Hashable {
    /// A player is on the bus: its well-known name, the process that owns it, the Flatpak app it is
    /// (if it is one), its status.
    case appeared(name: String, processID: Int?, appID: String? = nil, status: PlaybackStatus?)
    case statusChanged(name: String, PlaybackStatus)
    /// What it says it plays (its `Metadata`), at its appearance and when that changes.
    case metadataChanged(name: String, NowPlayingInfo)
    /// Where it is in what it plays (its `Position`), as read or as its `Seeked` says (`seeked`).
    case positionSaid(name: String, Duration, seeked: Bool)
    case vanished(name: String)
    /// No session bus (none at start, or it went away): no player can be paused, only muted.
    case busGone(reason: String)
    /// Connected to the session bus (at start, or again).
    case busConnected(address: String)
}

extension PlayerEvent {
    /// The player it is about, if one.
    var playerName: String? {
        switch self {
        case .appeared(let name, _, _, _), .statusChanged(let name, _), .metadataChanged(let name, _), .positionSaid(let name, _, _),
             .vanished(let name): name
        case .busGone, .busConnected: nil
        }
    }
}

/// A command to a player.
public enum PlayerCommand: String, Sendable, Hashable, CaseIterable {
    case pause = "Pause"
    case play = "Play"
    // The media keys' (remote commands to what is now playing):
    case playPause = "PlayPause"
    case stop = "Stop"
    case next = "Next"
    case previous = "Previous"

    /// A remote command by its word on the bus and the command line ("play-pause", "next" ...).
    public init?(word: String) {
        switch word {
        case "play": self = .play
        case "pause": self = .pause
        case "play-pause": self = .playPause
        case "stop": self = .stop
        case "next": self = .next
        case "previous": self = .previous
        default: return nil
        }
    }

    public var word: String {
        switch self {
        case .play: "play"
        case .pause: "pause"
        case .playPause: "play-pause"
        case .stop: "stop"
        case .next: "next"
        case .previous: "previous"
        }
    }
}

/// The media players on the session bus and the pauses we sent them (SPEC.md 5.7-5.8): a pure record.
///
/// "Interrupt" pauses the players that match the session's app and are playing; "resume" plays again
/// those we paused that are still ours and paused. MPRIS cannot say who paused, so what we sent is
/// recorded, and any status other than the pause we asked for is the user's hand: the core hears it
/// (`.userPaused`, `.userPlayed`: its wrong-resume guard decides whether the interruption's end resumes
/// anything) and the player is ours no more (a player the user paused before the interruption, or
/// paused or played during it after our pause, is left as the user left it; a player that starts
/// during an interruption of its app, ours or not before, is paused: `ControlTower.pauseLatePlayer`).
struct Players: Sendable, Hashable {
    struct Player: Sendable, Hashable {
        var processID: Int?
        /// A sandboxed player's app id (Flatpak): its process seen from outside is the D-Bus proxy's.
        var appID: String?
        var status: PlaybackStatus?
        /// What it says it plays.
        var metadata = NowPlayingInfo()
        /// Where it was in it, and when (the tower's clock): it moves on from there while it plays.
        var position: Position?

        /// Where it is at `now`: where it was, moved on by the time since while it plays (MPRIS's rule:
        /// Position is read, not told, and runs with the clock at `Rate`, taken as 1).
        func position(at now: Duration) -> Duration? {
            guard let position else { return nil }
            return status == .playing ? position.value + max(.zero, now - position.at) : position.value
        }
        /// What of ours is on it.
        var hold = Hold.none
        /// A play of ours (an interruption's end) is on its way, sent then: until the player says
        /// "Playing" (or stops, or refuses it, or the time a player takes to answer has passed) it is
        /// taken as playing. A new interruption before then pauses it again (its status still said
        /// Paused), and that "Playing", coming after our next pause, is our play's, not the user's hand.
        var ourPlaySent: Duration?
        var ourPlayOnItsWay: Bool { ourPlaySent != nil }
        /// The streams of the sessions it is paused for that stopped running (corked) since our pause:
        /// one of these running again is the user's play (`streamRanAgain`). A stream new since, or of
        /// another session (a browser's other tab), says nothing of this player.
        var corkedSincePause: Set<StreamKey> = []
    }

    /// A player's position said at `now` (negative taken as zero).
    private mutating func note(position value: Duration, of name: String, at now: Duration) {
        guard players[name] != nil else { return }
        players[name]?.position = Position(at: now, value: max(.zero, value))
    }

    /// Its status is about to change: where it got to is taken as said now (it stops or starts moving).
    private mutating func fixPosition(of name: String, at now: Duration) {
        guard let at = players[name]?.position(at: now) else { return }
        players[name]?.position = Position(at: now, value: at)
    }

    /// A player's position as last known.
    struct Position: Sendable, Hashable {
        var at: Duration
        var value: Duration
    }

    /// What of ours is on a player.
    ///
    ///     none --pause, interruption--> pausedFor([s], shown: false) --"Paused"--> pausedFor(shown: true)
    ///     pausedFor(S) --resume, last of S--> none (played again if paused or the pause still on its way)
    ///     pausedFor(S) --the user's hand (any other status, or its stream running again)--> none (the core hears it)
    ///     none --pause, headphones gone--> pausingForGood --"Paused", "Stopped"--> none
    enum Hold: Hashable, Sendable {
        case none
        /// Paused by us for these sessions' interruptions (never empty): played again when the last of
        /// them ends. `shown`: the player said "Paused" since. An interruption shorter than the player's
        /// answer still plays it again (the pause and the play reach it in order).
        case pausedFor(Set<SessionID>, shown: Bool)
        /// Our pause because the headphones went away is on its way: not sent again, nor ever undone.
        case pausingForGood
    }

    private(set) var players: [String: Player] = [:]
    /// Whether a session bus is there (else interrupting is muting only).
    private(set) var busAvailable = false
    /// Its absence was said (once, until it comes back: a bus tried every few seconds is not a log line
    /// every few seconds).
    private var absenceSaid = false
    /// How many times no bus was told (each try that failed): said once, whatever this says.
    private(set) var absencesTold = 0

    /// Returns what the core must hear: the user's hand on a player we paused, for each session it was
    /// paused for.
    /// `now`: the tower's clock, for where a player is in what it plays.
    mutating func apply(_ event: PlayerEvent, at now: Duration, _ out: inout Outbox) -> [PolicyEvent] {
        switch event {
        case .busConnected(let address):
            // (The new connection lists every player afresh; one told late by the last is no more.)
            players = [:]
            busAvailable = true
            absenceSaid = false
            out.log(.info) { ("session bus connected: players are paused through MPRIS", ["address": "\(address)"]) }
        case .appeared(let name, let processID, let appID, let status):
            // (Told twice, by the listing and by the owner's change: the second keeps what we paused.)
            var player = players[name] ?? Player()
            player.processID = processID ?? player.processID
            player.appID = appID ?? player.appID
            if let status { player.status = status }
            players[name] = player
        case .statusChanged(let name, let status):
            // (It stops or starts moving: where it got to is kept as said now; the shell reads it again.)
            fixPosition(of: name, at: now)
            guard var player = players[name] else { return [] }
            var told: [PolicyEvent] = []
            switch player.hold {
            case .pausedFor(let sessions, let shown):
                if status == .playing && player.ourPlayOnItsWay && !shown {
                    break  // our play, said after our next pause went out: that pause is still on its way
                } else if player.status != status && !(status == .paused && !shown) {
                    // The user's hand: played, paused again, stopped. The player is the user's from now on,
                    // nothing of it ours to play again.
                    told = sessions.sorted().map { status == .playing ? .userPlayed($0) : .userPaused($0) }
                    let said = status.rawValue
                    out.log(.info) { ("the user's hand on a player we paused: it is the user's", ["player": "\(name)", "status": "\(said)"]) }
                    player.hold = .none
                    player.ourPlaySent = nil
                } else if status != .playing {
                    player.hold = .pausedFor(sessions, shown: true)  // our pause done (paused, or stopped as told already)
                    player.ourPlaySent = nil  // (a player says our play before our pause after it)
                }
            case .pausingForGood where status != .playing:
                player.hold = .none  // (paused or stopped: our pause is done either way)
                player.ourPlaySent = nil
            case .none, .pausingForGood:
                break
            }
            // (Our play said; or the player stopped: a play it answers so is not on its way.)
            if status != .paused { player.ourPlaySent = nil }
            player.status = status
            players[name] = player
            return told
        case .metadataChanged(let name, let info):
            players[name]?.metadata = info
        case .positionSaid(let name, let value, _):
            note(position: value, of: name, at: now)
        case .vanished(let name):
            players[name] = nil
        case .busGone(let reason):
            absencesTold += 1
            if !absenceSaid {
                out.log(.notice) { ("no session bus: interrupted players are muted, not paused", ["reason": "\(reason)"]) }
                absenceSaid = true
            }
            busAvailable = false
            players = [:]
        }
        return []
    }

    /// A stream of a player we paused runs again (it stopped running after our pause, now it runs): the user played it,
    /// whatever its status said. mpv's MPRIS plugin may say only the last of a quick pause and play: our
    /// pause and the user's play before it spoke showed as "Playing" all along, and the user's pause
    /// after as our pause (issue 20 case 8b: the call's end then played it again). Returns what the core
    /// must hear, as for a status.
    mutating func streamRanAgain(_ name: String, _ key: StreamKey, _ out: inout Outbox) -> [PolicyEvent] {
        guard var player = players[name], case .pausedFor(let sessions, _) = player.hold,
              player.corkedSincePause.contains(key) else { return [] }
        player.hold = .none
        player.corkedSincePause = []
        players[name] = player
        out.log(.info) { ("the user's hand on a player we paused (its stream runs again): it is the user's", ["player": "\(name)"]) }
        return sessions.sorted().map { .userPlayed($0) }
    }

    /// A stream of a session the player is paused for stopped running (our pause reached it, say).
    mutating func streamCorked(_ name: String, _ key: StreamKey, session: SessionID) {
        guard var player = players[name], case .pausedFor(let sessions, _) = player.hold, sessions.contains(session) else { return }
        player.corkedSincePause.insert(key)
        players[name] = player
    }

    /// Whether any player holds a pause of ours for an interruption (else a stream's cork says nothing).
    var anyPausedForAnInterruption: Bool {
        players.values.contains { if case .pausedFor = $0.hold { true } else { false } }
    }

    /// The players of an app: by process (the stream's process is the player's, or a child's: browsers
    /// play from child processes; a few generations up, not to the desktop that started the app); by
    /// Flatpak app id; by the name the player took on the bus only for players whose process is not known, or when none
    /// matched by process (another instance of the same player is another app).
    func matching(processIDs: Set<Int>, appIDs: Set<String> = [], names: Set<String>, parent: (Int) -> Int?) -> [String] {
        // (The process tree is read from /proc, before the interruption's mute goes out: only when some
        // player's process is known.)
        var ancestry: Set<Int> = []
        for pid in processIDs where players.values.contains(where: { $0.processID != nil }) {
            var current: Int? = pid
            var generations = 0
            while let p = current, p > 1, generations < Self.generations, ancestry.insert(p).inserted {
                current = parent(p)
                generations += 1
            }
        }
        let byProcess = players.filter { $0.value.processID.map(ancestry.contains) == true }.keys.sorted()
        if !byProcess.isEmpty { return onePerPlayer(byProcess) }
        // A sandboxed app: its streams say its app id (pipewire.access.portal.app_id, application.flatpak.id),
        // its player's process is the bus proxy's, whose /.flatpak-info says the same id.
        let byApp = players.filter { $0.value.appID.map(appIDs.contains) == true }.keys.sorted()
        if !byApp.isEmpty { return onePerPlayer(byApp) }
        let lowered = Set(names.map { $0.lowercased() })
        return players.filter { name, player in
            // "org.mpris.MediaPlayer2.vlc.instance1234": "vlc".
            let short = name.dropFirst(Self.prefix.count).split(separator: ".").first.map { String($0).lowercased() }
            return player.processID == nil && short.map { lowered.contains($0) } == true
        }.keys.sorted()
    }

    /// One name for one player: VLC (Debian's 3.0, `--extraintf dbus`) serves MPRIS on two connections of
    /// its own, `org.mpris.MediaPlayer2.vlc` and `...vlc.instance<pid>` (the spec's name for a second
    /// instance), one player behind both; a Pause sent to each reached it twice, and it played on, or
    /// paused later by itself. Of a process's name and that name with `.instance<digits>` after it, one is
    /// kept: the one that holds something of ours (a pause, a play on its way: later commands and checks
    /// go where it is), else the one that says it plays, else the shorter. (Other names of one process
    /// stay apart: a player per tab. A process's names on one connection are one already: `MediaPlayers`
    /// tells one per owner.)
    func onePerPlayer(_ names: [String]) -> [String] {
        func rank(_ name: String) -> (Int, Int, Int) {
            guard let player = players[name] else { return (0, 0, -name.count) }
            return (player.hold != .none || player.ourPlayOnItsWay ? 1 : 0, player.status == .playing ? 1 : 0, -name.count)
        }
        return names.filter { name in
            guard let pid = players[name]?.processID else { return true }
            return !names.contains { other in
                other != name && players[other]?.processID == pid && Self.sameInstance(name, other) && rank(other) > rank(name)
            }
        }
    }

    /// Whether one name is the other with `.instance<digits>` after it.
    static func sameInstance(_ a: String, _ b: String) -> Bool {
        let (short, long) = a.count < b.count ? (a, b) : (b, a)
        guard long.hasPrefix(short + ".instance") else { return false }
        let rest = long.dropFirst(short.count + ".instance".count)
        return !rest.isEmpty && rest.allSatisfy { ("0"..."9").contains($0) }
    }

    /// How far up the process tree a stream's process may be from its player's.
    static let generations = 4

    static let prefix = "org.mpris.MediaPlayer2."

    /// Whether our pause of the player holds it for the session.
    func isPaused(_ name: String, for session: SessionID) -> Bool {
        if case .pausedFor(let sessions, _) = players[name]?.hold { sessions.contains(session) } else { false }
    }

    /// Pause those of `names` that play. For an interruption the pause is recorded, to be undone when it
    /// ends; one that does not play is left alone (and a pause of ours for another session stays).
    /// `playAnswersWithin`: how long a play of ours counts as on its way (`ourPlaySent`).
    mutating func pause(_ names: [String], for session: SessionID, why: PauseReason, by cause: SessionID? = nil,
                        at now: Duration, playAnswersWithin: Duration, _ out: inout Outbox) -> [(String, PlayerCommand)] {
        var commands: [(String, PlayerCommand)] = []
        for name in names {
            guard var player = players[name] else { continue }
            if let sent = player.ourPlaySent, now - sent > playAnswersWithin { player.ourPlaySent = nil }
            switch player.hold {
            case .none:
                guard player.status == .playing || player.ourPlayOnItsWay else {  // not playing: nothing to pause
                    players[name] = player
                    continue
                }
                commands.append((name, .pause))
                player.hold = why == .interruption ? .pausedFor([session], shown: false) : .pausingForGood
                player.corkedSincePause = []
                out.log(.info) {
                    var said: Logger.Metadata = ["player": "\(name)", "session": "\(session)", "why": "\(why.rawValue)"]
                    if let cause { said["by"] = "\(cause)" }
                    return ("pause the player", said)
                }
            case .pausedFor(let sessions, let shown):
                // Paused by us for another session, or on its way: this interruption holds it paused too; the
                // headphones gone, the pause is for good (the interruptions' ends play nothing).
                player.hold = why == .interruption ? .pausedFor(sessions.union([session]), shown: shown) : .none
            case .pausingForGood:
                continue
            }
            players[name] = player
        }
        return commands
    }

    /// Resume (the core decided it): play again what we paused for the session and is still ours, once no
    /// other interruption holds it, if it is paused (or our pause is still on its way).
    mutating func resume(for session: SessionID, at now: Duration, _ out: inout Outbox) -> [(String, PlayerCommand)] {
        var commands: [(String, PlayerCommand)] = []
        for name in players.keys.sorted() {
            guard var player = players[name], case .pausedFor(var sessions, let shown) = player.hold, sessions.remove(session) != nil
            else { continue }
            defer { players[name] = player }
            guard sessions.isEmpty else {
                player.hold = .pausedFor(sessions, shown: shown)
                continue
            }
            let paused = player.status == .paused || !shown
            player.hold = .none
            if paused {
                commands.append((name, .play))
                player.ourPlaySent = now
                out.log(.info) { ("play the player again", ["player": "\(name)", "session": "\(session)"]) }
            } else {
                out.log(.info) { ("the player is left as the user left it", ["player": "\(name)", "session": "\(session)"]) }
            }
        }
        return commands
    }

    /// A pause the player did not take: nothing to undo.
    mutating func refused(_ command: PlayerCommand, by name: String) {
        if command == .pause { players[name]?.hold = .none }
        if command == .play { players[name]?.ourPlaySent = nil }
    }
}

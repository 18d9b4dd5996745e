import AudioPolicy
import Logging
import ServerModel

/// The session bus: media players (MPRIS), whom they belong to, the pauses the core asked for and
/// what the players show of them; the desktop session (logind, the screen saver).
extension ControlTower {
    /// The media players of a session's app: by the processes of its streams, then by its name
    /// (`byName`: false for the sure matches only, by process or app id).
    func playersOf(_ session: SessionID, byName: Bool = true) -> [String] {
        // (No player on the bus, none to match: the streams' identities are not worked out. This is on
        // the way to a call's mute, and what the agent's own player shows is looked at after most batches.)
        guard players.busAvailable, !players.players.isEmpty else { return [] }
        var processIDs: Set<Int> = []
        var appIDs: Set<String> = []
        var names: Set<String> = []
        for (key, id) in directory.sessions where id == session {
            guard let stream = snapshot.stream(key.direction, key.index) else { continue }
            let app = snapshot.identity(of: stream)
            if let pid = app.processID { processIDs.insert(pid) }
            if let appID = app.appID { appIDs.insert(appID) }
            if byName { names.formUnion([app.binary, app.name].compactMap { $0 }) }
        }
        return players.matching(processIDs: processIDs, appIDs: appIDs, names: names, parent: parentProcess)
    }

    /// Carries out a pause the core asked for before the player was on the bus (see `pausesAwaitingPlayer`).
    mutating func pauseLatePlayer(_ name: String) {
        for (id, cause) in pausesAwaitingPlayer.sorted(by: { $0.key < $1.key }) {
            guard playersOf(id).contains(name) else { continue }
            // (One player for both, as a browser's tabs share one: pausing it would pause the interrupter.)
            if let cause, playersOf(cause).contains(name) {
                pausesAwaitingPlayer[id] = nil
                continue
            }
            let commands = players.pause([name], for: id, why: .interruption, by: cause, at: now, playAnswersWithin: settings.policy.resumeAwaited, &outbox)
            pausesAwaitingPlayer[id] = nil
            guard !commands.isEmpty else { continue }
            outbox.log(.info) { ("a player came on the bus after its app was interrupted: paused now", ["player": "\(name)", "session": "\(id)"]) }
            outbox.player(commands)
        }
    }

    /// The desktop session (logind, the screen saver): sleep and wake, the screen lock.
    mutating func desktop(_ event: DesktopEvent) {
        if case .unavailable = event {} else { logindAbsenceSaid = false }
        switch event {
        case .sleeping:
            outbox.log(.info) { ("the machine goes to sleep", [:]) }
            coreEvent(.sleep)
        case .woke:
            outbox.log(.info) { ("the machine woke", [:]) }
            coreEvent(.wake)
        case .screenLocked(let locked):
            defer { screenLock = locked }
            guard locked != screenLock ?? false else { break }
            outbox.log(.info) { (locked ? "the screen is locked: ambient sound is silenced" : "the screen is unlocked", [:]) }
            coreEvent(.screenLocked(locked))
        case .unavailable(let reason):
            // (Said once until logind is back: the system bus is tried again and again.)
            guard !logindAbsenceSaid else { break }
            logindAbsenceSaid = true
            outbox.log(.notice) { ("no logind: sleep and the screen lock are not followed", ["reason": "\(reason)"]) }
        }
    }

    /// Tells the core of the sessions whose players have all shown the pause sent when their headphones
    /// went away (or left, or refused it).
    mutating func releasePausedPlayers() {
        guard !isStopping else { return }  // (the stop lets go of everything itself)
        for (id, names) in pausesOnTheirWay.sorted(by: { $0.key < $1.key })
        where !names.contains(where: { players.players[$0]?.hold == .pausingForGood }) {
            pausesOnTheirWay[id] = nil
            coreEvent(.pauseShown(id))
        }
    }
}

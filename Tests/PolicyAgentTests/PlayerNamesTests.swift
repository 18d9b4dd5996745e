import AgentTower
import DBus
@testable import PolicyAgent
import SoundServerTesting
import Synchronization
import Testing

/// A player of the test's own: answers `PlaybackStatus` and says its changes as an MPRIS player does.
private final class TestPlayer: Sendable {
    let connection: DBusConnection
    let status = Mutex("Paused")

    init(on bus: PrivateSessionBus) throws {
        connection = try bus.connect()
        connection.export(MediaPlayers.path) { [weak self] call in
            switch (call.interface, call.member) {
            case ("org.freedesktop.DBus.Properties", "Get") where call.arguments.last?.string == "PlaybackStatus":
                return .values([.variant(.string(self?.status.withLock { $0 } ?? "Stopped"))])
            default:
                return .error(name: "org.freedesktop.DBus.Error.UnknownProperty", message: "not in this test")
            }
        }
    }

    func say(_ new: String) {
        status.withLock { $0 = new }
        connection.emit(MediaPlayers.path, "org.freedesktop.DBus.Properties", "PropertiesChanged", [
            .string(MediaPlayers.playerInterface),
            .dictionary(keySignature: "s", valueSignature: "v", [.string("PlaybackStatus"): .variant(.string(new))]),
            .array(elementSignature: "s", []),
        ])
    }
}

/// What the shell tells the tower of media players on a real (private) session bus.
@Suite("media players' names on the bus")
struct PlayerNamesTests {
    /// A connection that owns two names (a player's own and, say, that name with `.instance<pid>`). Told
    /// as two players, it was sent each pause twice and its status was said for one name only: the other
    /// stayed as it first was, and a call found it "not playing" and muted it only. One owner is one
    /// player, under its first name; a name it takes later is no new player; when it lets go of that
    /// name, the player is told under the next.
    @Test("a player owning two names is one player, under its first name, and its status is said under it")
    func oneOwnerIsOnePlayer() async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        let player = try TestPlayer(on: bus)
        defer { player.connection.close() }
        let name = "org.mpris.MediaPlayer2.twonames"
        try await player.connection.requestName(name)
        try await player.connection.requestName("\(name).instance42")

        let (agent, events) = try watchPlayers(on: bus)
        defer { agent.close() }
        // Listed at the start: one player, its own name (the shorter).
        let appeared = try await first(events, within: .seconds(10), "the player listed") { if case .appeared = $0 { true } else { false } }
        #expect(appeared.name == name)
        // Its status said under that name; nothing else told before it (a second player would be).
        player.say("Playing")
        var next = try await first(events, within: .seconds(10), "the next player event") { $0.name != nil }
        #expect(next == .statusChanged(name: name, .playing), "\(next)")
        // A name taken later is no new player.
        try await player.connection.requestName("\(name).third")
        player.say("Paused")
        next = try await first(events, within: .seconds(10), "the next player event") { $0.name != nil }
        #expect(next == .statusChanged(name: name, .paused), "\(next)")
        // Its first name let go: gone under it, told again under the next (asked anew: Paused).
        _ = try await player.connection.callDaemon("ReleaseName", [.string(name)])
        next = try await first(events, within: .seconds(10), "the next player event") { $0.name != nil }
        #expect(next == .vanished(name: name), "\(next)")
        next = try await first(events, within: .seconds(10), "the next player event") { if case .appeared = $0 { true } else { false } }
        guard case .appeared(let again, _, _, let status) = next else { return }
        #expect(again == "\(name).instance42" && status == .paused, "\(next)")
        player.say("Playing")
        next = try await first(events, within: .seconds(10), "the next player event") { if case .statusChanged = $0 { true } else { false } }
        #expect(next == .statusChanged(name: "\(name).instance42", .playing), "\(next)")
        // Its alias let go: nothing told; then the player leaves the bus: gone, once.
        _ = try await player.connection.callDaemon("ReleaseName", [.string("\(name).third")])
        player.connection.close()
        next = try await first(events, within: .seconds(10), "the next player event") { $0.name != nil }
        #expect(next == .vanished(name: "\(name).instance42"), "\(next)")
    }

    /// The review's case: a player known by the first of its names (sorted) leaves the bus; the daemon
    /// lets go of its names one by one, and the next was told as the player again, asked of an owner
    /// already gone (no process, no status: matched by its name alone to any app of that name).
    @Test("a player of two names that leaves the bus is gone, once: not told again under its other name")
    func aPlayerLeavingIsGoneOnce() async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        let player = try TestPlayer(on: bus)
        let name = "org.mpris.MediaPlayer2.leaving"
        try await player.connection.requestName("\(name).instance7")
        try await player.connection.requestName(name)
        let (agent, events) = try watchPlayers(on: bus)
        defer { agent.close() }
        var next = try await first(events, within: .seconds(10), "the player listed") { $0.name != nil }
        guard case .appeared(name, _, _, _) = next else { Issue.record("\(next)"); return }
        player.connection.close()
        next = try await first(events, within: .seconds(10), "the player gone") { $0.name != nil }
        #expect(next == .vanished(name: name), "\(next)")
        // Another player comes: the next thing told is it, nothing of the one gone.
        let other = try TestPlayer(on: bus)
        defer { other.connection.close() }
        try await other.connection.requestName("org.mpris.MediaPlayer2.other")
        next = try await first(events, within: .seconds(10), "the other player") { $0.name != nil }
        guard case .appeared("org.mpris.MediaPlayer2.other", _, _, _) = next else { Issue.record("told after the first left: \(next)"); return }
    }
}

/// The agent's side: a connection to the bus watched for players, and what is told of them.
private func watchPlayers(on bus: PrivateSessionBus) throws -> (DBusConnection, AsyncStream<PlayerEvent>) {
    let agent = try DBusConnection.connect(.session, address: bus.address)
    let (events, continuation) = AsyncStream.makeStream(of: PlayerEvent.self)
    MediaPlayers.watchSessionBus(agent, settings: AgentSettings()) { input in
        if case .players(let event) = input { continuation.yield(event) }
    }
    return (agent, events)
}

extension PlayerEvent {
    /// The player it is about, if one.
    fileprivate var name: String? {
        switch self {
        case .appeared(let name, _, _, _), .statusChanged(let name, _), .metadataChanged(let name, _), .positionSaid(let name, _, _),
             .vanished(let name): name
        case .busGone, .busConnected: nil
        }
    }
}

import AudioPolicy
import Foundation
@testable import PolicyAgent
import PulseClient
import Testing

/// The soak of `scripts/soak` in memory: the control tower on an in-memory server of each kind, with a
/// manual clock, through seeded random storms of players, calls, a reader, a recorder, the user's own
/// volumes and mutes, kill -9 (a new tower from the journal the dead one wrote) and server restarts.
/// Thousands of steps a second, so many seeds; the same invariants as the soak on real servers.
@Suite("tower soak")
struct TowerSoakTests {
    struct App {
        var name: String
        var properties: Properties
        var direction: Direction = .output
        var isCause = false
        var role: String { properties["media.role"] ?? "none" }
    }

    static let apps: [App] = [
        App(name: "Player A", properties: ["media.role": "music"]),
        App(name: "Player B", properties: ["media.role": "music"]),
        App(name: "Movie", properties: ["media.role": "video"]),
        App(name: "Game", properties: ["media.role": "game"]),
        App(name: "Call", properties: ["media.role": "phone"], isCause: true),
        App(name: "Reader", properties: ["media.role": "a11y"], isCause: true),
        App(name: "Recorder", properties: ["application.id": "org.example.Recorder"], direction: .input, isCause: true),
    ]

    static let policies = [
        AppPolicy(name: "recorder", match: .init(appID: ["org.example.Recorder"]), configuration: SessionConfiguration(.record)),
        AppPolicy(name: "player-b", match: .init(name: ["Player B"]), configuration: SessionConfiguration(.playback, options: .mixWithOthers)),
        AppPolicy(name: "movie", match: .init(name: ["Movie"]), configuration: SessionConfiguration(.playback, options: .mixWithOthers)),
    ]

    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }

    struct Live {
        var app: App
        var id: UInt32
        var started: Duration
        var volume: Double?
        var muted: Bool?
    }

    /// Runs one storm; returns what went wrong, in words.
    static func storm(_ kind: InMemoryServer.Kind, seed: UInt64, steps: Int) throws -> [String] {
        var random = Random(state: seed)
        let directory = NSTemporaryDirectory() + "audiosession-tower-soak-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var journal = Journal(directory: directory)
        _ = journal.leftovers()
        var w = TowerWorld(server: InMemoryServer(kind), policies: policies, journal: journal)
        var live: [Live] = []
        var chosenVolumes: [String: Set<Int>] = [:]
        var chosenMute: Set<String> = []
        var story: [String] = []
        var pid = 1000
        for _ in 0..<steps {
            w.advance(.milliseconds(20 + random.below(280)))
            switch random.below(100) {
            case 0..<30 where live.count < 8:
                let app = apps[random.below(apps.count)]
                // One Player A at most: two players that do not mix interrupt each other (the policy).
                if app.name == "Player A" && live.contains(where: { $0.app.name == "Player A" }) { continue }
                pid += 1
                let id = w.server.play(app.properties, name: app.name, pid: pid, direction: app.direction)
                live.append(Live(app: app, id: id, started: w.now))
                story.append("start \(app.name) #\(id)")
            case 0..<45 where !live.isEmpty:
                let gone = live.remove(at: random.below(live.count))
                w.server.stop(gone.id, direction: gone.app.direction)
                story.append("stop #\(gone.id)")
            case 45..<65:
                let players = live.indices.filter { !live[$0].app.isCause && w.now - live[$0].started > .milliseconds(3500) }
                guard !players.isEmpty else { continue }
                let i = players[random.below(players.count)]
                guard let stream = w.stream(live[i].id) else { continue }
                if random.below(10) < 6 {
                    let volume = [0.3, 0.5, 0.7, 1.0][random.below(4)]
                    w.server.userSetVolume(live[i].id, volume)
                    live[i].volume = volume
                    chosenVolumes[live[i].app.role, default: [100]].insert(Int(volume * 100))
                    story.append("volume #\(live[i].id) \(Int(volume * 100))")
                } else {
                    let mute = !stream.isMuted
                    w.server.userSetMute(live[i].id, mute)
                    live[i].muted = mute
                    if mute { chosenMute.insert(live[i].app.role) }
                    story.append("mute #\(live[i].id) \(mute)")
                }
            case 65..<67:
                // kill -9: a new tower reads what the dead one journaled, on the same server.
                journal = Journal(directory: directory)
                let left = journal.leftovers()
                w.server.forgetEvents()
                let log = w.log + ["\(w.now) ---- kill -9 ----"]
                w = TowerWorld(server: w.server, policies: policies, leftovers: left, journal: journal, now: w.now)
                w.log = log + w.log
                story.append("kill -9")
            case 67..<69:
                w.server.restart()
                live = []
                story.append("restart")
            default:
                continue
            }
            w.deliver()
        }
        var problems: [String] = []
        for cause in live where cause.app.isCause { w.server.stop(cause.id, direction: cause.app.direction) }
        live.removeAll { $0.app.isCause }
        w.advance(.seconds(5))
        func allowed(_ stream: AudioStream, role: String, volume: Double?, muted: Bool?) -> Bool {
            let volumes = chosenVolumes[role] ?? [100]
            let volumeOK = volume.map { v in stream.volume.values.allSatisfy { abs($0.fraction - v) < 0.01 } }
                ?? stream.volume.values.allSatisfy { v in volumes.contains { abs(v.fraction - Double($0) / 100) < 0.01 } }
            let muteOK = muted.map { stream.isMuted == $0 } ?? (!stream.isMuted || chosenMute.contains(role))
            return volumeOK && muteOK
        }
        for player in live {
            guard let stream = w.stream(player.id) else { continue }
            if !allowed(stream, role: player.app.role, volume: player.volume, muted: player.muted) {
                problems.append("\(player.app.name) #\(player.id): muted=\(stream.isMuted) volume=\(stream.volume)")
            }
        }
        for player in live { w.server.stop(player.id) }
        w.stop()
        for app in apps where !app.isCause && app.name != "Player B" {
            pid += 1
            let id = w.server.play(app.properties, name: "Fresh \(app.name)", pid: pid)
            if let stream = w.stream(id), !allowed(stream, role: app.role, volume: nil, muted: nil) {
                problems.append("a fresh \(app.role) stream, no agent: muted=\(stream.isMuted) volume=\(stream.volume)")
            }
            w.server.stop(id)
        }
        if !problems.isEmpty { problems.append("story: " + story.suffix(80).joined(separator: "; ")) }
        if ProcessInfo.processInfo.environment["TOWER_SOAK_TRACE"] != nil {
            print(story.joined(separator: "\n"))
            print(w.log.joined(separator: "\n"))
        }
        return problems
    }

    @Test("storms leave nothing of ours behind", arguments: InMemoryServer.Kind.allCases)
    func storms(_ kind: InMemoryServer.Kind) throws {
        // TOWER_SOAK_SEED=N (and TOWER_SOAK_TRACE=1 for the tower's log) runs one seed.
        let only = ProcessInfo.processInfo.environment["TOWER_SOAK_SEED"].flatMap { UInt64($0) }
        if let kindName = ProcessInfo.processInfo.environment["TOWER_SOAK_KIND"], kindName != "\(kind)" { return }
        for seed in only.map({ $0...$0 }) ?? UInt64(1)...60 {
            let problems = try Self.storm(kind, seed: seed, steps: 300)
            #expect(problems.isEmpty, "seed \(seed) on \(kind):\n\(problems.joined(separator: "\n"))")
            if !problems.isEmpty { return }
        }
    }
}

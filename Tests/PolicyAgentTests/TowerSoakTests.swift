import AudioPolicy
import Foundation
@testable import AgentTower
@testable import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing
import TowerTesting

/// The soak of `scripts/soak` in memory: the control tower on an in-memory server of each kind, with a
/// manual clock, through seeded random storms of players, calls, a reader, a recorder, the user's own
/// volumes and mutes, kill -9 (a new tower from the journal the dead one wrote) and server restarts.
/// Thousands of steps a second, so many seeds; the same invariants as the soak on real servers.
@Suite("tower soak")
struct TowerSoakTests {
    typealias App = Soak.App
    static let apps = Soak.apps
    /// The soak's own policy files, as the agent would read them.
    static let policies = Soak.policies.sorted { $0.key < $1.key }.map { try! PolicyFiles.parse($0.value, name: $0.key, path: "\($0.key).yaml") }

    struct Live {
        var app: App
        var id: UInt32
        var started: Duration
        var volume: Double?
        var muted: Bool?
    }

    /// Runs one storm; returns what went wrong, in words.
    static func storm(_ kind: InMemoryServer.Kind, seed: UInt64, steps: Int) throws -> [String] {
        var random = Soak.Random(seed: seed)
        let scratch = Scratch()
        defer { scratch.remove() }
        let directory = scratch.path
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
            var chosen = Soak.Chosen()
            chosen.volumes = chosenVolumes[role] ?? [100]
            chosen.muted = chosenMute.contains(role)
            return chosen.allows(stream, Soak.Left(volume: volume, muted: muted))
        }
        for player in live {
            // Only the tower could have ended it (the in-memory server ends a stream when told to).
            guard let stream = w.stream(player.id) else { problems.append("\(player.app.name) #\(player.id): gone"); continue }
            if !allowed(stream, role: player.app.role, volume: player.volume, muted: player.muted) {
                problems.append("\(player.app.name) #\(player.id): muted=\(stream.isMuted) volume=\(stream.volume)")
            }
        }
        for player in live { w.server.stop(player.id) }
        w.stop()
        for app in apps where !app.isCause && app.name != "Player B" {
            pid += 1
            let id = w.server.play(app.properties, name: "Fresh \(app.name)", pid: pid)
            if let stream = w.stream(id) {
                if !allowed(stream, role: app.role, volume: nil, muted: nil) {
                    problems.append("a fresh \(app.role) stream, no agent: muted=\(stream.isMuted) volume=\(stream.volume)")
                }
            } else {
                problems.append("a fresh \(app.role) stream, no agent: gone")
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

/// The real soak's reading of the agent's log, for a user's mute that met the agent's.
@Suite("the soak's reading of the agent's log")
struct SoakLogTests {
    /// The suite's soak, seed 1 on PulseAudio: the agent muted a game (a call's interruption) and
    /// unmuted it a second later; the user's mute of it, asked as the agent's landed, was no change the
    /// server could show.
    @Test("a mute of the agent's within a second of the user's, unmuted after, is found; one further off, or never undone, is not")
    func agentsMuteNearTheUsers() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let log = scratch.write("agent.log", """
        2026-11-29T14:33:24+0000 info audiosessiond: session=pacat[11790]:role=game stream=out#3 [PolicyAgent] duck to 0.2
        2026-11-29T14:33:29+0000 info audiosessiond: session=pacat[11790]:role=game stream=out#3 [PolicyAgent] mute
        2026-11-29T14:33:29+0000 info audiosessiond: session=pacat[11790]:role=game stream=out#3 [PolicyAgent] unduck
        2026-11-29T14:33:30+0000 info audiosessiond: session=pacat[11790]:role=game stream=out#3 [PolicyAgent] unmute
        2026-11-29T14:33:40+0000 info audiosessiond: session=pacat[11791]:role=game stream=out#4 [PolicyAgent] mute
        2026-11-29T14:33:35+0000 info audiosessiond: session=pacat[11794]:role=game stream=out#7 [PolicyAgent] mute
        2026-11-29T14:33:35+0000 info audiosessiond: session=pacat[11794]:role=game stream=out#7 [PolicyAgent] unmute
        2026-11-29T15:33:50+0100 info audiosessiond: session=pacat[11792]:role=game stream=out#5 [PolicyAgent] mute
        2026-11-29T15:33:51+0100 info audiosessiond: session=pacat[11792]:role=game stream=out#5 [PolicyAgent] unmute
        2026-11-29T00:00:00+0000 info audiosessiond: session=pacat[11793]:role=game stream=out#6 [PolicyAgent] mute
        2026-11-29T00:00:01+0000 info audiosessiond: session=pacat[11793]:role=game stream=out#6 [PolicyAgent] unmute
        """)
        let at = 14 * 3600 + 33 * 60
        #expect(Soak.agentMuted(in: log, stream: "out#3", near: at + 29))
        #expect(Soak.agentMuted(in: log, stream: "out#3", near: at + 30))
        #expect(!Soak.agentMuted(in: log, stream: "out#3", near: at + 31), "two seconds off")
        #expect(!Soak.agentMuted(in: log, stream: "out#30", near: at + 29), "another stream")
        #expect(!Soak.agentMuted(in: log, stream: "out#4", near: at + 40), "never unmuted")
        #expect(Soak.agentMuted(in: log, stream: "out#5", near: at + 50), "the log's time zone an hour east")
        #expect(!Soak.agentMuted(in: log, stream: "out#5", near: at + 3600 + 50), "read as UTC")
        #expect(Soak.agentMuted(in: log, stream: "out#6", near: 86_399), "across midnight")
        #expect(!Soak.agentMuted(in: log, stream: "out#7", near: at + 36), "unmuted before the user's mute: the user's was a change")
    }
}

import AudioPolicy
import Foundation
import PolicyAgent
import Testing

/// Issue 19, "policies checked against real programs" (SPEC.md section 8: shipped policies are checked
/// against what the real programs put in their streams, not against their documentation). Every stream
/// that real Debian 12 programs opened on the three private servers (`Tests/Fixtures/RealApps`, written
/// by `scripts/record-real-apps`) is given its identity as the agent gives it and classified with the
/// shipped policies (`policies/`); it must get the session the table below intends. The facts the
/// agent's behaviour relies on are checked in the same recordings.
@Suite("policies against real programs")
struct RealAppPolicyTests {
    // MARK: what a desktop user expects

    /// A player: interrupts other players, is interrupted by them and by calls.
    static let player = SessionConfiguration(.playback)
    /// A player of films (and music): the same, in the film mode.
    static let filmPlayer = SessionConfiguration(.playback, mode: .moviePlayback)
    /// A call: interrupts every player while it lasts.
    static let call = SessionConfiguration(.playAndRecord, mode: .voiceChat)
    /// Plays along with everything, and becomes a call if it records while it plays.
    static let mixing = SessionConfiguration(.playback, options: .mixWithOthers)
    /// An event sound: mixes in, silenced in silent mode and by the lock.
    static let eventSound = SessionConfiguration(.ambient)
    /// The screen reader's voice: ducks the others while it speaks, pauses spoken audio.
    static let screenReader = SessionConfiguration(.playback, mode: .spokenAudio, options: [.duckOthers, .interruptSpokenAudioAndMixWithOthers])

    /// Per recorded program (and per stream where they differ), the session a desktop user expects.
    static let table: [Row] = [
        Row("speech-dispatcher", .binary("speech-dispatcher"), .policy("speech-dispatcher", screenReader, duckLevel: 0.3,
            "the screen reader's voice (0.11 plays it from the daemon): the music goes down to 30 % while it speaks")),
        Row("speech-dispatcher", .binary("sd_dummy"), .policy("speech-dispatcher", screenReader, duckLevel: 0.3,
            "its fallback voice (the sd_dummy module, when no synthesizer works) is the same voice to the user")),
        Row("linphonec", .all, .policy("linphone", call,
            "a SIP softphone in a call: the music pauses until it hangs up")),
        Row("vlc", .all, .policy("vlc", filmPlayer, "a media player")),
        Row("mpv", .all, .policy("mpv", filmPlayer, "a media player (here playing music, --no-video)")),
        Row("mpg123", .all, .policy("mpg123", player, "a music player")),
        Row("canberra-gtk-play", .all, .policy("event-sounds", eventSound, "the desktop's event sound")),
        Row("chromium", .playback, .policy("chromium", mixing, "a web page playing: mixes; a call if it records while it plays")),
        Row("chromium-webcall", .playback, .policy("chromium", mixing,
            "the far end of a web call: the page's session, a call while it records (inferred, not classified)")),
        Row("chromium-webcall", .capture, .policy("chromium", mixing,
            "the microphone of a web call: the same session as the page's playback (one process)")),
        Row("firefox-esr", .all, .policy("firefox", mixing, "a web page playing: mixes; a call if it records while it plays")),
        Row("firefox-esr-webcall", .playback, .policy("firefox", mixing,
            "the far end of a web call, and the silent output Firefox opens with the microphone: the page's session, a call while it records and is heard")),
        Row("firefox-esr-webcall", .capture, .policy("firefox", mixing,
            "the microphone of a web call: the same session as the page's playback (one process, one client)")),
        // Generic tools, left to the role defaults on purpose (no policy shipped): what they play or
        // record is whatever the user or a script gives them, often beside music (a notification
        // played with paplay, a script recording with ffmpeg), so they mix, and a tool that records
        // while it plays is still taken for a call. A policy for `aplay` would also catch `arecord`
        // (one binary), ffmpeg names itself after its library version (Lavf59.27.100), and ffplay and
        // gst-play-1.0 are the same case: users who want a player of them write their own policy.
        Row("paplay", .all, .roleDefault(nil, mixing, "a generic tool (binary pacat): role default")),
        Row("arecord", .capture, .roleDefault(nil, mixing,
            "a generic recorder (binary aplay, like aplay): role default; recording alone silences no one")),
        Row("ffmpeg", .playback, .roleDefault(nil, mixing, "a generic tool playing: role default")),
        Row("ffmpeg", .capture, .roleDefault(nil, mixing, "a generic tool recording: role default; silences no one")),
        Row("gst-launch", .playback, .roleDefault(nil, mixing, "a generic tool playing (gst-launch-1.0 ! pulsesink): role default")),
        Row("gst-launch", .capture, .roleDefault(nil, mixing, "a generic tool recording (pulsesrc): role default; silences no one")),
    ]

    // MARK: the sessions

    @Test("every recording has its row in the table, on all three servers, and every row its recordings")
    func coverage() throws {
        let recordings = try Self.recordings()
        #expect(!recordings.isEmpty, "no recordings in \(Self.fixtures)")
        for recording in recordings where !Self.table.contains(where: { $0.program == recording.program }) {
            Issue.record("\(recording.file): the program '\(recording.program)' has no row in RealAppPolicyTests.table: say which session a desktop user expects of it")
        }
        for program in Set(Self.table.map(\.program)).sorted() {
            let servers = Set(recordings.filter { $0.program == program }.map(\.server))
            #expect(servers == Self.servers, "\(program): recorded on \(servers.sorted()), not on \(Self.servers.subtracting(servers).sorted()) (scripts/record-real-apps --server SERVER \(program))")
        }
        for recording in recordings {
            for phase in recording.phases where phase.program != recording.program || phase.server != recording.server {
                Issue.record("\(recording.file), phase '\(phase.phase)': recorded as \(phase.program) on \(phase.server), not what its file's name says")
            }
        }
        let streams = try Self.streams()
        for row in Self.table where !streams.contains(where: { row.covers($0) }) {
            Issue.record("the table's row for \(row.program), \(row.streams), is no recorded stream's: drop it or record the program")
        }
        let policies = try Self.shippedPolicies()
        for case .policy(let name) in Set(Self.table.map(\.intended.source)) where !policies.contains(where: { $0.name == name }) {
            Issue.record("the table intends policies/\(name).yaml, which is not shipped (in \(Self.policyDirectory))")
        }
    }

    @Test("every stream of every recorded phase gets the intended session from the shipped policies")
    func intendedSessions() throws {
        let policies = try Self.shippedPolicies()
        for stream in try Self.streams() {
            guard let row = Self.row(for: stream) else { continue }
            let got = Classifier.classify(stream.identity, policies: policies)
            let want = row.intended
            let matches = Intended.Source(got.source) == want.source && got.configuration == want.configuration
                && got.duckLevel == want.duckLevel && got.infersCalls == want.infersCalls && got.microphoneAllowed
            #expect(matches, "\(stream): got \(Self.describe(got)); intended \(want) (\(want.why))")
        }
    }

    @Test("a shipped policy that matches a recorded program matches every stream of it, and the table intends it")
    func policiesCoverTheirPrograms() throws {
        let policies = try Self.shippedPolicies()
        let streams = try Self.streams()
        for policy in policies {
            for program in Set(streams.map(\.program)).sorted() {
                let ofProgram = streams.filter { $0.program == program }
                let matched = ofProgram.filter { Self.matches(policy, $0) }
                guard !matched.isEmpty else { continue }
                for stream in ofProgram where !Self.matches(policy, stream) {
                    Issue.record("policies/\(policy.name).yaml matches \(program)'s \(matched[0]) but not its \(stream): \(Self.describe(stream.identity))")
                }
                for stream in matched {
                    guard let row = Self.row(for: stream) else { continue }
                    #expect(row.intended.source == .policy(policy.name),
                            "policies/\(policy.name).yaml matches \(stream) (\(Classifier.classify(stream.identity, policies: [policy]).explanation)), which the table gives \(row.intended.source)")
                }
            }
        }
    }

    @Test("a policy's binaries, names and app ids are what the programs it covers say (none out of date)")
    func matchListsAreTheProgramsOwn() throws {
        let policies = try Self.shippedPolicies()
        for stream in try Self.streams() {
            guard case .policy(let name, _, _) = Classifier.classify(stream.identity, policies: policies).source,
                  let policy = policies.first(where: { $0.name == name }) else { continue }
            let keys = [("binary", policy.match.binary, stream.identity.binary),
                        ("name", policy.match.name, stream.identity.name),
                        ("app-id", policy.match.appID, stream.identity.appID)]
            for (key, listed, said) in keys {
                guard let said, !listed.isEmpty else { continue }
                #expect(listed.contains(said),
                        "policies/\(name).yaml: its \(key) list \(listed) misses '\(said)', what \(stream) says: list what the program says, or leave the key out")
            }
        }
    }

    // MARK: the facts the agent relies on

    @Test("Chromium's web call plays and records from one process: one session, not a call by itself, whose call is inferred")
    func chromiumWebCall() throws {
        let policies = try Self.shippedPolicies()
        let phases = try Self.phases(of: "chromium-webcall")
        #expect(phases.count == 3, "one web call per server")
        for (file, phase) in phases {
            let streams = phase.streams(in: file)
            let playback = streams.filter { $0.kind == .playback }, capture = streams.filter { $0.kind == .capture }
            guard playback.count == 1, capture.count == 1, let far = playback.first, let mic = capture.first else {
                Issue.record("\(file), phase '\(phase.phase)': expected one playback and one capture, got \(streams)")
                continue
            }
            // One process (the audio service), two client connections: grouping by client would split them.
            #expect(far.identity.processID != nil && far.identity.processID == mic.identity.processID,
                    "\(file): the far end's \(far) and the microphone's \(mic) name different processes")
            #expect(far.client != mic.client, "\(file): \(far) and \(mic) share a client connection")
            let audioProcess = phase.processTree.first { $0.pid == far.identity.processID }
            #expect(audioProcess?.args.contains("AudioService") == true,
                    "\(file): \(far) is not from Chromium's audio service process: \(String(describing: audioProcess))")
            // The same binary, policy and configuration: the agent's one session `chromium[pid]:chromium`.
            let a = Classifier.classify(far.identity, policies: policies), b = Classifier.classify(mic.identity, policies: policies)
            #expect(far.identity.binary == mic.identity.binary && Intended.Source(a.source) == Intended.Source(b.source)
                        && a.configuration == b.configuration && a.infersCalls == b.infersCalls,
                    "\(file): \(far) gets \(a.explanation), \(mic) gets \(b.explanation)")
            #expect(!a.configuration.isCall && a.infersCalls, "\(file): \(far) gets \(a.explanation): its call must be inferred")
            // Both run at the snapshot, and the far end is heard: a call from behaviour.
            #expect(!far.corked && !mic.corked, "\(file): \(far) corked \(far.corked), \(mic) corked \(mic.corked)")
            #expect((phase.observations.meter["sink-input \(far.index)"]?.peak ?? 0) > 0, "\(file): \(far) was not heard")
        }
    }

    @Test("Firefox's web call plays and records from its one process and client, and opens a silent output beside the far end: only sound makes it a call")
    func firefoxWebCall() throws {
        let policies = try Self.shippedPolicies()
        let phases = try Self.phases(of: "firefox-esr-webcall")
        #expect(phases.count == 3, "one web call per server")
        for (file, phase) in phases {
            let streams = phase.streams(in: file)
            let playback = streams.filter { $0.kind == .playback }, capture = streams.filter { $0.kind == .capture }
            guard playback.count == 2, capture.count == 1, let mic = capture.first else {
                Issue.record("\(file), phase '\(phase.phase)': expected two playbacks and one capture, got \(streams)")
                continue
            }
            // Everything from the parent process, on one client connection.
            #expect(Set(streams.map(\.identity.processID)).count == 1 && mic.identity.processID == phase.processTree.first?.pid,
                    "\(file): the streams name other processes than the browser's own: \(streams)")
            #expect(Set(streams.map(\.client)).count == 1, "\(file): the streams are on several clients: \(streams)")
            // Opening the microphone opens an output that stays silent (the page's audio graph): an
            // uncorked stream alone would make any page that records a call.
            let peaks = playback.map { phase.observations.meter["sink-input \($0.index)"]?.peak ?? -1 }
            #expect(peaks.filter { $0 == 0 }.count == 1 && peaks.filter { $0 > 0 }.count == 1,
                    "\(file): expected one silent and one heard playback, peaks \(peaks)")
            #expect(streams.allSatisfy { !$0.corked }, "\(file): \(streams)")
            for stream in streams {
                let c = Classifier.classify(stream.identity, policies: policies)
                #expect(!c.configuration.isCall && c.infersCalls, "\(file): \(stream) gets \(c.explanation): its call must be inferred")
            }
        }
    }

    @Test("linphonec's streams say no media.role and live only while the call does: only its policy makes the call a call")
    func linphonecCall() throws {
        let policies = try Self.shippedPolicies()
        let phases = try Self.phases(of: "linphonec")
        #expect(phases.count == 9, "idle, in call, after the call, on each server")
        for (file, phase) in phases {
            let streams = phase.streams(in: file)
            guard phase.phase == "in call" else {
                #expect(streams.isEmpty, "\(file), phase '\(phase.phase)': linphonec has streams outside the call: \(streams)")
                continue
            }
            // Both ends of the call, each playing and recording from its own process.
            let processes = Dictionary(grouping: streams) { $0.identity.processID ?? -1 }
            #expect(processes.count == 2 && processes.values.allSatisfy { Set($0.map(\.kind)) == [.playback, .capture] && $0.count == 2 },
                    "\(file): expected a playback and a capture per linphonec, got \(streams)")
            for stream in streams {
                #expect(stream.identity.role == nil, "\(stream): says media.role=\(stream.identity.role ?? "")")
                let unmatched = Classifier.classify(stream.identity, policies: [])
                #expect(unmatched.configuration.isMixable && !unmatched.configuration.isCall,
                        "\(stream): without a policy gets \(unmatched.explanation)")
                let got = Classifier.classify(stream.identity, policies: policies)
                #expect(got.configuration.isCall, "\(stream): gets \(got.explanation), not a call")
            }
        }
    }

    @Test("speech-dispatcher keeps its voices' streams open and silent between utterances, uncorked (PipeWire 0.3.65 corks them after a while)")
    func speechDispatcherIdle() throws {
        /// Whether the server leaves an idle voice's stream uncorked once it has spoken: PulseAudio and
        /// PipeWire 1.4 do; pipewire-pulse 0.3.65 reports both streams corked a while after their last
        /// sound (sd_dummy about 5 s after it opened, the voice about 17 s after its stream opened).
        let uncorkedWhenIdle = ["pulseaudio": true, "pipewire": false, "pipewire-1.4": true]
        let phases = try Self.phases(of: "speech-dispatcher")
        #expect(phases.count == 12, "before speech, speaking, idle 15 s and 60 s after, on each server")
        for (file, phase) in phases {
            let streams = phase.streams(in: file)
            let dummy = streams.filter { $0.identity.binary == "sd_dummy" }, voice = streams.filter { $0.identity.binary == "speech-dispatcher" }
            #expect(dummy.count == 1, "\(file), phase '\(phase.phase)': sd_dummy's stream is not there from the start: \(streams)")
            let staysUncorked = try #require(uncorkedWhenIdle[phase.server] as Bool?, "\(file): unknown server \(phase.server)")
            switch phase.phase {
            case "daemon started, before any speech":
                #expect(voice.isEmpty, "\(file): the voice's stream opened before it spoke: \(voice)")
                #expect(dummy.allSatisfy { !$0.corked } && phase.observations.silentWhileOpen == true,
                        "\(file), before any speech: sd_dummy's \(dummy) is not open, uncorked and silent (silentWhileOpen \(String(describing: phase.observations.silentWhileOpen)))")
            case "speaking":
                #expect(voice.count == 1 && voice.allSatisfy { !$0.corked && (phase.observations.meter["sink-input \($0.index)"]?.peak ?? 0) > 0 },
                        "\(file), speaking: the voice's stream is not there, uncorked and heard: \(voice)")
            case let idle where idle.hasPrefix("idle"):
                #expect(voice.count == 1, "\(file), phase '\(idle)': the voice's stream closed after speaking: \(streams)")
                for stream in streams {
                    #expect(stream.corked == !staysUncorked, "\(stream): corked \(stream.corked), on \(phase.server) expected \(!staysUncorked)")
                    let meter = phase.observations.meter["sink-input \(stream.index)"]
                    #expect(meter != nil && (meter?.peak ?? 0) == 0, "\(stream): not silent while idle: \(String(describing: meter))")
                }
                #expect(phase.observations.silentWhileOpen == (staysUncorked ? true : nil),
                        "\(file), phase '\(idle)': silentWhileOpen is \(String(describing: phase.observations.silentWhileOpen))")
            default:
                Issue.record("\(file): a phase this test does not know: '\(phase.phase)'")
            }
        }
    }

    @Test("Chromium keeps a page's stream open, uncorked and silent for seconds after its sound ended (Firefox closes it)")
    func browsersAfterThePageEnded() throws {
        for (file, phase) in try Self.phases(of: "chromium") where phase.phase.hasPrefix("page still open, about 3 s") {
            let streams = phase.streams(in: file)
            #expect(streams.count == 1 && streams.allSatisfy { !$0.corked } && phase.observations.silentWhileOpen == true,
                    "\(file), phase '\(phase.phase)': expected one uncorked silent stream, got \(streams), silentWhileOpen \(String(describing: phase.observations.silentWhileOpen))")
        }
        for (file, phase) in try Self.phases(of: "firefox-esr") where phase.phase.hasPrefix("page still open") {
            #expect(phase.streams(in: file).isEmpty, "\(file), phase '\(phase.phase)': Firefox kept \(phase.streams(in: file))")
        }
    }

    @Test("a player's MPRIS name is owned by the process that plays or one above it (Chromium's browser process)")
    func playersOnTheBus() throws {
        for recording in try Self.recordings() {
            for phase in recording.phases {
                let pids = Set(phase.streams(in: recording.file).compactMap(\.identity.processID))
                for player in phase.mpris where !pids.isEmpty {
                    let owner = try #require(player.pid, "\(recording.file), phase '\(phase.phase)': \(player.name) has no owner")
                    #expect(pids.contains { phase.ancestors(of: $0).contains(owner) || $0 == owner },
                            "\(recording.file), phase '\(phase.phase)': \(player.name) is owned by process \(owner), none of the playing processes \(pids.sorted()) nor above them")
                }
            }
        }
        // A paused player corks its stream: paused is not playing.
        for (file, phase) in try Self.phases(of: "mpv") where phase.phase.hasPrefix("paused") {
            let streams = phase.streams(in: file)
            #expect(!streams.isEmpty && streams.allSatisfy { $0.corked }, "\(file): mpv paused and its stream is not corked: \(streams)")
        }
    }

    // MARK: the table's vocabulary

    /// The session a stream should get, and why a desktop user expects it.
    struct Intended: Sendable, CustomStringConvertible {
        enum Source: Hashable, Sendable, CustomStringConvertible {
            /// The shipped policy of that name (`policies/NAME.yaml`).
            case policy(String)
            /// No policy: the role default of that `media.role` (nil: none).
            case roleDefault(String?)

            init(_ source: Classification.Source) {
                switch source {
                case .policy(let name, _, _): self = .policy(name)
                case .roleDefault(let role): self = .roleDefault(role)
                }
            }

            var description: String {
                switch self {
                case .policy(let name): "policies/\(name).yaml"
                case .roleDefault(let role): "the role default for \(role.map { "media.role=\($0)" } ?? "no role")"
                }
            }
        }

        var source: Source
        var configuration: SessionConfiguration
        var duckLevel: Double?
        var infersCalls: Bool
        var why: String

        static func policy(_ name: String, _ configuration: SessionConfiguration, duckLevel: Double? = nil, infersCalls: Bool = true, _ why: String) -> Intended {
            Intended(source: .policy(name), configuration: configuration, duckLevel: duckLevel, infersCalls: infersCalls, why: why)
        }

        static func roleDefault(_ role: String?, _ configuration: SessionConfiguration, _ why: String) -> Intended {
            Intended(source: .roleDefault(role), configuration: configuration, duckLevel: nil, infersCalls: true, why: why)
        }

        var description: String {
            "\(source): \(configuration)" + (duckLevel.map { ", duck-level \($0)" } ?? "")
                + (configuration.isCall ? "" : infersCalls ? ", calls inferred" : ", calls not inferred")
        }
    }

    /// A row of the table: a program's streams, all of them or some, and what they should get.
    struct Row: Sendable {
        enum Streams: Sendable, CustomStringConvertible {
            case all, playback, capture
            /// Those of this `application.process.binary`.
            case binary(String)

            var description: String {
                switch self {
                case .all: "every stream"
                case .playback: "its playback"
                case .capture: "its capture"
                case .binary(let binary): "the streams of binary \(binary)"
                }
            }
        }

        var program: String
        var streams: Streams
        var intended: Intended

        init(_ program: String, _ streams: Streams, _ intended: Intended) {
            self.program = program; self.streams = streams; self.intended = intended
        }

        func covers(_ stream: RecordedStream) -> Bool {
            guard stream.program == program else { return false }
            switch streams {
            case .all: return true
            case .playback: return stream.kind == .playback
            case .capture: return stream.kind == .capture
            case .binary(let binary): return stream.identity.binary == binary
            }
        }
    }

    /// The table's row for a stream; none or two are an issue recorded against the stream.
    static func row(for stream: RecordedStream) -> Row? {
        let rows = table.filter { $0.covers(stream) }
        if rows.count == 1 { return rows[0] }
        Issue.record(rows.isEmpty
            ? "\(stream): no row of RealAppPolicyTests.table covers this stream: say which session a desktop user expects of it"
            : "\(stream): \(rows.count) rows of RealAppPolicyTests.table cover this stream (\(rows.map { "\($0.program), \($0.streams)" })): keep one")
        return nil
    }

    static func matches(_ policy: AppPolicy, _ stream: RecordedStream) -> Bool {
        if case .policy = Classifier.classify(stream.identity, policies: [policy]).source { return true }
        return false
    }

    static func describe(_ c: Classification) -> String {
        c.explanation + (c.duckLevel.map { ", duck-level \($0)" } ?? "") + (c.microphoneAllowed ? "" : ", microphone denied")
    }

    static func describe(_ app: AppIdentity) -> String {
        [app.binary.map { "binary \($0)" }, app.name.map { "name '\($0)'" }, app.appID.map { "app id \($0)" },
         "media.role " + (app.role ?? "none"), app.processID.map { "pid \($0)" }]
            .compactMap { $0 }.joined(separator: ", ")
    }

    // MARK: the recordings and the shipped policies

    static let servers: Set<String> = ["pulseaudio", "pipewire", "pipewire-1.4"]
    static let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    static let fixtures = tests.appendingPathComponent("Fixtures/RealApps").path
    static let policyDirectory = tests.deletingLastPathComponent().appendingPathComponent("policies").path

    /// The shipped policies, every one of which must read.
    static func shippedPolicies() throws -> [AppPolicy] {
        let (policies, errors) = PolicyFiles.load(layers: [policyDirectory])
        try #require(errors.isEmpty, "shipped policies that do not read: \(errors.map(\.description))")
        try #require(!policies.isEmpty, "no policies in \(policyDirectory)")
        return policies
    }

    /// One recorded file: `PROGRAM.SERVER.json`.
    struct Recording: Sendable {
        var file: String
        var program: String
        var server: String
        var phases: [RecordedPhase]
    }

    static func recordings() throws -> [Recording] {
        let files = try FileManager.default.contentsOfDirectory(atPath: fixtures).filter { $0.hasSuffix(".json") }.sorted()
        return try files.map { file in
            let parts = file.dropLast(".json".count).split(separator: ".", maxSplits: 1)
            guard parts.count == 2, servers.contains(String(parts[1])) else {
                throw FixtureError(file: file, message: "not named PROGRAM.SERVER.json with SERVER one of \(servers.sorted())")
            }
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(fixtures)/\(file)"))
            do {
                let phases = try JSONDecoder().decode([RecordedPhase].self, from: data)
                return Recording(file: file, program: String(parts[0]), server: String(parts[1]), phases: phases)
            } catch {
                throw FixtureError(file: file, message: "not a recording (Tests/Fixtures/RealApps/README.md): \(error)")
            }
        }
    }

    /// Every phase of a program's recordings, with its file's name.
    static func phases(of program: String) throws -> [(file: String, phase: RecordedPhase)] {
        try recordings().filter { $0.program == program }.flatMap { r in r.phases.map { (r.file, $0) } }
    }

    /// Every stream of every phase of every recording.
    static func streams() throws -> [RecordedStream] {
        try recordings().flatMap { r in r.phases.flatMap { $0.streams(in: r.file) } }
    }

    struct FixtureError: Error, CustomStringConvertible {
        var file: String
        var message: String
        var description: String { "Tests/Fixtures/RealApps/\(file): \(message)" }
    }
}

/// One phase of a recording, as `scripts/record-real-apps` writes it (Tests/Fixtures/RealApps/README.md).
struct RecordedPhase: Decodable, Sendable {
    /// A sink input or source output, as `pactl -f json list` gives it.
    struct Stream: Decodable, Sendable {
        var index: Int
        var client: String?
        var corked: Bool
        var properties: [String: String]
    }

    struct Client: Decodable, Sendable {
        var index: Int
        var properties: [String: String]
    }

    struct Process: Decodable, Sendable {
        var pid: Int
        var ppid: Int
        var comm: String
        var args: String
    }

    struct Player: Decodable, Sendable {
        var name: String
        var pid: Int?
    }

    struct Meter: Decodable, Sendable {
        var samples: Int
        var peak: Double?
    }

    struct Observations: Decodable, Sendable {
        var silentWhileOpen: Bool?
        var meter: [String: Meter]
    }

    var program: String
    var server: String
    var phase: String
    var sinkInputs: [Stream]
    var sourceOutputs: [Stream]
    var clients: [Client]
    var processTree: [Process]
    var mpris: [Player]
    var observations: Observations

    /// The phase's streams, each with its identity as the agent makes it (its client's properties
    /// beneath its own).
    func streams(in file: String) -> [RecordedStream] {
        func recorded(_ stream: Stream, _ kind: RecordedStream.Kind) -> RecordedStream {
            let client = clients.first { String($0.index) == stream.client }
            return RecordedStream(file: file, program: program, phase: phase, kind: kind, index: stream.index, client: stream.client,
                                  corked: stream.corked,
                                  identity: AppIdentity(properties: stream.properties, clientProperties: client?.properties ?? [:]))
        }
        return sinkInputs.map { recorded($0, .playback) } + sourceOutputs.map { recorded($0, .capture) }
    }

    /// The processes above a process in the recorded tree, nearest first.
    func ancestors(of pid: Int) -> [Int] {
        var found: [Int] = []
        var current = pid
        while let parent = processTree.first(where: { $0.pid == current })?.ppid, !found.contains(parent) {
            found.append(parent)
            current = parent
        }
        return found
    }
}

/// One stream of one recorded phase, named as a failure names it: file, phase, stream and who it is.
struct RecordedStream: Sendable, CustomStringConvertible {
    enum Kind: String, Sendable { case playback = "sink input", capture = "source output" }
    var file: String
    var program: String
    var phase: String
    var kind: Kind
    var index: Int
    var client: String?
    var corked: Bool
    var identity: AppIdentity

    var description: String {
        "\(file), phase '\(phase)', \(kind.rawValue) \(index) (\(RealAppPolicyTests.describe(identity)))"
    }
}

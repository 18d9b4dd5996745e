import AudioPolicy
import Foundation
import Logging
import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing

/// The agent on a real server: every rule of SPEC.md section 5 that can be seen there, checked
/// through the server's own state, with real `pacat` clients. Run on both servers by the suites below.
enum AgentScenarios {
    static let music = ["media.role": "music"]
    static let phone = ["media.role": "phone"]

    static func callInterruptsAndResumesMusic(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let song = try w.play(music, name: "Music")
            _ = try await w.running(song)
            try await w.settle()
            #expect(song.find(in: w.observer.snapshot)?.isMuted == false)
            let call = try w.play(phone, name: "Call")
            try await w.waitMuted(song, true, "the call silences the music")
            #expect(try await w.running(call).isMuted == false)
            call.stop()
            try await w.waitMuted(song, false, "the music comes back after the call")
        }
    }

    static func twoPlayersDoNotMix(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let (_, second) = try await w.secondPlayerInterruptsTheFirst()
            // (Awaited: on WirePlumber 0.5 the second may be given, for a moment, the first's mute the
            // server remembered for their role, which the agent takes back; seen once in a full suite.)
            try await w.waitMuted(second, false, "the second player plays")
        }
    }

    /// Issue 10, case 2: player R plays; A starts (R muted); B starts (A muted); A quits; B quits: R
    /// plays again (it stayed muted for good when A's session, interrupted itself, kept R waiting).
    static func chainOfThreePlayersEndsWithTheFirstPlaying(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let (first, second) = try await w.secondPlayerInterruptsTheFirst()
            _ = try await w.running(second)
            let third = try w.play(music, name: "Third")
            try await w.waitMuted(second, true, "the third player interrupts the second")
            _ = try await w.running(third)
            second.stop()
            try await w.settle()
            third.stop()
            try await w.waitMuted(first, false, "the first player once the other two have quit")
        }
    }

    static let mixingPlayerPolicy = """
        match:
          name: [Mixer]
        category: playback
        options: [mixWithOthers]
        """

    /// SPEC.md 5.12 against the server's memory: while the agent holds a music stream muted, the server
    /// remembers "music: muted" (it records every client's mute, ours included) and gives that mute to
    /// the next music stream. The agent must not leave that trace: a player that mixes, started during
    /// the call (so the agent has no reason to mute it), plays.
    static func newStreamDoesNotInheritOurMute(_ kind: ServerKind) async throws {
        try await withAgent(kind, policies: ["mixer": mixingPlayerPolicy]) { w in
            let first = try w.play(music, name: "First")
            _ = try await w.running(first)
            let call = try w.play(phone, name: "Call")
            try await w.waitMuted(first, true, "the call interrupts the music")
            let second = try w.play(music, name: "Mixer")
            let secondIndex = try await w.running(second).id
            try await w.waitForAgent("the second player known") { $0.streams[StreamKey(.output, secondIndex)] != nil }
            try await w.settle()
            try await w.waitMuted(second, false, "the mixing player during the call")
            call.stop()
            try await w.waitMuted(first, false, "the first player once the call is over")
            // Still so once everything has been handled (the server's memory acts a moment later on PipeWire).
            try await w.settle()
            try await w.waitMuted(second, false, "the second player after settling")
            let inputs = try await w.appSinkInputs()
            let secondBlock = inputs.components(separatedBy: "Sink Input #").first { $0.hasPrefix("\(secondIndex)\n") } ?? ""
            #expect(secondBlock.contains("Mute: no"), "the server says:\n\(secondBlock)")
        }
    }

    static func ambientMixes(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let song = try w.play(music)
            let game = try w.play(["media.role": "game"], name: "Game")
            _ = try await w.running(song)
            _ = try await w.running(game)
            try await w.settle()
            let s = w.observer.snapshot
            #expect(song.find(in: s)?.isMuted == false)
            #expect(game.find(in: s)?.isMuted == false)
        }
    }

    static func duckOthersLowersAndRestores(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let song = try w.play(music)
            _ = try await w.running(song)
            let voice = try w.play(["media.role": "a11y"], name: "Screen reader")
            // 0.2 amplitude on PulseAudio's cubic scale: 58 %.
            try await w.waitVolume(song, 0.585)
            #expect(try await w.running(voice).volume.overall == .norm, "the ducker is not ducked")
            voice.stop()
            try await w.waitVolume(song, 1.0)
        }
    }

    /// SPEC.md section 1: a screen reader's voice as speech-dispatcher keeps it, open from the start and
    /// writing silence between utterances (`audiosession-listen --voice-only`), leaves the music alone
    /// while silent, ducks it while it speaks, and lets it back once silent for the grace period.
    static func openSilentVoiceDucksOnlyWhileItSpeaks(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let song = try w.play(music)
            _ = try await w.running(song)
            let voice = try ChildProcess.spawn([builtExecutable("audiosession-listen"), "--server", w.server.address, "--voice-only"])
            defer { voice.signal(SIGTERM) }
            let pid = "\(voice.pid)"
            let index = try await w.observer.wait(for: "the voice's stream") { s in
                s.sinkInputs.values.first { $0.properties["application.process.id"] == pid && !$0.isCorked && $0.device != nil }?.id
            }
            let key = StreamKey(.output, index)
            // Its meter's first block is silent: until then it counted (a voice that starts speaking must not
            // wait for the meter), after it, the music is back at its volume, and stays there.
            try await w.waitForAgent("the open voice heard silent") { state in
                if case .quiet? = state.streams[key]?.sound { true } else { false }
            }
            try await w.waitVolume(song, 1.0)
            try await w.settle()
            #expect(try await w.running(song).volume.values.allSatisfy { abs($0.fraction - 1) < 0.01 }, "the open silent voice ducks nothing")
            for _ in 0..<2 {
                voice.signal(SIGUSR1)
                try await w.waitVolume(song, 0.585)
                voice.signal(SIGUSR2)
                try await w.waitVolume(song, 1.0)
            }
            // (Published at the end of the agent's batch, which may come a moment after its last command.)
            try await w.waitForAgent("the voice shown inactive, its stream open and silent", agent: { agent in
                let status = await agent.statusReport().sessions.first { $0.session.contains("[\(pid)]") }
                return status?.state == "inactive" && status?.streams?.first?.contains("open and silent") == true
            })
        }
    }

    /// SPEC.md section 1, calls from behaviour: an app with no role and no policy (two pacats that say
    /// they are one process, as a softphone's or a browser's playback and capture are) that records from
    /// the microphone while it plays is a call: the music is muted while both last, and back after.
    static func recordingWhilePlayingIsACall(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let (song, speaker) = try await musicBesideASoftphone(w, processID: "515151")
            let mic = try w.play(softphone("515151"), direction: .input, name: "Softphone")
            try await w.waitMuted(song, true, "recording while it plays: a call")
            try await w.waitForAgent("the softphone shown in a call inferred from its behaviour", agent: { agent in
                let line = await agent.statusReport().sessions.first { $0.session.hasPrefix("softphone[515151]") }
                return line?.configuration == "playAndRecord/voiceChat" && line?.inferredCall?.contains("while it plays") == true
            })
            mic.stop()
            try await w.waitMuted(song, false, "the recording over, the call too")
            _ = speaker
        }
    }

    /// A softphone's properties (process `processID`, binary softphone, no role).
    static func softphone(_ processID: String) -> [String: String] {
        ["application.process.id": processID, "application.process.binary": "softphone"]
    }

    /// Music playing, and a softphone's stream beside it, which mixes (a role default) until something
    /// makes it a call.
    static func musicBesideASoftphone(_ w: AgentWorld, processID: String,
                                      sourceLocation: SourceLocation = #_sourceLocation) async throws -> (song: ClientStream, speaker: ClientStream) {
        let song = try w.play(music)
        _ = try await w.running(song)
        let speaker = try w.play(softphone(processID), name: "Softphone")
        _ = try await w.running(speaker)
        try await w.settle()
        #expect(try await w.running(song).isMuted == false, "playing alone, it mixes (role default)", sourceLocation: sourceLocation)
        return (song, speaker)
    }

    /// Issue 20 case 3: a server that stops answering (SIGSTOP: pulseaudio, or pipewire-pulse) while a
    /// call's mute is on its way. Each command waited libpulse's 30 s; three of them, and the hold was
    /// given up for good, and the music played through the rest of the call once the server answered.
    /// Now the connection is taken as lost within `serverAnswerWithin`, `status` says so, and when the
    /// server serves again the agent connects again and holds the music through the call.
    static func stalledServerKeepsTheCall(_ kind: ServerKind) async throws {
        var settings = AgentSettings()
        settings.serverAnswerWithin = .seconds(2)
        try await withAgent(kind, settings: settings) { w in
            let (song, speaker) = try await musicBesideASoftphone(w, processID: "525252")
            let server = try #require(w.server.protocolServerProcessID, "no pid file for the server in \(w.server.directory)")
            kill(server, SIGSTOP)
            var resumed = false
            defer { if !resumed { kill(server, SIGCONT) } }
            // The softphone becomes a call (a policy file, read again): the music's mute goes out unanswered.
            try """
                match:
                  binary: [softphone]
                category: playAndRecord
                mode: voiceChat
                """.write(toFile: "\(w.directory)/policies/softphone.yaml", atomically: true, encoding: .utf8)
            w.agent.send(.reload)
            try await w.waitForAgent("the agent to take the stalled server as lost", timeout: .seconds(8), agent: { agent in
                await agent.statusReport().serverLost?.contains("stopped answering") == true
            })
            // The stall goes on a moment (a stall to last, not a wait for something): the agent connects
            // again meanwhile, to a server that says nothing.
            try await Task.sleep(for: .seconds(1))
            kill(server, SIGCONT)
            resumed = true
            try await w.waitForAgent("the agent to serve again", timeout: .seconds(20), agent: { agent in
                await agent.statusReport().serverLost == nil
            })
            try await w.waitMuted(song, true, "the call holds the music once the server serves again")
            try await w.settle()
            #expect(try await w.running(song).isMuted == true, "held through the call, not given up")
            speaker.stop()
            try await w.waitMuted(song, false, "the call over, the music is let go")
        }
    }

    /// Music ducked by a voice, and a second player that mixes (so that it does not interrupt the
    /// first) started during the duck, known to the agent.
    static func secondPlayerDuringADuck(_ w: AgentWorld) async throws
        -> (song: ClientStream, voice: ClientStream, second: ClientStream, index: UInt32) {
        let song = try w.play(music)
        _ = try await w.running(song)
        let voice = try w.play(["media.role": "a11y"], name: "Screen reader")
        try await w.waitVolume(song, 0.585)
        let second = try w.play(music, name: "Mixer")
        let index = try await w.running(second).id
        try await w.waitForAgent("the second player known") { $0.streams[StreamKey(.output, index)] != nil }
        return (song, voice, second, index)
    }

    /// SPEC.md 5.12 for volumes: while the music is ducked, the server remembers the lowered volume for
    /// music and gives it to the next music stream. A player started during the duck is ducked like the
    /// others (from the volume it would have had), and once the voice ends it plays at that volume, not
    /// at the remembered ducked one.
    static func newStreamDoesNotInheritOurDuck(_ kind: ServerKind) async throws {
        try await withAgent(kind, policies: ["mixer": mixingPlayerPolicy]) { w in
            let (song, voice, second, _) = try await secondPlayerDuringADuck(w)
            try await w.settle()
            voice.stop()
            try await w.waitVolume(song, 1.0)
            try await w.waitVolume(second, 1.0)
            try await w.settle()
            let inputs = try await w.appSinkInputs()
            #expect(!inputs.contains("Mute: yes") && inputs.components(separatedBy: "100%").count - 1 == 4,
                    "every stream at 100 % (two channels each), unmuted:\n\(inputs)")
        }
    }

    /// SPEC.md 5.11 at a stream's start: while the music is ducked (not muted), a player started then
    /// and muted by the user at once stays muted. The server's memory cannot hold a mute of ours for
    /// music then, so the mute is the user's.
    static func userMuteOfANewStreamDuringADuckWins(_ kind: ServerKind) async throws {
        try await withAgent(kind, policies: ["mixer": mixingPlayerPolicy]) { w in
            let (song, voice, second, index) = try await secondPlayerDuringADuck(w)
            try await w.server.pactl("set-sink-input-mute", "\(index)", "1")
            try await w.waitMuted(second, true, "the user's mute")
            try await w.settle()
            try await w.waitMuted(second, true, "the user's mute, once everything is handled")
            withExtendedLifetime((song, voice)) {}
        }
    }

    static let recorderPolicy = """
        match:
          app-id: [org.example.Recorder]
        category: record
        """
    static let spyPolicy = """
        match:
          app-id: [org.example.Spy]
        category: record
        microphone: deny
        """

    static func recordSilencesOutput(_ kind: ServerKind) async throws {
        try await withAgent(kind, policies: ["recorder": recorderPolicy]) { w in
            let song = try w.play(music)
            _ = try await w.running(song)
            let recording = try w.play(["application.id": "org.example.Recorder"], direction: .input, name: "Recorder")
            try await w.waitMuted(song, true, "recording silences playback")
            #expect(try await w.running(recording).isMuted == false)
            recording.stop()
            try await w.waitMuted(song, false)
        }
    }

    /// A recorder capturing what the speaker plays (its monitor) is not using a microphone: the music
    /// goes on; the same app recording from the microphone silences it.
    static func monitorCaptureSilencesNothing(_ kind: ServerKind) async throws {
        try await withAgent(kind, policies: ["recorder": recorderPolicy]) { w in
            let song = try w.play(music)
            let songIndex = try await w.running(song).id
            let capture = try w.play(["application.id": "org.example.Recorder"], direction: .input, name: "Recorder",
                                     device: "builtin_speaker.monitor")
            _ = try await w.running(capture)
            // The agent handles events in order: once it knows a stream that came after the capture,
            // it has decided about the capture, and any mute it sent has been carried out.
            let chime = try w.play(["media.role": "event"], name: "Chime")
            let chimeIndex = try await w.running(chime).id
            try await w.waitForAgent("the chime") { $0.streams[StreamKey(.output, chimeIndex)] != nil }
            let inputs = try await w.appSinkInputs()
            #expect(try await w.running(song).isMuted == false, "capturing the monitor silenced the music")
            #expect(!inputs.contains("Mute: yes"), "the server says a stream is muted:\n\(inputs)")
            let recording = try w.play(["application.id": "org.example.Recorder"], direction: .input, name: "Recorder")
            try await w.waitMuted(song, true, "recording from the microphone silences playback")
            recording.stop()
            try await w.waitMuted(song, false)
            #expect(w.observer.snapshot.sinkInputs[songIndex] != nil)
            withExtendedLifetime(capture) {}
        }
    }

    static func microphoneDenyRecordsSilence(_ kind: ServerKind) async throws {
        try await withAgent(kind, policies: ["spy": spyPolicy]) { w in
            let spy = try w.play(["application.id": "org.example.Spy"], direction: .input, name: "Spy")
            try await w.waitMuted(spy, true, "a denied app records silence")
        }
    }

    /// SPEC.md 5.12: the music app quits while muted by a call; afterwards a fresh stream of the same
    /// role starts at the user's volume, unmuted.
    static func rememberedVolumesUntouched(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let (song, call) = try await w.musicMutedByCall()
            song.stop()
            try await w.observer.wait(for: "the song to go") { s in song.find(in: s) == nil ? true : nil }
            call.stop()
            try await w.observer.wait(for: "the call to go") { s in call.find(in: s) == nil ? true : nil }
            try await w.settle()
            // The agent put back the remembered entry; on PipeWire it reaches WirePlumber through the
            // route-settings metadata a moment later, with no event to wait for: read it back (20 ms
            // steps, 2 s at most) before the fresh stream starts.
            for _ in 0..<100 {
                let entry = try await w.observer.readStreamRestore().first { $0.name == "sink-input-by-media-role:music" }
                if entry.map({ !$0.isMuted }) ?? true { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            let fresh = try w.play(music)
            _ = try await w.running(fresh)
            // Unmuted at the user's volume: at once, or within moments if it took our mute from the
            // server's memory before the put-back landed (the agent then undoes it).
            let stream = try await w.waitMuted(fresh, false, "a fresh music stream unmuted")
            #expect(stream.volume.values.allSatisfy { $0 == .norm }, "at the user's volume")
        }
    }

    /// Issue 20, case 9: an app's 64 KB name reached every log line about its streams whole (6.7 MB of
    /// log for 50 streams). Now each line shows its first 200 characters and its length. (A 60,000
    /// character name and program here.)
    static func longAppNamesAreShortenedInTheLog(_ kind: ServerKind) async throws {
        let log = LogRecorder()
        let logger = recordingLogger(log)
        // (60,000: PulseAudio takes no property of 64 KiB or more, and drops the client.)
        let name = String(repeating: "N", count: 60_000)
        try await withAgent(kind, devices: [.speaker, .internalMic], logger: logger) { w in
            let streams = try (0..<10).map { _ in try w.play(["media.role": "music", "application.process.binary": name], name: name) }
            // (30 s: in CI, under the whole suite's load, one of these was not seen running within 10 s,
            // cause not known; ten clients whose streams' properties are 180 KB each, read by the agent
            // and the observer, may be it. A timeout now says how the stream was last seen.)
            for stream in streams { _ = try await w.running(stream, timeout: .seconds(30)) }
            try await w.settle()
            let bytes = log.lines.reduce(0) { $0 + $1.utf8.count }
            #expect(log.lines.contains { $0.contains(String(repeating: "N", count: 200) + "… (600") },
                    "\(log.lines.suffix(5).map { $0.prefix(300) })")
            #expect(!log.lines.contains { $0.contains(String(repeating: "N", count: 1_001)) }, "a line holds more of the name")
            // (Whole, the name was 64 KB in each of dozens of lines.)
            #expect(bytes < 200_000, "\(bytes) bytes of log for 10 streams")
            for stream in streams { stream.stop() }
        }
    }

    /// SPEC.md 5.11: the user raises a ducked stream by hand; it stays where the user put it.
    static func userVolumeChangeWins(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let song = try w.play(music)
            let index = try await w.running(song).id
            let voice = try w.play(["media.role": "a11y"], name: "Screen reader")
            try await w.waitVolume(song, 0.585)
            try await w.server.pactl("set-sink-input-volume", "\(index)", "80%")
            try await w.waitVolume(song, 0.8)
            try await w.waitForAgent("the agent to let go") { $0.streams[StreamKey(.output, index)]?.heldDuck == nil }
            voice.stop()
            try await w.observer.wait(for: "the reader to go") { s in voice.find(in: s) == nil ? true : nil }
            try await w.settle()
            let after = try #require(song.find(in: w.observer.snapshot))
            #expect(after.volume.values.allSatisfy { abs($0.fraction - 0.8) < 0.01 }, "still where the user put it")
        }
    }

    /// Each route-change reason the server can show: USB and Bluetooth in and out, and the monitor guard.
    static func routeReasons(_ kind: ServerKind) async throws {
        try await withAgent(kind, devices: [.speaker, .internalMic]) { w in
            try await w.server.plug(.usbHeadset)
            // (30 s: under the whole suite's load, WirePlumber 0.4 has taken more than 10 s to choose.)
            try await w.observer.wait(for: "USB as the default sink", timeout: .seconds(30)) { $0.defaultSink?.name == "usb_headset" ? true : nil }
            try await w.server.unplug(.usbHeadset)
            try await w.observer.wait(for: "the speaker again") { $0.defaultSink?.name == "builtin_speaker" ? true : nil }
            try await w.server.plug(.bluetoothA2DP)
            try await w.observer.wait(for: "Bluetooth as the default") { $0.defaultSink?.name == "bt_a2dp_headphones" ? true : nil }
            try await w.server.plug(.hdmi)
            try await w.waitForAgent("the monitor to be seen") { $0.ports["hdmi_monitor"] != nil }
            try await w.settle()
            #expect(try await w.server.defaultSinkName() == "bt_a2dp_headphones", "the monitor does not steal the route")
            try await w.server.unplug(.bluetoothA2DP)
            try await w.observer.wait(for: "the speaker once more") { $0.defaultSink?.name == "builtin_speaker" ? true : nil }
            // (WirePlumber falls back by itself when the default goes away: wait for the agent too.)
            try await w.waitForAgent("the agent's route back on the speaker") {
                $0.systemRoute.outputs.first?.uid == "builtin_speaker" && $0.ports["bt_a2dp_headphones"] == nil
            }

            let outputs = try w.routeLogEntries().filter { $0.system && $0.previousRoute.outputs != $0.route.outputs || $0.cause.contains("guard") }
            let story = outputs.map { "\($0.reason.name) \($0.route.outputs.first?.type.name ?? "none")" }
            #expect(story == [
                "newDeviceAvailable usbAudio", "oldDeviceUnavailable builtInSpeaker", "newDeviceAvailable bluetoothA2DP",
                "newDeviceAvailable bluetoothA2DP", "oldDeviceUnavailable builtInSpeaker",
            ], "\(story)")
            #expect(outputs.allSatisfy { !$0.time.isEmpty })
            #expect(outputs.first?.previousRoute.outputs.first?.uid == "builtin_speaker")
        }
    }

    /// A Bluetooth headset that the server made into a card (from the imitation BlueZ, so with real
    /// A2DP and hands-free profiles): a call switches the card to hands-free and plays there; when the
    /// call is over the card goes back to A2DP and the music, unmuted, plays on it again. Unplugged, the
    /// route falls back on the speaker. Every step is in the route log. With `serverAutoswitch` the
    /// server's own Bluetooth policy is as shipped: PulseAudio's module-bluetooth-policy, which the agent
    /// takes over (so the agent switches), or WirePlumber's autoswitch, which cannot be turned off from
    /// outside (it switches first, and the agent goes along with it); without, the agent switches alone.
    static func bluetoothHeadsetSwitchesProfileForACall(_ kind: ServerKind, serverAutoswitch: Bool = true) async throws {
        try await withAgent(kind, devices: [.speaker, .internalMic], bluez: true, serverAutoswitch: serverAutoswitch) { w in
            let cardName = "bluez_card.70_BF_92_12_34_56"
            @Sendable func card(_ s: Snapshot) -> Card? { s.card(named: cardName) }
            @Sendable func isHandsFree(_ profile: String?) -> Bool {
                ["handsfree", "headset"].contains { profile?.hasPrefix($0) == true }
            }
            @Sendable func onCard(_ s: Snapshot, _ stream: AudioStream?) -> Bool {
                guard let id = card(s)?.id, let stream else { return false }
                return s.device(of: stream)?.card == id
            }
            // What the server says, for a failure's message.
            func state(_ streams: [(String, ClientStream)]) -> String {
                let s = w.observer.snapshot
                let devices = streams.map { name, stream in
                    "\(name) on \(stream.find(in: s).flatMap { s.device(of: $0)?.name } ?? "nothing")"
                }
                return "card in \(card(s)?.activeProfile ?? "none"), default sink \(s.defaultSink?.name ?? "none"), "
                    + devices.joined(separator: ", ")
            }
            try await w.server.plug(.bluezHeadset)
            let a2dp = try await w.waitForBluetoothCard("the headset's card in A2DP, its sink the default") { s in
                card(s).flatMap { c in
                    c.activeProfile?.hasPrefix("a2dp") == true && s.defaultSink?.card == c.id ? c.activeProfile : nil
                }
            }
            let song = try w.play(music)
            _ = try await w.observer.wait(for: "the music on the headset") { s in onCard(s, song.find(in: s)) ? true : nil }

            // One call app with its two streams (two pacats that say they are one process).
            let callApp = phone.merging(["application.process.id": "424242"]) { $1 }
            let call = try w.play(callApp, name: "Call")
            // Its playback linked before its recording starts: WirePlumber's autoswitch, set off by the
            // recording, re-creates the headset's sink at once, and a playback stream still being linked
            // to the sink that goes may be dropped (seen under load: the server no longer had the call's
            // stream; a real app would reconnect, pacat does not).
            _ = try await w.running(call)
            let microphone = try w.play(callApp, direction: .input, name: "Call")
            try await w.waitMuted(song, true, "the call interrupts the music")
            do {
                _ = try await w.observer.wait(for: "the card in hands-free, the call on it") { s in
                    isHandsFree(card(s)?.activeProfile) && onCard(s, call.find(in: s)) && onCard(s, microphone.find(in: s)) ? true : nil
                }
            } catch {
                let fresh = (try? await w.server.pactl("list", "short", "sink-inputs")) ?? ""
                Issue.record("\(error): \(state([("music", song), ("call", call), ("microphone", microphone)])); pactl: \(fresh)")
                throw error
            }
            #expect(call.find(in: w.observer.snapshot)?.isMuted == false)

            call.stop()
            microphone.stop()
            do {
                _ = try await w.observer.wait(for: "the card back in A2DP (\(a2dp)), the music on it") { s in
                    card(s)?.activeProfile == a2dp && onCard(s, song.find(in: s)) ? true : nil
                }
            } catch {
                Issue.record("\(error): \(state([("music", song)]))")
                throw error
            }
            try await w.waitMuted(song, false, "the music comes back after the call")

            try await w.server.unplug(.bluezHeadset)
            try await w.observer.wait(for: "the speaker again") { $0.defaultSink?.name == "builtin_speaker" ? true : nil }
            try await w.waitForAgent("the agent's route back on the speaker") {
                $0.systemRoute.outputs.first?.uid == "builtin_speaker"
            }
            let entries = try w.routeLogEntries()
            let story = entries.filter { $0.system && $0.previousRoute.outputs != $0.route.outputs }
                .map { "\($0.reason.name) \($0.route.outputs.first?.type.name ?? "none")" }
            #expect(story.first == "newDeviceAvailable bluetoothA2DP", "\(story)")
            #expect(story.last == "oldDeviceUnavailable builtInSpeaker", "\(story)")
            // The switch is one change each way, from the A2DP port to the hands-free one and back, never
            // through the speaker (issue 10, case 7).
            #expect(story.contains("categoryChange bluetoothHFP") && story.contains("categoryChange bluetoothA2DP"), "\(story)")
            #expect(!entries.contains { $0.system && $0.reason == .categoryChange && $0.route.outputs.first?.type == .builtInSpeaker },
                    "the switch went through the speaker: \(story)")
            #expect(entries.contains { $0.cause.hasSuffix("appeared after the profile switch of \(cardName)") }, "the switch is logged")
            let toHandsFree = entries.first { $0.system && $0.route.outputs.first?.type == .bluetoothHFP }
            #expect(toHandsFree?.previousRoute.outputs.first?.type == .bluetoothA2DP, "the previous route of the switch")
            withExtendedLifetime(song) {}
        }
    }

    /// Headphones with A2DP only (a real card from the imitation BlueZ): a call plays on them and
    /// records from the built-in microphone; the card stays in A2DP (it has nothing else), the route log
    /// says why the call went where it went.
    static func bluetoothHeadphonesWithoutHandsFree(_ kind: ServerKind) async throws {
        try await withAgent(kind, devices: [.speaker, .internalMic], bluez: true) { w in
            let cardName = "bluez_card.38_18_4C_AA_BB_CC"
            @Sendable func card(_ s: Snapshot) -> Card? { s.card(named: cardName) }
            try await w.server.plug(.bluezHeadphones)
            let a2dp = try await w.waitForBluetoothCard("the headphones in A2DP, the default sink") { s in
                card(s).flatMap { c in s.defaultSink?.card == c.id ? c.activeProfile : nil }
            }
            let callApp = phone.merging(["application.process.id": "434343"]) { $1 }
            let call = try w.play(callApp, name: "Call")
            _ = try await w.running(call)
            let microphone = try w.play(callApp, direction: .input, name: "Call")
            _ = try await w.running(microphone)
            try await w.waitForAgent("the call's route") { state in
                state.sessions.values.contains {
                    $0.route.outputs.first?.type == .bluetoothA2DP && $0.route.inputs.first?.uid == "builtin_mic"
                }
            }
            // Everything handled and no switch planned (one would be, from the call's route on, for its
            // debounce): the card stays in A2DP, the call on the headphones.
            try await w.settle()
            #expect(await w.agent.state.bluetoothSwitches.isEmpty)
            let s = w.observer.snapshot
            #expect(card(s)?.activeProfile == a2dp)
            #expect(call.find(in: s).flatMap { s.device(of: $0)?.card } == card(s)?.id)
            #expect(microphone.find(in: s).flatMap { s.device(of: $0)?.name } == "builtin_mic")
        }
    }

    /// The user picks a default device by hand (as a mixer does): the agent takes it as the user's
    /// choice and keeps to it (no reverting), logs it as an override, and a device plugged in later
    /// takes over from it (last in wins).
    static func userChosenDefaultDeviceStands(_ kind: ServerKind) async throws {
        try await withAgent(kind, devices: [.speaker, .internalMic, .usbHeadset]) { w in
            let first = try await w.observer.wait(for: "a default sink") { $0.defaultSink?.name }
            let chosen = first == "builtin_speaker" ? "usb_headset" : "builtin_speaker"
            try await w.server.pactl("set-default-sink", chosen)
            // (30 s: under the whole suite's load, WirePlumber 0.5 has taken more than 10 s to follow.)
            try await w.waitForAgent("the user's choice taken", timeout: .seconds(30)) { $0.userChoice[.output] == chosen }
            try await w.settle()
            #expect(try await w.server.defaultSinkName() == chosen, "the agent keeps to the user's choice")
            #expect(try w.routeLogEntries().contains { $0.reason == .override && $0.route.outputs.first?.uid == chosen })
            try await w.server.plug(.bluetoothA2DP)
            try await w.observer.wait(for: "the new device takes over") { $0.defaultSink?.name == "bt_a2dp_headphones" ? true : nil }
        }
    }

    /// The speaker the default; a USB headset plugged, which takes over (last in wins); the user picks
    /// the speaker in a mixer at once, and the agent takes it as the user's choice.
    static func pickTheSpeakerRightAfterPluggingTheHeadset(_ w: AgentWorld) async throws {
        try await w.waitForAgent("the speaker as the default route") { $0.systemRoute.outputs.first?.uid == "builtin_speaker" }
        try await w.server.plug(.usbHeadset)
        // (30 s: under the whole suite's load, WirePlumber 0.5 has taken more than 10 s to follow.)
        try await w.observer.wait(for: "the headset taking over", timeout: .seconds(30)) { $0.defaultSink?.name == "usb_headset" ? true : nil }
        // (The user's pick once the agent has seen its own request carried out: a pick that comes
        // while the server still answers the agent's is not told apart from it.)
        try await w.waitForAgent("the agent seeing the headset the default", timeout: .seconds(30), agent: { await $0.defaultSinkSeen == "usb_headset" })
        try await w.server.pactl("set-default-sink", "builtin_speaker")
        try await w.waitForAgent("the user's choice taken", timeout: .seconds(30)) { $0.userChoice[.output] == "builtin_speaker" }
    }

    /// Issue 23: the user picks a default in a mixer right after plugging a device in (measured on
    /// PulseAudio: one second after a USB headset came, the agent took the pick back; three seconds
    /// after, it stood). The pick is the user's however soon it comes: it stands, and is logged as an
    /// override.
    static func userPickRightAfterPluggingStands(_ kind: ServerKind) async throws {
        try await withAgent(kind, devices: [.speaker, .internalMic]) { w in
            try await pickTheSpeakerRightAfterPluggingTheHeadset(w)
            try await w.settle()
            // (A requirement: its failure prints the agent's log and the server's view.)
            try #require(try await w.server.defaultSinkName() == "builtin_speaker", "the agent keeps to the user's pick")
            #expect(await w.agent.state.systemRoute.outputs.first?.uid == "builtin_speaker")
            #expect(try w.routeLogEntries().contains { $0.reason == .override && $0.route.outputs.first?.uid == "builtin_speaker" })
        }
    }

    /// Issue 23: music on one output and a call on another at once. The music's policy file says
    /// `output: [builtInSpeaker]`, the USB headset (plugged last) is the default: the music is moved to
    /// the speaker, the call stays on the headset (private first), the default does not move; the music
    /// session's route change is logged with it. When the agent stops, the music goes back to the
    /// default: on PipeWire, WirePlumber remembered the speaker as the music's target (a stream moved is
    /// pinned there), and would have sent the next music stream to it without the agent; a move to the
    /// default makes both PipeWire versions (and PulseAudio) forget it.
    static func musicAndACallOnTwoOutputs(_ kind: ServerKind) async throws {
        let policy = "match:\n  name: [Speakers Only]\ncategory: playback\noutput: [builtInSpeaker]\n"
        try await withAgent(kind, devices: [.speaker, .internalMic], policies: ["speakers-only": policy]) { w in
            // The USB headset plugged last: the default by the agent's own rule (last in wins).
            try await w.plugTheHeadsetAsDefault()
            let song = try w.play(["media.role": "music"], name: "Speakers Only")
            try await w.observer.wait(for: "the music moved to the speaker", timeout: .seconds(20), on(song, "builtin_speaker"))
            let call = try w.play(["media.role": "phone"], name: "Call")
            try await w.observer.wait(for: "the call on the headset", timeout: .seconds(20), on(call, "usb_headset"))
            try await w.waitMuted(song, true, "the call interrupts the music")
            try await w.settle()
            let s = w.observer.snapshot
            #expect(song.find(in: s).flatMap { s.device(of: $0)?.name } == "builtin_speaker", "the music stays on the speaker")
            #expect(call.find(in: s).flatMap { s.device(of: $0)?.name } == "usb_headset")
            #expect(try await w.server.defaultSinkName() == "usb_headset", "the default does not move")
            let entries = try w.routeLogEntries()
            #expect(entries.contains {
                !$0.system && $0.route.outputs.first?.uid == "builtin_speaker" && $0.sessions.contains { $0.contains("speakers-only") }
            }, "\(entries)")
            // (WirePlumber remembers the speaker as the music's target, most times: on 0.5 the move's own
            // relinking has left none remembered once.)
            if kind != .pulseaudio {
                _ = try? await w.server.waitForWirePlumberMemory("Output/Audio:media.role:Music", timeout: .seconds(5)) { $0.target == "builtin_speaker" }
            }
            try await w.stopAgent()
            try await w.observer.wait(for: "the music back on the default", timeout: .seconds(10), on(song, "usb_headset"))
            // And left there (it was moved back to the speaker after, by the stop's own recomputation).
            try await AgentProcessScenarios.observerCaughtUp(w.observer)
            #expect(song.find(in: w.observer.snapshot).flatMap { w.observer.snapshot.device(of: $0)?.name } == "usb_headset", "left on the default")
            if kind != .pulseaudio {
                _ = try await w.server.waitForWirePlumberMemory("Output/Audio:media.role:Music", timeout: .seconds(10)) { $0.target == nil }
            }
            song.stop()
            let next = try w.play(["media.role": "music"], name: "Speakers Only")
            try await w.observer.wait(for: "the next music stream, no agent running, on the default", timeout: .seconds(10), on(next, "usb_headset"))
        }
    }

    /// Issue 23: a stream the agent moved off the default that ends while the agent runs. Both servers
    /// remember where a role's stream was last moved (PulseAudio's stream-restore, as Debian loads it;
    /// WirePlumber's target) and send the role's next stream there: the agent puts that memory back as
    /// it was. The next stream of the role, of another app and with no agent running, plays on the
    /// default (before: on the speaker, on all three servers).
    static func movedStreamThatEndsLeavesNoMemory(_ kind: ServerKind) async throws {
        let policy = "match:\n  name: [Speakers Only]\ncategory: playback\noutput: [builtInSpeaker]\n"
        let log = LogRecorder()
        let logger = recordingLogger(log)
        try await withAgent(kind, devices: [.speaker, .internalMic], policies: ["speakers-only": policy], logger: logger) { w in
            try await w.plugTheHeadsetAsDefault()
            let song = try w.play(["media.role": "music"], name: "Speakers Only")
            try await w.observer.wait(for: "the music moved to the speaker", timeout: .seconds(20), on(song, "builtin_speaker"))
            // The server remembers the move for the role (on WirePlumber 0.5 the move's own relinking has
            // left none remembered once: not asserted there).
            if kind == .pulseaudio {
                let entry = try await w.observer.readStreamRestore().first { $0.name == "sink-input-by-media-role:music" }
                #expect(entry?.device == "builtin_speaker", "\(String(describing: entry))")
            } else {
                _ = try? await w.server.waitForWirePlumberMemory("Output/Audio:media.role:Music", timeout: .seconds(5)) { $0.target == "builtin_speaker" }
            }
            song.stop()
            try await w.waitForAgent("the music's stream gone") { $0.streams.isEmpty }
            // The memory put back while the agent runs (through streams of its own on PipeWire: seconds
            // under load, more than the stop waits); the agent's own word on it, after each of its batches.
            try await w.waitForAgent("the role's memory put back", timeout: .seconds(30), agent: { _ in
                log.lines.contains { $0.contains("the server's memory is back") && $0.contains("sink-input-by-media-role:music") }
            })
            try await w.stopAgent()
            let next = try w.play(["media.role": "music"], name: "Another Player")
            try await w.observer.wait(for: "the next music stream, no agent running, on the default", timeout: .seconds(10), on(next, "usb_headset"))
        }
    }

    /// Issue 23: preferred outputs per category and per app in the configuration (`outputs.yaml`). Music
    /// (category playback) goes to the speaker by its category's list while the USB headset is the
    /// default; an app named in the file (by its policy file's name) goes where its own list says (the
    /// headset), over its category's.
    static func outputsPerCategoryAndApp(_ kind: ServerKind) async throws {
        let outputs = "categories:\n  playback: [builtInSpeaker]\napps:\n  podcasts: [usbAudio]\n"
        let podcasts = "match:\n  name: [Podcasts]\ncategory: playback\n"
        try await withAgent(kind, devices: [.speaker, .internalMic], policies: ["podcasts": podcasts], outputs: outputs) { w in
            try await w.plugTheHeadsetAsDefault()
            #expect(await w.agent.state.outputRoutes.categories[.playback] == [.type(.builtInSpeaker)])
            let song = try w.play(music, name: "Music Player")
            try await w.observer.wait(for: "the music moved to the speaker by its category", timeout: .seconds(20), on(song, "builtin_speaker"))
            song.stop()
            try await w.waitForAgent("the music's stream gone") { $0.streams.isEmpty }
            let podcast = try w.play(music, name: "Podcasts")
            // (Its own list names where it is already: it stays, and is never moved to the speaker.)
            try await w.waitForAgent("the podcast's route, its app's list", timeout: .seconds(20)) {
                $0.sessions.values.contains { $0.appName == "podcasts" && $0.route.outputs.first?.uid == "usb_headset" }
            }
            // (pipewire-pulse shows a new stream on no device until WirePlumber links it.)
            try await w.observer.wait(for: "the podcast on the headset", timeout: .seconds(20), on(podcast, "usb_headset"))
            try await w.settle()
            #expect(podcast.find(in: w.observer.snapshot).flatMap { w.observer.snapshot.device(of: $0)?.name } == "usb_headset", "left there")
            // policies explain says why, from the same files.
            let song2 = try w.play(music, name: "Music Player")
            try await w.observer.wait(for: "the second song", timeout: .seconds(20)) { s in song2.find(in: s) != nil ? true : nil }
            let explained = try await runCommand([builtExecutable("audiosessionctl"), "policies", "explain", "--server", w.server.address,
                                                  "--policies", w.server.directory + "/agent/policies"]).stdout
            #expect(explained.split(separator: "\n").contains { $0.contains("Podcasts") && $0.contains("outputs.yaml names its app (podcasts): usbAudio first") }, "\(explained)")
            #expect(explained.split(separator: "\n").contains { $0.contains("no policy matched") && $0.contains("outputs.yaml gives its category builtInSpeaker first") }, "\(explained)")
        }
    }

    /// Issue 23: an alarm heard on both outputs. Its policy file says `output: [everywhere]`; the USB
    /// headset (plugged last) is the default: the agent makes a sink of its own for the headset and the
    /// speaker and moves the alarm onto it, and both monitors hear it (the speaker's heard nothing of it
    /// before). The alarm over, the sink lingers; the stop removes it, and the server remembers no move:
    /// the next alarm, no agent running, plays on the default.
    static func alarmOnEveryOutput(_ kind: ServerKind) async throws {
        do {
            try await alarmOnEveryOutputOnce(kind)
        } catch let died as ServerDied {
            // (CI saw pipewire-pulse 0.3.65 end under this test once, under a whole suite's load, while
            // the monitors were recorded: the server's death, said here, earns one more try; a second
            // is a failure.)
            FileHandle.standardError.write(Data("\(kind): the server died under the alarm's test; trying once more. \(died.diagnosis)\n".utf8))
            try await alarmOnEveryOutputOnce(kind)
        }
    }

    /// A server process that the harness started was found dead: not the agent's test to fail.
    struct ServerDied: Error, CustomStringConvertible {
        var diagnosis: String
        var description: String { "a process of the server died: \(diagnosis)" }
    }

    private static func alarmOnEveryOutputOnce(_ kind: ServerKind) async throws {
        let policy = "match:\n  name: [Alarm Clock]\ncategory: ambient\noutput: [everywhere]\n"
        let log = LogRecorder()
        let logger = recordingLogger(log)
        try await withAgent(kind, devices: [.speaker, .internalMic], policies: ["alarm-clock": policy], logger: logger) { w in
            try await w.plugTheHeadsetAsDefault()
            let both = CombinedOutputs.name(["usb_headset", "builtin_speaker"])
            // (Something to hear: the headset's monitor hears the music, the speaker's nothing.)
            let song = try w.play(music, name: "Music Player")
            try await w.observer.wait(for: "the music on the headset", timeout: .seconds(20), on(song, "usb_headset"))
            let before = try await loudest(on: ["builtin_speaker", "usb_headset"], w.server, tries: 2)
            // (PulseAudio's idle speaker, suspended, gives its monitor nothing to record: -1.)
            #expect(before["builtin_speaker"]! <= 0 && before["usb_headset"]! > 1000, "\(before)")
            song.stop()
            try await w.waitForAgent("the music's stream gone") { $0.streams.isEmpty }
            let alarm = try w.play(["media.role": "alarm"], name: "Alarm Clock")
            try await w.observer.wait(for: "the alarm on the sink for both outputs", timeout: .seconds(20), on(alarm, both))
            #expect(await w.agent.state.sessions.values.contains { $0.route.outputs.map(\.uid) == ["usb_headset", "builtin_speaker"] })
            // Heard on both (noise: the loudest sample near full scale; silence is 0).
            let heard = try await loudest(on: ["builtin_speaker", "usb_headset"], w.server)
            // (The server's own view and logs too when it fails: CI saw the server lost here once.)
            let bothHeard = heard.allSatisfy { $0.value > 1000 }
            let diagnosis = bothHeard ? "" : await w.server.diagnosis()
            if diagnosis.contains(": NOT RUNNING") { throw ServerDied(diagnosis: diagnosis) }
            #expect(bothHeard, "each monitor's loudest sample: \(heard)\n\(log.lines.suffix(60).joined(separator: "\n"))\n\(diagnosis)")
            alarm.stop()
            try await w.waitForAgent("the alarm's stream gone") { $0.streams.isEmpty }
            #expect(w.observer.snapshot.sink(named: both) != nil, "the sink lingers")
            try await w.waitForAgent("the role's memory put back", timeout: .seconds(30), agent: { _ in
                log.lines.contains { $0.contains("the server's memory is back") && $0.contains("alarm") }
            })
            try await w.stopAgent()
            try await w.observer.wait(for: "the sink for both gone with the agent", timeout: .seconds(10)) {
                $0.sinks.values.contains { CombinedOutputs.isCombination($0.name) } ? nil : true
            }
            let next = try w.play(["media.role": "alarm"], name: "Alarm Clock")
            try await w.observer.wait(for: "the next alarm, no agent running, on the default", timeout: .seconds(10), on(next, "usb_headset"))
        }
    }

    /// The loudest sample each sink's monitor hears, by one-second recordings with `parec`, until one
    /// hears more than `enough` (five at most; 0: silence, -1: no recording brought anything, as a
    /// monitor's first on PulseAudio may). (A sink of PulseAudio's module-combine-sink plays silence
    /// first, the length of its latency, before its outputs carry what plays on it.)
    static func loudest(on sinks: [String], _ server: PrivateServer, enough: Int = 1000, tries: Int = 5) async throws -> [String: Int] {
        var found: [String: Int] = [:]
        for sink in sinks {
            found[sink] = -1
            for _ in 0..<tries {
                let out = try await runCommand(["sh", "-c", "timeout 1 parec --device=\(sink).monitor --raw --format=s16le --rate=8000 --channels=1"
                    + " --latency-msec=50 | od -An -v -td2 -w2 | awk '{ v = $1 < 0 ? -$1 : $1; if (v > m) m = v } END { print m + 0, NR }'"],
                    environment: ["PULSE_SERVER": server.address])
                let words = out.stdout.split(separator: " ").map { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 }
                guard words.count == 2, words[1] > 0 else { continue }
                found[sink] = max(found[sink] ?? -1, words[0])
                if words[0] > enough { break }
            }
        }
        return found
    }

    /// Issue 23: a USB headset plugged twice. The first time it takes over (a set of devices never seen),
    /// the user picks the speaker in a mixer; unplugged and plugged again, the speaker stays (the pick
    /// comes back with its set); Bluetooth headphones too, a set never seen: they take over.
    static func pickComesBackWithItsDevices(_ kind: ServerKind) async throws {
        try await withAgent(kind, devices: [.speaker, .internalMic]) { w in
            try await pickTheSpeakerRightAfterPluggingTheHeadset(w)
            try await w.server.unplug(.usbHeadset)
            try await w.waitForAgent("the headset gone") { $0.ports["usb_headset"] == nil }
            try await w.server.plug(.usbHeadset)
            try await w.waitForAgent("the headset back, and the pick with it", timeout: .seconds(30)) {
                $0.ports["usb_headset"] != nil && $0.userChoice[.output] == "builtin_speaker"
            }
            // (WirePlumber 0.5 may move its default to the headset by itself as it comes: the agent puts
            // the pick back, which it has taken 10 s and more to follow under a whole suite's load.)
            try await w.observer.wait(for: "the pick back on the server", timeout: .seconds(30)) { $0.defaultSink?.name == "builtin_speaker" ? true : nil }
            try await w.settle()
            #expect(try await w.server.defaultSinkName() == "builtin_speaker", "the pick came back with its devices")
            let entries = try w.routeLogEntries()
            #expect(entries.contains { $0.cause.contains("usbAudio usb_headset appeared; a set of devices never seen before") }, "\(entries.map(\.cause))")
            #expect(entries.contains { $0.cause.contains("a set of devices seen before: the user's choices for it come back (out builtin_speaker)") },
                    "\(entries.map(\.cause))")
            try await w.server.plug(.bluetoothA2DP)
            try await w.observer.wait(for: "the headphones taking over", timeout: .seconds(30)) { $0.defaultSink?.name == "bt_a2dp_headphones" ? true : nil }
            // A set never seen: the usual rules (no choice of the user's; the headphones, last in, the route).
            try await w.waitForAgent("the new set's usual rules", timeout: .seconds(30)) {
                $0.deviceSet?.members.contains("bt_a2dp_headphones") == true && $0.userChoice[.output] == nil
                    && $0.systemRoute.outputs.first?.uid == "bt_a2dp_headphones"
            }
        }
    }

    /// Issue 23: the user's move of a stream that follows the default stands too. The music's policy
    /// prefers the TV, not there yet: it follows the default (the USB headset). The user moves it to the
    /// Bluetooth headphones in a mixer; the monitor is plugged: the music stays where the user put it
    /// (before, the agent moved it to the TV).
    static func userMoveOfAStreamFollowingTheDefaultStands(_ kind: ServerKind) async throws {
        let policy = "match:\n  name: [TV Player]\ncategory: playback\noutput: [hdmi]\n"
        try await withAgent(kind, devices: [.speaker, .internalMic, .bluetoothA2DP], policies: ["tv-player": policy]) { w in
            try await w.plugTheHeadsetAsDefault()
            let song = try w.play(["media.role": "music"], name: "TV Player")
            @Sendable func on(_ device: String) -> @Sendable (Snapshot) -> Bool? {
                { s in song.find(in: s).flatMap { s.device(of: $0)?.name == device ? true : nil } }
            }
            try await w.observer.wait(for: "the music on the default", timeout: .seconds(20), on("usb_headset"))
            try await w.waitForAgent("the music known") { $0.streams.count == 1 }
            let index = try #require(song.find(in: w.observer.snapshot)?.id)
            // (pipewire-pulse ignores some of pactl's moves: the user moves it again, as a user would.)
            for attempt in 1...4 {
                try await w.server.pactl("move-sink-input", "\(index)", "bt_a2dp_headphones")
                do {
                    try await w.observer.wait(for: "the music where the user put it", timeout: .seconds(3), on("bt_a2dp_headphones"))
                    try await w.waitForAgent("the user's move taken", timeout: .seconds(3)) { $0.streams.values.contains { $0.userOwnsDevice } }
                    break
                } catch where attempt < 4 {}
            }
            try await w.server.plug(.hdmi)
            try await w.waitForAgent("the monitor known") { $0.ports.values.contains { $0.type == .hdmi } }
            #expect(await w.agent.state.sessions.values.contains { $0.route.outputs.first?.type == .hdmi }, "its route is the TV")
            try await w.settle()
            #expect(song.find(in: w.observer.snapshot).flatMap { w.observer.snapshot.device(of: $0)?.name } == "bt_a2dp_headphones", "not moved to the TV")
        }
    }

    /// Issue 23: the user's move wins over a policy's `output:`. The music is moved to the speaker by its
    /// policy; the user moves it to the Bluetooth headphones in a mixer: it stays there when the routes
    /// are worked out again (a monitor plugged), and when the agent stops.
    static func userMoveOfAPreferredStreamStands(_ kind: ServerKind) async throws {
        let policy = "match:\n  name: [Speakers Only]\ncategory: playback\noutput: [builtInSpeaker]\n"
        // (A move the user makes half a second after ours is the user's: the test's comes about that soon.)
        var settings = AgentSettings()
        settings.moveSettles = .milliseconds(500)
        try await withAgent(kind, devices: [.speaker, .internalMic, .bluetoothA2DP], policies: ["speakers-only": policy],
                            settings: settings) { w in
            // The USB headset plugged last: the default by the agent's own rule (last in wins).
            try await w.plugTheHeadsetAsDefault()
            let song = try w.play(["media.role": "music"], name: "Speakers Only")
            @Sendable func on(_ device: String) -> @Sendable (Snapshot) -> Bool? {
                { s in song.find(in: s).flatMap { s.device(of: $0)?.name == device ? true : nil } }
            }
            try await w.observer.wait(for: "the music moved to the speaker", timeout: .seconds(20), on("builtin_speaker"))
            let index = try #require(song.find(in: w.observer.snapshot)?.id)
            try await w.settle()
            try await Task.sleep(for: .milliseconds(600))  // (time passing since the agent's last move, not a wait for an event: moveSettles)
            // (pipewire-pulse has ignored one move in six of pactl's here, on both versions, with no event:
            // the user moves it again, as a user would.)
            // (And WirePlumber 0.5 may relink it through other devices on the way, which the agent may take
            // for the server's own: the user moves it again.)
            for attempt in 1...4 {
                try await w.server.pactl("move-sink-input", "\(index)", "bt_a2dp_headphones")
                do {
                    try await w.observer.wait(for: "the music where the user put it", timeout: .seconds(3), on("bt_a2dp_headphones"))
                    try await w.waitForAgent("the user's move taken", timeout: .seconds(3)) { $0.streams.values.contains { $0.userOwnsDevice } }
                    break
                } catch where attempt < 4 {
                    try await Task.sleep(for: .milliseconds(600))  // (past moveSettles of the agent's move back)
                }
            }
            try await w.server.plug(.hdmi)
            try await w.waitForAgent("the monitor known") { $0.ports.values.contains { $0.type == .hdmi } }
            try await w.settle()
            #expect(song.find(in: w.observer.snapshot).flatMap { w.observer.snapshot.device(of: $0)?.name } == "bt_a2dp_headphones", "not moved back")
            try await w.stopAgent()
            #expect(song.find(in: w.observer.snapshot).flatMap { w.observer.snapshot.device(of: $0)?.name } == "bt_a2dp_headphones", "the user's, after the stop")
        }
    }

    /// A bad policy file is rejected with file:line:column; the agent runs on with the last good set.
    static func badPolicyFilesAreRejected(_ kind: ServerKind) async throws {
        try await withAgent(kind, policies: ["recorder": recorderPolicy]) { w in
            #expect(await w.agent.policies.contains { $0.name == "recorder" })
            try "match:\n  app-id: [org.example.Recorder]\ncategory: recrod\n"
                .write(toFile: "\(w.policyDirectory)/recorder.yaml", atomically: true, encoding: .utf8)
            w.agent.send(.reload)
            try await w.waitForAgent("the reload", agent: { !(await $0.policyErrors.isEmpty) })
            let errors = await w.agent.policyErrors
            #expect(errors.contains { $0.description.hasSuffix("recorder.yaml:3:11: unknown category 'recrod' (accepted: ambient, soloAmbient, playback, record, playAndRecord, multiRoute, audioProcessing)") }, "\(errors)")
            #expect(await w.agent.policies.contains { $0.name == "recorder" && $0.configuration.category == .record },
                    "the last good version stays in force")
            // And it still works.
            let song = try w.play(music)
            _ = try await w.running(song)
            let recording = try w.play(["application.id": "org.example.Recorder"], direction: .input, name: "Recorder")
            try await w.waitMuted(song, true)
            withExtendedLifetime(recording) {}
        }
    }

    /// Stopping the agent undoes everything it holds, though the call still plays.
    static func stopUndoesEverything(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let (song, call) = try await w.musicMutedByCall()
            try await w.stopAgent()
            try await w.waitMuted(song, false, "stopping undid the mute")
            #expect(call.find(in: w.observer.snapshot) != nil, "the call still plays")
            #expect(try String(contentsOfFile: "\(w.stateDirectory)/held.log", encoding: .utf8) == "", "the journal is empty")
        }
    }

    /// The server restarts under the agent: it reconnects and enforces again by itself.
    /// The server restarts while the agent holds the music muted for a call: what the server remembers
    /// for music must not keep our mute (SPEC.md 5.12), so the next music stream plays.
    static func restartDuringHoldLeavesNoTrace(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            let (song, call) = try await w.musicMutedByCall()
            try await w.server.restart()
            _ = try await w.observer.wait(for: "the observer back") { s in s.sink(named: "builtin_speaker") }
            try await w.waitForAgent("the agent back") { $0.mediaServicesAvailable && $0.ports["builtin_speaker"] != nil }
            let fresh = try w.play(music, name: "Fresh")
            let index = try await w.running(fresh).id
            try await w.waitForAgent("the fresh player known") { $0.streams[StreamKey(.output, index)] != nil }
            try await w.settle()
            try await w.waitMuted(fresh, false, "the fresh player after the restart")
            let inputs = try await w.appSinkInputs()
            #expect(!inputs.contains("Mute: yes"), "the server says:\n\(inputs)")
            withExtendedLifetime((song, call)) {}
        }
    }

    static func serverRestartIsReapplied(_ kind: ServerKind) async throws {
        try await withAgent(kind) { w in
            try await w.server.restart()
            _ = try await w.observer.wait(for: "the observer back") { s in s.sink(named: "builtin_speaker") }
            try await w.waitForAgent("the agent back") { $0.mediaServicesAvailable && $0.ports["builtin_speaker"] != nil }
            let (_, call) = try await w.musicMutedByCall()
            withExtendedLifetime(call) {}
        }
    }
}

extension AgentScenarios {
    /// Issue 20 case 7b, with imitations: an app's stream both interrupted (a spoken-audio app, by a
    /// screen reader's voice) and ducked (by the same voice) goes away; the server's memory of the app
    /// must go back, with the agent running and after it stops: its next stream plays unmuted at 100 %.
    /// On both PipeWire versions it stayed remembered muted and ducked: the agent's probes, which write
    /// the memory through streams of its own, carried the agent's client's application.id (pipewire-pulse
    /// gives a client's properties to its streams), and WirePlumber, which keys by application.id before
    /// the name, remembered them under the agent's id, never under the app's name.
    static func interruptedAndDuckedLeavesNoMemory(_ kind: ServerKind) async throws {
        let talk = "match:\n  name: [Talk]\ncategory: playback\nmode: spokenAudio\n"
        try await withAgent(kind, policies: ["talk": talk]) { w in
            let show = try w.play([:], name: "Talk")
            _ = try await w.running(show)
            try await w.settle()
            let voice = try w.play([:], name: "speech-dispatcher-espeak-ng")
            try await w.waitMuted(show, true, "the talk show interrupted by the voice")
            try await w.settle()
            show.stop()
            try await w.observer.wait(for: "the talk show gone") { s in show.find(in: s) == nil ? true : nil }
            try await w.settle()
            voice.stop()
            try await w.settle()
            // What the server remembers is the app's own once the agent has put it back (checked with
            // the agent stopped, which would otherwise correct a stream given our trace, and so write
            // the memory right through the app's own stream).
            try await w.stopAgent()
            let last = try w.play([:], name: "Talk")
            // (Running: given what the server remembers, which it does before the stream is linked.)
            let after = try await w.running(last)
            #expect(!after.isMuted && after.volume.values.allSatisfy { abs($0.fraction - 1) < 0.01 }, "after the agent: \(after.isMuted) \(after.volume)")
        }
    }
}

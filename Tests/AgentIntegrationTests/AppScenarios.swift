import DBus
import Foundation
import Logging
import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing

/// Apps that declare their own session over D-Bus: the project's Python example
/// (examples/audiosession-play.py, python3-dbus) as the apps, on a private session bus, against the
/// agent on each real server.
enum AppScenarios {
    /// An agent serving `org.audiosession.Agent1` on a private session bus, and that bus.
    static func withApps(_ kind: ServerKind, policies: [String: String] = [:], settings: AgentSettings = AgentSettings(), logger: Logger? = nil,
                         _ body: (AgentWorld, PrivateSessionBus) async throws -> Void) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        try await withAgent(kind, devices: [.speaker, .internalMic], policies: policies, sessionBus: bus.address, settings: settings, logger: logger) { w in
            try await bus.waitForOwner(of: "org.audiosession.Agent1")
            try await body(w, bus)
        }
    }

    /// The example's stream (its pacat child names it), running.
    @Sendable static func appStream(_ s: Snapshot) -> AudioStream? {
        s.sinkInputs.values.first { $0.properties["media.name"] == "audiosession-play" && !$0.isCorked }
    }

    /// A declared call silences a declared player at its activation, before the call has any stream:
    /// the player is told `began` (and pauses), its stream muted meanwhile; the call's deactivation
    /// with notifyOthersOnDeactivation tells it `ended` with shouldResume, and it plays again.
    static func declaredCallInterruptsADeclaredPlayer(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let player = try SessionApp(["--category", "playback"], server: w.server, bus: bus)
            try await player.wait(for: "playing")
            let stream = try await w.observer.wait(for: "the player's stream running", appStream)
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await call.wait(for: "active")
            try await player.wait(for: "interruption began default")
            _ = try await w.observer.wait(for: "nothing of the player heard during the call") { s in
                s.sinkInputs[stream.id].map { $0.isMuted ? true : nil } ?? true
            }
            #expect(!w.observer.snapshot.sinkInputs.values.contains { $0.properties["media.name"] == "audiosession-play" && !$0.isMuted },
                    "no stream of the player plays during the call")
            let before = player.count
            call.send("deactivate")
            try await call.wait(for: "inactive")
            try await player.wait(for: "interruption ended shouldResume", after: before)
            try await player.wait(for: "playing", after: before)
            _ = try await w.observer.wait(for: "the player heard again", appStream)
            await call.stop()
            await player.stop()
        }
    }

    /// A call's end without notifyOthersOnDeactivation tells the player `ended` without shouldResume:
    /// it stays paused (the user decides).
    static func quietEndDoesNotResume(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let player = try SessionApp(["--category", "playback"], server: w.server, bus: bus)
            try await player.wait(for: "playing")
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await player.wait(for: "paused")
            let before = player.count
            call.send("deactivate-quietly")
            try await call.wait(for: "inactive")
            let ended = try await player.wait(for: "interruption ended", after: before)
            #expect(ended == "interruption ended", "no shouldResume without notifyOthersOnDeactivation")
            await call.stop()
            #expect(!player.said.dropFirst(before).contains("playing"), "\(player.said)")
            await player.stop()
        }
    }

    /// A policy file that says `declare: deny`: its app gets no session of its own (the file speaks for
    /// it), and is told why.
    static func policyFileDeniesDeclaring(_ kind: ServerKind) async throws {
        let program = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().lastPathComponent
        let deny = "match:\n  binary: [\(program)]\ncategory: playback\ndeclare: deny\n"
        try await withApps(kind, policies: ["python": deny]) { w, bus in
            let app = try SessionApp(["--category", "playback", "--silent"], server: w.server, bus: bus)
            let refused = try await app.wait(for: "error")
            #expect(refused.hasPrefix("error org.freedesktop.DBus.Error.AccessDenied "), "\(refused)")
            #expect(refused.contains("does not let 'python3' declare its own session"), "\(refused)")
            await app.stop()
        }
    }

    /// A mixable session (a game's ambient sound) is told when another app's non-mixable audio begins
    /// and ends (SilenceSecondaryAudioHint begin/end, SPEC.md 5.9), and the hint is in its properties.
    static func silenceHintReachesAMixableSession(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let game = try SessionApp(["--category", "ambient", "--silent"], server: w.server, bus: bus)
            try await game.wait(for: "active")
            let music = try SessionApp(["--category", "playback"], server: w.server, bus: bus)
            try await music.wait(for: "playing")
            try await game.wait(for: "silence-hint begin")
            let before = game.count
            music.send("deactivate")
            try await game.wait(for: "silence-hint end", after: before)
            await music.stop()
            await game.stop()
        }
    }

    /// A policy file that says `declare: no-calls` keeps its app from declaring a call.
    static func policyFileLimitsDeclaring(_ kind: ServerKind) async throws {
        // (Matched by the program's file name, /proc/PID/exe: python3's link resolved, python3.11 on
        // Debian 12, another elsewhere.)
        let program = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().lastPathComponent
        let noCalls = "match:\n  binary: [\(program)]\ncategory: playback\ndeclare: no-calls\n"
        try await withApps(kind, policies: ["python": noCalls]) { w, bus in
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            let refused = try await call.wait(for: "error")
            #expect(refused.hasPrefix("error org.audiosession.Error.IncompatibleCategory "), "\(refused)")
            #expect(refused.hasSuffix("does not let 'python3' declare a call"), "\(refused)")
            await call.stop()
        }
    }

    /// Music during a call is refused with insufficientPriority; a mode its category refuses with
    /// incompatibleCategory (D-Bus errors named after SPEC.md's codes).
    static func refusalsAreNamedErrors(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await call.wait(for: "active")
            let music = try SessionApp(["--category", "playback"], server: w.server, bus: bus)
            let refused = try await music.wait(for: "error")
            #expect(refused.hasPrefix("error org.audiosession.Error.InsufficientPriority "), "\(refused)")
            let wrong = try SessionApp(["--category", "playback", "--mode", "voiceChat"], server: w.server, bus: bus)
            let incompatible = try await wrong.wait(for: "error")
            #expect(incompatible.hasPrefix("error org.audiosession.Error.IncompatibleCategory "), "\(incompatible)")
            await wrong.stop()
            await music.stop()
            await call.stop()
        }
    }

    /// A call whose app is killed (kill -9) ends with it: the player it interrupted is told it may
    /// resume, and plays again.
    static func killedCallEndsItsSession(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let player = try SessionApp(["--category", "playback"], server: w.server, bus: bus)
            try await player.wait(for: "playing")
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await player.wait(for: "interruption began")
            let before = player.count
            await call.stop(hard: true)
            try await player.wait(for: "interruption ended shouldResume", after: before)
            try await player.wait(for: "playing", after: before)
            _ = try await w.observer.wait(for: "the player heard again", appStream)
            await player.stop()
        }
    }

    /// Silent mode (`audiosessionctl silent on`: the agent's `SilentMode` on the session bus) silences
    /// an ambient app's sound, not a player's; off, it is heard again.
    static func silentModeSilencesAmbient(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let game = try SessionApp(["--category", "ambient"], server: w.server, bus: bus)
            try await game.wait(for: "playing")
            let stream = try await w.observer.wait(for: "the game's stream running", appStream)
            let user = try bus.connect()
            defer { user.close() }
            let agent = "org.audiosession.Agent1"
            // (Through the CLI, as a user would.)
            func silent(_ on: Bool) async throws {
                let said = try await runCommand([builtExecutable("audiosessionctl"), "silent", on ? "on" : "off", "--bus", bus.address])
                #expect(said.stdout == (on ? "silent mode: on (ambient sounds silenced)\n" : "silent mode: off\n"))
            }
            try await silent(true)
            _ = try await w.observer.wait(for: "the ambient app muted in silent mode") { s in s.sinkInputs[stream.id]?.isMuted == true ? true : nil }
            let read = try await user.call(agent, "/org/audiosession/Agent1", "org.freedesktop.DBus.Properties", "Get",
                                           [.string(agent), .string("SilentMode")]).first?.bool
            #expect(read == true)
            try await silent(false)
            _ = try await w.observer.wait(for: "the ambient app heard after silent mode") { s in s.sinkInputs[stream.id]?.isMuted == false ? true : nil }
            await game.stop()
        }
    }

    /// The microphone muted for every app (`audiosessionctl mic mute`: the agent's `InputMuted`): a
    /// declared call that records is told (`InputMuteChanged`) and its capture muted, a capture stream
    /// started later by an app that never declared anything is muted too, and unmuting gives both back.
    /// A declared app's own input mute (`SetInputMuted`) mutes its capture only (issue 24).
    static func inputMuteReachesEveryApp(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent", "--record"], server: w.server, bus: bus)
            try await call.wait(for: "recording")
            @Sendable func callCapture(_ s: Snapshot) -> AudioStream? {
                s.sourceOutputs.values.first { $0.properties["media.name"] == "audiosession-record" }
            }
            let voice = try await w.observer.wait(for: "the call's capture stream", callCapture)
            #expect(!voice.isMuted)
            func mic(_ action: String, _ expected: String) async throws {
                let said = try await runCommand([builtExecutable("audiosessionctl"), "mic", action, "--bus", bus.address])
                #expect(said.stdout == "microphone: \(expected)\n", "\(said.stdout)\(said.stderr)")
            }
            try await mic("mute", "muted for every app")
            try await call.wait(for: "input-muted yes")
            _ = try await w.observer.wait(for: "the call's capture muted") { s in s.sourceOutputs[voice.id]?.isMuted == true ? true : nil }
            let dictation = try ClientStream.start(on: w.server, direction: .input, applicationName: "Dictation")
            defer { dictation.stop() }
            _ = try await w.observer.wait(for: "a capture started while muted, muted") { s in dictation.find(in: s)?.isMuted == true ? true : nil }
            let before = call.count
            try await mic("toggle", "not muted by the agent")
            try await call.wait(for: "input-muted no", after: before)
            _ = try await w.observer.wait(for: "both captures unmuted") { s in
                s.sourceOutputs[voice.id]?.isMuted == false && dictation.find(in: s)?.isMuted == false ? true : nil
            }
            // Its own input: its capture only.
            let own = call.count
            call.send("mute-input")
            try await call.wait(for: "input-muted yes", after: own)
            _ = try await w.observer.wait(for: "the call's own input muted") { s in s.sourceOutputs[voice.id]?.isMuted == true ? true : nil }
            #expect(dictation.find(in: w.observer.snapshot)?.isMuted == false, "another app's capture is not the call's")
            let back = call.count
            call.send("unmute-input")
            try await call.wait(for: "input-muted no", after: back)
            _ = try await w.observer.wait(for: "the call's own input back") { s in s.sourceOutputs[voice.id]?.isMuted == false ? true : nil }
            await call.stop()
        }
    }

    /// `audiosessionctl mic mute APP`: the user mutes one app's microphone by its program's name: its
    /// capture is muted, one it starts later too, another app's is not; a declared call muted by its
    /// name is told; `mic` lists it; unmuted, everything is given back (issue 24).
    static func oneAppsMicrophoneMuted(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent", "--record"], server: w.server, bus: bus)
            try await call.wait(for: "recording")
            let voice = try await w.observer.wait(for: "the call's capture stream") { s in
                s.sourceOutputs.values.first { $0.properties["media.name"] == "audiosession-record" }
            }
            let dictation = try ClientStream.start(on: w.server, direction: .input, applicationName: "Dictation")
            defer { dictation.stop() }
            _ = try await w.observer.wait(for: "the dictation's capture") { s in dictation.find(in: s) }
            func mic(_ arguments: [String]) async throws -> String {
                let said = try await runCommand([builtExecutable("audiosessionctl"), "mic"] + arguments + ["--bus", bus.address])
                return said.stdout
            }
            // pacat is the dictation's program.
            #expect(try await mic(["mute", "pacat"]) == "microphone of pacat: muted\n")
            _ = try await w.observer.wait(for: "the dictation's capture muted") { s in dictation.find(in: s)?.isMuted == true ? true : nil }
            #expect(w.observer.snapshot.sourceOutputs[voice.id]?.isMuted == false, "another app's capture")
            let later = try ClientStream.start(on: w.server, direction: .input, applicationName: "Dictation again")
            defer { later.stop() }
            _ = try await w.observer.wait(for: "a capture it starts later, muted") { s in later.find(in: s)?.isMuted == true ? true : nil }
            #expect(try await mic([]) == "microphone: not muted by the agent\nmicrophone of pacat: muted\n")
            // The declared call, by its program's name (python3): told, and its capture muted.
            let before = call.count
            _ = try await mic(["toggle", "python3"])
            try await call.wait(for: "input-muted yes", after: before)
            _ = try await w.observer.wait(for: "the call's capture muted") { s in s.sourceOutputs[voice.id]?.isMuted == true ? true : nil }
            let status = try await runCommand([builtExecutable("audiosessionctl"), "status", "--server", w.server.address, "--bus", bus.address]).stdout
            #expect(status.contains("microphone of pacat: muted") && status.contains("microphone of python3: muted"), "\(status)")
            let unmuting = call.count
            _ = try await mic(["unmute", "python3"])
            _ = try await mic(["unmute", "pacat"])
            try await call.wait(for: "input-muted no", after: unmuting)
            _ = try await w.observer.wait(for: "every capture given back") { s in
                s.sourceOutputs[voice.id]?.isMuted == false && dictation.find(in: s)?.isMuted == false && later.find(in: s)?.isMuted == false ? true : nil
            }
            // A name that is none: refused before the agent is asked.
            let bad = try await runCommand([builtExecutable("audiosessionctl"), "mic", "mute", "two words", "--bus", bus.address], check: false)
            #expect(bad.status != 0 && bad.stderr.contains("is not an app name"), "\(bad.stderr)")
            await call.stop()
        }
    }

    /// A muted call is told when someone speaks into its microphone (`MutedSpeechActivity`), and not
    /// while the microphone only hears silence: the agent meters the source the call's capture records
    /// from while it is muted, and stops once it is not (issue 24).
    static func aMutedCallIsToldOfSpeech(_ kind: ServerKind) async throws {
        let log = LogRecorder()
        try await withApps(kind, logger: log.logger) { w, bus in
            let voice = try MicrophoneVoice("builtin_mic", on: w.server)
            defer { voice.close() }
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent", "--record"], server: w.server, bus: bus)
            try await call.wait(for: "recording")
            let capture = try await w.observer.wait(for: "the call's capture on the microphone") { s in
                s.sourceOutputs.values.first { $0.properties["media.name"] == "audiosession-record" && $0.device != nil }
            }
            #expect(w.observer.snapshot.sources[capture.device!]?.name == "builtin_mic")
            @Sendable func meter(_ s: Snapshot) -> AudioStream? {
                s.sourceOutputs.values.first { $0.properties["media.name"] == "audiosessiond meter of source output #\(capture.id)" && $0.device != nil }
            }
            #expect(meter(w.observer.snapshot) == nil, "not muted: the microphone is not metered")
            call.send("mute-input")
            try await call.wait(for: "input-muted yes")
            let metering = try await w.observer.wait(for: "the agent's meter on the call's microphone", meter)
            #expect(w.observer.snapshot.sources[metering.device!]?.name == "builtin_mic")
            // Quiet: the meter's word reached the agent (silent), and nothing was said to the call.
            try await w.waitForAgent("the meter's word on the quiet microphone", agent: { _ in
                log.events.withLock { $0.contains { $0.message == "silent" && $0.metadata["stream"]?.description == "in#\(capture.id)" } }
            })
            #expect(!call.said.contains { $0.hasPrefix("muted-speech") }, "\(call.said)")
            let before = call.count
            try await voice.speak()
            try await call.wait(for: "muted-speech started", after: before)
            let spoke = call.count
            await voice.quiet()
            try await call.wait(for: "muted-speech ended", after: spoke)
            #expect(call.said.filter { $0 == "muted-speech started" }.count == 1, "said once: \(call.said)")
            // Unmuted: the meter goes, and speech is nobody's business.
            call.send("unmute-input")
            try await call.wait(for: "input-muted no", after: spoke)
            _ = try await w.observer.wait(for: "the agent's meter gone") { s in meter(s) == nil ? true : nil }
            let unmuted = call.count
            try await voice.speak()
            try await Task.sleep(for: .seconds(1))
            #expect(!call.said.dropFirst(unmuted).contains { $0.hasPrefix("muted-speech") }, "\(call.said)")
            await voice.quiet()
            await call.stop()
        }
    }

    /// A declared player that is now playing is told the media keys (`RemoteCommand` on its session
    /// object): `audiosessionctl play-pause` pauses it, and plays it again (issue 24).
    static func aDeclaredPlayerIsToldTheMediaKeys(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let player = try SessionApp(["--category", "playback", "--title", "Episode 3"], server: w.server, bus: bus)
            try await player.wait(for: "playing")
            _ = try await w.observer.wait(for: "the player's stream running", appStream)
            try await w.waitForAgent("the declared player now playing") { $0.nowPlaying?.rawValue.hasSuffix(":declared") == true }
            // What it says it plays, on the agent's MPRIS player (SetNowPlayingInfo came before its activation).
            let user = try bus.connect()
            defer { user.close() }
            let metadata = try await user.call("org.mpris.MediaPlayer2.audiosession", "/org/mpris/MediaPlayer2", "org.freedesktop.DBus.Properties", "Get",
                                               [.string("org.mpris.MediaPlayer2.Player"), .string("Metadata")]).first
            #expect(metadata?.stringDictionary?["xesam:title"]?.string == "Episode 3", "\(String(describing: metadata))")
            func key(_ word: String) async throws -> String {
                try await runCommand([builtExecutable("audiosessionctl"), word, "--bus", bus.address]).stdout
            }
            let before = player.count
            let sent = try await key("play-pause")
            #expect(sent.contains("told RemoteCommand on /org/audiosession/Session"), "\(sent)")
            try await player.wait(for: "remote-command play-pause", after: before)
            try await player.wait(for: "paused", after: before)
            let again = player.count
            _ = try await key("play-pause")
            try await player.wait(for: "playing", after: again)
            _ = try await w.observer.wait(for: "its stream running again", appStream)
            await player.stop()
        }
    }

    /// The sound server restarts: a declared session is told its media services were lost, then reset.
    static func mediaServicesLostAndReset(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let player = try SessionApp(["--category", "playback"], server: w.server, bus: bus)
            try await player.wait(for: "playing")
            try await w.server.restart()
            let lost = try await player.wait(for: "media-services-lost")
            let at = player.said.firstIndex(of: lost) ?? 0
            try await player.wait(for: "media-services-reset", after: at)
            await player.stop()
        }
    }

    /// Route changes reach a declared session with their reasons and the route before: a USB headset
    /// plugged in (newDeviceAvailable, from the speaker), then gone (oldDeviceUnavailable, from it).
    static func routeChangesReachADeclaredSession(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let player = try SessionApp(["--category", "playback"], server: w.server, bus: bus)
            try await player.wait(for: "playing")
            try await w.server.plug(.usbHeadset)
            try await player.wait(for: "route-change newDeviceAvailable from builtin_speaker")
            let before = player.count
            try await w.server.unplug(.usbHeadset)
            try await player.wait(for: "route-change oldDeviceUnavailable from usb_headset", after: before)
            await player.stop()
        }
    }

    /// A flood of calls from one app that does not wait for the answers: each is answered (the ones
    /// beyond what may wait at once refused with LimitsExceeded), and the agent answers the next call
    /// and goes on enforcing.
    static func floodOfCalls(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let flood = try bus.connect()
            defer { flood.close() }
            let agent = "org.audiosession.Agent1"
            let mine = try #require(try await flood.call(agent, "/org/audiosession/Agent1", agent, "GetSession").first?.string)
            let answers = await withTaskGroup(of: String.self) { group in
                for _ in 0..<400 {
                    group.addTask {
                        do {
                            _ = try await flood.call(agent, mine, "org.freedesktop.DBus.Properties", "Get",
                                                     [.string("org.audiosession.Session1"), .string("IsActive")])
                            return "ok"
                        } catch DBusError.remote(let name, _) {
                            return name
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                var all: [String] = []
                for await answer in group { all.append(answer) }
                return all
            }
            #expect(answers.count == 400)
            #expect(Set(answers).isSubset(of: ["ok", "org.freedesktop.DBus.Error.LimitsExceeded"]), "\(Set(answers))")
            #expect(answers.contains("ok"))
            // Still answering, and still enforcing.
            let category = try await flood.call(agent, mine, "org.freedesktop.DBus.Properties", "Get",
                                                [.string("org.audiosession.Session1"), .string("Category")]).first?.string
            #expect(category == "soloAmbient")
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await call.wait(for: "active")
            await call.stop()
        }
    }

    /// The record permission as the user decided it (`audiosessionctl permission APP deny`): the app that
    /// asks is told false, `RecordPermission` says "denied", and what it records is silence; reset, it is
    /// undetermined and allowed again.
    static func recordPermissionAsTheUserDecided(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let app = try bus.connect()
            defer { app.close() }
            let agent = "org.audiosession.Agent1", session = "org.audiosession.Session1"
            let path = try #require(try await app.call(agent, "/org/audiosession/Agent1", agent, "GetSession").first?.string)
            _ = try await app.call(agent, path, session, "SetCategory", [.string("record"), .string("default"), .array(elementSignature: "s", [])])
            _ = try await app.call(agent, path, session, "SetActive", [.bool(true), .array(elementSignature: "s", [])])
            // This test process is the app: its program's file name is what the store knows it by.
            let me = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")).lastPathComponent
            let ctl = builtExecutable("audiosessionctl")
            try await runCommand([ctl, "permission", me, "deny", "--state-dir", w.stateDirectory])
            let recorder = try w.play(["media.role": "production"], direction: .input, name: "Recorder")
            _ = try await w.running(recorder)
            #expect(try await app.call(agent, path, session, "RequestRecordPermission").first?.bool == false)
            let said = try await app.call(agent, path, "org.freedesktop.DBus.Properties", "Get", [.string(session), .string("RecordPermission")]).first?.string
            #expect(said == "denied")
            try await w.waitMuted(recorder, true, "the denied app's capture")
            try await runCommand([ctl, "permission", me, "reset", "--state-dir", w.stateDirectory])
            #expect(try await app.call(agent, path, session, "RequestRecordPermission").first?.bool == true)
            try await w.waitMuted(recorder, false, "the capture once the decision is reset")
            recorder.stop()
        }
    }

    /// A sandboxed app (Flatpak) is told what the desktop portal's permission store says about it
    /// (table `devices`, id `microphone`), which wins over the agent's own store; the user changes it
    /// there, the app asks again and is told the new answer. Its capture (the stream says its app id)
    /// is muted while it is denied.
    static func sandboxedAppIsToldThePortalsDecision(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let appID = "org.example.Recorder"
            let store = try await PrivatePermissionStore.start(on: bus, entries: ["devices/microphone/\(appID)=no"])
            defer { store.stop() }
            // The agent's own store says yes: for a sandboxed app the portal's word wins.
            try await runCommand([builtExecutable("audiosessionctl"), "permission", appID, "allow", "--state-dir", w.stateDirectory])
            let app = try SessionApp(sandboxedAs: appID, ["--category", "record", "--silent"], server: w.server, bus: bus)
            try await app.wait(for: "active")
            let recorder = try w.play(["media.role": "production", "application.flatpak.id": appID], direction: .input, name: "Recorder")
            _ = try await w.running(recorder)
            app.send("ask-record-permission")
            #expect(try await app.wait(for: "record-permission ") == "record-permission no denied")
            try await w.waitMuted(recorder, true, "the capture of the app the portal denies")
            // The user allows it in the desktop's settings (which write the portal's store):
            let settings = try bus.connect()
            defer { settings.close() }
            let portal = "org.freedesktop.impl.portal.PermissionStore"
            _ = try await settings.call(portal, "/org/freedesktop/impl/portal/PermissionStore", portal, "SetPermission",
                                        [.string("devices"), .bool(true), .string("microphone"), .string(appID), .array(elementSignature: "s", [.string("yes")])])
            let asked = app.count
            app.send("ask-record-permission")
            #expect(try await app.wait(for: "record-permission ", after: asked) == "record-permission yes granted")
            try await w.waitMuted(recorder, false, "the capture once the portal allows it")
            recorder.stop()
            await app.stop()
        }
    }

    /// Issue 20, case 6: a sandboxed caller that connects, forks and lets its parent exit: the bus
    /// daemon still names the parent, whose root (and /.flatpak-info) can no longer be read. It was taken
    /// for an unsandboxed app, and could set the silent mode and read Status(). Now its calls are
    /// refused (the check fails closed); an unsandboxed caller's calls keep being answered.
    static func aSandboxedCallerWhoseParentLeftIsRefused(_ kind: ServerKind) async throws {
        // Connects, says its unique name, forks; the parent exits at once, the child waits for "go" (the
        // test's, once it has reaped the parent) and then asks.
        let script = """
            import dbus, os, sys
            bus = dbus.SessionBus()
            print("connected", bus.get_unique_name(), flush=True)
            if os.fork() > 0:
                os._exit(0)
            sys.stdin.readline()
            agent = bus.get_object("org.audiosession.Agent1", "/org/audiosession/Agent1", introspect=False)
            try:
                agent.Set("org.audiosession.Agent1", "SilentMode", dbus.Boolean(True, variant_level=1), dbus_interface="org.freedesktop.DBus.Properties")
                print("silent-mode set", flush=True)
            except dbus.DBusException as e:
                print("silent-mode refused", e.get_dbus_name(), e.get_dbus_message(), flush=True)
            try:
                agent.Status(dbus_interface="org.audiosession.Agent1")
                print("status answered", flush=True)
            except dbus.DBusException as e:
                print("status refused", e.get_dbus_name(), flush=True)
            """
        try await withApps(kind) { w, bus in
            let sandboxed = repositoryRoot.appendingPathComponent("scripts/sandboxed").path
            let app = try SessionApp(command: [sandboxed, "org.example.Forker", "/usr/bin/python3", "-c", script], server: w.server, bus: bus)
            try await app.wait(for: "connected")
            // The parent (the process the bus daemon knows) has exited: reaped, its id is free.
            _ = await app.process.wait()
            app.send("go")
            let silent = try await app.wait(for: "silent-mode ")
            #expect(silent.hasPrefix("silent-mode refused org.freedesktop.DBus.Error.AccessDenied"), "\(silent)")
            #expect(silent.contains("cannot be looked into"), "\(silent)")
            #expect(try await app.wait(for: "status ") == "status refused org.freedesktop.DBus.Error.AccessDenied")
            try await w.waitForAgent("the silent mode still off", agent: { await !$0.state.silentMode })
            // An unsandboxed app, its process alive, is answered as before.
            let ctl = try await runCommand([builtExecutable("audiosessionctl"), "status", "--server", w.server.address, "--bus", bus.address], check: false)
            #expect(ctl.status == 0, "\(ctl.stdout)\(ctl.stderr)")
        }
    }

    /// A desktop portal that does not answer holds up only the sandboxed app whose record permission
    /// was asked of it: another app's calls are answered meanwhile. When the portal goes away, the
    /// agent's own store decides and the sandboxed app gets its session.
    static func stuckPortalHoldsUpNoOtherApp(_ kind: ServerKind) async throws {
        var settings = AgentSettings()
        settings.portalAnswer = .seconds(60)
        try await withApps(kind, settings: settings) { w, bus in
            let store = try await PrivatePermissionStore.start(on: bus, entries: [], hang: true)
            defer { store.stop() }
            let watcher = try bus.connect()
            defer { watcher.close() }
            let held = watcher.signals(matching: "type='signal',interface='org.audiosession.FakePermissionStore1',member='Held'")
            _ = try await watcher.callDaemon("GetId")
            let sandboxed = try SessionApp(sandboxedAs: "org.example.Recorder", ["--category", "record", "--silent"], server: w.server, bus: bus)
            try await firstSignal(held, within: .seconds(10), "the agent to ask the stuck portal (the sandboxed app said: \(sandboxed.said))")
            // Another app, while the portal holds the agent's question about the first:
            let other = try bus.connect()
            defer { other.close() }
            let agent = "org.audiosession.Agent1"
            let path = try await other.call(agent, "/org/audiosession/Agent1", agent, "GetSession").first?.string
            #expect(path?.hasPrefix("/org/audiosession/Session") == true, "\(path ?? "no path")")
            #expect(!sandboxed.said.contains { $0.hasPrefix("session") }, "the sandboxed app still waits: \(sandboxed.said)")
            store.stop()
            try await sandboxed.wait(for: "active")
            await sandboxed.stop()
        }
    }

    /// `audiosessionctl status` says why the music is silent: interrupted by the declared call, since
    /// when, and what the agent holds on it; and the route.
    static func statusExplainsTheSilence(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let song = try w.play(["media.role": "music"], name: "Music")
            _ = try await w.running(song)
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await call.wait(for: "active")
            try await w.waitMuted(song, true, "the music during the declared call")
            let ctl = builtExecutable("audiosessionctl")
            let said = try await runCommand([ctl, "status", "--server", w.server.address, "--bus", bus.address], check: false).stdout
            #expect(said.contains("role=music: interrupted by python3["), "\(said)")
            #expect(said.contains(":declared since "), "\(said)")
            #expect(said.contains("holds: out#"), "\(said)")
            #expect(said.contains(" muted: interrupted by python3["), "\(said)")
            #expect(said.contains(", a call)"), "\(said)")
            #expect(said.contains("route: out builtInSpeaker builtin_speaker"), "\(said)")
            let json = try await runCommand([ctl, "status", "--json", "--server", w.server.address, "--bus", bus.address], check: false).stdout
            #expect(json.contains("\"sessions\""), "\(json)")
            await call.stop()
            song.stop()
        }
    }

    /// Another app cannot change or read a session that is not its own; malformed calls are D-Bus
    /// errors that say what was wrong, and the agent answers the next call as before.
    static func anothersSessionAndMalformedCalls(_ kind: ServerKind) async throws {
        try await withApps(kind) { w, bus in
            let player = try SessionApp(["--category", "playback"], server: w.server, bus: bus)
            let path = try await player.wait(for: "session ").dropFirst("session ".count)
            let stranger = try bus.connect()
            defer { stranger.close() }
            func error(_ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue]) async -> (String, String)? {
                do {
                    _ = try await stranger.call("org.audiosession.Agent1", path, interface, member, arguments)
                    return nil
                } catch DBusError.remote(let name, let message) {
                    return (name, message)
                } catch {
                    return ("\(error)", "")
                }
            }
            let session = "org.audiosession.Session1"
            let denied = await error(String(path), session, "SetActive", [.bool(false), .array(elementSignature: "s", [])])
            #expect(denied?.0 == "org.freedesktop.DBus.Error.AccessDenied", "\(String(describing: denied))")
            #expect(denied?.1 == "\(path) is another app's session")
            let read = await error(String(path), "org.freedesktop.DBus.Properties", "GetAll", [.string(session)])
            #expect(read?.0 == "org.freedesktop.DBus.Error.AccessDenied")
            let malformed = await error(String(path), session, "SetCategory", [.int32(7)])
            #expect(malformed?.0 == "org.freedesktop.DBus.Error.InvalidArgs")
            #expect(malformed?.1 == "SetCategory takes (ssas), not (i)")
            // Its own session: a word outside the vocabulary, named.
            let own = try await stranger.call("org.audiosession.Agent1", "/org/audiosession/Agent1", "org.audiosession.Agent1", "GetSession")
            let mine = try #require(own.first?.string)
            #expect(mine != String(path))
            let bad = await error(mine, session, "SetCategory", [.string("loud"), .string(""), .array(elementSignature: "s", [])])
            #expect(bad?.0 == "org.audiosession.Error.BadParam")
            #expect(bad?.1.hasPrefix("unknown category 'loud' (accepted: ambient, soloAmbient, playback") == true, "\(String(describing: bad))")
            let xml = try await stranger.call("org.audiosession.Agent1", mine, "org.freedesktop.DBus.Introspectable", "Introspect").first?.string
            #expect(xml?.contains("<signal name=\"Interruption\">") == true)
            let properties = try await stranger.call("org.audiosession.Agent1", mine, "org.freedesktop.DBus.Properties", "Get",
                                                     [.string(session), .string("Category")]).first?.string
            #expect(properties == "soloAmbient", "a new session is soloAmbient, as AVAudioSession's")
            let inputs = try await stranger.call("org.audiosession.Agent1", mine, "org.freedesktop.DBus.Properties", "Get",
                                                 [.string(session), .string("AvailableInputs")]).first
            guard case .variant(.array(_, let ports))? = inputs else {
                Issue.record("AvailableInputs is not an array: \(String(describing: inputs))")
                return
            }
            #expect(ports.compactMap { $0.stringDictionary?["uid"]?.string } == ["builtin_mic"])
            let wrongInput = await error(mine, session, "SetPreferredInput", [.string("usb_mic")])
            #expect(wrongInput?.0 == "org.audiosession.Error.BadParam")
            #expect(wrongInput?.1 == "no input 'usb_mic' (available: builtin_mic)")
            // The player's session still answers the player.
            try await player.wait(for: "playing")
            await player.stop()
            _ = w
        }
    }
}

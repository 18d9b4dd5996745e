import AudioPolicy
import AudioSession
import DBus
import Foundation
import SoundServerTesting
import Synchronization
import Testing

/// The Swift library (`AudioSession`) against the agent on each real server: this test process is the
/// app, the Python example the other apps.
/// What a stream gave so far (shared with the task that reads it).
final class Collected<T: Sendable>: Sendable {
    let list = Mutex<[T]>([])
}

enum LibraryScenarios {
    /// The first `count` elements of a stream, or as many as came within `timeout`.
    static func first<T: Sendable>(_ count: Int, of stream: AsyncStream<T>, within timeout: Duration = .seconds(10)) async -> [T] {
        let got = Collected<T>()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await element in stream {
                    if got.list.withLock({ $0.append(element); return $0.count }) >= count { return }
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
        return got.list.withLock { $0 }
    }

    /// A session of the library is interrupted by a declared call (another app) and told so; the
    /// call's end with notifyOthersOnDeactivation tells it to resume.
    static func libraryIsToldOfAnInterruption(_ kind: ServerKind) async throws {
        try await AppScenarios.withApps(kind) { w, bus in
            let session = AudioSession(busAddress: bus.address)
            try await session.setCategory(.playback)
            try await session.setActive(true)
            #expect(try await session.isActive)
            #expect(try await session.category == .playback)
            // Now playing: the media keys come to it.
            let keys = session.remoteCommands()
            _ = try await runCommand([builtExecutable("audiosessionctl"), "next", "--bus", bus.address])
            #expect(await first(1, of: keys) == [.next], "a media key for the session now playing")
            // What it plays, shown by the agent's MPRIS player.
            try await session.setNowPlayingInfo(NowPlayingInfo(title: "From Swift", artists: ["The Library"], elapsed: 3_000_000))
            let user = try bus.connect()
            defer { user.close() }
            let metadata = try await user.call("org.mpris.MediaPlayer2.audiosession", "/org/mpris/MediaPlayer2", "org.freedesktop.DBus.Properties", "Get",
                                               [.string("org.mpris.MediaPlayer2.Player"), .string("Metadata")]).first?.stringDictionary
            #expect(metadata?["xesam:title"]?.string == "From Swift" && metadata?["xesam:artist"]?.array?.first?.string == "The Library",
                    "\(String(describing: metadata))")
            #expect(metadata?["audiosession:elapsed"] == nil, "where it is is its Position, not metadata")
            let position = try await user.call("org.mpris.MediaPlayer2.audiosession", "/org/mpris/MediaPlayer2", "org.freedesktop.DBus.Properties", "Get",
                                               [.string("org.mpris.MediaPlayer2.Player"), .string("Position")]).first?.integer
            #expect(position.map { $0 >= 3_000_000 && $0 < 60_000_000 } == true, "where it said it was, moved on: \(String(describing: position))")
            let began = session.interruptions()
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await call.wait(for: "active")
            #expect(await first(1, of: began) == [AudioSession.Interruption(type: .began, options: [], reason: .default)])
            #expect(try await session.isActive == false)
            let ended = session.interruptions()
            call.send("deactivate")
            #expect(await first(1, of: ended) == [AudioSession.Interruption(type: .ended, options: .shouldResume, reason: .default)])
            await call.stop()
        }
    }

    /// A call of the library, its input muted by itself, is told of speech on its microphone
    /// (`mutedSpeechActivity()`: true when it starts, false when it ends). Its capture is a child of this
    /// process (a pacat recording), which the agent counts as the session's.
    static func libraryIsToldOfSpeechWhileMuted(_ kind: ServerKind) async throws {
        try await AppScenarios.withApps(kind) { w, bus in
            let voice = try MicrophoneVoice("builtin_mic", on: w.server)
            defer { voice.close() }
            let session = AudioSession(busAddress: bus.address)
            try await session.setCategory(.playAndRecord, mode: .voiceChat)
            try await session.setActive(true)
            let capture = try ClientStream.start(on: w.server, direction: .input, applicationName: "Library call")
            defer { capture.stop() }
            let recording = try await w.observer.wait(for: "the call's capture", timeout: .seconds(10)) { s in capture.find(in: s).flatMap { $0.device != nil ? $0 : nil } }
            #expect(w.observer.snapshot.sources[recording.device!]?.name == "builtin_mic", "the microphone the voice speaks into")
            let speech = session.mutedSpeechActivity()
            try await session.setInputMuted(true)
            _ = try await w.observer.wait(for: "the call's capture muted") { s in capture.find(in: s)?.isMuted == true ? true : nil }
            try await voice.speak()
            #expect(await first(1, of: speech) == [true], "speech while muted")
            let ended = session.mutedSpeechActivity()
            await voice.quiet()
            #expect(await first(1, of: ended) == [false], "and its end")
            try await session.setInputMuted(false)
        }
    }

    /// The Swift example (`audiosession-play`: the library, and libpulse to play) as the player: a
    /// declared call pauses it (its stream muted meanwhile), the call's end plays it again.
    static func swiftExamplePausesAndPlaysAgain(_ kind: ServerKind) async throws {
        try await AppScenarios.withApps(kind) { w, bus in
            let player = try SessionApp(command: [builtExecutable("audiosession-play"), "--category", "playback"], server: w.server, bus: bus)
            try await player.wait(for: "playing")
            let stream = try await w.observer.wait(for: "the example's stream running", AppScenarios.appStream)
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await call.wait(for: "active")
            try await player.wait(for: "interruption began default")
            try await player.wait(for: "paused")
            _ = try await w.observer.wait(for: "the example muted during the call") { s in s.sinkInputs[stream.id]?.isMuted == true ? true : nil }
            let before = player.count
            call.send("deactivate")
            try await player.wait(for: "interruption ended shouldResume", after: before)
            try await player.wait(for: "playing", after: before)
            _ = try await w.observer.wait(for: "the example heard again") { s in s.sinkInputs[stream.id]?.isMuted == false ? true : nil }
            await call.stop()
            await player.stop()
        }
    }

    /// Refusals reach the app as `AudioSession.Error` with Apple's codes; the route and the inputs read.
    static func libraryErrorsAndRoute(_ kind: ServerKind) async throws {
        try await AppScenarios.withApps(kind) { w, bus in
            let call = try SessionApp(["--category", "playAndRecord", "--mode", "voiceChat", "--silent"], server: w.server, bus: bus)
            try await call.wait(for: "active")
            let session = AudioSession(busAddress: bus.address)
            try await session.setCategory(.playback)
            do throws(AudioSession.Error) {
                try await session.setActive(true)
                Issue.record("music activated during a call")
            } catch {
                #expect(error.code == .insufficientPriority, "\(error)")
            }
            do throws(AudioSession.Error) {
                try await session.setCategory(.playback, mode: .voiceChat)
                Issue.record("playback took voiceChat")
            } catch {
                #expect(error.code == .incompatibleCategory, "\(error)")
            }
            #expect(try await session.availableInputs.map(\.uid) == ["builtin_mic"])
            #expect(try await session.currentRoute.outputs.map(\.uid) == ["builtin_speaker"])
            await call.stop()
            // (The call's app left the bus: its departure reaches the agent apart from our calls.)
            try await w.waitForAgent("the call to be over") { !$0.sessions.values.contains { $0.status == .active && $0.configuration.mode == .voiceChat } }

            // The rest of what it reads, and a route change told with the route before.
            try await session.setCategory(.playback, options: [.mixWithOthers, .duckOthers])
            #expect(try await session.categoryOptions == [.mixWithOthers, .duckOthers])
            try await session.setActive(true)
            #expect(try await session.recordPermission == .undetermined)
            #expect(try await session.requestRecordPermission(), "undetermined is allowed")
            #expect(try await session.sampleRate > 0, "the rate of the device on its route")
            #expect(try await session.inputLatency == 0, "playback has no input route")
            let changes = session.routeChanges()
            try await w.server.plug(.usbHeadset)
            let change = await first(1, of: changes).first
            #expect(change?.reason == .newDeviceAvailable, "\(String(describing: change))")
            #expect(change?.previousRoute.outputs.map(\.uid) == ["builtin_speaker"])
            #expect(try await session.currentRoute.outputs.map(\.uid) == ["usb_headset"])
            // Its own input's mute: told once it records (a category with input in force), and read back.
            let mutes = session.inputMuteChanges()
            try await session.setInputMuted(true)
            #expect(try await session.isInputMuted)
            // (Set while inactive, a category comes in force at the activation.)
            try await session.setActive(false)
            try await session.setCategory(.playAndRecord, options: [.mixWithOthers])
            try await session.setActive(true)
            #expect(await first(1, of: mutes).first == true, "told, as it records, that its input is muted")
            try await session.setInputMuted(false)
            #expect(try await session.isInputMuted == false)
        }
    }
}

/// What the library does with no agent to talk to: said, with a code an app can act on.
@Suite("AudioSession library without an agent")
struct LibraryWithoutAnAgent {
    @Test("with no agent on the bus every call throws mediaServicesFailed, saying so")
    func noAgent() async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        let session = AudioSession(busAddress: bus.address)
        do throws(AudioSession.Error) {
            try await session.setActive(true)
            Issue.record("activated with no agent")
        } catch {
            #expect(error.code == .mediaServicesFailed)
            #expect(error.message == "no audiosessiond on the session bus (nobody owns org.audiosession.Agent1)")
        }
    }

    @Test("with no session bus at all, the same code, and why")
    func noBus() async throws {
        let session = AudioSession(busAddress: "unix:path=/nonexistent/audiosession-test-bus")
        do throws(AudioSession.Error) {
            try await session.setCategory(.playback)
            Issue.record("a category set with no bus")
        } catch {
            #expect(error.code == .mediaServicesFailed)
            #expect(error.message.hasPrefix("no session bus: "), "\(error)")
        }
    }
}

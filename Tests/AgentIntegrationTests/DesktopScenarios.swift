import AudioPolicy
import Foundation
import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing

/// The desktop session through a stand-in logind on a private system bus (scripts/fake-logind): the
/// screen lock silences ambient sound and not the music (SPEC.md 5.10); devices that come back after
/// waking are logged as wakeFromSleep.
enum DesktopScenarios {
    static func withLogind(_ kind: ServerKind, devices: [ImitationDevice] = [.speaker, .internalMic],
                           settings: AgentSettings = AgentSettings(),
                           _ body: (AgentWorld, PrivateLogind) async throws -> Void) async throws {
        let logind = try await PrivateLogind.start()
        defer { logind.stop() }
        try await withAgent(kind, devices: devices, systemBus: logind.bus, settings: settings) { w in
            // Once the agent has read the lock, its sleep match is in place too (made before, in order).
            try await w.waitForAgent("the agent to follow logind", agent: { await $0.screenLockKnown })
            try await body(w, logind)
        }
    }

    /// Locked: a game (ambient) is silenced, the music plays on; unlocked: the game is back.
    static func screenLockSilencesAmbient(_ kind: ServerKind) async throws {
        try await withLogind(kind) { w, logind in
            let game = try w.play(["media.role": "game"], name: "Game")
            let song = try w.play(["media.role": "music"], name: "Music")
            _ = try await w.running(game)
            _ = try await w.running(song)
            try await logind.send("lock")
            try await w.waitForAgent("the agent to see the lock") { $0.screenLocked }
            try await w.waitMuted(game, true, "the game silenced by the lock")
            try await w.settle()
            #expect(song.find(in: w.observer.snapshot)?.isMuted == false, "the music plays on")
            try await logind.send("unlock")
            try await w.waitMuted(game, false, "the game back after the unlock")
        }
    }

    /// Asleep and woken: a device that appears just after waking is logged as wakeFromSleep.
    static func deviceAfterWakingIsWakeFromSleep(_ kind: ServerKind) async throws {
        // The window's length is the core's to test (RoutingTests); here a plug on a server under a
        // whole suite's load may take longer than the desktop's few seconds.
        var settings = AgentSettings()
        settings.policy.wakeWindow = .seconds(60)
        try await withLogind(kind, settings: settings) { w, logind in
            try await logind.send("sleep")
            try await w.waitForAgent("the agent to see the sleep") { $0.asleep }
            try await logind.send("wake")
            try await w.waitForAgent("the agent to see the wake") { !$0.asleep && $0.wokeAt != nil }
            try await w.server.plug(.usbHeadset)
            try await w.waitForAgent("the agent to see the headset") { $0.ports["usb_headset"] != nil }
            let entries = try w.routeLogEntries()
            #expect(entries.contains { $0.reason == .wakeFromSleep && $0.route.outputs.contains { $0.uid == "usb_headset" } },
                    "\(entries.map { "\($0.reason.name): \($0.cause)" })")
        }
    }

    /// No logind: the desktop's screen saver says the lock on the session bus (GNOME's ActiveChanged),
    /// and the game is silenced, the music not; inactive again, the game is back.
    static func screenSaverLockWithoutLogind(_ kind: ServerKind) async throws {
        // (With mpv on the bus: once the agent has listed it, its screen-saver match is in place.)
        try await PlayerScenarios.withPlayer(kind) { w, _, _, bus in
            let game = try w.play(["media.role": "game"], name: "Game")
            _ = try await w.running(game)
            func screenSaver(_ active: Bool) async throws {
                _ = try await runCommand(["dbus-send", "--bus=\(bus.address)", "--type=signal", "/org/gnome/ScreenSaver",
                                          "org.gnome.ScreenSaver.ActiveChanged", "boolean:\(active)"])
            }
            try await screenSaver(true)
            try await w.waitMuted(game, true, "the game silenced by the lock")
            try await w.settle()
            #expect(w.observer.snapshot.sinkInputs.values.contains { $0.properties["application.name"] == "mpv" && !$0.isMuted },
                    "the music (mpv) plays on")
            try await screenSaver(false)
            try await w.waitMuted(game, false, "the game back")
        }
    }
}

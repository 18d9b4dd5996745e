import Foundation
@testable import PolicyAgent
import Testing

/// What the shell reads of a media player's process: its Flatpak app id.
@Suite("media players' processes")
struct PlayerProcessTests {
    @Test("a process's Flatpak app id, read from /.flatpak-info as it sees its root")
    func flatpakInfo() throws {
        let root = NSTemporaryDirectory() + "audiosession-proc-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: "\(root)/42/root", withIntermediateDirectories: true)
        try "[Instance]\nname=not.this\n\n[Application]\nruntime=runtime/org.gnome.Platform/x86_64/46\n name=org.example.Tunes \n"
            .write(toFile: "\(root)/42/root/.flatpak-info", atomically: true, encoding: .utf8)
        #expect(MediaPlayers.flatpakAppID(ofProcess: 42, root: root) == "org.example.Tunes")
        #expect(MediaPlayers.flatpakAppID(ofProcess: 43, root: root) == nil, "not sandboxed")
        try FileManager.default.createDirectory(atPath: "\(root)/44/root", withIntermediateDirectories: true)
        try "[Application]\nname=org.example.Tunes\u{1b}[2J;rm\n".write(toFile: "\(root)/44/root/.flatpak-info", atomically: true, encoding: .utf8)
        #expect(MediaPlayers.flatpakAppID(ofProcess: 44, root: root) == nil, "not an app id")
    }

    @Test("what a Flatpak app id looks like", arguments: [
        ("org.example.Tunes", true), ("com.valvesoftware.Steam", true), ("org.gnome.Maps-2_x", true),
        ("Tunes", false), ("", false), ("org..Tunes", false), (".org.Tunes", false), ("org.example.9Tunes", false),
        ("org.exämple.Tunes", false), ("org.example.Tu nes", false), ("org.example.\u{1b}[31m", false),
        (String(repeating: "a.", count: 128) + "a", false),
    ])
    func appIDShape(id: String, valid: Bool) {
        #expect(MediaPlayers.isAppID(id) == valid, "\(id.debugDescription)")
    }
}

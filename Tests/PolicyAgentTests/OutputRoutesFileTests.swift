import AudioPolicy
@testable import AgentTower
import Foundation
@testable import PolicyAgent
import Testing

/// Issue 23: the preferred outputs per category and per app configured in `outputs.yaml` (SPEC.md
/// section 10): what is accepted, what each mistake is told as, and how the layers merge.
@Suite("outputs.yaml")
struct OutputRoutesFileTests {
    func error(_ text: String) -> String? {
        do { _ = try OutputRoutesFile.parse(text, path: "outputs.yaml"); return nil } catch { return error.description }
    }

    @Test("categories and apps, each a list of outputs; an empty file is no preference")
    func reads() throws {
        let routes = try OutputRoutesFile.parse("""
            categories:
              playback: [usbAudio, headphones]
              ambient: everywhere
            apps:
              spotify: [builtInSpeaker]
              org.gnome.Podcasts: [alsa_output.usb-FiiO_K3-00.analog-stereo]
            """, path: "outputs.yaml")
        #expect(routes.categories == [.playback: [.type(.usbAudio), .type(.headphones)], .ambient: [.everywhere]])
        #expect(routes.apps == ["spotify": [.type(.builtInSpeaker)], "org.gnome.Podcasts": [.device("alsa_output.usb-FiiO_K3-00.analog-stereo")]])
        #expect(try OutputRoutesFile.parse("# nothing yet\n", path: "outputs.yaml").isEmpty)
    }

    @Test("each mistake names its line and column and what is accepted", arguments: [
        ("colours: red\n", "outputs.yaml:1:1: unknown key 'colours' (accepted: categories, apps)"),
        ("categories:\n  musik: [usbAudio]\n", "outputs.yaml:2:3: unknown category 'musik' (accepted: ambient, soloAmbient, playback, record, playAndRecord, multiRoute, audioProcessing)"),
        ("categories:\n  record: [usbAudio]\n", "outputs.yaml:2:3: categories.record: a record session plays nothing"),
        ("categories: [playback]\n", "outputs.yaml:1:13: categories: expected a mapping of categories to lists of outputs"),
        ("apps:\n  spotify: [builtInMic]\n", "outputs.yaml:2:13: apps.spotify: 'builtInMic' is no output a session can be sent to"),
        ("apps:\n  spotify: ['usb dac']\n", "outputs.yaml:2:13: apps.spotify: 'usb dac' is neither a port type"),
        ("- playback\n", "outputs.yaml:1:1: expected a mapping of categories, apps"),
    ])
    func mistakes(_ text: String, _ expected: String) {
        let said = error(text)
        #expect(said?.hasPrefix(expected) == true, "\(String(describing: said))")
    }

    @Test("the files beside the layers named policies; the user's entry masks the system's, key by key; a file not there is none; a bad one names its place and keeps its last good version")
    func layers() throws {
        let scratch = Scratch()
        let user = scratch.path + "/user", system = scratch.path + "/system"
        #expect(OutputRoutesFile.paths(layers: ["\(user)/policies", "\(system)/policies/", "/elsewhere/mine"])
            == ["\(user)/outputs.yaml", "\(system)/outputs.yaml"])
        try FileManager.default.createDirectory(atPath: user, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: system, withIntermediateDirectories: true)
        try "categories:\n  playback: [usbAudio]\n  ambient: [everywhere]\n".write(toFile: "\(system)/outputs.yaml", atomically: true, encoding: .utf8)
        try "categories:\n  playback: [headphones]\napps:\n  mpv: [hdmi]\n".write(toFile: "\(user)/outputs.yaml", atomically: true, encoding: .utf8)
        let paths = OutputRoutesFile.paths(layers: ["\(user)/policies", "\(system)/policies"])
        var lastGood: [String: OutputRoutes] = [:]
        let (merged, errors) = OutputRoutesFile.load(paths: paths + ["\(scratch.path)/none/outputs.yaml"], lastGood: &lastGood)
        #expect(errors.isEmpty)
        #expect(merged.categories == [.playback: [.type(.headphones)], .ambient: [.everywhere]])
        #expect(merged.apps == ["mpv": [.type(.hdmi)]])
        // The user's file goes bad: named, and its last good version stays in force.
        try "categories:\n  playback: [headphones\n".write(toFile: "\(user)/outputs.yaml", atomically: true, encoding: .utf8)
        let (again, bad) = OutputRoutesFile.load(paths: paths, lastGood: &lastGood)
        #expect(bad.count == 1 && bad[0].file == "\(user)/outputs.yaml" && bad[0].message.contains("the list opened at 2:13 is not closed"), "\(bad)")
        #expect(again == merged)
        // Removed: none of it holds.
        try FileManager.default.removeItem(atPath: "\(user)/outputs.yaml")
        let (without, none) = OutputRoutesFile.load(paths: paths, lastGood: &lastGood)
        #expect(none.isEmpty)
        #expect(without.categories == [.playback: [.type(.usbAudio)], .ambient: [.everywhere]] && without.apps.isEmpty)
    }
}

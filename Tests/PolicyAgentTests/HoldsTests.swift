import AudioPolicy
import Glibc
@testable import PolicyAgent
import PulseClient
import Testing

let music: Properties = ["media.role": "music"]
let phone: Properties = ["media.role": "phone"]
let reader: Properties = ["media.role": "a11y"]
let mixer = AppPolicy(name: "mixer", match: .init(name: ["Mixer"]), configuration: SessionConfiguration(.playback, options: .mixWithOthers))

/// What the agent holds and what the server remembers, on an in-memory server of each kind, under a
/// manual clock (SPEC.md 5.4, 5.11, 5.12).
@Suite("holds")
struct HoldsTests {
    static let ducked = cbrt(0.2)

    @Test("a duck ramps down and back up to the user's volume, and the server's memory goes back as it was", arguments: InMemoryServer.Kind.allCases)
    func duckRampsAndLeavesNoTrace(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind)
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.deliver()
        #expect(w.volume(song)! > Self.ducked + 0.01, "the first step only, at once")
        w.advance(.milliseconds(200))
        #expect(abs(w.volume(song)! - Self.ducked) < 0.01)
        w.server.stop(voice)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - 1) < 0.01)
        if kind != .wirePlumber05 {
            #expect(w.server.memory["sink-input-by-media-role:music"]?.volume?.values.first.map { abs($0.fraction - 1) < 0.01 } != false,
                    "\(String(describing: w.server.memory["sink-input-by-media-role:music"]))")
        }
    }

    @Test("a player started during a duck is ducked from the volume it would have had, and goes back to it", arguments: InMemoryServer.Kind.allCases)
    func newPlayerDuringDuck(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [mixer])
        let song = w.server.play(music, name: "Music", pid: 1)
        w.deliver()
        let voice = w.server.play(reader, name: "Reader", pid: 2)
        w.advance(.seconds(1))
        let second = w.server.play(music, name: "Mixer", pid: 3)
        w.deliver()
        w.advance(.seconds(1))
        #expect(abs(w.volume(second)! - Self.ducked) < 0.01, "ducked from 100 %, not from the remembered duck: \(w.volume(second)!)")
        w.server.stop(voice)
        w.advance(.seconds(2))
        #expect(abs(w.volume(song)! - 1) < 0.01)
        #expect(abs(w.volume(second)! - 1) < 0.01, "\(w.volume(second)!)")
    }
}

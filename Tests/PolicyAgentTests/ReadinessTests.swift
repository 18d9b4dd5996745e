@testable import AgentTower
@testable import PolicyAgent
import ServerModel
import Testing

/// systemd's readiness: READY=1 once the server is managed and the session bus has answered.
@Suite("readiness")
struct ReadinessTests {
    @Test("ready once the server is connected and the session bus answered, in either order, and said once")
    func readyOnceBothAreThere() {
        var ready = Readiness(waitsForSessionBus: true)
        #expect(ready.take([.server(.connected(Snapshot()))]) == nil, "the apps cannot find the agent yet")
        #expect(ready.take([.tick]) == nil)
        #expect(ready.take([.app(.served(busName: "org.audiosession.Agent1"))]) == "managing the sound server")
        #expect(ready.take([.server(.connected(Snapshot()))]) == nil, "said once")

        var busFirst = Readiness(waitsForSessionBus: true)
        #expect(busFirst.take([.players(.busGone(reason: "no bus"))]) == nil, "no bus to wait for, but no server yet")
        #expect(busFirst.take([.server(.connected(Snapshot()))]) == "managing the sound server")

        var noBus = Readiness(waitsForSessionBus: false)
        #expect(noBus.take([.server(.connected(Snapshot()))]) == "managing the sound server")

        var refused = Readiness(waitsForSessionBus: true)
        #expect(refused.take([.server(.connected(Snapshot())), .app(.unavailable(reason: "the name is another's"))]) == "managing the sound server",
                "the name refused is an answer too: the agent runs without the apps' API")
    }
}

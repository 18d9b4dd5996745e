import AudioPolicy
import Foundation
@testable import AgentTower
@testable import PolicyAgent
import PulseClient
import Testing
import TowerTesting

/// Stopping: a Bluetooth card a run switched to hands-free goes back to A2DP (SPEC.md 6); what the
/// server does not confirm, and what was never taken over, stays in the journal for the next run.
@Suite("stopping")
struct CardStopTests {
    static let card = "bluez_card.70_BF_92_12_34_56"

    /// A card a killed predecessor left in hands-free (its journal says so), found by a new tower,
    /// which is then stopped.
    static func stopped(_ scratch: Scratch, refusing: Bool) -> TowerWorld {
        let server = InMemoryServer(.pulseAudio)
        server.plug(bluetoothCard: card, active: "headset-head-unit")
        _ = server.takeEvents()
        if refusing { server.refuse = { if case .setCardProfile = $0 { true } else { false } } }
        Journal(directory: scratch.path).apply(.switched(card: card, from: "a2dp-sink"))
        var w = TowerWorld(server: server, leftovers: Journal(directory: scratch.path).leftovers(),
                           journal: Journal(directory: scratch.path))
        w.stop()
        return w
    }

    @Test("a switch back the server refuses is said, and the journal keeps the card for the next run")
    func refusedSwitchBackStaysJournaled() {
        let scratch = Scratch()
        defer { scratch.remove() }
        let w = Self.stopped(scratch, refusing: true)
        #expect(w.log.contains { $0.contains("could not set the profile of a card") }, "\(w.log.suffix(8).joined(separator: "\n"))")
        #expect(w.log.contains { $0.contains("did not confirm everything undone") })
        #expect(Journal(directory: scratch.path).leftovers().cards == [Self.card: "a2dp-sink"])
    }

    @Test("a switch back the server carries out leaves the journal empty")
    func switchBackClearsTheJournal() {
        let scratch = Scratch()
        defer { scratch.remove() }
        let w = Self.stopped(scratch, refusing: false)
        #expect(w.server.snapshot.cards.values.first?.activeProfile == "a2dp-sink")
        #expect(w.log.contains { $0.contains("stopped; nothing left held") }, "\(w.log.suffix(8).joined(separator: "\n"))")
        #expect(Journal(directory: scratch.path).leftovers().isEmpty)
    }

    @Test("an agent stopped before the server ever answered keeps what a predecessor left in the journal")
    func stopBeforeConnecting() {
        var left = Journal.Leftovers()
        left.cards = [Self.card: "a2dp-sink"]
        var tower = ControlTower()
        var effects = tower.handle([.recovered(left), .stop], at: .seconds(1))
        // (The stop's deadline is asked for: with no server, nothing else would wake the loop.)
        #expect(tower.nextDeadline == .seconds(1) + tower.settings.stopTimeout)
        effects += tower.handle([.tick], at: .seconds(1) + tower.settings.stopTimeout)
        #expect(tower.isFinished)
        #expect(!effects.contains { if case .journal(.clear) = $0 { true } else { false } }, "the journal was cleared")
    }
}

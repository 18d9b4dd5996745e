import AudioPolicy
@testable import AgentTower
import Foundation
@testable import PolicyAgent
import ServerModel
import Testing
import TowerTesting

/// Issue 23: alarms on every output. The tower carries out the core's sink for several outputs: a
/// module-combine-sink loaded with the outputs as its slaves, the alarm moved onto its sink once the
/// server shows it, unloaded with the stop; status says so.
@Suite("alarms on every output, in the tower")
struct EverywhereTowerTests {
    let alarmClock = AppPolicy(name: "alarm-clock", match: .init(name: ["Alarm Clock"]), configuration: SessionConfiguration(.ambient),
                               preferredOutputs: [.everywhere])

    func sinkName(_ w: TowerWorld, _ id: UInt32?) -> String? {
        id.flatMap { w.server.stream($0)?.device }.flatMap { d in w.server.snapshot.sinks[d]?.name }
    }

    @Test("the alarm on the headset and the speaker through the agent's combine sink, said by status; the sink unloaded with the stop, the alarm back on the default", arguments: InMemoryServer.Kind.allCases)
    func alarmThroughTheCombination(_ kind: InMemoryServer.Kind) throws {
        var w = TowerWorld(kind, policies: [alarmClock])
        w.server.plug(sink: "usb_headset", description: "USB Headset", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        let alarm = w.server.play(["media.role": "alarm"], name: "Alarm Clock", pid: 3)
        w.deliver()
        let name = CombinedOutputs.name(["usb_headset", "builtin_speaker"])
        let module = try #require(w.server.snapshot.modules.values.first { $0.name == "module-combine-sink" }, "\(w.log.suffix(12))")
        #expect(module.argument == "sink_name=\(name) slaves=usb_headset,builtin_speaker")
        #expect(sinkName(w, alarm) == name, "\(w.log.suffix(12))")
        let line = try #require(w.tower.statusReport().sessions.first { $0.session.contains("alarm-clock") })
        #expect(line.route?.contains("at once, through \(name)") == true, "\(String(describing: line.route))")
        w.stop()
        #expect(!w.server.snapshot.modules.values.contains { $0.name == "module-combine-sink" }, "\(w.log.suffix(12))")
        #expect(sinkName(w, alarm) == "usb_headset")
    }

    @Test("PulseAudio tells of the combine module after its sink: the sink is taken for ours once the module shows, and the alarm moved onto it; the stop removes it")
    func moduleAfterItsSink() throws {
        var w = TowerWorld(.pulseAudio, policies: [alarmClock])
        w.server.modulesAfterTheirSinks = true
        w.server.plug(sink: "usb_headset", description: "USB Headset", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        let alarm = w.server.play(["media.role": "alarm"], name: "Alarm Clock", pid: 3)
        w.deliver()
        w.advance(.seconds(1))
        let name = CombinedOutputs.name(["usb_headset", "builtin_speaker"])
        #expect(sinkName(w, alarm) == name, "\(w.log.suffix(12))")
        #expect(w.tower.core.state.ports[name] == nil && w.tower.core.state.combinationPorts.contains(name))
        w.stop()
        #expect(!w.server.snapshot.sinks.values.contains { $0.name == name }, "\(w.log.suffix(12))")
    }

    @Test("a sink another program made under the name of ours (no combine sink of ours) is never taken for ours: the alarm is not moved onto it, nor is it removed", arguments: InMemoryServer.Kind.allCases)
    func impostorIsNotOurs(_ kind: InMemoryServer.Kind) {
        var w = TowerWorld(kind, policies: [alarmClock])
        w.server.plug(sink: "usb_headset", description: "USB Headset", properties: ["device.bus": "usb", "device.class": "sound"])
        let name = CombinedOutputs.name(["usb_headset", "builtin_speaker"])
        let impostor = w.server.plug(sink: name, description: "Not ours", properties: ["device.class": "abstract"])
        w.advance(.seconds(5))
        let alarm = w.server.play(["media.role": "alarm"], name: "Alarm Clock", pid: 3)
        w.deliver()
        w.advance(.seconds(1))
        #expect(w.server.stream(alarm)?.device != impostor, "\(w.log.suffix(12))")
        #expect(w.server.snapshot.sinks[impostor] != nil)
        w.stop()
        #expect(w.server.snapshot.sinks[impostor] != nil, "not removed")
        #expect(w.server.snapshot.sinks.values.filter { $0.name == name }.count == 1, "no second sink of the name made, none left of ours")
    }

    @Test("a server that will not make the sink: the alarm plays on its usual output, the load is not asked again and again, and status says why", arguments: InMemoryServer.Kind.allCases)
    func serverWillNotMakeIt(_ kind: InMemoryServer.Kind) throws {
        var w = TowerWorld(kind, policies: [alarmClock])
        w.server.refuse = { if case .loadModule = $0 { true } else { false } }
        w.server.plug(sink: "usb_headset", description: "USB Headset", properties: ["device.bus": "usb", "device.class": "sound"])
        w.advance(.seconds(5))
        let alarm = w.server.play(["media.role": "alarm"], name: "Alarm Clock", pid: 3)
        w.deliver()
        w.advance(.seconds(2))
        #expect(sinkName(w, alarm) == "usb_headset")
        #expect(w.log.filter { $0.contains("send loadModule") }.count == 1, "\(w.log.suffix(12))")
        let line = try #require(w.tower.statusReport().sessions.first { $0.session.contains("alarm-clock") })
        #expect(line.route?.contains("which the server would not make") == true, "\(String(describing: line.route))")
    }

    @Test("a device whose name is no plain name is never put into a module's arguments")
    func plainNamesOnly() {
        #expect(ControlTower.isPlainDeviceName("alsa_output.usb-FiiO_K3-00.analog-stereo"))
        #expect(ControlTower.isPlainDeviceName("bluez_output.00:11:22:33:44:55.1"))
        #expect(!ControlTower.isPlainDeviceName("evil slaves=x"))
        #expect(!ControlTower.isPlainDeviceName("quote'd"))
        #expect(!ControlTower.isPlainDeviceName(""))
    }
}

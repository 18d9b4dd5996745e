import SoundServerTesting
import Testing

/// The integration scenarios against a private PipeWire stack (dbus-daemon, pipewire, wireplumber, pipewire-pulse).
@Suite("PipeWire", .serialized, .timeLimit(.minutes(2)))
struct OnPipeWire {
    let kind = ServerKind.pipewire

    @Test("PipeWire: snapshot agrees with pactl") func snapshotAgreesWithPactl() async throws { try await Scenarios.snapshotAgreesWithPactl(kind) }
    @Test("PipeWire: devices have their port types") func devicesHaveTheirPortTypes() async throws { try await Scenarios.devicesHaveTheirPortTypes(kind) }
    @Test("PipeWire: CLI devices reports port types") func cliDevicesReportsPortTypes() async throws { try await Scenarios.cliDevicesReportsPortTypes(kind) }
    @Test("PipeWire: events for plugging and unplugging") func eventsForPluggingAndUnplugging() async throws { try await Scenarios.eventsForPluggingAndUnplugging(kind) }
    @Test("PipeWire: events for starting and stopping streams") func eventsForStartingAndStoppingStreams() async throws { try await Scenarios.eventsForStartingAndStoppingStreams(kind) }
    @Test("PipeWire: stream commands take effect") func streamCommandsTakeEffect() async throws { try await Scenarios.streamCommandsTakeEffect(kind) }
    @Test("PipeWire: device commands take effect") func deviceCommandsTakeEffect() async throws { try await Scenarios.deviceCommandsTakeEffect(kind) }
    @Test("PipeWire: stream restore round trip") func streamRestoreRoundTrip() async throws { try await Scenarios.streamRestoreRoundTrip(kind) }
    @Test("PipeWire: the memory written through a stream of ours") func memoryWrittenThroughAStream() async throws { try await Scenarios.memoryWrittenThroughAStream(kind) }
    @Test("PipeWire: reconnects after server restart") func reconnectsAfterServerRestart() async throws { try await Scenarios.reconnectsAfterServerRestart(kind) }
    @Test("PipeWire: operations finish when the server dies") func operationsFinishWhenTheServerDies() async throws { try await Scenarios.operationsFinishWhenTheServerDies(kind) }
    @Test("PipeWire: memory stays flat over a thousand operations") func memoryStaysFlatOverAThousandOperations() async throws { try await Scenarios.memoryStaysFlatOverAThousandOperations(kind) }
    @Test("PipeWire: a meter hears one stream, follows it, ends with it") func meterHearsOneStream() async throws { try await Scenarios.meterHearsOneStream(kind) }
    @Test("PipeWire: meters of streams that come and go in a burst keep the connection") func metersInABurst() async throws { try await Scenarios.metersOfStreamsInABurstKeepTheConnection(kind) }
    @Test("PipeWire: a meter hears a stream no longer fed as silent") func meterNoLongerFed() async throws { try await Scenarios.meterHearsAStreamNoLongerFedAsSilent(kind) }
    @Test("PipeWire: a capture's meter hears its microphone, muted or not, and follows it to another") func meterOfACapture() async throws { try await Scenarios.meterOfACaptureFollowsItsMicrophone(kind) }
}

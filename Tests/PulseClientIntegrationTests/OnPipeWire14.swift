import SoundServerTesting
import Testing

/// The integration scenarios against a private PipeWire 1.4 stack (dbus-daemon, pipewire, wireplumber 0.5, pipewire-pulse).
@Suite("PipeWire 1.4", .serialized, .timeLimit(.minutes(2)))
struct OnPipeWire14 {
    let kind = ServerKind.pipewire14

    @Test("PipeWire 1.4: snapshot agrees with pactl") func snapshotAgreesWithPactl() async throws { try await Scenarios.snapshotAgreesWithPactl(kind) }
    @Test("PipeWire 1.4: devices have their port types") func devicesHaveTheirPortTypes() async throws { try await Scenarios.devicesHaveTheirPortTypes(kind) }
    @Test("PipeWire 1.4: CLI devices reports port types") func cliDevicesReportsPortTypes() async throws { try await Scenarios.cliDevicesReportsPortTypes(kind) }
    @Test("PipeWire 1.4: events for plugging and unplugging") func eventsForPluggingAndUnplugging() async throws { try await Scenarios.eventsForPluggingAndUnplugging(kind) }
    @Test("PipeWire 1.4: events for starting and stopping streams") func eventsForStartingAndStoppingStreams() async throws { try await Scenarios.eventsForStartingAndStoppingStreams(kind) }
    @Test("PipeWire 1.4: stream commands take effect") func streamCommandsTakeEffect() async throws { try await Scenarios.streamCommandsTakeEffect(kind) }
    @Test("PipeWire 1.4: device commands take effect") func deviceCommandsTakeEffect() async throws { try await Scenarios.deviceCommandsTakeEffect(kind) }
    @Test("PipeWire 1.4: stream restore round trip") func streamRestoreRoundTrip() async throws { try await Scenarios.streamRestoreRoundTrip(kind) }
    @Test("PipeWire 1.4: the memory written through a stream of ours") func memoryWrittenThroughAStream() async throws { try await Scenarios.memoryWrittenThroughAStream(kind) }
    @Test("PipeWire 1.4: reconnects after server restart") func reconnectsAfterServerRestart() async throws { try await Scenarios.reconnectsAfterServerRestart(kind) }
    @Test("PipeWire 1.4: operations finish when the server dies") func operationsFinishWhenTheServerDies() async throws { try await Scenarios.operationsFinishWhenTheServerDies(kind) }
    @Test("PipeWire 1.4: memory stays flat over a thousand operations") func memoryStaysFlatOverAThousandOperations() async throws { try await Scenarios.memoryStaysFlatOverAThousandOperations(kind) }
    @Test("PipeWire 1.4: a meter hears one stream, follows it, ends with it") func meterHearsOneStream() async throws { try await Scenarios.meterHearsOneStream(kind) }
    @Test("PipeWire 1.4: meters of streams that come and go in a burst keep the connection") func metersInABurst() async throws { try await Scenarios.metersOfStreamsInABurstKeepTheConnection(kind) }
    @Test("PipeWire 1.4: a meter hears a stream no longer fed as silent") func meterNoLongerFed() async throws { try await Scenarios.meterHearsAStreamNoLongerFedAsSilent(kind) }
    @Test("PipeWire 1.4: a capture's meter hears its microphone, muted or not, and follows it to another") func meterOfACapture() async throws { try await Scenarios.meterOfACaptureFollowsItsMicrophone(kind) }
}

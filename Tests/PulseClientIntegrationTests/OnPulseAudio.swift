import SoundServerTesting
import Testing

/// The integration scenarios against a private PulseAudio.
@Suite("PulseAudio", .serialized, .timeLimit(.minutes(2)))
struct OnPulseAudio {
    let kind = ServerKind.pulseaudio

    @Test("PulseAudio: snapshot agrees with pactl") func snapshotAgreesWithPactl() async throws { try await Scenarios.snapshotAgreesWithPactl(kind) }
    @Test("PulseAudio: devices have their port types") func devicesHaveTheirPortTypes() async throws { try await Scenarios.devicesHaveTheirPortTypes(kind) }
    @Test("PulseAudio: CLI devices reports port types") func cliDevicesReportsPortTypes() async throws { try await Scenarios.cliDevicesReportsPortTypes(kind) }
    @Test("PulseAudio: events for plugging and unplugging") func eventsForPluggingAndUnplugging() async throws { try await Scenarios.eventsForPluggingAndUnplugging(kind) }
    @Test("PulseAudio: events for starting and stopping streams") func eventsForStartingAndStoppingStreams() async throws { try await Scenarios.eventsForStartingAndStoppingStreams(kind) }
    @Test("PulseAudio: stream commands take effect") func streamCommandsTakeEffect() async throws { try await Scenarios.streamCommandsTakeEffect(kind) }
    @Test("PulseAudio: device commands take effect") func deviceCommandsTakeEffect() async throws { try await Scenarios.deviceCommandsTakeEffect(kind) }
    @Test("PulseAudio: stream restore round trip") func streamRestoreRoundTrip() async throws { try await Scenarios.streamRestoreRoundTrip(kind) }
    @Test("PulseAudio: the memory written through a stream of ours") func memoryWrittenThroughAStream() async throws { try await Scenarios.memoryWrittenThroughAStream(kind) }
    @Test("PulseAudio: reconnects after server restart") func reconnectsAfterServerRestart() async throws { try await Scenarios.reconnectsAfterServerRestart(kind) }
    @Test("PulseAudio: operations finish when the server dies") func operationsFinishWhenTheServerDies() async throws { try await Scenarios.operationsFinishWhenTheServerDies(kind) }
    @Test("PulseAudio: memory stays flat over a thousand operations") func memoryStaysFlatOverAThousandOperations() async throws { try await Scenarios.memoryStaysFlatOverAThousandOperations(kind) }
    @Test("PulseAudio: a meter hears one stream, follows it, ends with it") func meterHearsOneStream() async throws { try await Scenarios.meterHearsOneStream(kind) }
    @Test("PulseAudio: meters of streams that come and go in a burst keep the connection") func metersInABurst() async throws { try await Scenarios.metersOfStreamsInABurstKeepTheConnection(kind) }
    @Test("PulseAudio: a meter hears a stream no longer fed as silent") func meterNoLongerFed() async throws { try await Scenarios.meterHearsAStreamNoLongerFedAsSilent(kind) }
    @Test("PulseAudio: a capture's meter hears its microphone, muted or not, and follows it to another") func meterOfACapture() async throws { try await Scenarios.meterOfACaptureFollowsItsMicrophone(kind) }
}

/// What a device is running at, as the server reports it (SPEC.md section 7).
public struct DeviceFormat: Hashable, Sendable {
    public var sampleRate: Double
    public var channels: Int
    /// The device's latency (its buffer), in seconds.
    public var latency: Double
    /// The device volume as an amplitude, 0...1.
    public var volume: Double
    public init(sampleRate: Double, channels: Int, latency: Double, volume: Double = 1) {
        self.sampleRate = sampleRate; self.channels = channels; self.latency = latency; self.volume = volume
    }
}

/// A session's hardware preferences: requests, never promises (SPEC.md section 7).
public struct HardwarePreferences: Hashable, Sendable {
    public var sampleRate: Double?
    public var ioBufferDuration: Double?
    public var inputChannels: Int?
    public var outputChannels: Int?
    public init(sampleRate: Double? = nil, ioBufferDuration: Double? = nil, inputChannels: Int? = nil, outputChannels: Int? = nil) {
        self.sampleRate = sampleRate; self.ioBufferDuration = ioBufferDuration
        self.inputChannels = inputChannels; self.outputChannels = outputChannels
    }
}

/// The values actually in force for a session, read from the devices on its route (SPEC.md section 7):
/// what AVAudioSession calls `sampleRate`, `ioBufferDuration`, `inputLatency`, `outputLatency`,
/// `inputNumberOfChannels`, `outputNumberOfChannels`, `outputVolume` and `isInputAvailable`.
public struct HardwareValues: Hashable, Sendable {
    public var sampleRate: Double
    public var ioBufferDuration: Double
    public var inputLatency: Double
    public var outputLatency: Double
    public var inputChannels: Int
    public var outputChannels: Int
    public var outputVolume: Double
    public var isInputAvailable: Bool
    /// The preferences as asked, beside the values in force, for explanations.
    public var preferences: HardwarePreferences
}

extension PolicyMachine {
    /// The values in force for a session: the route's first output (else input) sets the rate;
    /// the buffer is the larger device latency, never below the preference's request as the server
    /// cannot run faster than its devices; channel counts are the devices' (a preference for more
    /// than a device has is not met).
    public func hardwareValues(for id: SessionID, preferences: HardwarePreferences = HardwarePreferences()) -> HardwareValues? {
        guard let session = state.sessions[id] else { return nil }
        let output = session.route.outputs.first.flatMap { state.ports[$0.uid]?.format }
        let input = session.route.inputs.first.flatMap { state.ports[$0.uid]?.format }
        let rate = output?.sampleRate ?? input?.sampleRate ?? preferences.sampleRate ?? 48_000
        let deviceBuffer = max(output?.latency ?? 0, input?.latency ?? 0)
        return HardwareValues(
            sampleRate: rate,
            ioBufferDuration: deviceBuffer > 0 ? deviceBuffer : (preferences.ioBufferDuration ?? 0),
            inputLatency: input?.latency ?? 0,
            outputLatency: output?.latency ?? 0,
            inputChannels: min(input?.channels ?? 0, preferences.inputChannels ?? .max),
            outputChannels: min(output?.channels ?? 0, preferences.outputChannels ?? .max),
            outputVolume: output?.volume ?? 0,
            isInputAvailable: state.ports.values.contains { $0.direction == .input && $0.type != .virtual },
            preferences: preferences)
    }
}

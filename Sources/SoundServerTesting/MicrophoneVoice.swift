import Foundation
import Synchronization

/// Someone speaking into an imitation microphone of a private server (a 440 Hz tone, half scale), or
/// keeping quiet: what the microphone's source delivers, whoever records it.
///
/// PulseAudio's imitation microphones are pipe sources: a thread writes the tone, or zeros while
/// quiet (as a real microphone delivers its noise floor), into the source's FIFO. PipeWire's are
/// virtual sources with input ports: `pw-cat` plays the tone into them, linked by hand (WirePlumber
/// links no playback to a source), and is stopped to keep quiet.
public final class MicrophoneVoice: Sendable {
    private let server: PrivateServer
    private let source: String
    /// Shared with the feeding thread (which must not keep the voice alive).
    private final class Flags: Sendable {
        let speaking = Atomic<Bool>(false)
        let finished = Atomic<Bool>(false)
    }
    private let flags = Flags()
    private let player = Mutex<ChildProcess?>(nil)

    /// Opens the microphone `source` (a node name: `builtin_mic`, `usb_headset_mic` ...), quiet.
    public init(_ source: String, on server: PrivateServer) throws {
        self.server = server; self.source = source
        if server.kind == .pulseaudio { try startFeeding() }
    }

    deinit { close() }

    /// Someone starts speaking, until `quiet()`.
    public func speak() async throws {
        flags.speaking.store(true, ordering: .relaxed)
        guard server.kind != .pulseaudio else { return }
        let tone = "\(server.directory)/voice-tone.wav"
        if !FileManager.default.fileExists(atPath: tone) { try Self.writeTone(seconds: 60, to: tone) }
        let node = "test-voice-\(source)"
        // (pipewire-pulse lists it as a playback stream, which the agent would hold as music during a
        // call: a notification's sound mixes with anything.)
        let child = try ChildProcess.spawn(["pw-cat", "--playback", "-P", "node.autoconnect=false", "-P", "node.name=\(node)",
                                            "--media-role", "Notification", tone],
                                           environment: pipeWireEnvironment)
        player.withLock { $0 = child }
        // Linked once its ports are there.
        for channel in ["FL", "FR"] {
            var linked = false
            for _ in 0..<500 where !linked {
                linked = (try? await runCommand(["pw-link", "\(node):output_\(channel)", "\(source):input_\(channel)"],
                                                environment: pipeWireEnvironment, check: true)) != nil
                if !linked { try await Task.sleep(for: .milliseconds(10)) }
            }
            guard linked else { throw CommandError(command: ["pw-link", node, source], output: CommandOutput(status: 1, stdout: "", stderr: "the voice's ports never came")) }
        }
    }

    /// Nobody speaks any more.
    public func quiet() async {
        flags.speaking.store(false, ordering: .relaxed)
        if let child = player.withLock({ p -> ChildProcess? in defer { p = nil }; return p }) {
            child.signal(SIGKILL)
            _ = await child.wait()
        }
    }

    /// Stops feeding the microphone.
    public func close() {
        flags.finished.store(true, ordering: .relaxed)
        player.withLock { $0?.signal(SIGKILL); $0 = nil }
    }

    private var pipeWireEnvironment: [String: String] { ["PIPEWIRE_RUNTIME_DIR": "\(server.directory)/runtime"] }

    /// PulseAudio: the pipe source's FIFO (`SOURCE.fifo.DEVICE` in the server's folder), fed on a thread
    /// of its own at the pace the source reads it.
    private func startFeeding() throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: server.directory)) ?? []
        guard let name = names.first(where: { $0.hasPrefix("\(source).fifo.") }) else {
            throw CommandError(command: ["open", source], output: CommandOutput(status: 1, stdout: "", stderr: "no pipe source \(source) in \(server.directory)"))
        }
        let fd = open("\(server.directory)/\(name)", O_WRONLY)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        // 20 ms of stereo s16le at 48 kHz, the tone's and the quiet's.
        let frames = 960
        let quiet = [Int16](repeating: 0, count: frames * 2)
        let tone = Self.tone(frames: frames)
        let flags = self.flags
        let feeder = Thread {
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            defer { Glibc.close(fd) }
            while !flags.finished.load(ordering: .relaxed) {
                let block = flags.speaking.load(ordering: .relaxed) ? tone : quiet
                guard block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 else { return }
            }
        }
        feeder.start()
    }

    /// The tone's first `frames` frames: stereo 16-bit at 48 kHz, interleaved, half scale.
    static func tone(frames: Int) -> [Int16] {
        (0..<frames * 2).map { Int16(16_000 * sin(2 * Double.pi * 440 * Double($0 / 2) / 48_000)) }
    }

    /// A stereo 16-bit 48 kHz WAV file of the tone.
    public static func writeTone(seconds: Int, to path: String) throws {
        let frames = 48_000 * seconds
        var data = Data()
        func le<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8)); le(UInt32(36 + frames * 4)); data.append(contentsOf: Array("WAVEfmt ".utf8))
        le(UInt32(16)); le(UInt16(1)); le(UInt16(2)); le(UInt32(48_000)); le(UInt32(48_000 * 4)); le(UInt16(4)); le(UInt16(16))
        data.append(contentsOf: Array("data".utf8)); le(UInt32(frames * 4))
        tone(frames: frames).withUnsafeBytes { data.append(contentsOf: $0) }
        guard FileManager.default.createFile(atPath: path, contents: data) else { throw POSIXError(.EIO) }
    }
}

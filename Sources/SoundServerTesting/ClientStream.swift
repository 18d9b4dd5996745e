import Foundation
import Synchronization
public import PulseClient

/// A real client stream: a `pacat` process playing (noise, or silence) or recording, with the
/// properties an application would set. Ended by `stop()` or when the object goes away.
///
/// It plays noise unless told otherwise: the agent counts a stream as playing while it is heard
/// (SPEC.md section 1), and real programs that keep a silent stream open (speech-dispatcher, browsers)
/// are imitated with `.silence`.
public final class ClientStream: Sendable {
    public let direction: Direction
    private let child: ChildProcess
    private let stopped = Atomic<Bool>(false)
    /// A property only this stream has (`audiosession.test.stream`): the process id may be claimed by
    /// another (a test's two pacats standing for one app's playback and recording).
    private let tag: String
    /// The pacat process id, which the server reports as `application.process.id`.
    public var processID: Int32 { child.pid }

    private init(direction: Direction, child: ChildProcess, tag: String) {
        self.direction = direction; self.child = child; self.tag = tag
    }

    /// What a playing stream writes.
    public enum Sound: Sendable {
        /// Full-scale noise (/dev/urandom): heard.
        case noise
        /// Digital silence (/dev/zero), as programs that keep a stream open between sounds write.
        case silence
    }

    /// Starts `pacat` against the server. `properties` become the stream's (PULSE_PROP), e.g.
    /// `["media.role": "music", "application.id": "org.example.Player"]`.
    public static func start(
        on server: PrivateServer, direction: Direction = .output, applicationName: String = "Test Player",
        properties: [String: String] = [:], device: String? = nil, sound: Sound = .noise
    ) throws -> ClientStream {
        var arguments = ["pacat", direction == .output ? "--playback" : "--record", "--client-name=\(applicationName)",
                         "--stream-name=\(applicationName) stream", "--format=s16le", "--rate=48000", "--channels=2",
                         "--latency-msec=100"]
        if let device { arguments.append("--device=\(device)") }
        arguments.append(direction == .input ? "/dev/null" : sound == .noise ? "/dev/urandom" : "/dev/zero")
        let tag = UUID().uuidString
        let all = properties.merging(["audiosession.test.stream": tag]) { own, _ in own }
        let child = try ChildProcess.spawn(arguments, environment: [
            "PULSE_SERVER": server.address,
            "PULSE_PROP": all.map { "\($0.key)='\($0.value)'" }.sorted().joined(separator: " "),
        ])
        return ClientStream(direction: direction, child: child, tag: tag)
    }

    /// Ends the client (SIGTERM) and waits until it has exited.
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        child.signal(SIGTERM)
        _ = child.blockingWait()
    }

    deinit { stop() }

    /// How the pacat process ended, nil while it runs (not reaped here).
    public var howItEnded: String? { child.howItEnded }

    /// This stream in a snapshot.
    public func find(in snapshot: Snapshot) -> AudioStream? {
        snapshot.streams(direction).first { $0.properties["audiosession.test.stream"] == tag }
    }
}

extension PulseClient {
    /// Waits until the process is a client of the server (by its process id: a killed predecessor's
    /// client may still be listed a moment after it died).
    public func waitForClient(processID pid: Int32) async throws {
        try await wait(for: "process \(pid) connected") { s in
            s.clients.values.contains { $0.properties["application.process.id"] == "\(pid)" } ? true : nil
        }
    }

    /// Waits until an agent process is a client of the server and has taken in what it found there: it
    /// says how its journal is (`audiosession.journal`, ControlTower.journalProperty) once it has handled
    /// its connection. A device that appears after that is news to it (one that came while it was still
    /// listing the server is part of what it found, and not logged as a route change).
    public func waitForAgentClient(processID pid: Int32, timeout: Duration = .seconds(10)) async throws {
        try await wait(for: "agent process \(pid) connected and past its first look at the server", timeout: timeout) { s in
            s.clients.values.contains {
                $0.properties["application.process.id"] == "\(pid)" && $0.properties["audiosession.journal"] != nil
            } ? true : nil
        }
    }

    /// Waits until a client stream is connected to a device and running, and returns it. (PipeWire
    /// announces a stream before it is linked, corked and with no device; it follows with changes.)
    /// A timeout says how the stream was last seen, and whether pacat had ended.
    @discardableResult
    public func wait(for stream: ClientStream, timeout: Duration = .seconds(10)) async throws -> AudioStream {
        do {
            return try await wait(for: "pacat \(stream.processID) to run", timeout: timeout) { snapshot in
                stream.find(in: snapshot).flatMap { $0.device != nil && !$0.isCorked ? $0 : nil }
            }
        } catch var error as TimeoutError {
            let seen = stream.find(in: snapshot).map { "seen as #\($0.id), device \($0.device.map(String.init) ?? "none"), corked \($0.isCorked)" }
            let client = snapshot.clients.values.contains { $0.properties["application.process.id"] == "\(stream.processID)" }
            error.what += "; its stream \(seen ?? "not seen"), its client \(client ? "seen" : "not seen"), "
                + "pacat \(stream.howItEnded ?? "running")"
            throw error
        }
    }
}

import Foundation
import Synchronization
public import PulseClient

/// A real client stream: a `pacat` process playing silence (or recording) with the properties an
/// application would set. Ended by `stop()` or when the object goes away.
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

    /// Starts `pacat` against the server. `properties` become the stream's (PULSE_PROP), e.g.
    /// `["media.role": "music", "application.id": "org.example.Player"]`.
    public static func start(
        on server: PrivateServer, direction: Direction = .output, applicationName: String = "Test Player",
        properties: [String: String] = [:], device: String? = nil
    ) throws -> ClientStream {
        var arguments = ["pacat", direction == .output ? "--playback" : "--record", "--client-name=\(applicationName)",
                         "--stream-name=\(applicationName) stream", "--format=s16le", "--rate=48000", "--channels=2",
                         "--latency-msec=100"]
        if let device { arguments.append("--device=\(device)") }
        arguments.append(direction == .output ? "/dev/zero" : "/dev/null")
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

    /// This stream in a snapshot.
    public func find(in snapshot: Snapshot) -> AudioStream? {
        snapshot.streams(direction).first { $0.properties["audiosession.test.stream"] == tag }
    }
}

public struct TimeoutError: Error, CustomStringConvertible {
    public var what: String
    public init(what: String) { self.what = what }
    public var description: String { "timed out waiting for \(what)" }
}

extension PulseClient {
    /// Waits, event by event (no polling), until the snapshot satisfies the predicate; returns its value.
    @discardableResult
    public func wait<T: Sendable>(
        for what: String, timeout: Duration = .seconds(10), _ predicate: @escaping @Sendable (Snapshot) -> T?
    ) async throws -> T {
        let events = self.events()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                // The first event of a fresh subscription is the current snapshot, so a condition that
                // already holds is seen at once.
                for await _ in events {
                    if let value = predicate(self.snapshot) { return value }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TimeoutError(what: what)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw TimeoutError(what: what) }
            return value
        }
    }

    /// Waits until a client stream is connected to a device and running, and returns it. (PipeWire
    /// announces a stream before it is linked, corked and with no device; it follows with changes.)
    @discardableResult
    public func wait(for stream: ClientStream, timeout: Duration = .seconds(10)) async throws -> AudioStream {
        try await wait(for: "pacat \(stream.processID) to run", timeout: timeout) { snapshot in
            stream.find(in: snapshot).flatMap { $0.device != nil && !$0.isCorked ? $0 : nil }
        }
    }
}

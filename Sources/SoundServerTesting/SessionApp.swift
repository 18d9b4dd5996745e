import Foundation
import PulseClient
import Synchronization

/// An app that declares its own session to the agent over D-Bus: the project's Python example
/// (examples/audiosession-play.py), a real client of the API. It says what happens in lines on its
/// standard output, which the test waits for; lines written to its standard input drive it.
public final class SessionApp: Sendable {
    public let process: ChildProcess
    private let input: Int32
    private struct Lines {
        var seen: [String] = []
        var ended = false
        var waiters: [(id: Int, prefix: String, after: Int, continuation: CheckedContinuation<String?, Never>)] = []
        var next = 0
    }
    private let lines = Mutex(Lines())

    public static let script = repositoryRoot.appendingPathComponent("examples/audiosession-play.py").path

    /// Starts the example on `server`, declaring its session on `bus` with these arguments
    /// (`--category playback`, `--silent` ...).
    public convenience init(_ arguments: [String], server: PrivateServer, bus: PrivateSessionBus) throws {
        try self.init(command: ["/usr/bin/python3", Self.script] + arguments, server: server, bus: bus)
    }

    /// The example as a sandboxed app with this Flatpak app id (scripts/sandboxed): its process's
    /// /.flatpak-info names it, as Flatpak's sandbox does.
    public convenience init(sandboxedAs appID: String, _ arguments: [String], server: PrivateServer, bus: PrivateSessionBus) throws {
        let sandboxed = repositoryRoot.appendingPathComponent("scripts/sandboxed").path
        try self.init(command: [sandboxed, appID, "/usr/bin/python3", Self.script] + arguments, server: server, bus: bus)
    }

    /// Any program that talks in lines the same way (the benchmark's own caller, say).
    public init(command: [String], server: PrivateServer, bus: PrivateSessionBus) throws {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else {
            throw CommandError(command: command, output: CommandOutput(status: -1, stdout: "", stderr: "pipe failed"))
        }
        // (Not inherited by other children: the app's end of each pipe is given to it by dup2.)
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let log = open("\(server.directory)/session-app.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { close(log); close(toChild[0]); close(fromChild[1]) }
        process = try ChildProcess.spawn(command,
                                         environment: ["PULSE_SERVER": server.address, "DBUS_SESSION_BUS_ADDRESS": bus.address],
                                         stdin: toChild[0], stdout: fromChild[1], stderr: log)
        input = toChild[1]
        let output = fromChild[0]
        Thread.detachNewThread { [self] in
            let handle = FileHandle(fileDescriptor: output, closeOnDealloc: true)
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 10) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending = Data(pending[pending.index(after: newline)...])
                    self.arrived(line)
                }
            }
            self.arrived(nil)
        }
    }

    deinit { close(input) }

    private func arrived(_ line: String?) {
        let ready: [(CheckedContinuation<String?, Never>, String?)] = lines.withLock { state in
            if let line { state.seen.append(line) } else { state.ended = true }
            let count = state.seen.count
            var ready: [(CheckedContinuation<String?, Never>, String?)] = []
            state.waiters.removeAll { waiter in
                if let line {
                    guard line.hasPrefix(waiter.prefix), count > waiter.after else { return false }
                    ready.append((waiter.continuation, line))
                } else {
                    ready.append((waiter.continuation, nil))
                }
                return true
            }
            return ready
        }
        for (continuation, line) in ready { continuation.resume(returning: line) }
    }

    /// Everything it said so far.
    public var said: [String] { lines.withLock { $0.seen } }

    /// How many lines it said so far (to wait for a line said after them).
    public var count: Int { lines.withLock { $0.seen.count } }

    /// Waits for a line starting with `prefix`, said after the first `after` lines (default: any), and
    /// returns it; throws when the app ends or `timeout` passes first.
    @discardableResult
    public func wait(for prefix: String, after: Int = 0, timeout: Duration = .seconds(10)) async throws -> String {
        let line: String? = await withCheckedContinuation { continuation in
            let (done, id): (String??, Int) = lines.withLock { state in
                if let hit = state.seen.dropFirst(after).first(where: { $0.hasPrefix(prefix) }) { return (.some(hit), 0) }
                if state.ended { return (.some(nil), 0) }
                state.next += 1
                state.waiters.append((state.next, prefix, after, continuation))
                return (nil, state.next)
            }
            if let done { return continuation.resume(returning: done) }
            Task {
                try? await Task.sleep(for: timeout)
                let expired = self.lines.withLock { state in
                    state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0).continuation }
                }
                expired?.resume(returning: nil)
            }
        }
        guard let line else {
            throw TimeoutError(what: "the app to say '\(prefix)' within \(timeout); it said: \(said.joined(separator: " | "))")
        }
        return line
    }

    /// Tells it what to do ("deactivate", "activate", "quit").
    public func send(_ command: String) {
        let bytes = Array((command + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
    }

    /// Ends it (kill -9 with `hard`), and waits until it has gone.
    public func stop(hard: Bool = false) async {
        if hard { process.signal(SIGKILL) } else { send("quit") }
        _ = await process.wait()
    }
}

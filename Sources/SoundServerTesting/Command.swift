public import Foundation
import Synchronization

/// Held while a pipe is made and marked close-on-exec, and while a child is spawned, so that no child
/// inherits another command's pipe (which would keep it open until that child exits).
private let spawnLock = Mutex(())

/// The result of a finished command.
public struct CommandOutput: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

public struct CommandError: Error, CustomStringConvertible {
    public var command: [String]
    public var output: CommandOutput
    public var description: String {
        "\(command.joined(separator: " ")) exited with \(output.status): \(output.stderr.trimmingCharacters(in: .whitespacesAndNewlines))"
    }
}

/// A child process started with posix_spawn. (Foundation's Process on Linux can miss a child's exit
/// when many run at once, which hung tests: waitpid on a thread of our own cannot.)
public struct ChildProcess: Sendable {
    public let pid: pid_t

    /// Starts `arguments` (looked up in PATH) with the environment changed by `environment`; the
    /// child's stdin, stdout and stderr are the given descriptors (or /dev/null).
    /// Descriptors of ours that must not leak into it are opened close-on-exec (libpulse's are too).
    public static func spawn(
        _ arguments: [String], environment: [String: String] = [:], stdin: Int32? = nil, stdout: Int32? = nil, stderr: Int32? = nil
    ) throws -> ChildProcess {
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { _, new in new }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdin { posix_spawn_file_actions_adddup2(&actions, stdin, 0) } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        if let stderr { posix_spawn_file_actions_adddup2(&actions, stderr, 2) } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Default signal handling in the child (the test runner may block some).
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let result = spawnLock.withLock { _ in posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp) }
        guard result == 0 else {
            throw CommandError(command: arguments, output: CommandOutput(
                status: -1, stdout: "", stderr: "cannot start: \(String(cString: strerror(result)))"))
        }
        return ChildProcess(pid: pid)
    }

    /// Sends a signal (SIGTERM by default).
    public func signal(_ number: Int32 = 15 /* SIGTERM */) { kill(pid, number) }

    /// Waits for the child to end, on a thread of its own, and returns its exit status
    /// (128 + signal for a child killed by a signal).
    public func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: blockingWait()) }
        }
    }

    /// Its exit status if it has ended (and is reaped by this), nil while it runs.
    public func exitStatusIfEnded() -> Int32? {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    /// How it ended, in words ("exited with status 1", "killed by signal 9"), nil while it runs; it is
    /// left to be reaped by `wait()` (WNOWAIT). For a message. ("ended" once reaped already.)
    public var howItEnded: String? {
        var info = siginfo_t()
        guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 else { return errno == ECHILD ? "ended" : nil }
        guard info._sifields._sigchld.si_pid == pid else { return nil }
        let status = info._sifields._sigchld.si_status
        return info.si_code == CLD_EXITED ? "exited with status \(status)" : "killed by signal \(status)"
    }

    func blockingWait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }
}

/// Runs a program to completion and returns what it printed; throws if it fails (unless `check` is false).
@discardableResult
public func runCommand(
    _ arguments: [String], environment: [String: String] = [:], check: Bool = true
) async throws -> CommandOutput {
    var outPipe: [Int32] = [0, 0]
    var errPipe: [Int32] = [0, 0]
    let made = spawnLock.withLock { _ in
        guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { return false }
        // Close-on-exec, so that no other child holds them open (the child gets its copies by dup2).
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return true
    }
    guard made else {
        throw CommandError(command: arguments, output: CommandOutput(status: -1, stdout: "", stderr: "pipe failed"))
    }
    let child: ChildProcess
    do {
        child = try ChildProcess.spawn(arguments, environment: environment, stdout: outPipe[1], stderr: errPipe[1])
    } catch {
        (outPipe + errPipe).forEach { close($0) }
        throw error
    }
    close(outPipe[1])
    close(errPipe[1])
    let (readOut, readErr) = (outPipe[0], errPipe[0])
    let output: CommandOutput = await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            let (o, e) = drain(readOut, readErr)
            close(readOut)
            close(readErr)
            let status = child.blockingWait()
            continuation.resume(returning: CommandOutput(
                status: status, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self)))
        }
    }
    if check && output.status != 0 { throw CommandError(command: arguments, output: output) }
    return output
}

/// Reads two descriptors to their ends, whichever has data first.
private func drain(_ a: Int32, _ b: Int32) -> ([UInt8], [UInt8]) {
    var data: [[UInt8]] = [[], []]
    var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
    var buffer = [UInt8](repeating: 0, count: 65536)
    while fds.contains(where: { $0.fd >= 0 }) {
        if poll(&fds, 2, -1) < 0 { if errno == EINTR { continue } else { break } }
        for i in 0..<2 where fds[i].fd >= 0 && fds[i].revents != 0 {
            let n = read(fds[i].fd, &buffer, buffer.count)
            if n > 0 { data[i].append(contentsOf: buffer[0..<n]) } else if n == 0 || errno != EINTR { fds[i].fd = -1 }
        }
    }
    return (data[0], data[1])
}

/// The repository's root, found from this file's place in it.
public let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A product SwiftPM built next to the running test bundle (`audiosessiond`, `audiosessionctl` ...).
public func builtExecutable(_ name: String) -> String {
    var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: dir.appendingPathComponent(name).path), dir.path != "/" {
        dir = dir.deletingLastPathComponent()
    }
    return dir.appendingPathComponent(name).path
}

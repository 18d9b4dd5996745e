import FoundationEssentials
import Glibc

/// One agent per user and state directory: two agents on one server fight over every stream (a SIGTERM
/// to one undoes what the other holds) and share one journal. The first takes an exclusive lock on
/// `agent.lock` in the state directory (held until the process ends, released by the kernel even after
/// `kill -9`); a second one is told who holds it.
final class InstanceLock {
    private let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }
    deinit { close(descriptor) }

    static func acquire(in directory: String) throws -> InstanceLock {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = "\(directory)/agent.lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AgentError.stateDirectory("cannot open \(path): \(String(cString: strerror(errno)))") }
        return try acquire(fd, path: path, directory: directory)
    }

    private static func acquire(_ fd: Int32, path: String, directory: String) throws -> InstanceLock {
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let holder = String(decoding: (FileManager.default.contents(atPath: path) ?? Data()), as: UTF8.self)
                .filter { !$0.isWhitespace }
            close(fd)
            throw AgentError.anotherAgent("another audiosessiond (process \(holder.isEmpty ? "?" : holder)) runs with the state directory \(directory); stop it first")
        }
        let pid = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pid.withCString { pwrite(fd, $0, strlen($0), 0) }
        return InstanceLock(descriptor: fd)
    }
}

/// Why the agent cannot run.
public enum AgentError: Error, CustomStringConvertible, Sendable {
    /// Another agent already runs for this user or this server.
    case anotherAgent(String)
    /// The state directory cannot be used.
    case stateDirectory(String)

    public var description: String {
        switch self {
        case .anotherAgent(let words), .stateDirectory(let words): words
        }
    }
}

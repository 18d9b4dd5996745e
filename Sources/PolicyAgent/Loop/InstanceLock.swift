import FoundationEssentials
import Glibc

/// One agent per state directory: two agents on one server fight over every stream (a SIGTERM to one
/// undoes what the other holds) and share one journal. The first takes an exclusive lock on
/// `agent.lock` in the state directory (held until the process ends, released by the kernel even after
/// `kill -9`); a second one is told who holds it. The file is opened through `StateDirectory` (never
/// through a link) and read through its descriptor.
final class InstanceLock {
    private let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }
    deinit { close(descriptor) }

    static let fileName = "agent.lock"

    static func acquire(in directory: StateDirectory) throws -> InstanceLock {
        let fd: Int32
        do { fd = try directory.openFile(fileName, O_RDWR | O_CREAT) } catch {
            throw error.kind == .unsafe ? AgentError.stateDirectory(error.description) : AgentError.noLock(error.description)
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            var bytes = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &bytes, bytes.count, 0)
            let holder = String(decoding: bytes.prefix(max(0, n)), as: UTF8.self).filter(\.isNumber)
            close(fd)
            throw AgentError.anotherAgent("another audiosessiond (process \(holder.isEmpty ? "?" : holder)) runs with the state directory \(StateDirectory.shown(directory.path)); stop it first")
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
    /// The state directory is not safe to use (a link planted there, another user's directory, one
    /// others may write): the agent refuses to start.
    case stateDirectory(String)
    /// The lock cannot be taken (a read-only or full state directory): said, and the agent runs on.
    case noLock(String)

    public var description: String {
        switch self {
        case .anotherAgent(let words), .stateDirectory(let words), .noLock(let words): words
        }
    }
}

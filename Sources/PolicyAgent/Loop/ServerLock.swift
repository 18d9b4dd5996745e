import DBus
import FoundationEssentials
import Glibc
import Synchronization

/// One agent per sound server, decided by something no client of the server can forge.
///
/// The server's own list of clients cannot decide it: what a client shows there (`application.id`,
/// `application.process.id`) is its own word, which neither PulseAudio nor pipewire-pulse verifies, so
/// any app (a sandboxed one too) could keep the agent from starting by claiming to be one. Two locks
/// decide instead, each held by the kernel or a daemon and let go when the agent dies (`kill -9` too):
/// - `agent.lock` in the state directory (`InstanceLock`), for agents that share it;
/// - a well-known name on the session bus that stands for the server (`org.audiosession.Server.s` and a
///   hash of the server's address as the connection resolved it, a socket's path through its links),
///   asked for without queueing: the bus daemon gives it to exactly one connection, so of two agents
///   started together exactly one runs; and it names the owner's process as it verified it.
///
/// A Flatpak app cannot own such a name (its bus proxy lets it own names under its app id only); a
/// program of the user's own could, as it could stop the agent in other ways. An agent with no session
/// bus (`--session-bus none`, or none to be had) has the state directory's lock only. The name is asked
/// for again when the session bus comes back; if another agent has it by then, this one stops.
final class ServerLock: Sendable {
    /// The name, once the server is known.
    private let held = Mutex<String?>(nil)

    /// The well-known name that stands for the server at `address`.
    static func busName(forServer address: String) -> String {
        // FNV-1a: a name, not a secret (anyone may ask for any name; the daemon decides who has it).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in canonical(address).utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "org.audiosession.Server.s" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// One spelling for one server: `unix:` left out, a socket's path resolved through its links.
    static func canonical(_ address: String) -> String {
        let path = address.hasPrefix("unix:") ? String(address.dropFirst(5)) : address
        guard path.hasPrefix("/"), let resolved = realpath(path, nil) else { return address }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Takes the server's name on `bus`, or throws `AgentError.anotherAgent` naming who has it.
    func take(forServer address: String, on bus: DBusConnection) async throws {
        let name = Self.busName(forServer: address)
        held.withLock { $0 = name }
        if try await bus.requestName(name, queue: false) == .owned { return }
        throw AgentError.anotherAgent("another audiosessiond (\(await Self.owner(of: name, on: bus))) already manages this sound server (\(Self.canonical(address))): it owns \(name) on the session bus; stop it first")
    }

    /// After the session bus came back: the server's name, if it had one, asked for again. Nil when it
    /// is ours (or there is none to ask for), else who has it.
    func retake(on bus: DBusConnection) async -> String? {
        guard let name = held.withLock({ $0 }) else { return nil }
        do {
            if try await bus.requestName(name, queue: false) == .owned { return nil }
            return "another audiosessiond (\(await Self.owner(of: name, on: bus))) took \(name) on the session bus while it was away"
        } catch {
            // (No bus again: the next connection asks once more.)
            return nil
        }
    }

    /// Who owns `name`, as the bus daemon knows it: "process 1234 (audiosessiond)".
    static func owner(of name: String, on bus: DBusConnection) async -> String {
        guard let owner = try? await bus.callDaemon("GetNameOwner", [.string(name)]).first?.string,
              let pid = try? await bus.callDaemon("GetConnectionUnixProcessID", [.string(owner)]).first?.integer else {
            return "process ?"
        }
        let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)).map { String($0.prefix { !$0.isNewline }) }
        return "process \(pid)\(command.map { " (\($0))" } ?? "")"
    }
}

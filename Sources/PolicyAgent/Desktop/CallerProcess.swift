import FoundationEssentials
import Glibc

/// A caller on the apps' bus as its process shows it in /proc: its command name, its program's file
/// name, and the Flatpak app id its root's /.flatpak-info names (nil: not sandboxed).
///
/// Fails closed. The bus daemon names the process that connected; that process may have handed the
/// connection to a child and gone (connect, fork, let the parent exit). Its root then cannot be read,
/// and the caller is not identified (its calls are refused) rather than taken for an unsandboxed app.
/// Everything is read through one descriptor of /proc/PID, which stays that process's even if its id is
/// given to another one later. (A pidfd from the bus would close the last gap, an id reused before the
/// first look; sd-bus of systemd 252 and dbus-daemon 1.14 give none: see README.)
struct CallerProcess: Sendable, Hashable {
    var name: String
    var binary: String?
    var appID: String?

    /// Reads process `pid` under `proc`, or says why it cannot be (gone, a zombie, not ours to look into).
    static func inspect(_ pid: Int, proc: String = "/proc") -> Result<CallerProcess, CallerProcessError> {
        let directory = open("\(proc)/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return .failure(CallerProcessError(pid: pid, "it has gone")) }
        defer { close(directory) }
        // The root as the process sees it: a process that has exited (a zombie too) has none.
        let root = openat(directory, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else {
            let why = errno == EACCES || errno == EPERM ? "its root is not ours to read" : "its root cannot be read (it has gone)"
            return .failure(CallerProcessError(pid: pid, why))
        }
        defer { close(root) }
        var appID: String?
        let info = openat(root, ".flatpak-info", O_RDONLY | O_CLOEXEC)
        if info >= 0 {
            defer { close(info) }
            guard let text = read(info, limit: 64 << 10) else { return .failure(CallerProcessError(pid: pid, "its /.flatpak-info cannot be read")) }
            // A /.flatpak-info that names no app id is a sandbox all the same: it is not taken for none.
            guard let id = MediaPlayers.flatpakAppID(inInfo: text) else {
                return .failure(CallerProcessError(pid: pid, "its /.flatpak-info names no app id"))
            }
            appID = id
        } else if errno != ENOENT {
            return .failure(CallerProcessError(pid: pid, "its /.flatpak-info cannot be read: \(String(cString: strerror(errno)))"))
        }
        let comm = openat(directory, "comm", O_RDONLY | O_CLOEXEC)
        let name = comm >= 0 ? (read(comm, limit: 64) ?? "") : ""
        if comm >= 0 { close(comm) }
        var exe = [UInt8](repeating: 0, count: 4096)
        let length = exe.withUnsafeMutableBufferPointer { readlinkat(directory, "exe", UnsafeMutableRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count - 1) }
        let binary = length > 0 ? String(decoding: exe[..<length], as: UTF8.self).split(separator: "/").last.map(String.init) : nil
        let command = String(name.prefix { !$0.isNewline })
        return .success(CallerProcess(name: command.isEmpty ? "pid\(pid)" : command, binary: binary, appID: appID))
    }

    /// At most `limit` bytes of the file, as text (nil on a read error).
    private static func read(_ fd: Int32, limit: Int) -> String? {
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < limit {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, limit - count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            count += n
        }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }
}

/// Why a caller's process could not be read: its calls are refused.
struct CallerProcessError: Error, CustomStringConvertible, Sendable, Hashable {
    let pid: Int
    let why: String
    init(pid: Int, _ why: String) { self.pid = pid; self.why = why }
    var description: String { "its process \(pid) cannot be looked into: \(why) (a connection handed on by a process that has gone is not trusted)" }
}

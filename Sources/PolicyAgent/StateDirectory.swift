import FoundationEssentials
import Glibc

/// The agent's state directory (the journal, the instance lock, the user's record permissions), opened
/// once and then used through its descriptor only: every file in it is opened relative to that
/// descriptor with `O_NOFOLLOW|O_CLOEXEC` and checked to be a plain file of ours, so a symbolic link
/// or a hard link planted there is never written through, and a directory renamed or swapped after the
/// check is not the one written to. Files are replaced through a new file of a unique name, renamed
/// over the old one.
///
/// The directory itself must be ours and writable by no one else: it is created 0700 (its missing
/// parents too), an existing one of ours with wider read permissions is narrowed to 0700, and one owned
/// by another user, writable by group or others, or a symbolic link, is refused with the reason.
public final class StateDirectory: Sendable {
    /// The directory as given (for messages).
    public let path: String
    private let descriptor: Int32

    /// The names the agent keeps there. Each is checked when the directory is opened: a symbolic link,
    /// a directory or another user's file in its place is something other than the agent put there.
    static let ownFiles = ["agent.lock", "held.log", "held.log.new", "held.log~", "held.json", "record-permissions", "record-permissions.new"]

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Opens (and, with `creating`, makes) the state directory at `path`, or says why it cannot be used.
    public static func open(_ path: String, creating: Bool = true) throws(StateDirectoryError) -> StateDirectory {
        if creating { try makeDirectories(path) }
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP || (code == ENOTDIR && isSymbolicLink(path)) {
                throw StateDirectoryError(.unsafe, "the state directory \(Self.shown(path)) is a symbolic link\(linkTarget(path).map { " (to \($0))" } ?? ""): give the directory itself")
            }
            if code == ENOTDIR { throw StateDirectoryError(.unsafe, "the state directory \(Self.shown(path)) is not a directory") }
            throw StateDirectoryError(code == ENOENT ? .missing : .unusable, "cannot open the state directory \(Self.shown(path)): \(String(cString: strerror(code)))")
        }
        let directory = StateDirectory(path: path, descriptor: fd)
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw StateDirectoryError(.unusable, "cannot read the state directory \(Self.shown(path)): \(String(cString: strerror(errno)))")
        }
        guard info.st_uid == geteuid() else {
            throw StateDirectoryError(.unsafe, "the state directory \(Self.shown(path)) belongs to user \(info.st_uid), not to this user (\(geteuid())): another user could plant files there")
        }
        guard info.st_mode & 0o022 == 0 else {
            throw StateDirectoryError(.unsafe, "the state directory \(Self.shown(path)) may be written by \(info.st_mode & 0o020 != 0 ? "its group" : "other users") (mode \(String(info.st_mode & 0o7777, radix: 8))): make it 0700 (chmod 700)")
        }
        // Ours and closed to writers: what others may still read (an earlier version's 0755) is narrowed.
        if info.st_mode & 0o077 != 0 { _ = fchmod(fd, 0o700) }
        for name in ownFiles { try directory.checkEntry(name) }
        return directory
    }

    /// `mkdir -p` with mode 0700 for every directory it makes (the XDG base directory rule).
    private static func makeDirectories(_ path: String) throws(StateDirectoryError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0, errno != EEXIST {
                throw StateDirectoryError(errno == ENOENT ? .missing : .unusable,
                                          "cannot make the state directory \(Self.shown(path)): \(Self.shown(prefix)): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Refuses an entry that is there but is not a plain file of ours with one name.
    private func checkEntry(_ name: String) throws(StateDirectoryError) {
        var info = stat()
        guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return }
        if let problem = problem(with: info, name) { throw StateDirectoryError(.unsafe, problem + ": something other than the agent put it there; remove it and start again") }
    }

    /// What is wrong with a file found at `name` (nil: a plain file of ours).
    private func problem(with info: stat, _ name: String) -> String? {
        let kind = info.st_mode & 0o170000
        if kind == 0o120000 {
            let target = Self.linkTarget(descriptor, name).map { " (to \($0))" } ?? ""
            return "\(shown(name)) is a symbolic link\(target), which the agent never writes through"
        }
        if kind != 0o100000 { return "\(shown(name)) is not a plain file" }
        if info.st_uid != geteuid() { return "\(shown(name)) belongs to user \(info.st_uid), not to this user (\(geteuid()))" }
        if info.st_nlink > 1 { return "\(shown(name)) has other names (\(info.st_nlink) hard links)" }
        return nil
    }

    /// Opens the file `name` in the directory (never through a link), checked to be a plain file of
    /// ours; `flags` as open(2)'s (`O_CREAT` makes it 0600).
    func openFile(_ name: String, _ flags: Int32) throws(StateDirectoryError) -> Int32 {
        let fd = openat(descriptor, name, flags | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP { throw StateDirectoryError(.unsafe, "\(shown(name)) is a symbolic link, which the agent never writes through") }
            throw StateDirectoryError(code == ENOENT ? .missing : .unusable, "cannot open \(shown(name)): \(String(cString: strerror(code)))")
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw StateDirectoryError(.unusable, "cannot read \(shown(name)): \(String(cString: strerror(code)))")
        }
        if let problem = problem(with: info, name) {
            close(fd)
            throw StateDirectoryError(.unsafe, problem)
        }
        return fd
    }

    /// The file's bytes, read as a whole (for small files: at most `limit` bytes, more is an error);
    /// nil when there is no such file.
    func read(_ name: String, limit: Int) throws(StateDirectoryError) -> [UInt8]? {
        let fd: Int32
        do { fd = try openFile(name, O_RDONLY) } catch where error.kind == .missing { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw StateDirectoryError(.unusable, "cannot read \(shown(name)): \(String(cString: strerror(errno)))")
            }
            if n == 0 { return bytes }
            bytes += chunk[..<n]
            if bytes.count > limit { throw StateDirectoryError(.unusable, "\(shown(name)) is larger than \(limit) bytes") }
        }
    }

    /// Replaces the file `name` with `bytes`: written to a new file of a unique name (`O_EXCL`: made
    /// by us, never a link), then renamed over it, so a reader sees the old file or the new one.
    func replace(_ name: String, with bytes: some Collection<UInt8>) throws(StateDirectoryError) {
        var temporary = ""
        var fd: Int32 = -1
        for _ in 0..<8 {
            temporary = ".\(name).\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
            fd = openat(descriptor, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw StateDirectoryError(.unusable, "cannot write a new \(shown(name)): \(String(cString: strerror(errno)))") }
        let written = Array(bytes).withUnsafeBytes { writeAll($0, to: fd) }
        let code = errno
        close(fd)
        guard written else {
            unlinkat(descriptor, temporary, 0)
            throw StateDirectoryError(.unusable, "cannot write a new \(shown(name)): \(String(cString: strerror(code)))")
        }
        guard renameat(descriptor, temporary, descriptor, name) == 0 else {
            let code = errno
            unlinkat(descriptor, temporary, 0)
            throw StateDirectoryError(.unusable, "cannot replace \(shown(name)): \(String(cString: strerror(code)))")
        }
    }

    /// Renames `name` to `newName` in the directory (a link at `newName` is replaced, not followed).
    func rename(_ name: String, to newName: String) throws(StateDirectoryError) {
        guard renameat(descriptor, name, descriptor, newName) == 0 else {
            throw StateDirectoryError(.unusable, "cannot rename \(shown(name)) to \(newName): \(String(cString: strerror(errno)))")
        }
    }

    /// Removes the file `name`, if there is one (a link is removed, not what it points to).
    func remove(_ name: String) { unlinkat(descriptor, name, 0) }

    /// A file of the directory, as messages show it.
    func shown(_ name: String) -> String { Self.shown("\(path)/\(name)") }

    /// A path in a message, shortened (a link's target can be 4 KB of anyone's text); the message's
    /// sink (the log, the terminal) escapes it.
    static func shown(_ path: String) -> String { Escape.shortened(path) }

    private static func isSymbolicLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & 0o170000 == 0o120000
    }

    private static func linkTarget(_ path: String) -> String? { linkTarget(AT_FDCWD, path) }

    private static func linkTarget(_ directory: Int32, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBufferPointer { readlinkat(directory, name, UnsafeMutableRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count) }
        return n >= 0 ? shown(String(decoding: buffer[..<n], as: UTF8.self)) : nil
    }

    /// Where the agent keeps its state unless told (`--state-dir`): `$XDG_STATE_HOME/audiosession`,
    /// else `$HOME/.local/state/audiosession`, else `$XDG_RUNTIME_DIR/audiosession` (gone at logout:
    /// better than a shared place such as /tmp, where another user could plant links). Relative paths
    /// in these variables are ignored, as the XDG base directory rules say.
    public static func defaultPath(environment: [String: String]) throws(StateDirectoryError) -> String {
        func absolute(_ name: String) -> String? { environment[name].flatMap { $0.hasPrefix("/") ? $0 : nil } }
        if let state = absolute("XDG_STATE_HOME") { return "\(state)/audiosession" }
        if let home = absolute("HOME") { return "\(home)/.local/state/audiosession" }
        if let runtime = absolute("XDG_RUNTIME_DIR") { return "\(runtime)/audiosession" }
        throw StateDirectoryError(.missing, "no state directory: none of XDG_STATE_HOME, HOME and XDG_RUNTIME_DIR is set to an absolute path; give one with --state-dir")
    }
}

/// Why the state directory, or a file in it, cannot be used.
public struct StateDirectoryError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Hashable {
        /// Something is there that the agent did not put there (a link, another user's file or
        /// directory, a directory others may write): refused, never used.
        case unsafe
        /// It is not there (and was not to be made).
        case missing
        /// It cannot be read or written (a read-only or full file system, a permission).
        case unusable
    }
    public var kind: Kind
    public var description: String

    init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// Writes every byte (retrying short writes and EINTR); false on an error, with errno set.
func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { if n == 0 { errno = ENOSPC }; return false }
        offset += n
    }
    return true
}

import AudioPolicy
import Foundation
import Glibc
@testable import AgentTower
@testable import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing

/// Issue 20, case 1: the state directory as another local user, or a careless setup, leaves it: links
/// planted where the agent's files go, a directory of someone else's or one others may write, no HOME.
/// The agent refuses to start and says why, and never writes through a link. No sound server is
/// needed: the state directory is dealt with before the agent connects.
@Suite("the state directory")
struct StateDirectoryTests {
    /// A file outside the state directory that a planted link points to, with text that must stay.
    struct Target {
        let path: String
        static let text = "the user's own file: must stay as it is\n"
        init(in scratch: Scratch) { path = scratch.write("elsewhere/target", Self.text) }
        var untouched: Bool { (try? String(contentsOfFile: path, encoding: .utf8)) == Self.text }
    }

    /// The agent started on a state directory, with no server to connect to: what it says and its status.
    func runAgent(state: String, in scratch: Scratch) async throws -> CommandOutput {
        try await runCommand(
            [Built.audiosessiond, "--server", "unix:\(scratch.path)/no-server", "--state-dir", state, "--session-bus", "none", "--system-bus", "none",
             "--policies", scratch.directory("policies")],
            environment: ["SWIFT_BACKTRACE": "enable=no", "XDG_CONFIG_HOME": "\(scratch.path)/config"], check: false)
    }

    @Test("a symbolic link planted at agent.lock, held.log or held.log.new: the agent refuses to start, says which and why, and the link's target stays as it was",
          arguments: ["agent.lock", "held.log", "held.log.new"])
    func plantedLink(name: String) async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let target = Target(in: scratch)
        let state = scratch.directory("state")
        #expect(symlink(target.path, "\(state)/\(name)") == 0)
        let result = try await runAgent(state: state, in: scratch)
        #expect(result.status == 1, "exit status \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("\(state)/\(name) is a symbolic link (to \(target.path))"), "\(result.stderr)")
        #expect(target.untouched, "written through the link at \(name)")
    }

    @Test("a dangling link planted at agent.lock or held.log: the agent refuses, and makes no file where it points",
          arguments: ["agent.lock", "held.log"])
    func danglingLink(name: String) async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let state = scratch.directory("state")
        let nowhere = "\(scratch.path)/elsewhere-\(name)"
        #expect(symlink(nowhere, "\(state)/\(name)") == 0)
        let result = try await runAgent(state: state, in: scratch)
        #expect(result.status == 1, "exit status \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("is a symbolic link"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: nowhere), "a file was made outside the state directory")
    }

    @Test("a state directory others may write, or another user's, is refused with the reason")
    func foreignDirectory() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let open = scratch.directory("open")
        chmod(open, 0o777)
        let result = try await runAgent(state: open, in: scratch)
        #expect(result.status == 1, "exit status \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("\(open) may be written by its group (mode 777)"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(open)/agent.lock"))
        let theirs = scratch.directory("theirs")
        #expect(chown(theirs, 65534, 65534) == 0, "the tests run as root")
        let other = try await runAgent(state: theirs, in: scratch)
        #expect(other.status == 1, "exit status \(other.status): \(other.stderr)")
        #expect(other.stderr.contains("\(theirs) belongs to user 65534, not to this user (0)"), "\(other.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(theirs)/agent.lock"))
    }

    @Test("a state directory the agent makes is 0700, its missing parents too; an existing one of ours open to readers is narrowed")
    func madePrivate() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let path = "\(scratch.path)/a/b/audiosession"
        _ = try StateDirectory.open(path)
        for made in ["\(scratch.path)/a", "\(scratch.path)/a/b", path] {
            var info = stat()
            #expect(stat(made, &info) == 0 && info.st_mode & 0o777 == 0o700, "\(made): \(String(info.st_mode & 0o777, radix: 8))")
        }
        let wide = scratch.directory("wide")
        chmod(wide, 0o755)
        _ = try StateDirectory.open(wide)
        var info = stat()
        #expect(stat(wide, &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    @Test("with neither XDG_STATE_HOME, HOME nor XDG_RUNTIME_DIR the agent refuses with a clear error: no /tmp fallback")
    func noStateDirectory() async throws {
        #expect(throws: StateDirectoryError.self) { try StateDirectory.defaultPath(environment: ["HOME": "relative/home"]) }
        #expect(try StateDirectory.defaultPath(environment: ["HOME": "/home/u", "XDG_STATE_HOME": "/s"]) == "/s/audiosession")
        #expect(try StateDirectory.defaultPath(environment: ["HOME": "/home/u", "XDG_STATE_HOME": "s"]) == "/home/u/.local/state/audiosession")
        #expect(try StateDirectory.defaultPath(environment: ["XDG_RUNTIME_DIR": "/run/user/7"]) == "/run/user/7/audiosession")
        let result = try await runCommand(
            ["/usr/bin/env", "-u", "HOME", "-u", "XDG_STATE_HOME", "-u", "XDG_RUNTIME_DIR", Built.audiosessiond,
             "--server", "unix:/nonexistent/native", "--session-bus", "none", "--system-bus", "none"],
            environment: ["SWIFT_BACKTRACE": "enable=no"], check: false)
        #expect(result.status == 1, "exit status \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("no state directory: none of XDG_STATE_HOME, HOME and XDG_RUNTIME_DIR is set"), "\(result.stderr)")
    }

    @Test("a link planted after the start is not written through: the journal says it cannot be written, and its compaction uses a name of its own")
    func linkPlantedLater() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let target = Target(in: scratch)
        let state = scratch.directory("state")
        let journal = Journal(directory: state)
        _ = journal.leftovers()
        #expect(symlink(target.path, "\(state)/held.log") == 0)
        let entry = Journal.Entry(direction: .output, index: 1, processID: "42", name: "Player", muted: true, baseVolume: nil, restoreKey: nil)
        let health = journal.apply(.hold(StreamKey(.output, 1), entry))
        guard case .failing(let reason)? = health else { Issue.record("a write through a link was not refused: \(String(describing: health))"); return }
        #expect(reason.contains("held.log is a symbolic link"), "\(reason)")
        #expect(target.untouched)
        // Compaction writes a new file of its own and renames it over the link (not through it).
        #expect(symlink(target.path, "\(state)/held.log.new") == 0)
        journal.apply(.clear)
        #expect(target.untouched)
        var info = stat()
        #expect(lstat("\(state)/held.log", &info) == 0 && info.st_mode & 0o170000 == 0o100000, "held.log is the journal's own file again")
        #expect(try String(contentsOfFile: "\(state)/held.log", encoding: .utf8) == "")
    }

    @Test("the record permissions are written through a file of their own, never through a link planted at their name")
    func recordPermissionsThroughALink() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let target = Target(in: scratch)
        let state = scratch.directory("state")
        #expect(symlink(target.path, "\(state)/record-permissions") == 0)
        let result = try await Built.ctl(["permission", "org.example.App", "deny", "--state-dir", state])
        #expect(result.status == 1, "exit status \(result.status): \(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("record-permissions is a symbolic link"), "\(result.stderr)")
        #expect(target.untouched)
    }
}

/// Issue 20, case 2, through the built agent: a large corrupt journal is neither read whole nor
/// logged line by line. (No server: the journal is read before the agent connects.)
@Suite("a corrupt journal, through the agent")
struct CorruptJournalTests {
    @Test("20,000 bad lines: the agent logs the first five, counts the rest, and moves the file aside")
    func fewLinesLogged() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let state = scratch.directory("state")
        let good = #"{"entry":{"direction":"output","index":7,"muted":true,"name":"Player"},"key":"out#7"}"#
        scratch.write("state/held.log", good + "\n" + String(repeating: "not a journal line\n", count: 20_000))
        let result = try await runCommand(
            [Built.audiosessiond, "--server", "unix:\(scratch.path)/no-server", "--state-dir", state, "--session-bus", "none", "--system-bus", "none",
             "--policies", scratch.directory("policies")],
            environment: ["SWIFT_BACKTRACE": "enable=no", "XDG_CONFIG_HOME": "\(scratch.path)/config"], check: false)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.filter { $0.contains("journal line skipped") }.count == 5, "\(result.stderr.prefix(2_000))")
        #expect(lines.contains { $0.contains("more journal lines skipped") && $0.contains("count=19995") }, "\(result.stderr.prefix(2_000))")
        #expect(lines.contains { $0.contains("the journal was corrupt") && $0.contains("moved aside") }, "\(result.stderr.prefix(2_000))")
        #expect(lines.count < 40, "\(lines.count) lines of log")
        #expect(FileManager.default.fileExists(atPath: "\(state)/held.log~"))
        #expect(try String(contentsOfFile: "\(state)/held.log", encoding: .utf8).contains("out#7"), "the good entry is kept")
    }
}

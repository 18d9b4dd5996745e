import Foundation
import Glibc
import SoundServerTesting
@testable import PolicyAgent
package import AgentTower
import TowerTesting

/// A fresh directory under /tmp for one test, removed by `remove()`.
struct Scratch {
    let path: String

    init() {
        var template = Array("/tmp/audiosession-bad-input-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    /// Writes bytes to `name` under the directory (making the directories on the way) and returns its path.
    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) -> String {
        let file = "\(path)/\(name)"
        try? FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: file, contents: Data(bytes))
        return file
    }

    @discardableResult
    func write(_ name: String, _ text: String) -> String { write(name, Array(text.utf8)) }

    func directory(_ name: String) -> String {
        let dir = "\(path)/\(name)"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// The built command-line tool and daemon, run as the user would. Crashes print no backtrace (it
/// would only slow the test down); a crash shows as status 128 + the signal.
enum Built {
    static var audiosessionctl: String { builtExecutable("audiosessionctl") }
    /// (AUDIOSESSION_AGENT_BINARY runs the tests against another build: an earlier commit's, to see a
    /// test fail without its fix.)
    static var audiosessiond: String { ProcessInfo.processInfo.environment["AUDIOSESSION_AGENT_BINARY"] ?? builtExecutable("audiosessiond") }

    static func ctl(_ arguments: [String], environment: [String: String] = [:]) async throws -> CommandOutput {
        try await runCommand([audiosessionctl] + arguments, environment: ["SWIFT_BACKTRACE": "enable=no"].merging(environment) { $1 }, check: false)
    }

    /// As another user (nobody) when the tests run as root, for whom no permission is ever missing.
    static func ctlUnprivileged(_ arguments: [String]) async throws -> CommandOutput {
        if getuid() != 0 { return try await ctl(arguments) }
        return try await runCommand(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", audiosessionctl] + arguments,
            environment: ["SWIFT_BACKTRACE": "enable=no", "HOME": "/tmp"], check: false)
    }
}

/// The CPU time this thread spends in `body` (not the wall clock, which the tests running beside it
/// slow down).
func timed<R>(_ body: () throws -> R) rethrows -> (R, Duration) {
    func now() -> Duration {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return .seconds(t.tv_sec) + .nanoseconds(t.tv_nsec)
    }
    let start = now()
    let result = try body()
    return (result, now() - start)
}

/// A file nested `levels` deep by indentation, one space a level.
func nested(_ levels: Int) -> String {
    var text = ""
    for level in 0..<levels { text += String(repeating: " ", count: level) + "k\(level):\n" }
    return text + String(repeating: " ", count: levels) + "k: v\n"
}

/// A policy file that is good, for tests that break one thing at a time.
let goodPolicy = "match: {binary: [x]}\ncategory: playback\n"

/// Whether text holds, raw, a character that breaks a line or drives a terminal, other than the line
/// feeds that end lines: the C0 controls, DEL, the C1 controls, the line and paragraph separators and the
/// bidirectional overrides. (The tests' own list, not the product's.)
func hasRawControls(_ text: String) -> Bool {
    text.unicodeScalars.contains { scalar in
        switch scalar.value {
        case 0x0A: false
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

/// The shell's journal file, where a tower world's changes go in the tests of a successor.
extension Journal: JournalKeeping {
    package func keep(_ change: JournalChange) {
        _ = apply(change)
        _ = compactIfGrown()
    }
}

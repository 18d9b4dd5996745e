import AudioPolicy
import Foundation
import Glibc
import PolicyAgent
import SoundServerTesting
import Testing

/// Issue 11 through the built programs, as a user or a hostile local app would meet them: deep
/// nesting, unreadable files and directories, `audiosessionctl log` on what is not a log, and control
/// characters that must not reach a terminal or forge a log line. No sound server is needed.
@Suite("the command line: bad input")
struct CommandLineInputTests {
    @Test("case 3: 4,000 levels of nesting are an error, not a stack overflow, in this (debug) build")
    func deepNesting() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let deep = scratch.write("deep.yaml", nested(4_000))
        let under = scratch.write("under.yaml", nested(1_400))  // under the size limit: the depth limit speaks
        let result = try await Built.ctl(["policies", "check", deep, under])
        #expect(result.status == 1, "exit status \(result.status): \(result.stderr.prefix(300))")
        #expect(result.stderr.contains("\(deep):"))
        #expect(result.stderr.contains("bytes, the limit for a policy file"))
        #expect(result.stderr.contains("\(under):33:33: nested more than 32 levels deep, the limit for a policy file"))
        #expect(result.stdout == "0 good, 2 bad\n")
    }

    @Test("case 1 and 6: policies check reads CRLF files, and names file:line:column for bytes that are not UTF-8")
    func checkFiles() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let crlf = scratch.write("p/crlf.yaml", "match: {binary: [x]}\r\ncategory: playback\r\n")
        let bad = scratch.write("p/org.example.bad.yaml", Array("match: {binary: [x]}\ncategory: ".utf8) + [0xC0, 0x80] + [0x0A])
        let one = try await Built.ctl(["policies", "check", crlf])
        #expect(one.status == 0 && one.stdout == "1 good, 0 bad\n", "\(one.stdout) \(one.stderr)")
        let both = try await Built.ctl(["policies", "check", "\(scratch.path)/p"])
        #expect(both.status == 1)
        #expect(both.stdout == "1 good, 1 bad\n")
        #expect(both.stderr == "\(bad):2:11: not valid UTF-8 (policy files are UTF-8 text)\n")
        #expect(!both.stderr.contains("NSCocoaErrorDomain"))
    }

    @Test("case 6: a policy directory or file that cannot be read fails the check (exit status 1), saying why")
    func unreadable() async throws {
        let scratch = Scratch()
        defer { chmod("\(scratch.path)/locked", 0o755); chmod("\(scratch.path)/open/secret.yaml", 0o644); scratch.remove() }
        chmod(scratch.path, 0o755)
        let locked = scratch.directory("locked")
        scratch.write("locked/app.yaml", goodPolicy)
        chmod(locked, 0o000)
        scratch.write("open/secret.yaml", goodPolicy)
        chmod("\(scratch.path)/open/secret.yaml", 0o000)
        let dir = try await Built.ctlUnprivileged(["policies", "check", locked])
        #expect(dir.status == 1, "exit status \(dir.status): \(dir.stdout) \(dir.stderr)")
        #expect(dir.stderr == "\(locked): cannot read this policy directory: Permission denied\n")
        let file = try await Built.ctlUnprivileged(["policies", "check", "\(scratch.path)/open"])
        #expect(file.status == 1)
        #expect(file.stderr == "\(scratch.path)/open/secret.yaml:1:1: cannot read this policy file: Permission denied\n")
    }

    @Test("case 7: policies check shows control characters a file's keys hold as escapes")
    func checkEscapes() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let file = scratch.write("p.yaml", goodPolicy + "\"\\u001b[2J\\u0007\": x\n")
        let result = try await Built.ctl(["policies", "check", file])
        #expect(result.status == 1)
        #expect(!hasRawControls(result.stderr), "\(result.stderr.debugDescription)")
        #expect(result.stderr.hasPrefix("\(file):3:1: unknown key '\\x1b[2J\\x07'"))
    }

    @Test("case 7: an app's name cannot forge a line of the agent's log nor reach the terminal")
    func agentLogInjection() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        // A policy file's name is the one thing that reaches the agent's log before it has a server.
        let forged = "2026-11-23T09:00:00+0000 notice audiosessiond: stopped; nothing left held"
        scratch.write("policies/evil\n\(forged)\n\u{1B}[2J.yaml", "category: [\n")
        let result = try await runCommand(
            [Built.audiosessiond, "--server", "unix:\(scratch.path)/no-server", "--policies", "\(scratch.path)/policies",
             "--state-dir", "\(scratch.path)/state"],
            environment: ["SWIFT_BACKTRACE": "enable=no", "XDG_CONFIG_HOME": "\(scratch.path)/config"], check: false)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.contains { $0.contains("policy file skipped") && $0.contains("evil\\n\(forged)\\n\\x1b[2J.yaml") },
                "\(result.stderr)")
        #expect(!lines.contains { $0.hasPrefix(forged) })
        #expect(!hasRawControls(result.stderr))
    }

    @Test("a fade out of range is refused before anything starts, naming the option and the range")
    func fadeOutOfRange() async throws {
        for (option, value) in [("--duck-fade", "10001"), ("--unduck-fade", "-1")] {
            let result = try await runCommand([Built.audiosessiond, "--server", "unix:/nonexistent", "\(option)=\(value)", "--state-dir", "/nonexistent"],
                                              environment: ["SWIFT_BACKTRACE": "enable=no"], check: false)
            #expect(result.status == 64, "\(option) \(value): exit status \(result.status): \(result.stderr)")
            #expect(result.stderr.contains("\(option) \(value): a fade lasts 0 to 10000 milliseconds"), "\(result.stderr)")
        }
    }

    @Test("a wait after a new stream's mutes out of range is refused before anything starts, naming the option and the range")
    func runAfterMuteOutOfRange() async throws {
        for value in ["101", "-1"] {
            let result = try await runCommand([Built.audiosessiond, "--server", "unix:/nonexistent", "--run-after-mute=\(value)", "--state-dir", "/nonexistent"],
                                              environment: ["SWIFT_BACKTRACE": "enable=no"], check: false)
            #expect(result.status == 64, "\(value): exit status \(result.status): \(result.stderr)")
            #expect(result.stderr.contains("--run-after-mute \(value): 0 to 100 milliseconds"), "\(result.stderr)")
        }
    }

    // MARK: audiosessionctl log

    /// One route-change entry as JSON, written by JSONEncoder as it is (no escaping of ours), naming
    /// the port `name`.
    static func entry(port name: String, cause: String = "plugged") -> String {
        let port = PortDescription(type: .usbAudio, name: name, uid: "alsa_output.usb")
        let json: [String: Any] = [
            "time": "2026-11-23T09:00:00.000Z", "reason": "newDeviceAvailable", "cause": cause, "sessions": [String](), "system": true,
            "previousRoute": ["outputs": [[String: Any]](), "inputs": [[String: Any]]()],
            "route": ["outputs": [["type": port.type.name, "name": port.name, "uid": port.uid, "channels": 2, "dataSources": [Any]()]],
                      "inputs": [[String: Any]]()],
        ]
        let data = try! JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    @Test("case 8: log on a directory is one clear line and exit status 1, not a crash")
    func logDirectory() async throws {
        let result = try await Built.ctl(["log", "/etc"])
        #expect(result.status == 1, "exit status \(result.status)")
        #expect(result.stderr == "audiosessionctl: cannot read the route-change log /etc: it is a directory, not a log file\n")
        #expect(result.stdout.isEmpty)
    }

    @Test("case 8: log on a file it may not read is one clear line and exit status 1")
    func logUnreadable() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        chmod(scratch.path, 0o755)
        let file = scratch.write("routes.jsonl", Self.entry(port: "USB") + "\n")
        chmod(file, 0o000)
        let result = try await Built.ctlUnprivileged(["log", file])
        #expect(result.status == 1)
        #expect(result.stderr == "audiosessionctl: cannot read the route-change log \(file): Permission denied\n")
    }

    @Test("case 8: a torn last line is named with its line number, exit status 1; the entries before it show")
    func logTornLine() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let whole = Self.entry(port: "USB Headset")
        let file = scratch.write("routes.jsonl", whole + "\n" + whole + "\n" + whole.prefix(40))
        let result = try await Built.ctl(["log", file])
        #expect(result.status == 1)
        #expect(result.stdout.split(separator: "\n").count == 2)
        #expect(result.stderr == "\(file):3: a torn line: the file ends in the middle of an entry (no line feed after its 40 bytes)\n")
        // A line torn in the middle of the file (a writer killed mid-line, another one appending) too.
        let middle = scratch.write("middle.jsonl", whole + "\n" + whole.prefix(40) + whole + "\n" + whole + "\n")
        let second = try await Built.ctl(["log", middle])
        #expect(second.status == 1)
        #expect(second.stdout.split(separator: "\n").count == 2)
        #expect(second.stderr == "\(middle):2: not a route-change entry\n")
    }

    @Test("case 8: log is linear in the file: 40,000 lines in seconds of CPU, not the half minute it took")
    func logIsLinear() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let line = Self.entry(port: "USB Headset")
        let lines = String(repeating: line + "\n", count: 40_000)
        let file = scratch.write("routes.jsonl", lines)
        // The CPU time the command spent (bash's `time`), not the wall clock: the tests beside this one
        // slow the clock down, not the work done.
        let output = "\(scratch.path)/out.jsonl", times = "\(scratch.path)/times"
        let run = try await runCommand(
            ["bash", "-c", "TIMEFORMAT='%U %S'; { time \"$0\" log --json \"$1\" >\"$2\" 2>/dev/null; } 2>\"$3\"",
             Built.audiosessionctl, file, output, times],
            environment: ["SWIFT_BACKTRACE": "enable=no"], check: false)
        #expect(run.status == 0)
        #expect(try String(contentsOfFile: output, encoding: .utf8) == lines)
        let cpu = try String(contentsOfFile: times, encoding: .utf8).split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        #expect(cpu.count == 2)
        // About 1 s in a debug build (before the fix: 32 s, each line copied the rest of the buffer).
        #expect(cpu.reduce(0, +) < 8, "took \(cpu) s of CPU (user, system)")
        let small = scratch.write("small.jsonl", String(repeating: line + "\n", count: 2_000))
        let human = try await Built.ctl(["log", small])
        #expect(human.status == 0)
        #expect(human.stdout.split(separator: "\n").count == 2_000)
    }

    @Test("case 7: log shows the names an entry holds with their control characters escaped, one entry one line")
    func logEscapes() async throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let evil = "Evil\u{1B}]0;owned\u{07}\n2026-11-23 forged\u{9B}2J\u{202E}"
        let file = scratch.write("routes.jsonl", Self.entry(port: evil, cause: "bad\rcause") + "\n")
        let human = try await Built.ctl(["log", file])
        #expect(human.status == 0)
        #expect(human.stdout.split(separator: "\n").count == 1, "\(human.stdout.debugDescription)")
        #expect(!hasRawControls(human.stdout), "\(human.stdout.debugDescription)")
        #expect(human.stdout.contains(#""Evil\x1b]0;owned\x07\n2026-11-23 forged\u{9b}2J\u{202e}""#))
        #expect(human.stdout.contains(#"(bad\rcause)"#))
        let json = try await Built.ctl(["log", "--json", file])
        #expect(json.stdout.split(separator: "\n").count == 1)
        #expect(!hasRawControls(json.stdout))
        // Still the same JSON.
        let decoded = try JSONDecoder().decode(RouteLogEntry.self, from: Data(json.stdout.utf8))
        #expect(decoded.route.outputs.first?.name == evil)
    }

    @Test("case 7: the route log's JSON line escapes what JSONEncoder leaves raw (DEL, C1, separators) and stays the same JSON")
    func routeLogJSON() throws {
        let evil = "Evil\u{7F}\u{9B}2J\u{85}\u{2028}\u{202E}"
        let entry = try JSONDecoder().decode(RouteLogEntry.self, from: Data(Self.entry(port: evil).utf8))
        let line = entry.json
        #expect(!hasRawControls(line) && !line.contains("\n"), "\(line.debugDescription)")
        #expect(line.contains(#"Evil\u007f\u009b2J\u0085\u2028\u202e"#))
        #expect(try JSONDecoder().decode(RouteLogEntry.self, from: Data(line.utf8)) == entry)
    }
}

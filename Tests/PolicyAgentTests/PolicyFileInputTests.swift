import Foundation
import Glibc
@testable import AgentTower
@testable import PolicyAgent
import Testing

/// Issue 11, cases 1, 2, 3, 5 and 6, in the process: what a policy file may hold, and what each bad
/// input is told as (file:line:column, the limit or the YAML feature it names).
@Suite("policy files: bad input")
struct PolicyFileInputTests {
    func error(_ text: String) -> String? {
        do { _ = try PolicyFiles.parse(text, name: "app", path: "app.yaml"); return nil } catch { return error.description }
    }

    @Test("case 1: CRLF line ends read like LF ones, in every form")
    func crlf() throws {
        let flow = try PolicyFiles.parse("match: {binary: [x]}\r\ncategory: playback\r\n", name: "app", path: "app.yaml")
        #expect(flow.match.binary == ["x"])
        #expect(flow.configuration.category == .playback)
        let block = try PolicyFiles.parse(
            "--- # a player\r\nmatch:\r\n  binary:\r\n    - x   # the binary\r\n  name: ['It''s X']\r\ncategory: \"playback\"\r\noptions: [mixWithOthers]\r\n",
            name: "app", path: "app.yaml")
        #expect(block.match.binary == ["x"])
        #expect(block.match.name == ["It's X"])
        #expect(block.configuration.options == [.mixWithOthers])
        // An error's column is the same as with LF.
        #expect(error("match: {binary: [x]}\r\ncategory: recrod\r\n")?.hasPrefix("app.yaml:2:11: unknown category 'recrod'") == true)
    }

    @Test("case 1: a UTF-8 byte-order mark at the start is accepted, anywhere else it is an error")
    func byteOrderMark() {
        let scratch = Scratch()
        defer { scratch.remove() }
        scratch.write("layer/bom.yaml", [0xEF, 0xBB, 0xBF] + Array(goodPolicy.utf8))
        scratch.write("layer/late.yaml", Array("match: {binary: [x]}\n".utf8) + [0xEF, 0xBB, 0xBF] + Array("category: playback\n".utf8))
        let (policies, errors) = PolicyFiles.load(layers: ["\(scratch.path)/layer"])
        #expect(policies.map(\.name) == ["bom"])
        #expect(errors.map(\.description) == ["\(scratch.path)/layer/late.yaml:2:1: not valid YAML: a byte-order mark (U+FEFF) may only stand at the start of the file"])
    }

    @Test("case 2: 30,000 keys are refused in a moment (the key limit), not read in quadratic time (58 s on main, debug)")
    func manyKeys() {
        var text = goodPolicy
        for i in 0..<30_000 { text += "k\(i): v\n" }
        let (got, elapsed) = timed { error(text) }
        #expect(got?.contains("keys and list items, the limit for a policy file") == true, "got \(got ?? "no error")")
        #expect(got?.hasPrefix("app.yaml:") == true)
        #expect(elapsed < .seconds(2), "took \(elapsed) of CPU")  // about 0.1 s here, in a debug build
    }

    @Test("case 5: what YAML has and policy files do not use is an error with its line and column", arguments: [
        // Two documents; a document start with a value on it (was read as nothing at all).
        ("---\n---\n" + goodPolicy, "app.yaml:2:1: not valid YAML: a policy file holds one document"),
        (goodPolicy + "---\n", "app.yaml:3:1: not valid YAML: a policy file holds one document"),
        (goodPolicy + "...\n", "app.yaml:3:1: not valid YAML: a policy file holds one document ('...' ends it)"),
        ("--- duck-level: 5\n" + goodPolicy, "app.yaml:1:5: not valid YAML: nothing may follow '---' on its line"),
        ("%YAML 1.2\n---\n" + goodPolicy, "app.yaml:1:1: not valid YAML: directives (%YAML, %TAG) are not used"),
        // Anchors, aliases and tags, in flow and block lists, values and keys (were literal text).
        ("match: {binary: [&x vlc, *x, !!str y]}\ncategory: playback\n", "app.yaml:1:18: not valid YAML: anchors and aliases are not used"),
        ("match: {binary: [vlc, *x]}\ncategory: playback\n", "app.yaml:1:23: not valid YAML: anchors and aliases are not used"),
        ("match: {binary: [!!str y]}\ncategory: playback\n", "app.yaml:1:18: not valid YAML: tags are not used"),
        ("match:\n  binary:\n    - &x vlc\n    - *x\ncategory: playback\n", "app.yaml:3:7: not valid YAML: anchors and aliases are not used"),
        ("match:\n  binary: [x]\ncategory: !!str playback\n", "app.yaml:3:11: not valid YAML: tags are not used"),
        ("match: {!t binary: [x]}\ncategory: playback\n", "app.yaml:1:9: not valid YAML: tags are not used"),
        ("!!map match: {binary: [x]}\ncategory: playback\n", "app.yaml:1:1: not valid YAML: tags are not used"),
        ("? match\n: {binary: [x]}\n", "app.yaml:1:1: not valid YAML: complex keys ('? ') are not used"),
        ("match: {binary: [@x]}\ncategory: playback\n", "app.yaml:1:18: not valid YAML: '@' cannot start a plain value; quote it"),
        // NUL and other control characters (were taken into names).
        ("match: {binary: [x\0]}\ncategory: playback\n", "app.yaml:1:19: not valid YAML: a NUL byte is not allowed"),
        ("match: {binary: [x\u{1B}[2J]}\ncategory: playback\n", "app.yaml:1:19: not valid YAML: control character U+001B is not allowed"),
        ("match: {binary: [x]}\ncategory: play\u{7F}back\n", "app.yaml:2:15: not valid YAML: control character U+007F is not allowed"),
        ("match: {binary: [x]}\ncategory: playback\u{85}\n", "app.yaml:2:19: not valid YAML: control character U+0085 is not allowed"),
        ("match: {binary: [x]}\rcategory: playback\n", "app.yaml:1:21: not valid YAML: a carriage return must be followed by a line feed"),
        ("match: {binary: [x]}\ncategory: playback\n\u{FEFF}", "app.yaml:3:1: not valid YAML: a byte-order mark (U+FEFF) may only stand at the start"),
    ])
    func outsideTheSubset(_ text: String, _ expected: String) {
        let got = error(text)
        #expect(got?.hasPrefix(expected) == true, "got \(got ?? "no error")")
    }

    @Test("what the subset does accept still reads: a comment after 'key:', '-' and '%' inside values, escapes in quotes")
    func stillAccepted() throws {
        let policy = try PolicyFiles.parse("""
            match:   # who
              binary: [a-b, "&x", '*y', "!z", 100%]
              name: ["\\u001b is written as an escape"]
            category: playback
            """, name: "app", path: "app.yaml")
        #expect(policy.match.binary == ["a-b", "&x", "*y", "!z", "100%"])
        #expect(policy.match.name == ["\u{1B} is written as an escape"])
    }

    @Test("case 6: bytes that are not UTF-8 are an error at their line and column, not a Foundation error")
    func invalidUTF8() {
        let scratch = Scratch()
        defer { scratch.remove() }
        scratch.write("layer/bad.yaml", Array("match: {binary: [x]}\ncategory: ".utf8) + [0xFF] + Array("\n".utf8))
        scratch.write("layer/cut.yaml", Array("match: {binary: [caf".utf8) + [0xC3])
        let (policies, errors) = PolicyFiles.load(layers: ["\(scratch.path)/layer"])
        #expect(policies.isEmpty)
        #expect(errors.map(\.description) == [
            "\(scratch.path)/layer/bad.yaml:2:11: not valid UTF-8 (policy files are UTF-8 text)",
            "\(scratch.path)/layer/cut.yaml:1:21: not valid UTF-8 (policy files are UTF-8 text)",
        ])
    }

    @Test("case 6: a policy file that cannot be read says why at its line 1, column 1")
    func unreadableFiles() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let layer = scratch.directory("layer")
        _ = scratch.directory("layer/folder.yaml")
        #expect(symlink("\(scratch.path)/nowhere", "\(layer)/dangling.yaml") == 0)
        #expect(mkfifo("\(layer)/fifo.yaml", 0o644) == 0)
        let (_, errors) = PolicyFiles.load(layers: [layer])
        #expect(errors.map(\.description) == [
            "\(layer)/dangling.yaml:1:1: cannot read this policy file: No such file or directory",
            "\(layer)/fifo.yaml:1:1: cannot read this policy file: it is not a regular file",
            "\(layer)/folder.yaml:1:1: cannot read this policy file: it is a directory",
        ])
    }

    @Test("case 6: a layer that exists and cannot be read as a directory is an error; one that does not exist is none")
    func unreadableLayers() {
        let scratch = Scratch()
        defer { scratch.remove() }
        let file = scratch.write("plain-file", goodPolicy)
        #expect(symlink("loop", "\(scratch.path)/loop") == 0)
        let (policies, errors) = PolicyFiles.load(layers: [file, "\(scratch.path)/loop", "\(scratch.path)/absent"])
        #expect(policies.isEmpty)
        #expect(errors.map(\.description) == [
            "\(file): cannot read this policy directory: Not a directory",
            "\(scratch.path)/loop: cannot read this policy directory: Too many levels of symbolic links",
        ])
    }
}

@testable import AgentTower
@testable import PolicyAgent
import Testing

/// Issue 11, cases 2 and 3, on the parser itself with its limits lifted: the work is linear in keys,
/// lines and nesting, and nesting never reaches the stack (the depth limit bounds the recursion).
@Suite("policy files: the parser's cost and limits")
struct ParserLimitTests {
    static let unlimited = PolicyYAML.Limits(bytes: .max, depth: 32, entries: .max)

    static func keys(_ count: Int) -> String {
        var text = ""
        text.reserveCapacity(count * 12)
        for i in 0..<count { text += "k\(i): v\(i)\n" }
        return text
    }

    /// The CPU time of parsing `text` with the limits lifted.
    static func time(_ text: String) throws -> Duration {
        try timed { _ = try PolicyYAML.parse(text, limits: unlimited) }.1
    }

    @Test("case 2: ten times the keys cost about ten times the time (10,000 and 100,000 keys, limits lifted)")
    func linearInKeys() throws {
        let small = Self.keys(10_000), large = Self.keys(100_000)
        _ = try Self.time(small)  // warm up
        let a = try Self.time(small), b = try Self.time(large)
        // Linear is 10x; quadratic would be 100x. Allow for a busy machine.
        #expect(b < a * 25, "10,000 keys \(a), 100,000 keys \(b)")
        #expect(b < .seconds(5), "100,000 keys took \(b) in this build")
    }

    @Test("case 2: a long flow list costs linear time too")
    func linearInItems() throws {
        func list(_ n: Int) -> String { "binary: [" + (0..<n).map { "a\($0)" }.joined(separator: ", ") + "]\n" }
        let small = list(10_000), large = list(100_000)
        _ = try Self.time(small)
        let a = try Self.time(small), b = try Self.time(large)
        #expect(b < a * 25, "10,000 items \(a), 100,000 items \(b)")
    }

    @Test("case 3: 4,000 levels of nesting (8 MB) stop at the depth limit, here in a debug build")
    func deepNesting() {
        for levels in [33, 4_000] {
            do {
                _ = try PolicyYAML.parse(nested(levels), limits: Self.unlimited)
                Issue.record("\(levels) levels were accepted")
            } catch {
                #expect(error.mark == PolicyYAML.Mark(line: 33, column: 33))
                #expect(error.message == "nested more than 32 levels deep, the limit for a policy file")
            }
        }
        // 32 levels are fine.
        #expect((try? PolicyYAML.parse(nested(31))) != nil)
    }

    @Test("each limit is an error naming it, where the text crosses it")
    func limits() {
        let small = PolicyYAML.Limits(bytes: 20, depth: 2, entries: 3)
        func error(_ text: String) -> String {
            do { _ = try PolicyYAML.parse(text, limits: small); return "accepted" } catch { return "\(error.mark.line):\(error.mark.column): \(error.message)" }
        }
        #expect(error("a: b\nc: d\nee: ffffffffffffff\n") == "3:11: the file is larger than 20 bytes, the limit for a policy file")
        #expect(error("a: [1, 2, 3]\n") == "1:11: more than 3 keys and list items, the limit for a policy file")
        #expect(error("a:\n b:\n  c: d\n") == "3:3: nested more than 2 levels deep, the limit for a policy file")
        #expect(error("a:\n b: c\n") == "accepted")
    }
}

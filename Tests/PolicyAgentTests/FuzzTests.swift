import Foundation
@testable import AgentTower
@testable import PolicyAgent
import SoundServerTesting
import Testing

/// The fuzz target's corpus and a short run of it (scripts/fuzz-policies).
@Suite("policy files: fuzzing")
struct FuzzTests {
    static let regressions = repositoryRoot.appendingPathComponent("fuzz/policies/regressions").path

    /// What each input of the regression corpus gives: nil for a policy, else the start of its error
    /// after the file's path.
    static let expected: [String: String?] = [
        "crlf.yaml": nil,
        "crlf-block.yaml": nil,
        "bom.yaml": nil,
        "many-keys.yaml": ":9999:1: more than 10000 keys and list items, the limit for a policy file",
        "deep-nesting.yaml": ":33:33: nested more than 32 levels deep, the limit for a policy file",
        "org.example.dotapp.yaml": ":2:11: unknown category 'recrod'",
        "two-documents.yaml": ":2:1: not valid YAML: a policy file holds one document",
        "document-start-value.yaml": ":1:5: not valid YAML: nothing may follow '---' on its line",
        "anchors-aliases-tags.yaml": ":1:18: not valid YAML: anchors and aliases are not used",
        "nul.yaml": ":1:19: not valid YAML: a NUL byte is not allowed",
        "control-characters.yaml": ":1:19: not valid YAML: control character U+001B is not allowed",
        "escaped-control-characters.yaml": ":3:1: unknown key '\u{1B}[2J\u{07}'",
        "invalid-utf8.yaml": ":2:11: not valid UTF-8",
    ]

    @Test("every input of the regression corpus gives what it should, and every one is listed here")
    func regressionCorpus() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.regressions).filter { $0.hasSuffix(".yaml") }
        #expect(Set(files) == Set(Self.expected.keys))
        for file in files.sorted() {
            let path = "\(Self.regressions)/\(file)"
            let got: String?
            do {
                _ = try PolicyFiles.load(file: path, name: PolicyFiles.policyName(ofFile: file)!)
                got = nil
            } catch {
                got = error.description
            }
            switch Self.expected[file] {
            case .some(.some(let prefix)): #expect(got?.hasPrefix(path + prefix) == true, "\(file): got \(got ?? "a policy")")
            case .some(.none): #expect(got == nil, "\(file): got \(got ?? "")")
            case .none: break
            }
        }
    }

    @Test("the fuzz target builds from the tree and runs for five seconds without a finding", .timeLimit(.minutes(10)))
    func shortRun() async throws {
        let result = try await runCommand(
            [repositoryRoot.appendingPathComponent("scripts/fuzz-policies").path, "5", "-seed=11"], check: false)
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        let runs = result.stderr.split(separator: "\n").first { $0.hasPrefix("stat::number_of_executed_units:") }
        let count = runs.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        #expect(count > 100, "\(runs ?? "no stats")")
    }
}

import AudioPolicy
@testable import AgentTower
@testable import PolicyAgent
import Testing

/// Issue 11, case 4: "a bad file keeps its last good version" (SPEC.md section 8), as the pure rule
/// `PolicyFiles.keepingLastGood` that the agent applies on every reload.
@Suite("policy files: the last good version")
struct LastGoodTests {
    static func policy(_ name: String, in directory: String, _ category: AudioPolicy.Category = .playback) -> AppPolicy {
        AppPolicy(name: name, source: "\(directory)/\(name).yaml", match: .init(binary: [name]),
                  configuration: SessionConfiguration(category))
    }

    static func broken(_ file: String) -> PolicyFileError {
        PolicyFileError(file: file, line: 2, column: 11, message: "unknown category 'recrod'")
    }

    @Test("case 4: a bad file with dots in its name keeps its last good version, matched by the whole name")
    func dottedName() {
        let previous = [Self.policy("org.example.dotapp", in: "/u"), Self.policy("org.example.other", in: "/u"), Self.policy("vlc", in: "/s")]
        let loaded = [Self.policy("org.example.other", in: "/u", .ambient), Self.policy("vlc", in: "/s")]
        let now = PolicyFiles.keepingLastGood(previous: previous, loaded: loaded, errors: [Self.broken("/u/org.example.dotapp.yaml")])
        #expect(Set(now.map(\.name)) == ["org.example.dotapp", "org.example.other", "vlc"])
        #expect(now.count == 3)
        // The other dotted file's new version is in force, not its old one.
        #expect(now.first { $0.name == "org.example.other" }?.configuration.category == .ambient)
    }

    @Test("case 4: a bad file keeps only its own name's version: not one whose name starts the same")
    func noPrefixMatch() {
        let previous = [Self.policy("org", in: "/u"), Self.policy("org.example.dotapp", in: "/u")]
        let now = PolicyFiles.keepingLastGood(previous: previous, loaded: [], errors: [Self.broken("/u/org.example.dotapp.yml")])
        #expect(now.map(\.name) == ["org.example.dotapp"])
    }

    @Test("a bad file in a higher layer keeps the version in force before, even one from a lower layer")
    func maskingLayer() {
        let previous = [Self.policy("firefox", in: "/usr/share/audiosession/policies")]
        let now = PolicyFiles.keepingLastGood(previous: previous, loaded: [], errors: [Self.broken("/home/u/.config/audiosession/policies/firefox.yaml")])
        #expect(now == previous)
    }

    @Test("a policy directory that cannot be read keeps the versions its files had; a file that is gone is gone")
    func unreadableDirectory() {
        let previous = [Self.policy("a", in: "/u"), Self.policy("b", in: "/u"), Self.policy("a", in: "/s").with(source: "/s/a.yaml")]
        let loaded = [Self.policy("a", in: "/s", .ambient)]
        let now = PolicyFiles.keepingLastGood(previous: previous, loaded: loaded,
                                              errors: [PolicyFileError(directory: "/u", message: "cannot read this policy directory: Permission denied")])
        #expect(now.map(\.source).sorted() == ["/u/a.yaml", "/u/b.yaml"])
        #expect(PolicyFiles.keepingLastGood(previous: previous, loaded: loaded, errors: []) == loaded)
    }

    @Test("the name of a policy file is its whole name without .yaml or .yml")
    func names() {
        #expect(PolicyFiles.policyName(ofFile: "/a/b/org.example.dotapp.yaml") == "org.example.dotapp")
        #expect(PolicyFiles.policyName(ofFile: "vlc.yml") == "vlc")
        #expect(PolicyFiles.policyName(ofFile: "notes.txt") == nil)
        #expect(PolicyFiles.policyName(ofFile: "/a/b.yaml/c.yaml.bak") == nil)
    }
}

extension AppPolicy {
    func with(source: String) -> AppPolicy {
        var copy = self
        copy.source = source
        return copy
    }
}

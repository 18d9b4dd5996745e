@testable import AudioPolicy
import PropertyBased
import Testing

/// Issue 20, case 9: classification through `PolicyIndex` (built once per load) gives what the
/// algorithm before it gave (sort every policy by name, scan every list) for any layer and any app.
struct ClassificationIndexTests {
    /// The algorithm as it was before the index, kept here as the reference.
    static func reference(_ app: AppIdentity, policies: [AppPolicy]) -> Classification {
        func match(_ m: AppPolicy.Match) -> (Int, String)? {
            var facts: [String] = []
            var score = 0
            if let id = app.appID, m.appID.contains(id) { facts.append("app-id=\(id)"); score = max(score, 40) }
            if let binary = app.binary, m.binary.contains(binary) { facts.append("binary=\(binary)"); score = max(score, 30) }
            if let name = app.name, m.name.contains(name) { facts.append("name=\(name)"); score = max(score, 20) }
            let roleMatches = app.role.map { m.role.contains($0) } ?? false
            if roleMatches { facts.append("role=\(app.role!)"); score = score == 0 ? 10 : score + 5 }
            guard !facts.isEmpty else { return nil }
            if !m.role.isEmpty && !roleMatches { return nil }
            return (score, facts.joined(separator: ", "))
        }
        var best: (score: Int, policy: AppPolicy, matched: String)?
        for policy in policies.sorted(by: { $0.name < $1.name }) {
            guard let (score, matched) = match(policy.match) else { continue }
            if best == nil || score > best!.score { best = (score, policy, matched) }
        }
        if let best {
            let roleMatched = best.matched.contains("role=")
            if app.role == "phone" && !best.policy.configuration.isCall && !roleMatched {
                return Classification(configuration: Classifier.roleDefault("phone"), microphoneAllowed: best.policy.microphoneAllowed,
                                      duckLevel: nil, source: .roleDefault(role: "phone"))
            }
            return Classification(configuration: best.policy.configuration, microphoneAllowed: best.policy.microphoneAllowed,
                                  duckLevel: best.policy.duckLevel,
                                  source: .policy(name: best.policy.name, source: best.policy.source, matched: best.matched))
        }
        return Classification(configuration: Classifier.roleDefault(app.role), microphoneAllowed: true, duckLevel: nil,
                              source: .roleDefault(role: app.role))
    }

    /// Few values, so that random policies and apps meet often; "" and duplicates included.
    static let values = ["firefox", "mpv", "Spotify", "org.example.App", "", "music", "phone", "video"]
    static let roles = ["music", "phone", "video", "a11y", ""]
    static let configurations: [SessionConfiguration] = [
        SessionConfiguration(.playback), SessionConfiguration(.playAndRecord, mode: .voiceChat), SessionConfiguration(.ambient),
        SessionConfiguration(.playback, options: .mixWithOthers), SessionConfiguration(.record),
    ]

    /// A layer of policies and an app, decoded from random numbers.
    static func world(_ codes: [Int]) -> ([AppPolicy], AppIdentity) {
        var codes = codes.makeIterator()
        func next() -> Int { codes.next() ?? 0 }
        func list(_ from: [String]) -> [String] { (0..<(next() % 4)).map { _ in from[next() % from.count] } }
        let count = next() % 12
        let policies = (0..<count).map { i in
            AppPolicy(name: "p\(next() % 6)", source: "/layer/\(i).yaml",
                      match: AppPolicy.Match(binary: list(values), appID: list(values), name: list(values), role: next() % 3 == 0 ? list(roles) : []),
                      configuration: configurations[next() % configurations.count], microphoneAllowed: next() % 2 == 0,
                      duckLevel: next() % 3 == 0 ? 0.3 : nil)
        }
        func maybe(_ from: [String]) -> String? { next() % 4 == 0 ? nil : from[next() % from.count] }
        let app = AppIdentity(binary: maybe(values), name: maybe(values), appID: maybe(values), role: maybe(roles), processID: 42)
        return (policies, app)
    }

    @Test("the index classifies every app as the scan over every policy did (property, random layers)")
    func sameAsBefore() async {
        await propertyCheck(count: 5000, input: Gen.int(in: 0...9999).array(of: 0...120)) { codes in
            let (policies, app) = Self.world(codes)
            let index = PolicyIndex(policies)
            #expect(Classifier.classify(app, index: index) == Self.reference(app, policies: policies), "\(policies) \(app)")
        }
    }

    @Test("a layer of 1,000 policies of 1,000 names each: an app is classified through the index, in a fraction of a millisecond")
    func largeLayer() {
        let policies = (0..<1_000).map { p in
            AppPolicy(name: "app\(p)", match: AppPolicy.Match(binary: (0..<1_000).map { "binary-\(p)-\($0)" }),
                      configuration: SessionConfiguration(.playback))
        }
        let index = PolicyIndex(policies)
        let app = AppIdentity(binary: "binary-500-999", name: "Unknown", role: "music")
        let clock = ContinuousClock()
        var result: Classification?
        let took = clock.measure { for _ in 0..<1_000 { result = Classifier.classify(app, index: index) } }
        #expect(result?.source == .policy(name: "app500", source: "", matched: "binary=binary-500-999"))
        #expect(result == Self.reference(app, policies: policies))
        // (A bound far above what it takes, ~µs, and far below the scan's ~50 ms: no flake on a busy machine.)
        #expect(took < .seconds(1), "1,000 classifications took \(took)")
    }
}

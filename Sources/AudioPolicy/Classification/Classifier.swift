/// Who a stream belongs to, as the server reports it (SPEC.md section 8's match keys).
public struct AppIdentity: Hashable, Sendable, Codable {
    /// `application.process.binary`, e.g. `firefox-esr`, `paplay`.
    public var binary: String?
    /// `application.name`, e.g. `Firefox`.
    public var name: String?
    /// The Flatpak or application id (`application.id`, PipeWire's portal app id, Flatpak's).
    public var appID: String?
    /// `media.role`, e.g. `music`, `phone`.
    public var role: String?
    /// `application.process.id`.
    public var processID: Int?

    public init(binary: String? = nil, name: String? = nil, appID: String? = nil, role: String? = nil, processID: Int? = nil) {
        self.binary = binary; self.name = name; self.appID = appID; self.role = role; self.processID = processID
    }
}

/// One per-app policy: which streams it covers and the session it gives them (SPEC.md section 8).
public struct AppPolicy: Hashable, Sendable {
    public struct Match: Hashable, Sendable {
        public var binary: [String] = []
        public var appID: [String] = []
        public var name: [String] = []
        public var role: [String] = []
        public init(binary: [String] = [], appID: [String] = [], name: [String] = [], role: [String] = []) {
            self.binary = binary; self.appID = appID; self.name = name; self.role = role
        }
        public var isEmpty: Bool { binary.isEmpty && appID.isEmpty && name.isEmpty && role.isEmpty }
    }

    /// The policy's name: its file name without `.yaml` (a file of the same name in a higher layer masks it).
    public var name: String
    /// Where it came from, for explanations (`/etc/xdg/audiosession/policies/spotify.yaml`).
    public var source: String
    public var match: Match
    public var configuration: SessionConfiguration
    public var microphoneAllowed: Bool
    /// How low others go while this app ducks them (amplitude), if it says.
    public var duckLevel: Double?
    /// What the app may declare itself (over D-Bus or the library); the policy file wins.
    public var declaring: Declaring
    /// Recording from a microphone while playing makes the app a call (SPEC.md section 1): yes for
    /// browsers and call apps, no for an always-open voice channel (`infer-calls:` in the file).
    public var infersCalls: Bool
    /// Where its sound would rather go, first present wins (`output:` in the file, SPEC.md section 10).
    public var preferredOutputs: [OutputPreference]

    /// What a policy file lets its app declare itself (`declare:` in the file).
    public enum Declaring: String, Hashable, Sendable, CaseIterable {
        /// Any session.
        case allow
        /// Any session but a call (playAndRecord in a call mode).
        case noCalls = "no-calls"
        /// None: the policy file speaks for the app.
        case deny
    }

    public init(name: String, source: String = "", match: Match, configuration: SessionConfiguration,
                microphoneAllowed: Bool = true, duckLevel: Double? = nil, declaring: Declaring = .allow, infersCalls: Bool = true,
                preferredOutputs: [OutputPreference] = []) {
        self.name = name; self.source = source; self.match = match; self.configuration = configuration
        self.microphoneAllowed = microphoneAllowed; self.duckLevel = duckLevel; self.declaring = declaring
        self.infersCalls = infersCalls; self.preferredOutputs = preferredOutputs
    }
}

/// The session a stream gets, and why.
public struct Classification: Hashable, Sendable {
    public enum Source: Hashable, Sendable {
        /// A policy matched: its name, and the fact that matched (`binary=spotify`).
        case policy(name: String, source: String, matched: String)
        /// No policy matched: the role default for this role (nil: no role).
        case roleDefault(role: String?)
    }
    public var configuration: SessionConfiguration
    public var microphoneAllowed: Bool
    public var duckLevel: Double?
    public var source: Source
    /// Recording while playing makes it a call (the policy's `infer-calls`; yes for role defaults).
    public var infersCalls = true
    /// The policy's `output:` (none for role defaults).
    public var preferredOutputs: [OutputPreference] = []

    /// One line for `audiosessionctl policies explain`.
    public var explanation: String {
        let base = switch source {
        case .policy(let name, let source, let matched):
            "policy \(name)\(source.isEmpty ? "" : " (\(source))") matched \(matched): \(configuration)"
        case .roleDefault(let role):
            "no policy matched; role default for \(role.map { "media.role=\($0)" } ?? "no role"): \(configuration)"
        }
        let places = preferredOutputs.filter { $0 != .everywhere }
        let output = (places.isEmpty ? ""
            : "; it plays on the first of \(places.map(\.description).joined(separator: ", ")) that is connected, else on the default")
            + (preferredOutputs.contains(.everywhere) ? "; and on the built-in speaker too, at once (everywhere)" : "")
        if configuration.isCall { return base + output }
        return base + (infersCalls ? "; recording while it plays makes it a call" : "; its calls are not inferred (infer-calls: no)") + output
    }
}

/// SPEC.md section 8: which policy covers a stream, or which role default.
public enum Classifier {
    /// The role-default table of SPEC.md section 8.
    public static func roleDefault(_ role: String?) -> SessionConfiguration {
        switch role {
        case "phone": SessionConfiguration(.playAndRecord, mode: .voiceChat)
        case "music": SessionConfiguration(.playback)
        case "video": SessionConfiguration(.playback, mode: .moviePlayback)
        case "game", "animation", "event": SessionConfiguration(.ambient)
        case "a11y": SessionConfiguration(.playback, mode: .spokenAudio, options: .duckOthers)
        case "production": SessionConfiguration(.playback, options: .mixWithOthers)
        default: SessionConfiguration(.playback, options: .mixWithOthers)
        }
    }

    /// The most specific matching policy wins: one that matches the app and the role, then by
    /// app id, binary, application name, and last one that matches the role alone; ties go to the
    /// policy whose name sorts first. A `media.role=phone` stream is a call whatever an app-wide
    /// policy says (SPEC.md 5.1), unless the policy itself makes it a call or matched the role.
    /// (Indexes the policies for this one call: for many, index them once, `PolicyIndex`.)
    public static func classify(_ app: AppIdentity, policies: [AppPolicy]) -> Classification {
        classify(app, index: PolicyIndex(policies))
    }

    /// The same, with the policies indexed once per load: the work is that of the policies that name
    /// one of the app's facts, not of the whole layer.
    public static func classify(_ app: AppIdentity, index: PolicyIndex) -> Classification {
        guard let (policy, matched) = index.best(for: app) else {
            return Classification(configuration: roleDefault(app.role), microphoneAllowed: true, duckLevel: nil,
                                  source: .roleDefault(role: app.role))
        }
        let roleMatched = matched.contains("role=")
        if app.role == "phone" && !policy.configuration.isCall && !roleMatched {
            return Classification(configuration: roleDefault("phone"), microphoneAllowed: policy.microphoneAllowed,
                                  duckLevel: nil, source: .roleDefault(role: "phone"))
        }
        var found = Classification(
            configuration: policy.configuration, microphoneAllowed: policy.microphoneAllowed,
            duckLevel: policy.duckLevel,
            source: .policy(name: policy.name, source: policy.source, matched: matched))
        found.infersCalls = policy.infersCalls
        found.preferredOutputs = policy.preferredOutputs
        return found
    }
}

/// The policies of a layer indexed for classification, built once per load: for each match key (app
/// id, binary, application name, role), which policies name each value. Classifying an app then costs
/// the policies that name one of its facts, not a sort of the layer and a scan of every list (1,000
/// files of 1,000 names each took ~55 ms per new app that way, in a debug build). Building it is
/// linear in the layer's size.
public struct PolicyIndex: Sendable, Hashable {
    /// The policies in classification order: by name (ties keep the order they were given in).
    public let policies: [AppPolicy]
    private let byAppID: Table
    private let byBinary: Table
    private let byName: Table
    private let byRole: Table

    /// Which policies (by position) name each value of one match key, in order. Most values are named
    /// by one policy: those take no list of their own.
    struct Table: Sendable, Hashable {
        private var first: [String: Int32] = [:]
        private var more: [String: [Int32]] = [:]

        init(_ policies: [AppPolicy], _ values: KeyPath<AppPolicy.Match, [String]>) {
            for (i, policy) in policies.enumerated() {
                for value in policy.match[keyPath: values] {
                    guard let known = first[value] else { first[value] = Int32(i); continue }
                    if known == Int32(i) || more[value]?.last == Int32(i) { continue }
                    more[value, default: []].append(Int32(i))
                }
            }
        }

        func forEach(_ value: String, _ body: (Int) -> Void) {
            guard let known = first[value] else { return }
            body(Int(known))
            for i in more[value] ?? [] { body(Int(i)) }
        }
    }

    public init(_ policies: [AppPolicy]) {
        let sorted = policies.sorted { $0.name < $1.name }
        self.policies = sorted
        byAppID = Table(sorted, \.appID)
        byBinary = Table(sorted, \.binary)
        byName = Table(sorted, \.name)
        byRole = Table(sorted, \.role)
    }

    /// The policy that covers `app` best and the facts that matched (the rule: app
    /// id 40, binary 30, name 20, a matching role 5 more or 10 alone; a policy that names roles covers
    /// only those; the first by name among equals), or nil.
    func best(for app: AppIdentity) -> (AppPolicy, String)? {
        // Which of the app's facts each candidate names, as bits: 1 app id, 2 binary, 4 name, 8 role.
        var hits: [Int: UInt8] = [:]
        for (value, table, bit) in [(app.appID, byAppID, UInt8(1)), (app.binary, byBinary, 2), (app.name, byName, 4), (app.role, byRole, 8)] {
            guard let value else { continue }
            table.forEach(value) { hits[$0, default: 0] |= bit }
        }
        var best: (score: Int, index: Int)?
        for (i, bits) in hits {
            let roleMatches = bits & 8 != 0
            if !policies[i].match.role.isEmpty && !roleMatches { continue }
            var score = bits & 1 != 0 ? 40 : bits & 2 != 0 ? 30 : bits & 4 != 0 ? 20 : 0
            if roleMatches { score = score == 0 ? 10 : score + 5 }
            if best == nil || score > best!.score || (score == best!.score && i < best!.index) { best = (score, i) }
        }
        guard let best, let bits = hits[best.index] else { return nil }
        var facts: [String] = []
        if bits & 1 != 0, let id = app.appID { facts.append("app-id=\(id)") }
        if bits & 2 != 0, let binary = app.binary { facts.append("binary=\(binary)") }
        if bits & 4 != 0, let name = app.name { facts.append("name=\(name)") }
        if bits & 8 != 0, let role = app.role { facts.append("role=\(role)") }
        return (policies[best.index], facts.joined(separator: ", "))
    }
}

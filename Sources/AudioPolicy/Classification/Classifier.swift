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
                microphoneAllowed: Bool = true, duckLevel: Double? = nil, declaring: Declaring = .allow, infersCalls: Bool = true) {
        self.name = name; self.source = source; self.match = match; self.configuration = configuration
        self.microphoneAllowed = microphoneAllowed; self.duckLevel = duckLevel; self.declaring = declaring
        self.infersCalls = infersCalls
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

    /// One line for `audiosessionctl policies explain`.
    public var explanation: String {
        let base = switch source {
        case .policy(let name, let source, let matched):
            "policy \(name)\(source.isEmpty ? "" : " (\(source))") matched \(matched): \(configuration)"
        case .roleDefault(let role):
            "no policy matched; role default for \(role.map { "media.role=\($0)" } ?? "no role"): \(configuration)"
        }
        if configuration.isCall { return base }
        return base + (infersCalls ? "; recording while it plays makes it a call" : "; its calls are not inferred (infer-calls: no)")
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
    public static func classify(_ app: AppIdentity, policies: [AppPolicy]) -> Classification {
        var best: (score: Int, policy: AppPolicy, matched: String)?
        for policy in policies.sorted(by: { $0.name < $1.name }) {
            guard let (score, matched) = match(policy.match, app) else { continue }
            if best == nil || score > best!.score { best = (score, policy, matched) }
        }
        if let best {
            let roleMatched = best.matched.contains("role=")
            if app.role == "phone" && !best.policy.configuration.isCall && !roleMatched {
                return Classification(configuration: roleDefault("phone"), microphoneAllowed: best.policy.microphoneAllowed,
                                      duckLevel: nil, source: .roleDefault(role: "phone"))
            }
            var found = Classification(
                configuration: best.policy.configuration, microphoneAllowed: best.policy.microphoneAllowed,
                duckLevel: best.policy.duckLevel,
                source: .policy(name: best.policy.name, source: best.policy.source, matched: best.matched))
            found.infersCalls = best.policy.infersCalls
            return found
        }
        return Classification(configuration: roleDefault(app.role), microphoneAllowed: true, duckLevel: nil,
                              source: .roleDefault(role: app.role))
    }

    /// How well a policy's match section fits the app, and the facts that matched; nil if it does not.
    static func match(_ m: AppPolicy.Match, _ app: AppIdentity) -> (Int, String)? {
        var facts: [String] = []
        var score = 0
        if let id = app.appID, m.appID.contains(id) { facts.append("app-id=\(id)"); score = max(score, 40) }
        if let binary = app.binary, m.binary.contains(binary) { facts.append("binary=\(binary)"); score = max(score, 30) }
        if let name = app.name, m.name.contains(name) { facts.append("name=\(name)"); score = max(score, 20) }
        let roleMatches = app.role.map { m.role.contains($0) } ?? false
        if roleMatches { facts.append("role=\(app.role!)"); score = score == 0 ? 10 : score + 5 }
        guard !facts.isEmpty else { return nil }
        // A policy that names roles covers only those roles of its apps.
        if !m.role.isEmpty && !roleMatches { return nil }
        return (score, facts.joined(separator: ", "))
    }
}

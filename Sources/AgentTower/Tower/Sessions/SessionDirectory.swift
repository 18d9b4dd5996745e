public import AudioPolicy
import ServerModel

/// The policy files in force, indexed for classification, and the files that could not be read. The
/// index is built where the set is made (the loader, off the agent's loop on SIGHUP), once per load.
public struct PolicySet: Sendable, Hashable {
    public var policies: [AppPolicy] { index.policies }
    public let index: PolicyIndex
    public var errors: [PolicyFileError]
    /// The preferred outputs per category and per app configured (`outputs.yaml`).
    public var outputs: OutputRoutes
    public init(policies: [AppPolicy], errors: [PolicyFileError], outputs: OutputRoutes = OutputRoutes()) {
        index = PolicyIndex(policies); self.errors = errors; self.outputs = outputs
    }
}

/// Which session each stream belongs to, and why (SPEC.md sections 1 and 8): a pure record, fed the
/// streams as the server reports them, answering with the policy core's events.
///
/// Streams of different processes share a session only as one app (a Flatpak app's, by its app id; a
/// process and its child matched by the same policy file); streams of one process that classify
/// differently (a browser's call tab beside its music tab) form one session per classification. A
/// session is named `binary[pid]:label`, the label being the policy file's name or `role=...`.
struct SessionDirectory: Hashable, Sendable {
    /// The policies in force, indexed once per load (`PolicyIndex`).
    var index = PolicyIndex([])
    var policies: [AppPolicy] { index.policies }
    /// The session each stream was given.
    private(set) var sessions: [StreamKey: SessionID] = [:]
    /// The classification behind each session.
    private(set) var classifications: [SessionID: Classification] = [:]

    /// What placing a stream means for the core.
    struct Placement: Hashable, Sendable {
        var session: SessionID
        /// Why, for a session of a policy file or a role default (nil: the app declared it).
        var classification: Classification?
        /// The core must hear of the session (new, or classified differently).
        var declare: SessionDeclaration?
    }

    /// Places a stream in its app's session: the one the app declared (`declared`), else one of the
    /// policy files or the role defaults.
    mutating func place(_ stream: AudioStream, in snapshot: Snapshot, declared: SessionID? = nil,
                        parent: (Int) -> Int? = { _ in nil }) -> Placement {
        if let declared {
            sessions[StreamKey(stream)] = declared
            return Placement(session: declared)
        }
        let (id, app, classification, owner) = session(for: stream, in: snapshot, parent: parent)
        sessions[StreamKey(stream)] = id
        if let pid = app.processID, owner == String(pid), classification.source.policyName != nil {
            processOfSession[id] = processOfSession[id] ?? pid
        }
        // (Declared again only when what the core is told changes: an app's streams may match its
        // policy by different facts, Chromium's playback by name=Chromium and its capture by
        // name=Chromium input, which is one session, not a new classification at each stream.)
        guard !(classifications[id].map { $0.declaresAlike(classification) } ?? false) else {
            return Placement(session: id, classification: classifications[id] ?? classification)
        }
        classifications[id] = classification
        var declaration = SessionDeclaration(
            id, app: owner, origin: .inferred, configuration: classification.configuration,
            duckLevel: classification.duckLevel, microphoneAllowed: classification.microphoneAllowed,
            infersCalls: classification.infersCalls, preferredOutputs: classification.preferredOutputs,
            appName: classification.source.policyName ?? app.binary ?? app.name)
        declaration.names = SessionDeclaration.names(appID: app.appID, binary: app.binary, name: app.name, policy: classification.source.policyName)
        return Placement(session: id, classification: classification, declare: declaration)
    }

    /// The session of the policy files or the role defaults a stream belongs in (`place`, which records
    /// it), with its app, classification and owner.
    func session(for stream: AudioStream, in snapshot: Snapshot, parent: (Int) -> Int?)
        -> (id: SessionID, app: AppIdentity, classification: Classification, owner: String) {
        let client = snapshot.client(of: stream)
        return session(for: stream, client: client, app: AppIdentity(stream, client: client), parent: parent)
    }

    /// The same, with the stream's client (nil: none known) and its identity worked out already: `app` is
    /// `AppIdentity(stream, client: client)`.
    func session(for stream: AudioStream, client: Client?, app: AppIdentity, parent: (Int) -> Int?)
        -> (id: SessionID, app: AppIdentity, classification: Classification, owner: String) {
        let classification = Classifier.classify(app, index: index)
        let owner = Self.owner(of: stream, app, client: client)
        let label: String =
            switch classification.source {
            case .policy(let name, _, _): name
            case .roleDefault(let role): "role=\(role ?? "none")"
            }
        let related = classification.source.policyName.flatMap {
            relatedSession(policy: $0, processID: app.processID, owner: owner, parent: parent)
        }
        return (related ?? SessionID("\(app.binary ?? app.name ?? "app")[\(owner)]:\(label)"), app, classification, owner)
    }

    /// Whether the core has a session of that name, classified here (an inferred one).
    func knows(_ id: SessionID) -> Bool { classifications[id] != nil }

    /// The process behind each session of a policy file (its first stream's), for `relatedSession`.
    private(set) var processOfSession: [SessionID: Int] = [:]

    /// An app of several processes, one a child of the other, whose streams match the same policy file
    /// (speech-dispatcher 0.11: the voice from the daemon, its fallback from its child `sd_dummy`) is one
    /// app: the stream joins the session of the related process that is there already. Related: one is
    /// the other's ancestor, a few generations up (`Players.generations`). The policy file says they are
    /// one program; processes merely launched by the same parent (a desktop shell's apps) are not
    /// related, nor is a parent matched by another policy or by none. The process tree is read only when
    /// another process has a session of the same policy.
    func relatedSession(policy: String, processID: Int?, owner: String,
                        parent: (Int) -> Int?) -> SessionID? {
        guard let pid = processID, owner == String(pid) else { return nil }
        let others = processOfSession.filter { $0.value != pid && classifications[$0.key]?.source.policyName == policy }
        guard !others.isEmpty else { return nil }
        func ancestors(of start: Int) -> Set<Int> {
            var found: Set<Int> = []
            var current = start
            for _ in 0..<Players.generations {
                guard let up = parent(current), up > 1, found.insert(up).inserted else { break }
                current = up
            }
            return found
        }
        let mine = ancestors(of: pid)
        return others.sorted { $0.key < $1.key }.first { other in
            mine.contains(other.value) || ancestors(of: other.value).contains(pid)
        }?.key
    }

    /// Who a stream's app is, for grouping its streams into one session (SPEC.md section 1): a Flatpak
    /// app by its app id, whichever of its processes plays or records (PipeWire's portal names it on the
    /// client; Flatpak's libpulse on the stream); else the process; else the client connection.
    static func owner(of stream: AudioStream, _ app: AppIdentity, client: Client?) -> String {
        for key in ["pipewire.access.portal.app_id", "application.flatpak.id"] {
            if let id = stream.properties[key] ?? client?.properties[key], !id.isEmpty { return id }
        }
        return app.processID.map(String.init) ?? "client\(stream.client ?? 0)"
    }

    /// The stream is no session's any more (gone, or a capture of a sink's monitor); true if it was one's.
    @discardableResult
    mutating func remove(_ key: StreamKey) -> Bool { sessions.removeValue(forKey: key) != nil }

    func session(of key: StreamKey) -> SessionID? { sessions[key] }

    /// The server went away, and every stream with it.
    mutating func serverLost() { sessions = [:] }

    /// The core ended an inferred session (no stream left, nothing to do): its classification and process
    /// are forgotten (a session is declared to the core exactly while its classification is kept here).
    mutating func forget(_ id: SessionID) {
        classifications[id] = nil
        processOfSession[id] = nil
    }
}

extension Classification {
    /// Whether the core would be told the same of a session classified either way (the facts that
    /// matched aside).
    func declaresAlike(_ other: Classification) -> Bool {
        configuration == other.configuration && microphoneAllowed == other.microphoneAllowed && duckLevel == other.duckLevel
            && infersCalls == other.infersCalls && preferredOutputs == other.preferredOutputs && source.policyName == other.source.policyName
    }
}

extension Classification.Source {
    /// The policy's name, or nil for a role default.
    public var policyName: String? {
        if case .policy(let name, _, _) = self { name } else { nil }
    }
}

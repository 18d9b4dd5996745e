public import AudioPolicy
public import FoundationEssentials
import Glibc

/// Per-app policy files (SPEC.md section 8): YAML, one app per file, layered like systemd and
/// WirePlumber. A file of the same name in a higher layer masks the lower one.
///
/// ```yaml
/// match:
///   binary: [spotify]
///   app-id: [com.spotify.Client]
/// category: playback
/// mode: default
/// options: [mixWithOthers, duckOthers]
/// microphone: allow
/// duck-level: 0.2
/// infer-calls: no    # recording while playing is not a call (an always-open voice channel)
/// ```
public enum PolicyFiles {
    /// The places an `output:` list may name (its first 7 are told apart; more are not needed).
    static let maxOutputs = 7
    static let topKeys = ["match", "category", "mode", "options", "microphone", "duck-level", "declare", "infer-calls", "output", "description"]
    static let matchKeys = ["binary", "app-id", "name", "role"]

    /// The layers, highest precedence first: `extra` (the agent's --policies), then
    /// `$XDG_CONFIG_HOME/audiosession/policies`, `/etc/xdg/audiosession/policies`, and the shipped files.
    public static func layers(extra: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (environment["HOME"].map { "\($0)/.config" } ?? "/root/.config")
        let configDirs = (environment["XDG_CONFIG_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/etc/xdg")
            .split(separator: ":").map { "\($0)/audiosession/policies" }
        return extra + ["\(configHome)/audiosession/policies"] + configDirs + shippedDirectories
    }

    /// Where the shipped policies are: beside the program as installed (PREFIX/bin and
    /// PREFIX/share/audiosession/policies: scripts/install), in /usr/share, or in this source tree.
    public static var shippedDirectories: [String] {
        let beside = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")).map {
            URL(fileURLWithPath: $0).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("share/audiosession/policies").path
        }
        let installed = "/usr/share/audiosession/policies"
        let tree = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("policies").path
        var seen: Set<String> = []
        return [beside, installed, tree].compactMap { $0 }
            .filter { FileManager.default.fileExists(atPath: $0) && seen.insert($0).inserted }
    }

    /// Loads every `*.yaml` (and `*.yml`) of the layers; a name found in a higher layer masks the lower
    /// ones. Bad files are reported and left out (a bad file still masks the lower ones: the agent keeps
    /// its last good version, see `keepingLastGood`); the good ones load. A layer that does not exist
    /// is skipped (most of the XDG ones do not); one that exists and cannot be read is an error.
    public static func load(layers: [String]) -> (policies: [AppPolicy], errors: [PolicyFileError]) {
        var cache = PolicyFileCache()
        return load(layers: layers, cache: &cache)
    }

    /// The same, reading again only the files that changed since they went into `cache` (and keeping
    /// there what it read): what a reload costs is what changed, not the whole layer.
    public static func load(layers: [String], cache: inout PolicyFileCache) -> (policies: [AppPolicy], errors: [PolicyFileError]) {
        var fresh = PolicyFileCache(settledAfter: cache.settledAfter)
        defer { cache = fresh }
        var seen: Set<String> = []
        var policies: [AppPolicy] = []
        var errors: [PolicyFileError] = []
        for directory in layers {
            let entries: [String]
            do {
                entries = try fileNames(in: directory)
            } catch {
                if error.code != ENOENT {
                    errors.append(PolicyFileError(directory: directory, message: "cannot read this policy directory: \(error.text)"))
                }
                continue
            }
            for file in entries.sorted() {
                guard let name = policyName(ofFile: file) else { continue }
                guard seen.insert(name).inserted else { continue }
                let path = "\(directory)/\(file)"
                let stamp = PolicyFileCache.Stamp(path)
                if let stamp, let known = cache.policy(at: path, stamp: stamp) {
                    fresh.keep(known, at: path, stamp: stamp, reused: true)
                    policies.append(known)
                    continue
                }
                do {
                    let policy = try load(file: path, name: name)
                    if let stamp { fresh.keep(policy, at: path, stamp: stamp, reused: false) }
                    policies.append(policy)
                } catch {
                    errors.append(error)
                }
            }
        }
        return (policies, errors)
    }

    /// The policy a file names: its whole name without `.yaml` or `.yml` (`org.example.App.yaml` is
    /// `org.example.App`), or nil for a file that is not a policy file. Takes a path or a name.
    public static func policyName(ofFile path: String) -> String? {
        let file = path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? path
        for suffix in [".yaml", ".yml"] where file.hasSuffix(suffix) {
            return String(file.dropLast(suffix.count))
        }
        return nil
    }

    /// Reads and parses one policy file. A file that cannot be read (missing, a directory, not a
    /// regular file, no permission) is an error at its line 1, column 1 that says why.
    public static func load(file path: String, name: String) throws(PolicyFileError) -> AppPolicy {
        let bytes = try read(path, atMost: PolicyYAML.Limits.policyFile.bytes + 1)
        return try parse(utf8: bytes, name: name, path: path)
    }

    /// The policies in force after a load, given those in force before it (SPEC.md section 8, "a bad
    /// file keeps its last good version"): the loaded ones, and each earlier policy whose file is now
    /// bad (an error names a file of the same whole name, `org.example.App.yaml` for `org.example.App`),
    /// or whose directory can no longer be read. A kept policy stands in for the bad file, which masks
    /// any lower file of its name, so it replaces a loaded policy of the same name.
    public static func keepingLastGood(previous: [AppPolicy], loaded: [AppPolicy], errors: [PolicyFileError]) -> [AppPolicy] {
        let badNames = Set(errors.filter { !$0.isAboutDirectory }.compactMap { policyName(ofFile: $0.file) })
        let badDirectories = Set(errors.filter(\.isAboutDirectory).map(\.file))
        let kept = previous.filter { policy in
            badNames.contains(policy.name) || badDirectories.contains(directory(of: policy.source))
        }
        let keptNames = Set(kept.map(\.name))
        return loaded.filter { !keptNames.contains($0.name) } + kept
    }

    /// The directory part of a path (`a/b` of `a/b/c.yaml`).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return String(path[..<slash])
    }

    /// An errno with its text.
    struct SystemError: Error {
        var code: Int32
        var text: String { String(cString: strerror(code)) }
    }

    /// The names in a directory (not `.` and `..`), as readdir(3) gives them.
    static func fileNames(in directory: String) throws(SystemError) -> [String] {
        guard let handle = opendir(directory) else { throw SystemError(code: errno) }
        defer { closedir(handle) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(handle) else {
                if errno != 0 { throw SystemError(code: errno) }
                return names
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                // A name that is not UTF-8 keeps its bytes repaired (U+FFFD): reading it then fails
                // with an error that shows it.
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    /// Up to `limit` bytes of a regular file. Opened without blocking (a FIFO dropped in a policy
    /// directory must not stop the agent), and read with read(2), so that every failure says why.
    static func read(_ path: String, atMost limit: Int) throws(PolicyFileError) -> [UInt8] {
        func fail(_ why: String) -> PolicyFileError {
            PolicyFileError(file: path, line: 1, column: 1, message: "cannot read this policy file: \(why)")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { throw fail(SystemError(code: errno).text) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw fail(SystemError(code: errno).text) }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw fail("it is a directory")
        default: throw fail("it is not a regular file")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count < limit {
            let wanted = min(chunk.count, limit - bytes.count)
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, wanted) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw fail(SystemError(code: errno).text)
            }
            bytes += chunk[..<n]
        }
        return bytes
    }

    /// Parses one policy file. Every error names the line and column and what would be accepted.
    public static func parse(_ text: String, name: String, path: String) throws(PolicyFileError) -> AppPolicy {
        try parse(utf8: text.utf8, name: name, path: path)
    }

    /// Parses one policy file from its bytes (which need not be UTF-8: that is an error with its place).
    static func parse(utf8 bytes: some Collection<UInt8>, name: String, path: String) throws(PolicyFileError) -> AppPolicy {
        typealias Node = PolicyYAML.Node
        func fail(_ mark: PolicyYAML.Mark?, _ message: String) -> PolicyFileError {
            PolicyFileError(file: path, line: mark?.line ?? 1, column: mark?.column ?? 1, message: message)
        }
        let parsed: Node?
        do {
            parsed = try PolicyYAML.parse(utf8: bytes)
        } catch {
            throw fail(error.mark, error.isSyntax ? "not valid YAML: \(error.message)" : error.message)
        }
        guard let root = parsed else { throw fail(nil, "the file is empty") }
        guard case .mapping(let top, _) = root else {
            throw fail(root.mark, "expected a mapping of \(topKeys.joined(separator: ", "))")
        }

        var match = AppPolicy.Match()
        var category: Category?
        var mode = Mode.default
        var options: CategoryOptions = []
        var optionsMark: PolicyYAML.Mark?
        var microphone = true
        var duckLevel: Double?
        var declaring = AppPolicy.Declaring.allow
        var infersCalls = true
        var output: [OutputPreference] = []
        var outputMark: PolicyYAML.Mark?
        for (key, keyMark, value) in top {
            switch key {
            case "match":
                guard case .mapping(let m, _) = value else {
                    throw fail(value.mark, "match: expected a mapping of \(matchKeys.joined(separator: ", "))")
                }
                for (k, kMark, v) in m {
                    let list = try strings(v, "match.\(k)", fail)
                    switch k {
                    case "binary": match.binary = list
                    case "app-id": match.appID = list
                    case "name": match.name = list
                    case "role": match.role = list
                    default:
                        throw fail(kMark, "unknown key match.\(k) (accepted: \(matchKeys.joined(separator: ", ")))")
                    }
                }
            case "category":
                let text = try scalar(value, "category", fail)
                guard let found = Category.allCases.first(where: { $0.rawValue == text }) else {
                    throw fail(value.mark, "unknown category '\(text)' (accepted: \(Category.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                category = found
            case "mode":
                let text = try scalar(value, "mode", fail)
                guard let found = Mode.allCases.first(where: { $0.rawValue == text }) else {
                    throw fail(value.mark, "unknown mode '\(text)' (accepted: \(Mode.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                mode = found
            case "options":
                optionsMark = value.mark
                for item in try items(value, fail, "options: expected a list of option names") {
                    let text = try scalar(item, "options", fail)
                    guard let option = CategoryOptions(name: text) else {
                        throw fail(item.mark, "unknown option '\(text)' (accepted: \(CategoryOptions.named.map(\.name).joined(separator: ", ")))")
                    }
                    options.insert(option)
                }
            case "microphone":
                switch try scalar(value, "microphone", fail) {
                case "allow": microphone = true
                case "deny": microphone = false
                case let other: throw fail(value.mark, "microphone: '\(other)' is neither allow nor deny")
                }
            case "duck-level":
                guard case .scalar(let text, _) = value, let level = Double(text), (0...1).contains(level) else {
                    throw fail(value.mark, "duck-level: expected a number from 0 to 1 (an amplitude; 0.2 is -14 dB)")
                }
                duckLevel = level
            case "declare":
                let text = try scalar(value, "declare", fail)
                guard let found = AppPolicy.Declaring(rawValue: text) else {
                    throw fail(value.mark, "declare: '\(text)' is none of \(AppPolicy.Declaring.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                declaring = found
            case "infer-calls":
                switch try scalar(value, "infer-calls", fail) {
                case "yes": infersCalls = true
                case "no": infersCalls = false
                case let other: throw fail(value.mark, "infer-calls: '\(other)' is neither yes nor no")
                }
            case "output":
                outputMark = value.mark
                output = try outputs(value, "output", fail)
            case "description":
                _ = try scalar(value, "description", fail)
            default:
                throw fail(keyMark, "unknown key '\(key)' (accepted: \(topKeys.joined(separator: ", ")))")
            }
        }
        guard let category else { throw fail(root.mark, "category is missing (accepted: \(Category.allCases.map(\.rawValue).joined(separator: ", ")))") }
        if match.isEmpty { throw fail(root.mark, "match is missing or empty: name at least one of \(matchKeys.joined(separator: ", "))") }
        if !output.isEmpty && !category.hasOutput {
            throw fail(outputMark, "output: a \(category.rawValue) session plays nothing")
        }
        let configuration = SessionConfiguration(category, mode: mode, options: options)
        do {
            try configuration.validate()
        } catch {
            throw fail(optionsMark ?? root.mark, error.message)
        }
        if output.contains(.everywhere) && configuration.isCall {
            throw fail(outputMark, "output: everywhere (the speaker too) is for alarms and ringtones: a call never plays out loud by a rule")
        }
        return AppPolicy(name: name, source: path, match: match, configuration: configuration,
                         microphoneAllowed: microphone, duckLevel: duckLevel, declaring: declaring, infersCalls: infersCalls,
                         preferredOutputs: output)
    }

    /// A list's items, or a single value as a list of one; a mapping is the error `wanted` says.
    static func items(_ node: PolicyYAML.Node, _ fail: (PolicyYAML.Mark?, String) -> PolicyFileError,
                      _ wanted: String) throws(PolicyFileError) -> [PolicyYAML.Node] {
        switch node {
        case .sequence(let list, _): return list
        case .scalar: return [node]
        case .mapping: throw fail(node.mark, wanted)
        }
    }

    /// An `output:` list (a policy file's, or one of `outputs.yaml`): port types, `everywhere`, device
    /// names, at most `maxOutputs`; `key` names it in an error.
    static func outputs(_ value: PolicyYAML.Node, _ key: String,
                        _ fail: (PolicyYAML.Mark?, String) -> PolicyFileError) throws(PolicyFileError) -> [OutputPreference] {
        let places = try items(value, fail, "\(key): expected a list of port types or device names, the first connected wins")
        guard places.count <= maxOutputs else {
            throw fail(value.mark, "\(key): \(places.count) places; at most \(maxOutputs)")
        }
        var output: [OutputPreference] = []
        for item in places {
            let text = try scalar(item, key, fail)
            guard !text.isEmpty, text.utf8.count <= 255, !text.contains(where: { $0.isWhitespace || $0.unicodeScalars.contains { $0.properties.generalCategory == .control } }) else {
                throw fail(item.mark, "\(key): '\(text)' is neither a port type (\(PortType.known.map(\.name).filter { $0 != "virtual" }.joined(separator: ", "))), everywhere, nor a device name")
            }
            let preference = OutputPreference(word: text)
            if case .type(let type) = preference, type == .virtual || [.builtInMic, .headsetMic, .lineIn].contains(type) {
                throw fail(item.mark, "\(key): '\(text)' is no output a session can be sent to")
            }
            output.append(preference)
        }
        return output
    }

    static func scalar(_ node: PolicyYAML.Node, _ key: String,
                       _ fail: (PolicyYAML.Mark?, String) -> PolicyFileError) throws(PolicyFileError) -> String {
        guard case .scalar(let text, _) = node else { throw fail(node.mark, "\(key): expected a single value") }
        return text
    }

    static func strings(_ node: PolicyYAML.Node, _ key: String,
                        _ fail: (PolicyYAML.Mark?, String) -> PolicyFileError) throws(PolicyFileError) -> [String] {
        switch node {
        case .scalar(let text, _): return [text]
        case .sequence(let items, _):
            var result: [String] = []
            for item in items { result.append(try scalar(item, key, fail)) }
            return result
        case .mapping: throw fail(node.mark, "\(key): expected a value or a list of values")
        }
    }
}

/// The policy files an earlier load parsed, by path, each with what identified its content then
/// (device, inode, size, modification and change times, as stat(2) gave them just before it was read):
/// a file whose stamp is the same is not read again. A file whose times are less than two seconds
/// before its stamp was taken is read again anyway (a write within the same clock tick as that read
/// would have left the times as they were), as Git treats a "racily clean" file.
public struct PolicyFileCache: Sendable {
    struct Stamp: Sendable {
        var device: UInt64, inode: UInt64, size: Int64
        var modified: timespec, changed: timespec
        /// When the stamp was taken (CLOCK_REALTIME, the clock file times are in).
        var taken: timespec

        /// The file's stamp now (following links, as reading it does); nil if it cannot be had.
        init?(_ path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            device = UInt64(info.st_dev); inode = UInt64(info.st_ino); size = Int64(info.st_size)
            modified = info.st_mtim; changed = info.st_ctim; taken = now
        }

        /// The same content as `other` says, as far as the file system tells.
        func same(as other: Stamp) -> Bool {
            device == other.device && inode == other.inode && size == other.size
                && modified.tv_sec == other.modified.tv_sec && modified.tv_nsec == other.modified.tv_nsec
                && changed.tv_sec == other.changed.tv_sec && changed.tv_nsec == other.changed.tv_nsec
        }

        /// Whether the file was last written `seconds` or more before the stamp was taken.
        func settled(_ seconds: Int) -> Bool { max(modified.tv_sec, changed.tv_sec) + seconds <= taken.tv_sec }
    }

    private var entries: [String: (stamp: Stamp, policy: AppPolicy)] = [:]
    /// How many files the load that made this cache took from the one before, not reading them.
    public private(set) var reused = 0
    /// How long before its stamp a file must have been written for the stamp to be trusted.
    let settledAfter: Int

    /// (`settledAfter` in seconds: 2, more than a file system's clock tick; tests may say 0.)
    public init(settledAfter: Int = 2) { self.settledAfter = settledAfter }

    /// The policy read from `path` before, if the file is as it was then.
    func policy(at path: String, stamp: Stamp) -> AppPolicy? {
        guard let entry = entries[path], entry.stamp.settled(settledAfter), entry.stamp.same(as: stamp) else { return nil }
        return entry.policy
    }

    /// Keeps a policy as read from `path` (or taken from the cache before), with the file's stamp.
    mutating func keep(_ policy: AppPolicy, at path: String, stamp: Stamp, reused: Bool) {
        entries[path] = (stamp, policy)
        if reused { self.reused += 1 }
    }
}

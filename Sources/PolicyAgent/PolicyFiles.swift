public import AudioPolicy
public import FoundationEssentials
import Glibc

/// An error in a policy file, with where it is: `file:line:column: message`.
public struct PolicyFileError: Error, Hashable, Sendable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public var message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file; self.line = line; self.column = column; self.message = message
    }

    public var description: String { "\(file):\(line):\(column): \(message)" }
}

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
/// ```
public enum PolicyFiles {
    static let topKeys = ["match", "category", "mode", "options", "microphone", "duck-level", "description"]
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

    /// Where the shipped policies are: installed, or in this source tree.
    public static var shippedDirectories: [String] {
        let installed = "/usr/share/audiosession/policies"
        let tree = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("policies").path
        return [installed, tree].filter { FileManager.default.fileExists(atPath: $0) }
    }

    /// Loads every `*.yaml` of the layers; a name found in a higher layer masks the lower ones. Bad
    /// files are reported and left out; the good ones load.
    public static func load(layers: [String]) -> (policies: [AppPolicy], errors: [PolicyFileError]) {
        var seen: Set<String> = []
        var policies: [AppPolicy] = []
        var errors: [PolicyFileError] = []
        for directory in layers {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for file in names.sorted() where file.hasSuffix(".yaml") || file.hasSuffix(".yml") {
                let name = String(file.prefix(upTo: file.lastIndex(of: ".")!))
                guard seen.insert(name).inserted else { continue }
                let path = "\(directory)/\(file)"
                do {
                    let text = try String(contentsOfFile: path, encoding: .utf8)
                    policies.append(try parse(text, name: name, path: path))
                } catch let error as PolicyFileError {
                    errors.append(error)
                } catch {
                    errors.append(PolicyFileError(file: path, line: 1, column: 1, message: "cannot read: \(error)"))
                }
            }
        }
        return (policies, errors)
    }

    /// Parses one policy file. Every error names the line and column and what would be accepted.
    public static func parse(_ text: String, name: String, path: String) throws(PolicyFileError) -> AppPolicy {
        typealias Node = PolicyYAML.Node
        func fail(_ mark: PolicyYAML.Mark?, _ message: String) -> PolicyFileError {
            PolicyFileError(file: path, line: mark?.line ?? 1, column: mark?.column ?? 1, message: message)
        }
        let root: Node
        do {
            guard let node = try PolicyYAML.parse(text) else { throw fail(nil, "the file is empty") }
            root = node
        } catch let error as PolicyYAML.Failure {
            throw fail(error.mark, "not valid YAML: \(error.message)")
        } catch let error as PolicyFileError {
            throw error
        } catch {
            throw fail(nil, "\(error)")
        }
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
                let items: [Node]
                switch value {
                case .sequence(let list, _): items = list
                case .scalar: items = [value]
                case .mapping: throw fail(value.mark, "options: expected a list of option names")
                }
                for item in items {
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
            case "description":
                _ = try scalar(value, "description", fail)
            default:
                throw fail(keyMark, "unknown key '\(key)' (accepted: \(topKeys.joined(separator: ", ")))")
            }
        }
        guard let category else { throw fail(root.mark, "category is missing (accepted: \(Category.allCases.map(\.rawValue).joined(separator: ", ")))") }
        if match.isEmpty { throw fail(root.mark, "match is missing or empty: name at least one of \(matchKeys.joined(separator: ", "))") }
        let configuration = SessionConfiguration(category, mode: mode, options: options)
        do {
            try configuration.validate()
        } catch {
            throw fail(optionsMark ?? root.mark, error.message)
        }
        return AppPolicy(name: name, source: path, match: match, configuration: configuration,
                         microphoneAllowed: microphone, duckLevel: duckLevel)
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

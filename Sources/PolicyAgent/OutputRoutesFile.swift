public import AudioPolicy
import AgentTower
import Glibc

/// The user's preferred outputs per category and per app (SPEC.md section 10): `outputs.yaml` beside
/// each directory of policy files named `policies` (`$XDG_CONFIG_HOME/audiosession/outputs.yaml`,
/// `/etc/xdg/audiosession/outputs.yaml`, the shipped one), a higher layer's entry masking a lower
/// one's, key by key. An app's list outranks its policy file's `output:`, which outranks its
/// category's list.
///
/// ```yaml
/// categories:
///   playback: [usbAudio, headphones]   # music on the USB DAC, else the headphones, else the default
///   ambient: [everywhere]              # the built-in speaker too, at once
/// apps:
///   spotify: [builtInSpeaker]          # by its policy file's name, or its program's
/// ```
public enum OutputRoutesFile {
    public static let fileName = "outputs.yaml"
    /// The apps one file may name.
    static let maxApps = 256
    static let limits = PolicyYAML.Limits(bytes: 256 * 1024, depth: 8, entries: 4096)

    /// The files for these policy layers, highest precedence first: `outputs.yaml` beside each layer
    /// whose directory is named `policies`.
    public static func paths(layers: [String]) -> [String] {
        var seen: Set<String> = []
        return layers.compactMap { layer -> String? in
            let trimmed = layer.hasSuffix("/") ? String(layer.dropLast()) : layer
            guard trimmed.hasSuffix("/policies") else { return nil }
            return String(trimmed.dropLast("policies".count)) + fileName
        }.filter { seen.insert($0).inserted }
    }

    /// Reads the files (highest precedence first) and merges them; a file that is not there is
    /// skipped; a bad one is an error naming its place and counts as `lastGood[path]` (nothing, the
    /// first time).
    public static func load(paths: [String], lastGood: inout [String: OutputRoutes]) -> (OutputRoutes, [PolicyFileError]) {
        var merged = OutputRoutes()
        var errors: [PolicyFileError] = []
        for path in paths.reversed() {
            var info = stat()
            guard stat(path, &info) == 0 || errno != ENOENT else { lastGood[path] = nil; continue }
            let routes: OutputRoutes
            do {
                let bytes = try PolicyFiles.read(path, atMost: limits.bytes + 1)
                routes = try parse(utf8: bytes, path: path)
                lastGood[path] = routes
            } catch {
                errors.append(error)
                guard let kept = lastGood[path] else { continue }
                routes = kept
            }
            merged.categories.merge(routes.categories) { _, higher in higher }
            merged.apps.merge(routes.apps) { _, higher in higher }
        }
        return (merged, errors)
    }

    /// Parses one file. Every error names the line and column and what would be accepted.
    public static func parse(_ text: String, path: String) throws(PolicyFileError) -> OutputRoutes {
        try parse(utf8: text.utf8, path: path)
    }

    static func parse(utf8 bytes: some Collection<UInt8>, path: String) throws(PolicyFileError) -> OutputRoutes {
        func fail(_ mark: PolicyYAML.Mark?, _ message: String) -> PolicyFileError {
            PolicyFileError(file: path, line: mark?.line ?? 1, column: mark?.column ?? 1, message: message)
        }
        let parsed: PolicyYAML.Node?
        do {
            parsed = try PolicyYAML.parse(utf8: bytes, limits: limits)
        } catch {
            throw fail(error.mark, error.isSyntax ? "not valid YAML: \(error.message)" : error.message)
        }
        guard let root = parsed else { return OutputRoutes() }
        guard case .mapping(let top, _) = root else { throw fail(root.mark, "expected a mapping of categories, apps") }
        var routes = OutputRoutes()
        for (key, keyMark, value) in top {
            guard key == "categories" || key == "apps" else { throw fail(keyMark, "unknown key '\(key)' (accepted: categories, apps)") }
            guard case .mapping(let entries, _) = value else {
                throw fail(value.mark, "\(key): expected a mapping of \(key == "categories" ? "categories" : "app names") to lists of outputs")
            }
            for (name, nameMark, list) in entries {
                let outputs = try PolicyFiles.outputs(list, "\(key).\(name)", fail)
                if key == "categories" {
                    guard let category = Category.allCases.first(where: { $0.rawValue == name }) else {
                        throw fail(nameMark, "unknown category '\(name)' (accepted: \(Category.allCases.map(\.rawValue).joined(separator: ", ")))")
                    }
                    guard category.hasOutput else { throw fail(nameMark, "categories.\(name): a \(name) session plays nothing") }
                    routes.categories[category] = outputs
                } else {
                    guard Escape.isAppName(name) else {
                        throw fail(nameMark, "apps: '\(name)' is no app name (its policy file's name, or its program's)")
                    }
                    guard routes.apps.count < maxApps || routes.apps[name] != nil else {
                        throw fail(nameMark, "apps: more than \(maxApps) apps")
                    }
                    routes.apps[name] = outputs
                }
            }
        }
        return routes
    }
}

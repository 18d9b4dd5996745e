import AgentTower
import AudioPolicy
import FoundationEssentials
import Glibc

/// What the user set on the agent that outlives it (`KeptSettings`), in the state directory: one word
/// a line for each setting that is on (`input-muted`, `silent-mode`); nothing, or no file, for the
/// defaults. Opened through `StateDirectory`: never through a link.
enum KeptSettingsFile {
    static let fileName = "settings"
    /// The most read of it: a few words are all it ever holds.
    static let sizeLimit = 4096

    /// What the files say (`settings`, and `routes`: `RoutesFile`), and what was wrong with them (named
    /// with the file and the line); what could be read holds.
    static func read(in directory: StateDirectory?) -> (KeptSettings, problem: String?) {
        var (kept, problem) = readSettings(in: directory)
        let (routes, routesProblem) = RoutesFile.read(in: directory)
        kept.routes = routes
        let problems = [problem, routesProblem].compactMap { $0 }
        return (kept, problems.isEmpty ? nil : problems.joined(separator: "; "))
    }

    /// A file of the state directory, at most `limit` bytes: its bytes (nil: no file), or what was wrong.
    static func bytes(of name: String, in directory: StateDirectory, limit: Int) -> Result<[UInt8]?, StateFileProblem> {
        do {
            guard let read = try directory.read(name, limit: limit + 1) else { return .success(nil) }
            guard read.count <= limit else { return .failure(StateFileProblem(text: "\(directory.shown(name)) is larger than \(limit) bytes: not ours")) }
            return .success(read)
        } catch {
            return .failure(StateFileProblem(text: error.description))
        }
    }

    struct StateFileProblem: Error { var text: String }

    static func readSettings(in directory: StateDirectory?) -> (KeptSettings, problem: String?) {
        guard let directory else { return (KeptSettings(), nil) }
        let shown = directory.shown(fileName)
        let bytes: [UInt8]
        switch Self.bytes(of: fileName, in: directory, limit: sizeLimit) {
        case .success(let read?): bytes = read
        case .success(nil): return (KeptSettings(), nil)
        case .failure(let problem): return (KeptSettings(), problem.text)
        }
        var kept = KeptSettings()
        var problems: [String] = []
        for (number, line) in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            switch line.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ") {
            case "": continue
            case "input-muted": kept.inputMuted = true
            case "silent-mode": kept.silentMode = true
            default: problems.append("\(shown):\(number + 1): not a setting: '\(Escape.forDisplay(String(line.prefix(60))))'")
            }
        }
        return (kept, problems.isEmpty ? nil : problems.prefix(3).joined(separator: "; "))
    }

    static func text(_ kept: KeptSettings) -> String {
        (kept.inputMuted ? "input-muted\n" : "") + (kept.silentMode ? "silent-mode\n" : "")
    }

    /// Writes the files (each a new file renamed over the old: a reader sees one or the other).
    static func write(_ kept: KeptSettings, in directory: StateDirectory) throws(StateDirectoryError) {
        try directory.replace(fileName, with: text(kept).utf8)
        try directory.replace(RoutesFile.fileName, with: RoutesFile.text(kept.routes).utf8)
    }
}

/// The user's route choices per set of devices (`RememberedRoutes`), in the state directory: a JSON
/// object a line, the least recently seen set first:
/// `{"devices":["builtin_speaker","usb_dac"],"output":"builtin_speaker","scoped":{"category:playback":"usb_dac"}}`.
/// Bounded: at most `RememberedRoutes.limit` sets of at most 64 devices and 64 choices, names of at most
/// 512 bytes (a set beyond those is not written).
enum RoutesFile {
    static let fileName = "routes"
    /// 32 sets of at most 64 devices and 64 choices, names of at most 512 bytes: what the agent writes fits.
    static let sizeLimit = 4 * 1024 * 1024

    struct Line: Codable {
        var devices: [String]
        var output: String?
        var input: String?
        var scoped: [String: String]?
    }

    static func text(_ routes: RememberedRoutes) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return routes.sets.compactMap { entry -> String? in
            guard entry.set.members.count <= 64, entry.choices.scoped.count <= RouteChoices.scopedLimit else { return nil }
            let line = Line(devices: entry.set.members, output: entry.choices.output, input: entry.choices.input,
                            scoped: entry.choices.scoped.isEmpty ? nil : Dictionary(uniqueKeysWithValues: entry.choices.scoped.map { ($0.key.word, $0.value) }))
            return (try? encoder.encode(line)).map { String(decoding: $0, as: UTF8.self) + "\n" }
        }.joined()
    }

    static func read(in directory: StateDirectory?) -> (RememberedRoutes, problem: String?) {
        guard let directory else { return (RememberedRoutes(), nil) }
        let shown = directory.shown(fileName)
        let bytes: [UInt8]
        switch KeptSettingsFile.bytes(of: fileName, in: directory, limit: sizeLimit) {
        case .success(let read?): bytes = read
        case .success(nil): return (RememberedRoutes(), nil)
        case .failure(let problem): return (RememberedRoutes(), problem.text)
        }
        var entries: [(DeviceSet, RouteChoices)] = []
        var problems: [String] = []
        let decoder = JSONDecoder()
        func name(_ text: String?) -> Bool { text.map { !$0.isEmpty && $0.utf8.count <= 512 } ?? true }
        for (number, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() where !line.isEmpty {
            guard let read = try? decoder.decode(Line.self, from: Data(line)),
                  read.devices.count <= 64, read.devices.allSatisfy({ name($0) }), name(read.output), name(read.input),
                  (read.scoped ?? [:]).count <= 64, (read.scoped ?? [:]).allSatisfy({ RouteScope(word: $0.key) != nil && name($0.value) }) else {
                problems.append("\(shown):\(number + 1): not a set of devices with the user's route choices")
                continue
            }
            var scoped: [RouteScope: String] = [:]
            for (word, device) in read.scoped ?? [:] { if let scope = RouteScope(word: word) { scoped[scope] = device } }
            entries.append((DeviceSet(read.devices), RouteChoices(output: read.output, input: read.input, scoped: scoped)))
        }
        return (RememberedRoutes(entries), problems.isEmpty ? nil : problems.prefix(3).joined(separator: "; "))
    }
}

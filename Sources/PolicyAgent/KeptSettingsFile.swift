import AgentTower
import FoundationEssentials
import Glibc

/// What the user set on the agent that outlives it (`KeptSettings`), in the state directory: one word
/// a line for each setting that is on (`input-muted`, `silent-mode`); nothing, or no file, for the
/// defaults. Opened through `StateDirectory`: never through a link.
enum KeptSettingsFile {
    static let fileName = "settings"
    /// The most read of it: a few words are all it ever holds.
    static let sizeLimit = 4096

    /// What the file says, and what was wrong with it (named with the file and the line); the settings
    /// it could read hold.
    static func read(in directory: StateDirectory?) -> (KeptSettings, problem: String?) {
        guard let directory else { return (KeptSettings(), nil) }
        let shown = directory.shown(fileName)
        let bytes: [UInt8]
        do {
            guard let read = try directory.read(fileName, limit: sizeLimit + 1) else { return (KeptSettings(), nil) }
            bytes = read
        } catch {
            return (KeptSettings(), error.description)
        }
        guard bytes.count <= sizeLimit else { return (KeptSettings(), "\(shown) is larger than \(sizeLimit) bytes: not ours") }
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

    /// Writes the file (a new file renamed over the old: a reader sees one or the other).
    static func write(_ kept: KeptSettings, in directory: StateDirectory) throws(StateDirectoryError) {
        try directory.replace(fileName, with: text(kept).utf8)
    }
}

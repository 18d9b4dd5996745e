import FoundationEssentials
import Glibc

/// The user's record-permission decisions, per app (`audiosessionctl permission APP allow|deny|reset`),
/// in the state directory: one line per app, `allow APP` or `deny APP`. An app is named by its Flatpak
/// app id, else its program's file name, else its command name (as `AppClient.storeName`).
public struct RecordPermissions: Sendable, Hashable {
    public private(set) var decisions: [String: Bool] = [:]

    public init(decisions: [String: Bool] = [:]) { self.decisions = decisions }

    static let fileName = "record-permissions"
    /// The most the file is read of (a decision a line: some 4,000 apps).
    static let sizeLimit = 1 << 20

    /// The decisions in `text`; lines that are not a decision are skipped (the file is ours, but a
    /// person may have edited it).
    public init(parsing text: String) {
        for line in text.split(whereSeparator: \.isNewline) {
            let words = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard words.count == 2, Self.isName(words[1]) else { continue }
            switch words[0] {
            case "allow": decisions[words[1]] = true
            case "deny": decisions[words[1]] = false
            default: continue
            }
        }
    }

    /// The file's text: sorted, one decision a line.
    public var text: String { decisions.keys.sorted().map { "\(decisions[$0]! ? "allow" : "deny") \($0)\n" }.joined() }

    public mutating func set(_ name: String, _ allowed: Bool?) { decisions[name] = allowed }

    /// A name an app can have: printable, no spaces, at most 255 bytes.
    public static func isName(_ name: String) -> Bool { Escape.isAppName(name) }

    /// What the file in `stateDirectory` says (nothing when there is none, or it cannot be read).
    public static func read(in stateDirectory: StateDirectory?) -> RecordPermissions {
        guard let stateDirectory, let bytes = try? stateDirectory.read(fileName, limit: sizeLimit) else { return RecordPermissions() }
        return RecordPermissions(parsing: String(decoding: bytes, as: UTF8.self))
    }

    /// Writes the file (a new file renamed over the old: a reader sees one or the other; never
    /// through a link).
    public func write(in stateDirectory: StateDirectory) throws(StateDirectoryError) {
        try stateDirectory.replace(Self.fileName, with: text.utf8)
    }
}

extension AppClient {
    /// The name the record-permission store knows the app by.
    public var storeName: String { appID ?? binary ?? name }
}

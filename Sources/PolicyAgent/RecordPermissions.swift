import FoundationEssentials
import Glibc

/// The user's record-permission decisions, per app (`audiosessionctl permission APP allow|deny|reset`),
/// in the state directory: one line per app, `allow APP` or `deny APP`. An app is named by its Flatpak
/// app id, else its program's file name, else its command name (as `AppClient.storeName`).
public struct RecordPermissions: Sendable, Hashable {
    public private(set) var decisions: [String: Bool] = [:]

    public init(decisions: [String: Bool] = [:]) { self.decisions = decisions }

    public static func path(in stateDirectory: String) -> String { "\(stateDirectory)/record-permissions" }

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
    public static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255 && !name.unicodeScalars.contains { $0.properties.isWhitespace || Escape.isDangerous($0) }
    }

    /// What the file in `stateDirectory` says (nothing when there is none, or it cannot be read).
    public static func read(in stateDirectory: String?) -> RecordPermissions {
        guard let stateDirectory, let text = try? String(contentsOfFile: path(in: stateDirectory), encoding: .utf8) else {
            return RecordPermissions()
        }
        return RecordPermissions(parsing: text)
    }

    /// Writes the file (a new file renamed over the old: a reader sees one or the other).
    public func write(in stateDirectory: String) throws {
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        let final = Self.path(in: stateDirectory)
        let temporary = final + ".new"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)) else {
            throw RecordPermissionsError("cannot write \(temporary)")
        }
        guard rename(temporary, final) == 0 else {
            unlink(temporary)
            throw RecordPermissionsError("cannot replace \(final): \(String(cString: strerror(errno)))")
        }
    }
}

public struct RecordPermissionsError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

extension AppClient {
    /// The name the record-permission store knows the app by.
    public var storeName: String { appID ?? binary ?? name }
}

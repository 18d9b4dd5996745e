import Foundation

/// What the agent holds on the server, kept in its state directory so that a successor can undo it
/// after a `kill -9` or a crash (SPEC.md 5.12). Written on every change; small.
struct Journal {
    struct Entry: Codable, Hashable {
        var direction: String
        var index: UInt32
        /// The stream's `application.process.id` and name, so that a reused index is not mistaken for it.
        var processID: String?
        var name: String
        /// We muted it: unmute it.
        var muted: Bool
        /// We ducked it from this volume: put it back.
        var baseVolume: [UInt32]?
        /// The server's remembered entry for the stream's app or role before we touched it.
        var restoreKey: String?
    }

    let path: String?
    private(set) var entries: [String: Entry] = [:]

    init(directory: String?) {
        path = directory.map { "\($0)/held.json" }
        if let directory { try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
    }

    /// What a previous run left, if anything.
    func leftovers() -> [Entry] {
        guard let path, let data = FileManager.default.contents(atPath: path) else { return [] }
        return (try? JSONDecoder().decode([Entry].self, from: data)) ?? []
    }

    mutating func set(_ key: String, _ entry: Entry?) {
        entries[key] = entry
        save()
    }

    mutating func clear() {
        entries = [:]
        save()
    }

    func save() {
        guard let path else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(entries.values.sorted { ($0.direction, $0.index) < ($1.direction, $1.index) })) ?? Data("[]".utf8)
        try? data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}

import FoundationEssentials
import Glibc
import PulseClient

/// What the agent holds on the server, kept in its state directory so that a successor can undo it
/// after a `kill -9` or a crash (SPEC.md 5.12).
///
/// The journal sits on the path to every mute, so a change costs one `write(2)` of one line to a file
/// opened for appending (`held.log`, JSON lines: `{"key": ..., "entry": {...} | null}`, the last line
/// of a key wins). No fsync: the journal has to outlive the agent, not the machine, and the page cache
/// survives `kill -9`; after a power loss the sound server starts afresh with nothing held. A line
/// torn by a crash is ignored on reading. The file is rewritten compactly (temporary file, rename)
/// when it has grown well past what it holds, off the path to the server: see `compactIfGrown`.
final class Journal {
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

    struct Line: Codable {
        var key: String
        var entry: Entry?
    }

    /// The server's remembered entry for an app or role as it was before we held a stream of it (nil:
    /// it had none), to be put back; `released` once it has been.
    struct RememberedLine: Codable {
        var remembered: String
        var entry: StreamRestoreEntry?
        var released: Bool?
    }

    /// A server module the agent took over (unloaded, or replaced by a copy), with its own arguments.
    struct ModuleLine: Codable, Hashable {
        var module: String
        var argument: String
    }

    /// A Bluetooth card the agent switched to hands-free, with the profile it had; `released` once it
    /// has been switched back.
    struct CardLine: Codable {
        var card: String
        var original: String?
        var released: Bool?
    }

    /// What a previous run left: streams it held, remembered entries it had not put back yet, the
    /// server modules it had taken over, and the Bluetooth cards it had switched (with their profiles).
    struct Leftovers {
        var streams: [Entry] = []
        var remembered: [String: StreamRestoreEntry?] = [:]
        var modules: [ModuleLine] = []
        var cards: [String: String] = [:]
        var isEmpty: Bool { streams.isEmpty && remembered.isEmpty && modules.isEmpty && cards.isEmpty }
    }

    let path: String?
    /// The format of earlier versions (one JSON array, rewritten on every change): read once, then removed.
    let legacyPath: String?
    private(set) var entries: [String: Entry] = [:]
    private(set) var remembered: [String: StreamRestoreEntry?] = [:]
    private(set) var modules: [ModuleLine] = []
    private(set) var cards: [String: String] = [:]
    private var descriptor: Int32 = -1
    private var lines = 0

    init(directory: String?) {
        path = directory.map { "\($0)/held.log" }
        legacyPath = directory.map { "\($0)/held.json" }
        if let directory { try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// What a previous run left, if anything.
    func leftovers() -> Leftovers {
        var held: [String: Entry] = [:]
        var remembered: [String: StreamRestoreEntry?] = [:]
        var modules: [ModuleLine] = []
        var cards: [String: String] = [:]
        if let legacyPath, let data = FileManager.default.contents(atPath: legacyPath),
           let old = try? JSONDecoder().decode([Entry].self, from: data) {
            for entry in old { held["\(entry.direction)#\(entry.index)"] = entry }
        }
        if let path, let data = FileManager.default.contents(atPath: path) {
            let decoder = JSONDecoder()
            for line in data.split(separator: UInt8(ascii: "\n")) {
                if let line = try? decoder.decode(Line.self, from: Data(line)) {
                    held[line.key] = line.entry
                } else if let line = try? decoder.decode(RememberedLine.self, from: Data(line)) {
                    if line.released == true { remembered[line.remembered] = nil } else { remembered[line.remembered] = .some(line.entry) }
                } else if let line = try? decoder.decode(ModuleLine.self, from: Data(line)) {
                    if !modules.contains(line) { modules.append(line) }
                } else if let line = try? decoder.decode(CardLine.self, from: Data(line)) {
                    cards[line.card] = line.released == true ? nil : line.original
                }  // else torn by a crash: skipped
            }
        }
        return Leftovers(streams: held.values.sorted { ($0.direction, $0.index) < ($1.direction, $1.index) },
                         remembered: remembered, modules: modules, cards: cards)
    }

    /// Records the server's memory for an app or role as it was before we touched it (nil: none).
    func remember(_ key: String, _ entry: StreamRestoreEntry?) {
        remembered[key] = .some(entry)
        append(Self.json(RememberedLine(remembered: key, entry: entry)))
    }

    /// A server module taken over until the agent stops (a clean stop clears the journal).
    func tookOver(_ module: String, argument: String) {
        let line = ModuleLine(module: module, argument: argument)
        guard !modules.contains(line) else { return }
        modules.append(line)
        append(Self.json(line))
    }

    /// A Bluetooth card switched away from `original` until the agent switches it back.
    func switched(_ card: String, from original: String) {
        guard cards[card] != original else { return }
        cards[card] = original
        append(Self.json(CardLine(card: card, original: original)))
    }

    /// That card is back in its own profile (or gone).
    func switchedBack(_ card: String) {
        guard cards.removeValue(forKey: card) != nil else { return }
        append(Self.json(CardLine(card: card, released: true)))
    }

    /// That memory has been put back.
    func putBack(_ key: String) {
        guard remembered.removeValue(forKey: key) != nil else { return }
        append(Self.json(RememberedLine(remembered: key, released: true)))
    }

    /// Records what is held on one stream (nil: nothing any more).
    func set(_ key: String, _ entry: Entry?) {
        guard entries[key] != entry else { return }
        entries[key] = entry
        append(Line(key: key, entry: entry))
    }

    /// Nothing is held: the file is emptied.
    func clear() {
        entries = [:]
        remembered = [:]
        modules = []
        cards = [:]
        rewrite()
        if let legacyPath { unlink(legacyPath) }
    }

    /// Rewrites the file with only what is held, once it has grown to several times that.
    func compactIfGrown() {
        if lines > 64 + 4 * (entries.count + remembered.count + modules.count + cards.count) { rewrite() }
    }

    private func append(_ line: Line) { append(line.json) }

    private func append(_ json: String) {
        guard let path else { return }
        if descriptor < 0 { descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600) }
        guard descriptor >= 0 else { return }
        writeAll(json + "\n", to: descriptor)
        lines += 1
    }

    /// The lines that are not on the way to a mute (remembered entries, modules), encoded plainly.
    private static func json(_ line: some Encodable) -> String {
        (try? JSONEncoder().encode(line)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    private func rewrite() {
        guard let path else { return }
        if descriptor >= 0 { close(descriptor); descriptor = -1 }
        let all = entries.sorted { $0.key < $1.key }.map { Line(key: $0.key, entry: $0.value).json }
            + remembered.sorted { $0.key < $1.key }.map { Self.json(RememberedLine(remembered: $0.key, entry: $0.value)) }
            + modules.map { Self.json($0) }
            + cards.sorted { $0.key < $1.key }.map { Self.json(CardLine(card: $0.key, original: $0.value)) }
        let data = Data(all.map { $0 + "\n" }.joined().utf8)
        try? data.write(to: URL(fileURLWithPath: path), options: .atomic)
        lines = entries.count + remembered.count + modules.count + cards.count
    }
}

extension Journal.Line {
    /// The line as JSON, formatted by hand: JSONEncoder costs more than the write on the way to a mute.
    var json: String {
        guard let e = entry else { return "{\"entry\":null,\"key\":\(Self.quoted(key))}" }
        var fields = ["\"direction\":\(Self.quoted(e.direction))", "\"index\":\(e.index)", "\"muted\":\(e.muted)",
                      "\"name\":\(Self.quoted(e.name))"]
        if let base = e.baseVolume { fields.append("\"baseVolume\":[\(base.map(String.init).joined(separator: ","))]") }
        if let pid = e.processID { fields.append("\"processID\":\(Self.quoted(pid))") }
        if let restoreKey = e.restoreKey { fields.append("\"restoreKey\":\(Self.quoted(restoreKey))") }
        return "{\"entry\":{\(fields.joined(separator: ","))},\"key\":\(Self.quoted(key))}"
    }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

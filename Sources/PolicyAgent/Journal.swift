public import AudioPolicy
import FoundationEssentials
import Glibc
public import PulseClient

/// A change of what the agent holds on the server, for the journal.
public enum JournalChange: Sendable, Hashable {
    /// What is held on one stream (nil: nothing any more).
    case hold(StreamKey, Journal.Entry?)
    /// The server's memory of an app or role as it was before our first hold of it (nil: it had none).
    case remember(String, StreamRestoreEntry?)
    /// That memory has been put back.
    case putBack(String)
    /// A server module taken over (unloaded, or replaced by a copy) until the agent stops.
    case tookOver(module: String, argument: String)
    /// A Bluetooth card switched away from `from` until switched back.
    case switched(card: String, from: String)
    case switchedBack(card: String)
    /// Nothing is held (a clean stop).
    case clear
}

/// What the agent holds on the server, kept in its state directory so that a successor can undo it
/// after a `kill -9` or a crash (SPEC.md 5.12).
///
/// The journal sits on the path to every mute (it is written before the command it records), so a
/// change costs one `write(2)` of one line to a file opened for appending (`held.log`, JSON lines,
/// the last line of a key wins). No fsync: the journal has to outlive the agent, not the machine, and
/// the page cache survives `kill -9`; after a power loss the sound server starts afresh with nothing
/// held. A line that is not a journal line (torn by a crash, garbage) is skipped with a warning, never
/// merged with the next: a run that finds the file not ending in a newline starts with one. The file is
/// rewritten compactly (temporary file, rename) when it has grown well past what it holds, by the loop
/// after a batch (`compactIfGrown`).
///
/// A write that fails (a full disk, a read-only folder) is not silent: `apply` returns the journal's
/// health when it changes, and each later change tries to write the whole journal again.
public final class Journal {
    public struct Entry: Codable, Hashable, Sendable {
        public var direction: String
        public var index: UInt32
        /// The stream's `application.process.id` and name, so that a reused index is not mistaken for it.
        public var processID: String?
        public var name: String
        /// We muted it: unmute it.
        public var muted: Bool
        /// We ducked it from this volume: put it back.
        public var baseVolume: [UInt32]?
        /// The duck level it was held at (nil: on its way back up, or an earlier version's line).
        public var level: Double?
        /// The key of the server's memory for the stream's app or role.
        public var restoreKey: String?

        public init(direction: String, index: UInt32, processID: String?, name: String, muted: Bool,
                    baseVolume: [UInt32]?, level: Double? = nil, restoreKey: String?) {
            self.direction = direction; self.index = index; self.processID = processID; self.name = name
            self.muted = muted; self.baseVolume = baseVolume; self.level = level; self.restoreKey = restoreKey
        }

        /// `baseVolume` as a volume.
        var base: ChannelVolumes? { baseVolume.map { ChannelVolumes($0.map(Volume.init(rawValue:))) } }
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
    /// server modules it had taken over, and the Bluetooth cards it had switched (with their profiles);
    /// and the lines that could not be read.
    public struct Leftovers: Sendable {
        public var streams: [Entry] = []
        public var remembered: [String: StreamRestoreEntry?] = [:]
        public var modules: [(module: String, argument: String)] = []
        public var cards: [String: String] = [:]
        /// Lines skipped, in words (file and line number).
        public var skipped: [String] = []
        public var isEmpty: Bool { streams.isEmpty && remembered.isEmpty && modules.isEmpty && cards.isEmpty }
        public init() {}
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
    /// Why the last write failed; nil while writes go through.
    private(set) var failure: String?
    /// The file may end in a torn line: the next line starts on a fresh one.
    private var mayBeTorn = true

    public init(directory: String?) {
        path = directory.map { "\($0)/held.log" }
        legacyPath = directory.map { "\($0)/held.json" }
        if let directory { try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// What a previous run left, if anything. It stays in this journal (through its compactions) until
    /// the changes of this run release it.
    public func leftovers() -> Leftovers {
        var left = Leftovers()
        var held: [String: Entry] = [:]
        var modules: [ModuleLine] = []
        if let legacyPath, let data = FileManager.default.contents(atPath: legacyPath),
           let old = try? JSONDecoder().decode([Entry].self, from: data) {
            for entry in old { held["\(entry.direction)#\(entry.index)"] = entry }
        }
        if let path, let data = FileManager.default.contents(atPath: path) {
            let decoder = JSONDecoder()
            for (number, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated()
            where !line.isEmpty {
                if let line = try? decoder.decode(Line.self, from: Data(line)) {
                    held[line.key] = line.entry
                } else if let line = try? decoder.decode(RememberedLine.self, from: Data(line)) {
                    if line.released == true { left.remembered[line.remembered] = nil } else { left.remembered[line.remembered] = .some(line.entry) }
                } else if let line = try? decoder.decode(ModuleLine.self, from: Data(line)) {
                    if !modules.contains(line) { modules.append(line) }
                } else if let line = try? decoder.decode(CardLine.self, from: Data(line)) {
                    left.cards[line.card] = line.released == true ? nil : line.original
                } else {
                    left.skipped.append("\(path):\(number + 1): not a journal line (torn by a crash?)")
                }
            }
        }
        left.streams = held.values.sorted { ($0.direction, $0.index) < ($1.direction, $1.index) }
        left.modules = modules.map { ($0.module, $0.argument) }
        entries = held
        remembered = left.remembered
        self.modules = modules
        cards = left.cards
        return left
    }

    /// Records a change. Returns the journal's health when it changes (a write failed, or works again).
    @discardableResult
    public func apply(_ change: JournalChange) -> JournalHealth? {
        let before = failure
        switch change {
        case .hold(let key, let entry):
            let name = key.journalName
            guard entries[name] != entry else { return nil }
            entries[name] = entry
            append(Line(key: name, entry: entry).json)
        case .remember(let key, let entry):
            remembered[key] = .some(entry)
            append(RememberedLine(remembered: key, entry: entry).json)
        case .putBack(let key):
            guard remembered.removeValue(forKey: key) != nil else { return nil }
            append(RememberedLine(remembered: key, released: true).json)
        case .tookOver(let module, let argument):
            let line = ModuleLine(module: module, argument: argument)
            guard !modules.contains(line) else { return nil }
            modules.append(line)
            append(Self.json(line))
        case .switched(let card, let original):
            guard cards[card] != original else { return nil }
            cards[card] = original
            append(Self.json(CardLine(card: card, original: original)))
        case .switchedBack(let card):
            guard cards.removeValue(forKey: card) != nil else { return nil }
            append(Self.json(CardLine(card: card, released: true)))
        case .clear:
            entries = [:]
            remembered = [:]
            modules = []
            cards = [:]
            rewrite()
            if let legacyPath { unlink(legacyPath) }
        }
        guard (failure == nil) != (before == nil) else { return nil }
        return failure.map(JournalHealth.failing) ?? .writable
    }

    /// Rewrites the file compactly once it has grown well past what it holds: called by the loop after
    /// a batch's commands have gone out, off the path between a journal line and the command it records.
    /// Returns the journal's health if that changed.
    @discardableResult
    func compactIfGrown() -> JournalHealth? {
        guard failure == nil, lines > 64 + 4 * (entries.count + remembered.count + modules.count + cards.count) else { return nil }
        rewrite()
        return failure.map(JournalHealth.failing)
    }

    private func append(_ json: String) {
        guard let path else { return }
        // After a failed write the file is behind what is held: write it whole again.
        if failure != nil { return rewrite() }
        if descriptor < 0 {
            descriptor = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { return failed("cannot open \(path)") }
        }
        var text = json + "\n"
        if mayBeTorn {
            // A predecessor killed in the middle of a line left no newline at the end: start a fresh one.
            var last: UInt8 = 0
            let size = lseek(descriptor, 0, SEEK_END)
            if size > 0, pread(descriptor, &last, 1, size - 1) == 1, last != UInt8(ascii: "\n") { text = "\n" + text }
            mayBeTorn = false
        }
        guard writeAll(text, to: descriptor) else {
            mayBeTorn = true
            return failed("cannot write \(path)")
        }
        lines += 1
    }

    private func failed(_ what: String) {
        failure = "\(what): \(String(cString: strerror(errno)))"
    }

    /// The lines that are not on the way to a mute (modules, cards), encoded plainly.
    private static func json(_ line: some Encodable) -> String {
        (try? JSONEncoder().encode(line)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Writes the file anew with only what is held (a temporary file, renamed over it).
    private func rewrite() {
        guard let path else { return }
        if descriptor >= 0 { close(descriptor); descriptor = -1 }
        let all = entries.sorted { $0.key < $1.key }.map { Line(key: $0.key, entry: $0.value).json }
            + remembered.sorted { $0.key < $1.key }.map { RememberedLine(remembered: $0.key, entry: $0.value).json }
            + modules.map { Self.json($0) }
            + cards.sorted { $0.key < $1.key }.map { Self.json(CardLine(card: $0.key, original: $0.value)) }
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return failed("cannot write \(temporary)") }
        let written = writeAll(all.map { $0 + "\n" }.joined(), to: fd)
        close(fd)
        guard written else { unlink(temporary); return failed("cannot write \(temporary)") }
        guard rename(temporary, path) == 0 else { unlink(temporary); return failed("cannot replace \(path)") }
        failure = nil
        mayBeTorn = false
        lines = all.count
    }
}

extension StreamKey {
    /// How the journal names a stream (`out#3`, as earlier versions did).
    var journalName: String { description }
}

extension Journal.Line {
    /// The line as JSON, formatted by hand: JSONEncoder costs more than the write on the way to a mute.
    var json: String {
        guard let e = entry else { return "{\"entry\":null,\"key\":\(Journal.quoted(key))}" }
        var fields = ["\"direction\":\(Journal.quoted(e.direction))", "\"index\":\(e.index)", "\"muted\":\(e.muted)",
                      "\"name\":\(Journal.quoted(e.name))"]
        if let base = e.baseVolume { fields.append("\"baseVolume\":[\(base.map(String.init).joined(separator: ","))]") }
        if let level = e.level, level.isFinite { fields.append("\"level\":\(level)") }
        if let pid = e.processID { fields.append("\"processID\":\(Journal.quoted(pid))") }
        if let restoreKey = e.restoreKey { fields.append("\"restoreKey\":\(Journal.quoted(restoreKey))") }
        return "{\"entry\":{\(fields.joined(separator: ","))},\"key\":\(Journal.quoted(key))}"
    }
}

extension Journal.RememberedLine {
    /// The line as JSON, formatted by hand as `Line`'s is: the server's entry is remembered on the way
    /// to the first hold of its app or role (JSONEncoder took about as long as the rest of the batch).
    /// Fields that are nil are left out, as JSONEncoder leaves them out.
    var json: String {
        var fields: [String] = []
        if let e = entry {
            var entry = ["\"name\":\(Journal.quoted(e.name))", "\"channelMap\":[\(e.channelMap.map(Journal.quoted).joined(separator: ","))]"]
            if let volume = e.volume { entry.append("\"volume\":{\"values\":[\(volume.values.map { String($0.rawValue) }.joined(separator: ","))]}") }
            if let device = e.device { entry.append("\"device\":\(Journal.quoted(device))") }
            entry.append("\"isMuted\":\(e.isMuted)")
            fields.append("\"entry\":{\(entry.joined(separator: ","))}")
        }
        if let released { fields.append("\"released\":\(released)") }
        fields.append("\"remembered\":\(Journal.quoted(remembered))")
        return "{\(fields.joined(separator: ","))}"
    }
}

extension Journal {
    /// A string as a JSON string.
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

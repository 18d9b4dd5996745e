import AudioPolicy
import FoundationEssentials
import Glibc
import ServerModel

/// What the agent holds on the server, kept in its state directory so that a successor can undo it
/// after a `kill -9` or a crash (SPEC.md 5.12).
///
/// The journal sits on the path to every mute (it is written before the command it records), so a
/// change costs one `write(2)` of one line to a file opened for appending (`held.log`, JSON lines,
/// the last line of a key wins). No fsync: the journal has to outlive the agent, not the machine, and
/// the page cache survives `kill -9`; after a power loss the sound server starts afresh with nothing
/// held. The file is rewritten compactly (a new file, renamed over it) when it has grown well past what
/// it holds, by the loop after a batch (`compactIfGrown`), and always long before `sizeLimit`.
///
/// The file is the agent's, but it is read as anything on disk is: as a stream of lines (never whole),
/// at most `sizeLimit` bytes of it and `lineLimit` per line, one decode per line. A line that is not a
/// journal line (torn by a crash, garbage) is skipped, never merged with the next: a run that finds the
/// file not ending in a newline starts with one. The first `namedBadLines` are named, the rest counted.
/// A file over the limit, or with more bad lines than good ones, is corrupt: it is moved aside to
/// `held.log~` (for a person to look at) and what it held that could be read is written anew. So the
/// agent is ready in bounded time and memory whatever it finds.
///
/// A write that fails (a full disk, a read-only folder, a link planted in the directory) is not
/// silent: `apply` returns the journal's health when it changes, and each later change tries to write
/// the whole journal again. Files are opened through `StateDirectory`: never through a link.
public final class Journal {
    public typealias Entry = JournalEntry
    public typealias Leftovers = JournalLeftovers

    struct Line: Codable {
        var key: String
        var entry: Entry?
    }

    /// The server's remembered entry for an app or role as it was before we held a stream of it (nil:
    /// it had none), to be put back; `released` once it has been. `traces`: the volumes of put-backs the
    /// user's change overtook (`JournalChange.trace`), all of them, on each line of the key (an earlier
    /// version, which knows no such field, reads the line as it did).
    struct RememberedLine: Codable {
        var remembered: String
        var entry: StreamRestoreEntry?
        var released: Bool?
        var traces: [[UInt32]]?
        /// The volumes the user set on the key's streams (the latest `tracesPerKey`).
        var users: [[UInt32]]?
        /// The ends of ramps of the key's streams that went away held: low and high in turn.
        var ramps: [[UInt32]]?
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

    /// Any line of the file, told apart by its first field's name, in one decode.
    enum AnyLine: Decodable {
        case hold(Line)
        case remembered(RememberedLine)
        case module(ModuleLine)
        case card(CardLine)

        enum Keys: String, CodingKey { case key, entry, remembered, released, traces, users, ramps, module, argument, card, original }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            if c.contains(.key) {
                self = .hold(Line(key: try c.decode(String.self, forKey: .key), entry: try c.decodeIfPresent(Entry.self, forKey: .entry)))
            } else if c.contains(.remembered) {
                self = .remembered(RememberedLine(remembered: try c.decode(String.self, forKey: .remembered),
                                                  entry: try c.decodeIfPresent(StreamRestoreEntry.self, forKey: .entry),
                                                  released: try c.decodeIfPresent(Bool.self, forKey: .released),
                                                  traces: try c.decodeIfPresent([[UInt32]].self, forKey: .traces),
                                                  users: try c.decodeIfPresent([[UInt32]].self, forKey: .users),
                                                  ramps: try c.decodeIfPresent([[UInt32]].self, forKey: .ramps)))
            } else if c.contains(.module) {
                self = .module(ModuleLine(module: try c.decode(String.self, forKey: .module), argument: try c.decode(String.self, forKey: .argument)))
            } else if c.contains(.card) {
                self = .card(CardLine(card: try c.decode(String.self, forKey: .card), original: try c.decodeIfPresent(String.self, forKey: .original),
                                      released: try c.decodeIfPresent(Bool.self, forKey: .released)))
            } else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "no field of a journal line"))
            }
        }
    }

    /// The largest journal read: one that holds more is corrupt (a journal is compacted at a fraction
    /// of it; 8 MiB is some 40,000 held streams).
    static let sizeLimit = 8 << 20
    /// The longest line read (a longer one is a bad line, skipped without being kept in memory).
    static let lineLimit = 1 << 20
    /// How many bad lines are named one by one; the rest are counted.
    static let namedBadLines = 5
    /// The file grows past this (and past four times its size after the last compaction) only to be
    /// compacted: far from `sizeLimit`.
    static let compactionSize = 1 << 20

    static let fileName = "held.log"
    static let asideName = "held.log~"
    /// The format of earlier versions (one JSON array, rewritten on every change): read once, then removed.
    static let legacyName = "held.json"

    let directory: StateDirectory?
    /// Why the state directory cannot be used (every write then fails, saying so); nil when it can.
    let unusable: String?
    private(set) var entries: [String: Entry] = [:]
    private(set) var remembered: [String: StreamRestoreEntry?] = [:]
    private(set) var traces: [String: [[UInt32]]] = [:]
    /// Per key, the volumes the user set on its streams (`JournalChange.userVolumes`), kept like traces.
    private(set) var users: [String: [[UInt32]]] = [:]
    /// Per key, the ends of the ramps of its streams that went away held (`JournalChange.ramp`).
    private(set) var ramps: [String: [[UInt32]]] = [:]
    /// The most traces kept per key (the latest).
    static let tracesPerKey = JournalChange.tracesPerKey
    private(set) var modules: [ModuleLine] = []
    private(set) var cards: [String: String] = [:]
    private var descriptor: Int32 = -1
    private var lines = 0
    /// The file's size as written by this run, and as the last compaction left it.
    private var bytes = 0
    private var compactedBytes = 0
    /// Why the last write failed; nil while writes go through.
    private(set) var failure: String?
    /// The file may end in a torn line: the next line starts on a fresh one.
    private var mayBeTorn = true

    /// The journal in `directory` (nil: none, nothing is kept); `unusable` says why a state directory
    /// that was asked for cannot be used.
    public init(directory: StateDirectory?, unusable: String? = nil) {
        self.directory = directory
        self.unusable = directory == nil ? unusable : nil
    }

    /// The journal in the directory at `path`, made if needed (for tools and tests; the agent opens its
    /// state directory once, refusing one that is unsafe). One that cannot be used makes every write fail.
    public convenience init(directory path: String?) {
        guard let path else { self.init(directory: nil as StateDirectory?); return }
        do { self.init(directory: try StateDirectory.open(path)) } catch { self.init(directory: nil, unusable: error.description) }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    var path: String { directory.map { "\($0.path)/\(Self.fileName)" } ?? Self.fileName }

    /// What a previous run left, if anything. It stays in this journal (through its compactions) until
    /// the changes of this run release it.
    public func leftovers() -> Leftovers {
        var left = Leftovers()
        var held: [String: Entry] = [:]
        var modules: [ModuleLine] = []
        if let directory {
            do {
                if let data = try directory.read(Self.legacyName, limit: Self.sizeLimit) {
                    for entry in (try? JSONDecoder().decode([Entry].self, from: Data(data))) ?? [] { held["\(entry.direction)#\(entry.index)"] = entry }
                }
            } catch {
                left.problem = error.description
            }
            var remembered: [String: StreamRestoreEntry?] = [:]
            var traces: [String: [[UInt32]]] = [:]
            var users: [String: [[UInt32]]] = [:]
            var ramps: [String: [[UInt32]]] = [:]
            var cards: [String: String] = [:]
            read(from: directory, into: &left) { line in
                switch line {
                case .hold(let line): held[line.key] = line.entry
                case .remembered(let line):
                    if line.released == true {
                        remembered[line.remembered] = nil
                        traces[line.remembered] = nil
                        users[line.remembered] = nil
                        ramps[line.remembered] = nil
                    } else {
                        remembered[line.remembered] = .some(line.entry)
                        traces[line.remembered] = Self.kept(line.traces, Self.tracesPerKey)
                        users[line.remembered] = Self.kept(line.users, Self.tracesPerKey)
                        // (Whole pairs of ends only.)
                        ramps[line.remembered] = Self.kept(line.ramps, 2 * Self.tracesPerKey, inPairs: true)
                    }
                case .module(let line): if !modules.contains(line) { modules.append(line) }
                case .card(let line): cards[line.card] = line.released == true ? nil : line.original
                }
            }
            left.remembered = remembered
            self.traces = traces
            left.traces = traces.mapValues { $0.map { ChannelVolumes($0.map(Volume.init(rawValue:))) } }
            self.users = users
            left.userVolumes = users.mapValues { $0.map { ChannelVolumes($0.map(Volume.init(rawValue:))) } }
            self.ramps = ramps
            left.ramps = ramps.mapValues { $0.map { ChannelVolumes($0.map(Volume.init(rawValue:))) } }
            left.cards = cards
        }
        left.streams = held.values.sorted { ($0.direction.rawValue, $0.index) < ($1.direction.rawValue, $1.index) }
        left.modules = modules.map { ($0.module, $0.argument) }
        entries = held
        remembered = left.remembered
        self.modules = modules
        cards = left.cards
        // What could be read of a corrupt file is written anew (the file itself is aside).
        if left.movedAside != nil { rewrite() }
        return left
    }

    /// Reads the file as a stream of lines, handing each journal line to `take`; counts and names the
    /// bad ones, and moves a corrupt file aside.
    private func read(from directory: StateDirectory, into left: inout Leftovers, _ take: (AnyLine) -> Void) {
        let fd: Int32
        do { fd = try directory.openFile(Self.fileName, O_RDONLY) } catch {
            if error.kind != .missing { left.problem = error.description }
            return
        }
        defer { close(fd) }
        let decoder = JSONDecoder()
        var number = 0
        var pending: [UInt8] = []
        /// The line being read is longer than `lineLimit`: its bytes are dropped up to its end.
        var overlong = false
        func bad(_ why: String) {
            left.skippedCount += 1
            if left.skipped.count < Self.namedBadLines { left.skipped.append("\(StateDirectory.shown(path)):\(number): \(why)") }
        }
        func line(_ bytes: ArraySlice<UInt8>) {
            number += 1
            if overlong || bytes.count > Self.lineLimit { overlong = false; return bad("longer than \(Self.lineLimit) bytes: not a journal line") }
            guard !bytes.isEmpty else { return }  // (an empty line is no line: a torn line's fresh start)
            guard bytes.first == UInt8(ascii: "{"), let decoded = try? decoder.decode(AnyLine.self, from: Data(bytes)) else {
                return bad("not a journal line (torn by a crash?)")
            }
            left.goodCount += 1
            take(decoded)
        }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var overLimit = false
        while true {
            let room = Self.sizeLimit - left.bytesRead
            guard room > 0 else {
                var probe: UInt8 = 0
                overLimit = Glibc.read(fd, &probe, 1) == 1
                break
            }
            let n = Glibc.read(fd, &chunk, min(chunk.count, room))
            if n < 0 && errno == EINTR { continue }
            if n < 0 { left.problem = "cannot read \(StateDirectory.shown(path)): \(String(cString: strerror(errno)))"; break }
            if n == 0 { break }
            left.bytesRead += n
            var start = 0
            while let newline = chunk[start..<n].firstIndex(of: UInt8(ascii: "\n")) {
                if pending.isEmpty { line(chunk[start..<newline]) } else { pending += chunk[start..<newline]; line(pending[...]); pending = [] }
                start = newline + 1
            }
            if !overlong { pending += chunk[start..<n] }
            if pending.count > Self.lineLimit { overlong = true; pending = [] }
        }
        // A last line with no newline: torn by a crash, or cut at the limit (not counted then).
        if !overLimit, overlong || !pending.isEmpty { line(pending[...]) }
        let why: String? =
            if overLimit { "it is larger than \(Self.sizeLimit) bytes, which no journal grows to" }
            else if left.skippedCount > 1 && left.skippedCount > left.goodCount { "\(left.skippedCount) of its \(left.skippedCount + left.goodCount) lines are not journal lines" }
            else { nil }
        guard let why else { return }
        do {
            try directory.rename(Self.fileName, to: Self.asideName)
            left.movedAside = "\(why): moved aside to \(directory.shown(Self.asideName)); \(left.goodCount) journal lines of it were read"
        } catch {
            left.problem = "\(why), and it cannot be moved aside: \(error.description)"
        }
    }

    /// Records a change. Returns the journal's health when it changes (a write failed, or works again).
    @discardableResult
    public func apply(_ change: JournalChange) -> JournalHealth? {
        let before = failure
        record(change)
        return health(since: before)
    }

    /// Records several changes with one `write(2)` of their lines (a batch's changes ahead of its first
    /// command: the first hold of a key writes what the server remembers and the hold, two lines).
    @discardableResult
    public func apply(_ changes: [JournalChange]) -> JournalHealth? {
        guard changes.count > 1 else { return changes.first.flatMap { apply($0) } }
        let before = failure
        grouped = ("", 0)
        for change in changes { record(change) }
        let (text, count) = grouped ?? ("", 0)
        grouped = nil
        if !text.isEmpty { write(text, lines: count) }
        // (A write that fails is tried again as the whole journal at once, as a second line applied on its
        // own would have: the command after these changes goes out either way.)
        if before == nil, failure != nil { rewrite() }
        return health(since: before)
    }

    /// The journal's health if it changed since it was `before` (a failure, or nil).
    private func health(since before: String?) -> JournalHealth? {
        guard (failure == nil) != (before == nil) else { return nil }
        return failure.map(JournalHealth.failing) ?? .writable
    }

    /// The file's descriptor while open, else -1 (for tests, which make a write fail through it).
    var openDescriptor: Int32 { descriptor }

    /// The lines of the changes being applied together, not written yet, and how many.
    private var grouped: (text: String, lines: Int)?

    private func record(_ change: JournalChange) {
        switch change {
        case .hold(let key, let entry):
            let name = key.journalName
            guard entries[name] != entry else { return }
            entries[name] = entry
            append(Line(key: name, entry: entry).json)
        case .remember(let key, let entry):
            remembered[key] = .some(entry)
            append(rememberedLine(key, entry))
        case .putBack(let key):
            traces[key] = nil
            users[key] = nil
            ramps[key] = nil
            guard remembered.removeValue(forKey: key) != nil else { return }
            append(RememberedLine(remembered: key, released: true).json)
        case .trace(let key, let volume):
            let values = volume.values.map(\.rawValue)
            guard !values.isEmpty, let entry = remembered[key] else { return }
            traces[key] = Array((traces[key, default: []] + [values]).suffix(Self.tracesPerKey))
            append(rememberedLine(key, entry))
        case .ramp(let key, let low, let high):
            let ends = [low.values.map(\.rawValue), high.values.map(\.rawValue)]
            guard !ends[0].isEmpty, !ends[1].isEmpty, let entry = remembered[key] else { return }
            let known = ramps[key, default: []]
            guard !stride(from: 0, to: known.count - 1, by: 2).contains(where: { Array(known[$0...($0 + 1)]) == ends }) else { return }
            ramps[key] = Array((known + ends).suffix(2 * Self.tracesPerKey))
            append(rememberedLine(key, entry))
        case .userVolumes(let key, let volumes):
            let values = volumes.map { $0.values.map(\.rawValue) }.filter { !$0.isEmpty }.suffix(Self.tracesPerKey)
            guard let entry = remembered[key], (users[key] ?? []) != Array(values) else { return }
            users[key] = values.isEmpty ? nil : Array(values)
            append(rememberedLine(key, entry))
        case .tookOver(let module, let argument):
            let line = ModuleLine(module: module, argument: argument)
            guard !modules.contains(line) else { return }
            modules.append(line)
            append(Self.json(line))
        case .switched(let card, let original):
            guard cards[card] != original else { return }
            cards[card] = original
            append(Self.json(CardLine(card: card, original: original)))
        case .switchedBack(let card):
            guard cards.removeValue(forKey: card) != nil else { return }
            append(Self.json(CardLine(card: card, released: true)))
        case .clear:
            entries = [:]
            remembered = [:]
            traces = [:]
            modules = []
            cards = [:]
            rewrite()
            directory?.remove(Self.legacyName)
        }
    }

    /// Rewrites the file compactly once it has grown well past what it holds (in lines, or in bytes
    /// past `compactionSize`): called by the loop after a batch's commands have gone out, off the path
    /// between a journal line and the command it records. Returns the journal's health if that changed.
    @discardableResult
    func compactIfGrown() -> JournalHealth? {
        guard failure == nil else { return nil }
        let grown = lines > 64 + 4 * (entries.count + remembered.count + modules.count + cards.count)
            || (bytes > Self.compactionSize && bytes > 4 * compactedBytes)
        guard grown else { return nil }
        rewrite()
        return failure.map(JournalHealth.failing)
    }

    private func append(_ json: String) {
        if var group = grouped {
            // (Applied with others: written with them.)
            grouped = nil  // (not shared while appended to)
            group.text += json
            group.text += "\n"
            group.lines += 1
            grouped = group
            return
        }
        write(json + "\n", lines: 1)
    }

    /// Appends `text`, whole lines (`lines` of them), with one `write(2)`.
    private func write(_ text: String, lines count: Int) {
        guard let directory else {
            if let unusable { failure = unusable }
            return
        }
        // After a failed write the file is behind what is held: write it whole again.
        if failure != nil { return rewrite() }
        if descriptor < 0 {
            do { descriptor = try directory.openFile(Self.fileName, O_RDWR | O_APPEND | O_CREAT) } catch { return failure = error.description }
            bytes = Int(lseek(descriptor, 0, SEEK_END))
        }
        var text = text
        if mayBeTorn {
            // A predecessor killed in the middle of a line left no newline at the end: start a fresh one.
            var last: UInt8 = 0
            let size = lseek(descriptor, 0, SEEK_END)
            if size > 0, pread(descriptor, &last, 1, size - 1) == 1, last != UInt8(ascii: "\n") { text = "\n" + text }
            mayBeTorn = false
        }
        guard writeAll(text, to: descriptor) else {
            mayBeTorn = true
            return failed("cannot write \(StateDirectory.shown(path))")
        }
        lines += count
        bytes += text.utf8.count
    }

    private func failed(_ what: String) {
        failure = "\(what): \(String(cString: strerror(errno)))"
    }

    /// The latest `limit` non-empty volumes of a line's list (whole pairs if `inPairs`), nil for none.
    private static func kept(_ lists: [[UInt32]]?, _ limit: Int, inPairs: Bool = false) -> [[UInt32]]? {
        var kept = (lists ?? []).filter { !$0.isEmpty }.suffix(limit)
        if inPairs && kept.count % 2 == 1 { kept = kept.dropFirst() }
        return kept.isEmpty ? nil : Array(kept)
    }

    /// A remembered key's line, with its traces, the user's volumes and gone streams' ramps.
    private func rememberedLine(_ key: String, _ entry: StreamRestoreEntry?) -> String {
        RememberedLine(remembered: key, entry: entry, traces: traces[key], users: users[key], ramps: ramps[key]).json
    }

    /// The lines that are not on the way to a mute (modules, cards), encoded plainly.
    private static func json(_ line: some Encodable) -> String {
        (try? JSONEncoder().encode(line)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Writes the file anew with only what is held (a new file of a unique name, renamed over it).
    private func rewrite() {
        guard let directory else {
            if let unusable { failure = unusable }
            return
        }
        if descriptor >= 0 { close(descriptor); descriptor = -1 }
        // (Changes applied together and not written yet are in what is written now.)
        if grouped != nil { grouped = ("", 0) }
        let all = entries.sorted { $0.key < $1.key }.map { Line(key: $0.key, entry: $0.value).json }
            + remembered.sorted { $0.key < $1.key }.map { rememberedLine($0.key, $0.value) }
            + modules.map { Self.json($0) }
            + cards.sorted { $0.key < $1.key }.map { Self.json(CardLine(card: $0.key, original: $0.value)) }
        let text = all.map { $0 + "\n" }.joined()
        do { try directory.replace(Self.fileName, with: text.utf8) } catch { return failure = error.description }
        failure = nil
        mayBeTorn = false
        lines = all.count
        bytes = text.utf8.count
        compactedBytes = bytes
    }
}

extension Journal.Line {
    /// The line as JSON, formatted by hand into one string: JSONEncoder costs more than the write on the
    /// way to a mute.
    var json: String {
        var out = "{\"entry\":"
        out.reserveCapacity(160 + key.utf8.count + (entry?.name.utf8.count ?? 0) + (entry?.restoreKey?.utf8.count ?? 0))
        if let e = entry {
            out += "{\"direction\":"; Journal.quote(e.direction.rawValue, into: &out)
            out += ",\"index\":"; out += String(e.index)
            out += ",\"muted\":"; out += e.muted ? "true" : "false"
            out += ",\"name\":"; Journal.quote(e.name, into: &out)
            if let base = e.baseVolume { out += ",\"baseVolume\":"; Journal.list(base, into: &out) }
            if let level = e.level, level.isFinite { out += ",\"level\":\(level)" }
            if let pid = e.processID { out += ",\"processID\":"; Journal.quote(pid, into: &out) }
            if let restoreKey = e.restoreKey { out += ",\"restoreKey\":"; Journal.quote(restoreKey, into: &out) }
            if e.moved == true { out += ",\"moved\":true" }
            out += "}"
        } else {
            out += "null"
        }
        out += ",\"key\":"; Journal.quote(key, into: &out)
        out += "}"
        return out
    }
}

extension Journal.RememberedLine {
    /// The line as JSON, formatted by hand as `Line`'s is: the server's entry is remembered on the way
    /// to the first hold of its app or role (JSONEncoder took about as long as the rest of the batch).
    /// Fields that are nil are left out, as JSONEncoder leaves them out.
    var json: String {
        var out = "{"
        out.reserveCapacity(200 + 2 * remembered.utf8.count + (entry?.device?.utf8.count ?? 0))
        if let e = entry {
            out += "\"entry\":{\"name\":"; Journal.quote(e.name, into: &out)
            out += ",\"channelMap\":["
            for (i, channel) in e.channelMap.enumerated() {
                if i > 0 { out += "," }
                Journal.quote(channel, into: &out)
            }
            out += "]"
            if let volume = e.volume { out += ",\"volume\":{\"values\":"; Journal.list(volume.values.map(\.rawValue), into: &out); out += "}" }
            if let device = e.device { out += ",\"device\":"; Journal.quote(device, into: &out) }
            out += ",\"isMuted\":"; out += e.isMuted ? "true" : "false"
            out += "},"
        }
        if let released { out += "\"released\":"; out += released ? "true," : "false," }
        out += "\"remembered\":"; Journal.quote(remembered, into: &out)
        for (name, lists) in [("traces", traces), ("users", users), ("ramps", ramps)] {
            guard let lists, !lists.isEmpty else { continue }
            out += ",\"\(name)\":["
            for (i, volume) in lists.enumerated() {
                if i > 0 { out += "," }
                Journal.list(volume, into: &out)
            }
            out += "]"
        }
        out += "}"
        return out
    }
}

extension Journal {
    /// Appends a string as a JSON string: as it is, quoted, when nothing in it needs escaping (the names
    /// of streams and keys nearly always).
    static func quote(_ text: String, into out: inout String) {
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out += "\""
            out += text
            out += "\""
        } else {
            out += quoted(text)
        }
    }

    /// Appends numbers as a JSON array.
    static func list(_ numbers: [UInt32], into out: inout String) {
        out += "["
        for (i, number) in numbers.enumerated() {
            if i > 0 { out += "," }
            out += String(number)
        }
        out += "]"
    }

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

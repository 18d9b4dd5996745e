import AudioPolicy
import Foundation
import SoundServerTesting
@testable import AgentTower
@testable import PolicyAgent
import PulseClient
import Logging
import ServerModel
import Synchronization
import Testing

/// The journal on its own (no server): what a run writes, a successor reads back; and what it says
/// when it cannot write.
@Suite("journal")
struct JournalTests {
    func directory() throws -> String {
        let path = NSTemporaryDirectory() + "audiosession-journal-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func entry(_ index: UInt32, name: String = "Player", muted: Bool = true) -> Journal.Entry {
        Journal.Entry(direction: .output, index: index, processID: "42", name: name, muted: muted,
                      baseVolume: muted ? nil : [65536, 32768], level: muted ? nil : 0.2, restoreKey: "sink-input-by-media-role:music")
    }

    func hold(_ journal: Journal, _ index: UInt32, _ entry: Journal.Entry?) {
        journal.apply(.hold(StreamKey(.output, index), entry))
        journal.compactIfGrown()  // as the agent's loop does after each batch
    }

    @Test("the last line of each stream wins; released streams are not left over")
    func lastLineWins() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        hold(journal, 1, entry(1))
        hold(journal, 2, entry(2, muted: false))
        hold(journal, 1, nil)
        hold(journal, 3, entry(3))
        let left = Journal(directory: dir).leftovers().streams
        #expect(left == [entry(2, muted: false), entry(3)])
    }

    @Test("switched Bluetooth cards are left over with their own profiles until switched back, also after compaction")
    func cards() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        journal.apply(.switched(card: "bluez_card.A", from: "a2dp_sink"))
        journal.apply(.switched(card: "bluez_card.B", from: "a2dp-sink-sbc"))
        hold(journal, 1, entry(1))
        journal.apply(.switchedBack(card: "bluez_card.A"))
        #expect(Journal(directory: dir).leftovers().cards == ["bluez_card.B": "a2dp-sink-sbc"])
        for round in 0..<100 { hold(journal, UInt32(round + 2), entry(UInt32(round + 2))); hold(journal, UInt32(round + 2), nil) }
        let left = Journal(directory: dir).leftovers()
        #expect(left.cards == ["bluez_card.B": "a2dp-sink-sbc"])
        #expect(left.streams == [entry(1)])
    }

    @Test("names with quotes, backslashes, newlines and other text come back as written")
    func quoting() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let name = "Say \"hi\"\\ to\nme\t— ünïcödé 🎵 \u{1b}[2J"
        hold(Journal(directory: dir), 7, entry(7, name: name))
        #expect(Journal(directory: dir).leftovers().streams == [entry(7, name: name)])
    }

    @Test("changes applied together (one write, ahead of a command) leave the file as applied one by one would; a clear among them leaves what follows it")
    func changesTogether() throws {
        let (one, together) = (try directory(), try directory())
        defer { for dir in [one, together] { try? FileManager.default.removeItem(atPath: dir) } }
        let key = "sink-input-by-media-role:music"
        let memory = StreamRestoreEntry(name: key, channelMap: ["front-left", "front-right"], volume: ChannelVolumes(channels: 2, volume: .norm),
                                        device: "speaker \"A\"", isMuted: false)
        let first: [JournalChange] = [.remember(key, memory), .hold(StreamKey(.output, 1), entry(1)), .hold(StreamKey(.output, 2), entry(2, name: "Say \"hi\"\n"))]
        let second: [JournalChange] = [.hold(StreamKey(.output, 1), nil), .clear, .hold(StreamKey(.output, 3), entry(3)), .trace(key, ChannelVolumes(channels: 2, volume: .norm))]
        let byOne = Journal(directory: one), byGroup = Journal(directory: together)
        for change in first { byOne.apply(change) }
        #expect(byGroup.apply(first) == nil, "a write that works changes nothing")
        #expect(try String(contentsOfFile: "\(together)/held.log", encoding: .utf8) == String(contentsOfFile: "\(one)/held.log", encoding: .utf8))
        for change in second { byOne.apply(change) }
        byGroup.apply(second)
        let (left, leftByGroup) = (Journal(directory: one).leftovers(), Journal(directory: together).leftovers())
        #expect(leftByGroup.streams == [entry(3)] && leftByGroup.streams == left.streams && leftByGroup.remembered == left.remembered)
        #expect(try String(contentsOfFile: "\(together)/held.log", encoding: .utf8) == String(contentsOfFile: "\(one)/held.log", encoding: .utf8))
    }

    @Test("changes applied together whose write fails are written again as the whole journal before the command goes: the file is whole, nothing said")
    func changesTogetherWrittenAgain() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        journal.apply(.hold(StreamKey(.output, 1), entry(1)))
        // (The next write fails, as on a full disk: the file's descriptor now writes to /dev/full.)
        let full = open("/dev/full", O_WRONLY | O_CLOEXEC)
        #expect(full >= 0 && journal.openDescriptor >= 0)
        #expect(dup2(full, journal.openDescriptor) >= 0)
        close(full)
        let key = "sink-input-by-media-role:music"
        let memory = StreamRestoreEntry(name: key, channelMap: ["mono"], volume: nil, device: nil, isMuted: false)
        #expect(journal.apply([.remember(key, memory), .hold(StreamKey(.output, 2), entry(2))]) == nil, "written again at once: nothing to say")
        let left = Journal(directory: dir).leftovers()
        #expect(left.streams == [entry(1), entry(2)] && left.remembered == [key: memory])
    }

    @Test("the journal's lines are in the file before the command they record is handed to the server, one change or several; those after the last command at the end")
    func journalBeforeItsCommand() async throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = try StateDirectory.open(dir)
        let executors = Executors(AgentConfiguration(policyLayers: [], stateDirectory: dir), stateDirectory: state, unusable: nil,
                                  inbox: Inbox<TowerInput>(), logger: Logger(label: "test"), sleep: { _ in })
        let server = FileReadingServer(path: "\(dir)/\(Journal.fileName)")
        executors.server = server
        let key = "sink-input-by-media-role:music"
        let memory = StreamRestoreEntry(name: key, channelMap: ["mono"], volume: nil, device: nil, isMuted: false)
        _ = executors.perform([
            .journal(.remember(key, memory)), .journal(.hold(StreamKey(.output, 1), entry(1))),
            .send(CommandID(rawValue: 1), .setStreamMute(StreamReference(.output, 1), true)),
            .journal(.hold(StreamKey(.output, 2), entry(2))),
            .send(CommandID(rawValue: 2), .setStreamMute(StreamReference(.output, 2), true)),
            .journal(.hold(StreamKey(.output, 1), nil)),
        ])
        let seen = server.seen.withLock { $0 }
        #expect(seen.count == 2)
        #expect(seen.first.map { $0.contains("\"remembered\":\"\(key)\"") && $0.contains("\"key\":\"out#1\"") && !$0.contains("out#2") } == true, "\(seen)")
        #expect(seen.last.map { $0.contains("\"key\":\"out#2\"") && !$0.contains("\"entry\":null") } == true, "\(seen)")
        #expect(Journal(directory: dir).leftovers().streams == [entry(2)], "the last change, after the last command, written too")
        executors.closing()
    }

    @Test("a torn last line (a crash in the middle of a write) is skipped with a warning, and the next run's first line is not glued to it (issue 10, case 7)")
    func tornLine() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        hold(Journal(directory: dir), 1, entry(1))
        let handle = try #require(FileHandle(forWritingAtPath: "\(dir)/held.log"))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"entry":{"direction":"out"#.utf8))
        try handle.close()
        let successor = Journal(directory: dir)
        let left = successor.leftovers()
        #expect(left.streams == [entry(1)])
        #expect(left.skipped.count == 1 && left.skipped[0].contains("held.log:2"), "\(left.skipped)")
        // The successor's first line stands on its own, and so is read back by the run after it.
        hold(successor, 2, entry(2))
        let next = Journal(directory: dir).leftovers()
        #expect(next.streams == [entry(1), entry(2)])
        #expect(next.skipped.count == 1)
    }

    @Test("garbage lines are skipped, each named; the good lines around them are read")
    func garbage() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        hold(Journal(directory: dir), 1, entry(1))
        let handle = try #require(FileHandle(forWritingAtPath: "\(dir)/held.log"))
        handle.seekToEndOfFile()
        handle.write(Data("\u{0}\u{1}binary\n[1,2]\n{\"key\":5}\n".utf8))
        try handle.close()
        hold(Journal(directory: dir), 9, entry(9))
        let left = Journal(directory: dir).leftovers()
        #expect(left.streams == [entry(1), entry(9)])
        #expect(left.skipped.count == 3, "\(left.skipped)")
    }

    @Test("the file is compacted as it grows: it keeps exactly what is held; clear empties it")
    func compaction() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        for round in 0..<1000 {
            hold(journal, UInt32(round), entry(UInt32(round)))
            if round % 100 != 0 { hold(journal, UInt32(round), nil) }
        }
        let text = try String(contentsOfFile: "\(dir)/held.log", encoding: .utf8)
        #expect(text.split(separator: "\n").count <= 64 + 4 * 10, "the file was not compacted")
        #expect(Journal(directory: dir).leftovers().streams == (0..<10).map { entry(UInt32($0 * 100)) })
        journal.apply(.clear)
        #expect(try String(contentsOfFile: "\(dir)/held.log", encoding: .utf8) == "")
        #expect(Journal(directory: dir).leftovers().streams.isEmpty)
    }

    @Test("what a successor read stays in the journal until it is released: its own compaction keeps it")
    func leftoversStayJournaled() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = Journal(directory: dir)
        hold(first, 1, entry(1))
        first.apply(.remember("sink-input-by-media-role:music", nil))
        let second = Journal(directory: dir)
        _ = second.leftovers()
        for round in 0..<200 { hold(second, UInt32(round + 10), entry(UInt32(round + 10))); hold(second, UInt32(round + 10), nil) }
        let left = Journal(directory: dir).leftovers()
        #expect(left.streams == [entry(1)])
        #expect(left.remembered.keys.sorted() == ["sink-input-by-media-role:music"])
    }

    @Test("a remembered entry's line, written by hand, reads back as JSONEncoder's line does, whatever its text holds")
    func rememberedLineByHand() throws {
        let awkward = "Tab\there \"quoted\" back\\slash\n\u{1}\u{7F}\u{9B} é 🎵"
        let entries: [StreamRestoreEntry?] = [
            nil,
            StreamRestoreEntry(name: awkward, channelMap: [], volume: nil, device: nil, isMuted: true),
            StreamRestoreEntry(name: "sink-input-by-media-role:music", channelMap: ["front-left", awkward],
                               volume: ChannelVolumes([Volume(rawValue: 0), Volume(rawValue: UInt32.max)]), device: awkward, isMuted: false),
        ]
        for entry in entries {
            for line in [Journal.RememberedLine(remembered: awkward, entry: entry), Journal.RememberedLine(remembered: "k", released: true),
                         Journal.RememberedLine(remembered: "k", entry: entry, released: false),
                         Journal.RememberedLine(remembered: "k", entry: entry, traces: [[0, 65536], [UInt32.max]]),
                         Journal.RememberedLine(remembered: "k", entry: entry, traces: [[1]], users: [[32768, 32768], [UInt32.max]]),
                         Journal.RememberedLine(remembered: "k", entry: entry, users: [[0]]),
                         Journal.RememberedLine(remembered: "k", entry: entry, users: [[7]], ramps: [[1, 2], [3, 4]])] {
                let byHand = try JSONDecoder().decode(Journal.RememberedLine.self, from: Data(line.json.utf8))
                let byEncoder = try JSONDecoder().decode(Journal.RememberedLine.self, from: JSONEncoder().encode(line))
                #expect(byHand.remembered == byEncoder.remembered && byHand.entry == byEncoder.entry && byHand.released == byEncoder.released
                        && byHand.traces == byEncoder.traces && byHand.traces == line.traces
                        && byHand.users == byEncoder.users && byHand.users == line.users
                        && byHand.ramps == byEncoder.ramps && byHand.ramps == line.ramps, "\(line.json)")
                #expect(byHand.remembered == line.remembered && byHand.entry == line.entry)
                #expect(!line.json.contains("\n"))
            }
        }
    }

    @Test("a hold's line, written by hand, reads back as JSONEncoder's line does, whatever its text holds")
    func holdLineByHand() throws {
        let awkward = "Tab\there \"quoted\" back\\slash\n\u{1}\u{7F}\u{9B} é 🎵"
        let entries: [JournalEntry?] = [
            nil,
            JournalEntry(direction: .output, index: 7, processID: nil, name: "Song", muted: true, baseVolume: nil, restoreKey: nil),
            JournalEntry(direction: .input, index: UInt32.max, processID: awkward, name: awkward, muted: false, baseVolume: [0, 65536, UInt32.max],
                         level: 0.25, restoreKey: awkward, moved: true),
            JournalEntry(direction: .output, index: 0, processID: "1", name: "", muted: false, baseVolume: [], level: .infinity, restoreKey: "k"),
        ]
        for entry in entries {
            for key in ["out#7", awkward] {
                let line = Journal.Line(key: key, entry: entry)
                let byHand = try JSONDecoder().decode(Journal.Line.self, from: Data(line.json.utf8))
                let byEncoder = try JSONDecoder().decode(Journal.Line.self, from: JSONEncoder().encode(Journal.Line(key: key, entry: entry.map {
                    var finite = $0
                    if finite.level?.isFinite == false { finite.level = nil }  // (JSON has no infinity: left out by hand)
                    return finite
                })))
                #expect(byHand.key == key && byHand.key == byEncoder.key && byHand.entry == byEncoder.entry, "\(line.json)")
                #expect(!line.json.contains("\n"))
            }
        }
    }

    @Test("remembered entries: kept until put back, through compaction; nil means there was none")
    func remembered() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        let music = StreamRestoreEntry(name: "sink-input-by-media-role:music", channelMap: ["front-left", "front-right"],
                                       volume: ChannelVolumes([Volume(rawValue: 40000), Volume(rawValue: 41000)]),
                                       device: nil, isMuted: false)
        journal.apply(.remember(music.name, music))
        journal.apply(.remember("sink-input-by-media-role:video", nil))
        journal.apply(.remember("sink-input-by-application-name:Gone", nil))
        journal.apply(.putBack("sink-input-by-application-name:Gone"))
        let none: StreamRestoreEntry? = nil
        let expected: [String: StreamRestoreEntry?] = [music.name: music, "sink-input-by-media-role:video": none]
        #expect(Journal(directory: dir).leftovers().remembered == expected)
        for round in 0..<200 { hold(journal, UInt32(round), entry(UInt32(round))); hold(journal, UInt32(round), nil) }
        #expect(Journal(directory: dir).leftovers().remembered == expected, "compaction lost them")
        #expect(Journal(directory: dir).leftovers().streams.isEmpty)
        journal.apply(.clear)
        #expect(Journal(directory: dir).leftovers().isEmpty)
    }

    @Test("the volumes of put-backs the user's change overtook: kept per remembered key (the latest few) through compaction and a later remember line, gone once it is put back; on the remembered lines, which an earlier version reads as before")
    func traces() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        let music = "sink-input-by-media-role:music", video = "sink-input-by-media-role:video"
        func volume(_ raw: UInt32) -> ChannelVolumes { ChannelVolumes(channels: 2, volume: Volume(rawValue: raw)) }
        journal.apply(.remember(music, nil))
        journal.apply(.remember(video, nil))
        journal.apply(.trace("sink-input-by-media-role:never-remembered", volume(1)))
        journal.apply(.trace(music, volume(65536)))
        for raw in UInt32(1)...UInt32(Journal.tracesPerKey + 2) { journal.apply(.trace(video, volume(raw))) }
        let latest = (3...Journal.tracesPerKey + 2).map { volume(UInt32($0)) }
        #expect(Journal(directory: dir).leftovers().traces == [music: [volume(65536)], video: latest])
        // The key's entry changed again (the user's volume): its traces stay.
        journal.apply(.remember(music, nil))
        #expect(Journal(directory: dir).leftovers().traces[music] == [volume(65536)])
        // Every line is a remembered line: what an earlier version (no traces field) reads as one.
        let text = try String(contentsOfFile: "\(dir)/held.log", encoding: .utf8)
        struct Earlier: Decodable { var remembered: String; var entry: StreamRestoreEntry?; var released: Bool? }
        for line in text.split(separator: "\n") where line.contains("traces") {
            #expect((try? JSONDecoder().decode(Earlier.self, from: Data(line.utf8))) != nil, "\(line)")
        }
        for round in 0..<200 { hold(journal, UInt32(round), entry(UInt32(round))); hold(journal, UInt32(round), nil) }
        #expect(Journal(directory: dir).leftovers().traces == [music: [volume(65536)], video: latest], "compaction lost them")
        journal.apply(.putBack(music))
        #expect(Journal(directory: dir).leftovers().traces == [video: latest])
        // Remembered again later: the old traces do not come back.
        journal.apply(.remember(music, nil))
        #expect(Journal(directory: dir).leftovers().traces[music] == nil)
        journal.apply(.clear)
        #expect(Journal(directory: dir).leftovers().traces.isEmpty)
    }

    @Test("the volumes the user set on a remembered key's streams, and the ramps of its streams gone held: the latest few, kept through compaction and a later remember line, gone once it is put back")
    func userVolumes() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        let video = "sink-input-by-media-role:video"
        func volume(_ raw: UInt32) -> ChannelVolumes { ChannelVolumes(channels: 2, volume: Volume(rawValue: raw)) }
        journal.apply(.userVolumes(video, [volume(1)]))
        #expect(Journal(directory: dir).leftovers().userVolumes.isEmpty, "a key not remembered has none")
        journal.apply(.remember(video, nil))
        journal.apply(.userVolumes(video, (1...Journal.tracesPerKey + 2).map { volume(UInt32($0)) }))
        let latest = (3...Journal.tracesPerKey + 2).map { volume(UInt32($0)) }
        #expect(Journal(directory: dir).leftovers().userVolumes == [video: latest])
        // (The same again writes nothing.)
        let size = try FileManager.default.attributesOfItem(atPath: "\(dir)/held.log")[.size] as? Int
        journal.apply(.userVolumes(video, latest))
        #expect(try FileManager.default.attributesOfItem(atPath: "\(dir)/held.log")[.size] as? Int == size)
        journal.apply(.remember(video, nil))
        journal.apply(.trace(video, volume(7)))
        // The ends of gone streams' ramps, each pair once.
        journal.apply(.ramp(video, low: volume(10), high: volume(20)))
        journal.apply(.ramp(video, low: volume(10), high: volume(20)))
        journal.apply(.ramp(video, low: volume(30), high: volume(40)))
        #expect(Journal(directory: dir).leftovers().ramps == [video: [volume(10), volume(20), volume(30), volume(40)]])
        for round in 0..<200 { hold(journal, UInt32(round), entry(UInt32(round))); hold(journal, UInt32(round), nil) }
        let left = Journal(directory: dir).leftovers()
        #expect(left.userVolumes == [video: latest] && left.traces == [video: [volume(7)]], "compaction lost them")
        #expect(left.ramps == [video: [volume(10), volume(20), volume(30), volume(40)]], "compaction lost them")
        journal.apply(.putBack(video))
        journal.apply(.remember(video, nil))
        #expect(Journal(directory: dir).leftovers().userVolumes.isEmpty && Journal(directory: dir).leftovers().ramps.isEmpty, "put back: gone")
    }

    @Test("what an earlier version left (held.json) is read, and removed by clear")
    func legacyFormat() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let old = Journal.Entry(direction: .output, index: 5, processID: "42", name: "Player", muted: true, baseVolume: nil,
                                restoreKey: "sink-input-by-media-role:music")
        try JSONEncoder().encode([old]).write(to: URL(fileURLWithPath: "\(dir)/held.json"))
        let journal = Journal(directory: dir)
        #expect(journal.leftovers().streams == [old])
        journal.apply(.clear)
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/held.json"))
    }

    @Test("a full disk is said, not silent; once there is room again the whole journal is written (issue 10, case 7)")
    func fullDisk() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let disk = try TinyDisk(at: "\(dir)/state")
        defer { disk.unmount() }
        let journal = Journal(directory: disk.path)
        #expect(journal.apply(.hold(StreamKey(.output, 1), entry(1))) == nil, "a write that works changes nothing")
        disk.fill()
        // (Longer than a page: a short line would still fit in the file's last page.)
        let long = entry(2, name: String(repeating: "x", count: 5000))
        let failing = journal.apply(.hold(StreamKey(.output, 2), long))
        guard case .failing(let reason)? = failing else { Issue.record("a write to a full disk was not reported: \(String(describing: failing))"); return }
        #expect(reason.contains("No space left on device"), "\(reason)")
        #expect(journal.apply(.hold(StreamKey(.output, 3), entry(3))) == nil, "still failing: said once")
        try disk.empty()
        #expect(journal.apply(.hold(StreamKey(.output, 4), entry(4))) == .writable)
        #expect(Journal(directory: disk.path).leftovers().streams == [entry(1), long, entry(3), entry(4)], "what was held meanwhile is in the file")
    }

    @Test("a read-only state directory is said, not silent (issue 10, case 7)")
    func readOnly() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let disk = try TinyDisk(at: "\(dir)/state", size: "64k")
        defer { disk.unmount() }
        try disk.readOnly()
        let failing = Journal(directory: disk.path).apply(.hold(StreamKey(.output, 1), entry(1)))
        guard case .failing(let reason)? = failing else { Issue.record("a read-only journal was not reported"); return }
        #expect(reason.contains("Read-only file system"), "\(reason)")
    }

    // MARK: issue 20, case 2: a large corrupt journal

    /// A journal with `good` held streams, then `garbage` bytes of lines that are not journal lines.
    func corruptJournal(in dir: String, good: Int, garbage: Int) throws {
        let journal = Journal(directory: dir)
        for index in 0..<good { journal.apply(.hold(StreamKey(.output, UInt32(index)), entry(UInt32(index)))) }
        let fd = open("\(dir)/held.log", O_WRONLY | O_APPEND)
        defer { close(fd) }
        let line = Array("garbage: this is not a journal line, it is what a broken disk or a hostile program left here\n".utf8)
        let block = Array(repeating: line, count: (1 << 20) / line.count).flatMap { $0 }
        var written = 0
        while written < garbage {
            let n = block.withUnsafeBytes { write(fd, $0.baseAddress!, min($0.count, garbage - written)) }
            #expect(n > 0)
            written += n
        }
    }

    @Test("100 MB of garbage lines: read in bounded bytes, a few lines named and the rest counted, the file moved aside, the good entries kept")
    func hundredMegabytesOfGarbage() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try corruptJournal(in: dir, good: 3, garbage: 100 << 20)
        let successor = Journal(directory: dir)
        let left = successor.leftovers()
        #expect(left.streams == [entry(0), entry(1), entry(2)], "the good entries are kept")
        #expect(left.bytesRead <= Journal.sizeLimit, "\(left.bytesRead) bytes read")
        #expect(left.skipped.count == Journal.namedBadLines, "\(left.skipped)")
        #expect(left.skippedCount > 10_000, "the rest are counted: \(left.skippedCount)")
        #expect(left.movedAside?.contains("larger than \(Journal.sizeLimit) bytes") == true, "\(left.movedAside ?? "not moved aside")")
        let aside = try FileManager.default.attributesOfItem(atPath: "\(dir)/held.log~")[.size] as? Int
        #expect(aside.map { $0 > 100 << 20 } == true, "the whole file is aside for a person to look at")
        // What was kept is the journal now: a successor reads it at once.
        let next = Journal(directory: dir).leftovers()
        #expect(next.streams == [entry(0), entry(1), entry(2)])
        #expect(next.skippedCount == 0 && next.movedAside == nil)
    }

    @Test("one line of 100 MB (no newline at all) is one bad line, read in bounded bytes and never kept whole")
    func oneHugeLine() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fd = open("\(dir)/held.log", O_WRONLY | O_CREAT, 0o600)
        #expect(ftruncate(fd, 100 << 20) == 0)  // (sparse: 100 MB of NUL bytes)
        close(fd)
        let left = Journal(directory: dir).leftovers()
        #expect(left.bytesRead <= Journal.sizeLimit)
        #expect(left.movedAside != nil)
        #expect(left.skippedCount == 0, "the line cut at the limit is not counted: \(left.skipped)")
        #expect(FileManager.default.fileExists(atPath: "\(dir)/held.log~"))
    }

    @Test("more bad lines than good: the file is corrupt, moved aside, and what it held that could be read is kept; an overlong line is one bad line")
    func moreBadThanGood() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        hold(Journal(directory: dir), 1, entry(1))
        let handle = try #require(FileHandle(forWritingAtPath: "\(dir)/held.log"))
        handle.seekToEndOfFile()
        handle.write(Data(("not json\n" + String(repeating: "{", count: Journal.lineLimit + 10) + "\nnot json either\n").utf8))
        try handle.close()
        let left = Journal(directory: dir).leftovers()
        #expect(left.streams == [entry(1)])
        #expect(left.skippedCount == 3, "\(left.skipped)")
        #expect(left.skipped.contains { $0.contains("held.log:3: longer than") }, "\(left.skipped)")
        #expect(left.movedAside?.contains("3 of its 4 lines are not journal lines") == true, "\(left.movedAside ?? "not moved aside")")
        #expect(Journal(directory: dir).leftovers().streams == [entry(1)])
    }

    @Test("a torn last line alone is no corruption: the file stays where it is")
    func tornLineIsNoCorruption() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fd = open("\(dir)/held.log", O_WRONLY | O_CREAT, 0o600)
        _ = writeAll(#"{"entry":{"direction":"out"#, to: fd)
        close(fd)
        let left = Journal(directory: dir).leftovers()
        #expect(left.skippedCount == 1 && left.movedAside == nil)
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/held.log~"))
    }

    @Test("the file is compacted long before the size limit, also when what it holds changes in place")
    func compactedLongBeforeTheLimit() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        // Few keys, long lines: the line count alone would let the file grow for a long while.
        for round in 0..<5_000 {
            hold(journal, UInt32(round % 100), entry(UInt32(round % 100), name: "Player \(round) " + String(repeating: "x", count: 2_000)))
        }
        let size = try #require(try FileManager.default.attributesOfItem(atPath: "\(dir)/held.log")[.size] as? Int)
        #expect(size < Journal.sizeLimit / 4, "\(size) bytes")
    }
}

/// A server that reads what the journal's file holds as each command is handed to it.
final class FileReadingServer: SoundServer {
    let path: String
    let seen = Mutex<[String]>([])
    init(path: String) { self.path = path }
    func send(_ command: ServerCommand, whenDone: @escaping @Sendable (Result<ServerAnswer, PulseError>) -> Void) {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        seen.withLock { $0.append(text) }
    }
    func forwardEventGroups(_ deliver: @escaping @Sendable ([PulseEvent]) -> Void) {}
    func meter(_ stream: StreamReference, _ on: Bool, settings: MeterSettings) {}
    func forwardSound(_ deliver: @escaping @Sendable (SoundReport) -> Void) {}
    func close() {}
}

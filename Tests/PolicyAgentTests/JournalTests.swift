import AudioPolicy
import Foundation
import SoundServerTesting
@testable import PolicyAgent
import PulseClient
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
        Journal.Entry(direction: "output", index: index, processID: "42", name: name, muted: muted,
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
                         Journal.RememberedLine(remembered: "k", entry: entry, released: false)] {
                let byHand = try JSONDecoder().decode(Journal.RememberedLine.self, from: Data(line.json.utf8))
                let byEncoder = try JSONDecoder().decode(Journal.RememberedLine.self, from: JSONEncoder().encode(line))
                #expect(byHand.remembered == byEncoder.remembered && byHand.entry == byEncoder.entry && byHand.released == byEncoder.released,
                        "\(line.json)")
                #expect(byHand.remembered == line.remembered && byHand.entry == line.entry)
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

    @Test("what an earlier version left (held.json) is read, and removed by clear")
    func legacyFormat() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let old = Journal.Entry(direction: "output", index: 5, processID: "42", name: "Player", muted: true, baseVolume: nil,
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
}

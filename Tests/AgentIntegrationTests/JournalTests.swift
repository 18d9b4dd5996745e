import Foundation
@testable import PolicyAgent
import PulseClient
import Testing

/// The journal on its own (no server): what a run writes, a successor reads back.
@Suite("journal")
struct JournalTests {
    func directory() throws -> String {
        let path = NSTemporaryDirectory() + "audiosession-journal-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func entry(_ index: UInt32, name: String = "Player", muted: Bool = true) -> Journal.Entry {
        Journal.Entry(direction: "output", index: index, processID: "42", name: name, muted: muted,
                      baseVolume: muted ? nil : [65536, 32768], restoreKey: "sink-input-by-media-role:music")
    }

    @Test("the last line of each stream wins; released streams are not left over")
    func lastLineWins() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        journal.set("output#1", entry(1))
        journal.set("output#2", entry(2, muted: false))
        journal.set("output#1", nil)
        journal.set("output#3", entry(3))
        let left = Journal(directory: dir).leftovers().streams
        #expect(left == [entry(2, muted: false), entry(3)])
    }

    @Test("switched Bluetooth cards are left over with their own profiles until switched back, also after compaction")
    func cards() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        journal.switched("bluez_card.A", from: "a2dp_sink")
        journal.switched("bluez_card.B", from: "a2dp-sink-sbc")
        journal.set("output#1", entry(1))
        journal.switchedBack("bluez_card.A")
        #expect(Journal(directory: dir).leftovers().cards == ["bluez_card.B": "a2dp-sink-sbc"])
        for round in 0..<100 { journal.set("output#\(round + 2)", entry(UInt32(round + 2))); journal.set("output#\(round + 2)", nil) }
        journal.compactIfGrown()
        let left = Journal(directory: dir).leftovers()
        #expect(left.cards == ["bluez_card.B": "a2dp-sink-sbc"])
        #expect(left.streams == [entry(1)])
    }

    @Test("names with quotes, backslashes, newlines and other text come back as written")
    func quoting() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let name = "Say \"hi\"\\ to\nme\t— ünïcödé 🎵"
        Journal(directory: dir).set("output#7", entry(7, name: name))
        #expect(Journal(directory: dir).leftovers().streams == [entry(7, name: name)])
    }

    @Test("a torn last line (a crash in the middle of a write) is skipped, the rest is read")
    func tornLine() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        Journal(directory: dir).set("output#1", entry(1))
        let handle = try #require(FileHandle(forWritingAtPath: "\(dir)/held.log"))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"entry":{"direction":"out"#.utf8))
        try handle.close()
        #expect(Journal(directory: dir).leftovers().streams == [entry(1)])
    }

    @Test("compaction keeps exactly what is held; clear empties the file")
    func compaction() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        for round in 0..<100 {
            journal.set("output#\(round)", entry(UInt32(round)))
            if round % 10 != 0 { journal.set("output#\(round)", nil) }
        }
        journal.compactIfGrown()
        let text = try String(contentsOfFile: "\(dir)/held.log", encoding: .utf8)
        #expect(text.split(separator: "\n").count == 10, "the file was not compacted")
        #expect(Journal(directory: dir).leftovers().streams == (0..<10).map { entry(UInt32($0 * 10)) })
        journal.clear()
        #expect(try String(contentsOfFile: "\(dir)/held.log", encoding: .utf8) == "")
        #expect(Journal(directory: dir).leftovers().streams.isEmpty)
    }

    @Test("remembered entries: kept until put back, through compaction; nil means there was none")
    func remembered() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = Journal(directory: dir)
        let music = StreamRestoreEntry(name: "sink-input-by-media-role:music", channelMap: ["front-left", "front-right"],
                                       volume: ChannelVolumes([Volume(rawValue: 40000), Volume(rawValue: 41000)]),
                                       device: nil, isMuted: false)
        journal.remember(music.name, music)
        journal.remember("sink-input-by-media-role:video", nil)
        journal.remember("sink-input-by-application-name:Gone", nil)
        journal.putBack("sink-input-by-application-name:Gone")
        let none: StreamRestoreEntry? = nil
        let expected: [String: StreamRestoreEntry?] = [music.name: music, "sink-input-by-media-role:video": none]
        #expect(Journal(directory: dir).leftovers().remembered == expected)
        for round in 0..<200 { journal.set("output#\(round)", entry(UInt32(round))); journal.set("output#\(round)", nil) }
        journal.compactIfGrown()
        #expect(Journal(directory: dir).leftovers().remembered == expected, "compaction lost them")
        #expect(Journal(directory: dir).leftovers().streams.isEmpty)
        journal.clear()
        #expect(Journal(directory: dir).leftovers().isEmpty)
    }

    @Test("what an earlier version left (held.json) is read, and removed by clear")
    func legacyFormat() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try JSONEncoder().encode([entry(5)]).write(to: URL(fileURLWithPath: "\(dir)/held.json"))
        let journal = Journal(directory: dir)
        #expect(journal.leftovers().streams == [entry(5)])
        journal.clear()
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/held.json"))
    }
}

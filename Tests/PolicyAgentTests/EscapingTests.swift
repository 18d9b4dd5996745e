import AudioPolicy
import Foundation
import Logging
import PolicyAgent
import SoundServerTesting
import Synchronization
import Testing
@testable import audiosessionctl

/// Issue 11, case 7: what an app controls reaches a log line or a terminal escaped, one event one line,
/// through the log handler of the agent and the human outputs of the command line.
@Suite("escaping what apps control")
struct EscapingTests {
    /// What a hostile app puts in its properties: a forged log line, a screen clear, an OSC title,
    /// a C1 CSI, a right-to-left override.
    static let hostile = "evil\n2026-11-23T09:00:00+0000 notice audiosessiond: stopped; nothing left held\u{1B}[2J\u{1B}]0;owned\u{07}\u{9B}31m\u{202E}"
    static let shown = #"evil\n2026-11-23T09:00:00+0000 notice audiosessiond: stopped; nothing left held\x1b[2J\x1b]0;owned\x07\u{9b}31m\u{202e}"#

    @Test("control characters are shown as escapes, a backslash doubled; other text, accents and emoji included, as it is")
    func forDisplay() {
        #expect(Escape.forDisplay(Self.hostile) == Self.shown)
        #expect(Escape.forDisplay("tab\there\r\0\u{7F}") == #"tab\there\r\x00\x7f"#)
        #expect(Escape.forDisplay(#"C:\a\n"#) == #"C:\\a\\n"#)
        #expect(Escape.forDisplay("Lecteur vidéo 🎵 Ω") == "Lecteur vidéo 🎵 Ω")
        #expect(Escape.forDisplay("\u{85}\u{2028}\u{2029}\u{200F}\u{2066}") == #"\u{85}\u{2028}\u{2029}\u{200f}\u{2066}"#)
    }

    @Test("in JSON text, control characters become \\u escapes and the JSON stays the same value")
    func inJSON() throws {
        let raw = "{\"name\":\"a\u{7F}\u{9B}\u{2028}\u{202E}b\\n\"}"
        let escaped = Escape.inJSON(raw)
        #expect(escaped == #"{"name":"a\u007f\u009b\u2028\u202eb\n"}"#)
        let decoded = try JSONDecoder().decode([String: String].self, from: Data(escaped.utf8))
        #expect(decoded["name"] == "a\u{7F}\u{9B}\u{2028}\u{202E}b\n")
    }

    struct AppError: Error, CustomStringConvertible {
        var description: String { "no such stream \(EscapingTests.hostile)" }
    }

    @Test("issue 20 case 9: long text is shortened in a log line after escaping: its first 200 characters, an ellipsis and its whole length; an escape is never cut")
    func shortenedForLog() {
        let long = String(repeating: "n", count: 65_536)
        #expect(Escape.forLog(long) == String(repeating: "n", count: 200) + "… (65536 characters)")
        #expect(Escape.forLog("short \u{1B}") == #"short \x1b"#)
        // 150 escape characters are 600 shown: 50 whole escapes fit in 200.
        #expect(Escape.forLog(String(repeating: "\u{1B}", count: 150)) == String(repeating: #"\x1b"#, count: 50) + "… (150 characters)")
        #expect(Escape.shortened(long, limit: 10) == "nnnnnnnnnn… (65536 characters)")
    }

    @Test("issue 20 case 9: the log handler shortens metadata values to 200 characters, messages, errors and reasons to 1,000")
    func logHandlerShortens() {
        let recorder = LogRecorder()
        let logger = Logger(label: "test") { _ in EscapingLogHandler(wrapping: LogRecorder.Handler(recorder: recorder)) }
        let name = String(repeating: "x", count: 65_536)
        logger.info("stream of \(name)", metadata: ["app": "\(name)", "reason": "because \(name)", "list": [.string(name)]])
        let event = recorder.events.withLock { $0 }.first
        #expect(event?.metadata["app"] == .string(String(repeating: "x", count: 200) + "… (65536 characters)"))
        #expect(event?.metadata["list"] == .array([.string(String(repeating: "x", count: 200) + "… (65536 characters)")]))
        #expect(event?.metadata["reason"] == .string("because " + String(repeating: "x", count: 992) + "… (65544 characters)"))
        #expect(event?.message == "stream of " + String(repeating: "x", count: 990) + "… (65546 characters)")
        #expect((event?.line.utf8.count ?? .max) < 3_000)
    }

    @Test("the agent's log handler escapes the message, metadata values and keys (nested too), the handler's metadata and the error")
    func logHandler() {
        let recorder = LogRecorder()
        var logger = Logger(label: "test") { _ in
            EscapingLogHandler(wrapping: LogRecorder.Handler(recorder: recorder))
        }
        logger[metadataKey: "app"] = "\(Self.hostile)"
        logger.info("session \(Self.hostile)", metadata: [
            "session": "\(Self.hostile)",
            "list": [.string(Self.hostile)],
            "nested": ["inner\n": .stringConvertible(Self.hostile)],
        ])
        logger.warning("failed", error: AppError())
        let events = recorder.events.withLock { $0 }
        #expect(events.count == 2)
        guard events.count == 2 else { return }
        #expect(events[0].message == "session \(Self.shown)")
        #expect(events[0].metadata["session"] == .string(Self.shown))
        #expect(events[0].metadata["app"] == .string(Self.shown))
        #expect(events[0].metadata["list"] == .array([.string(Self.shown)]))
        #expect(events[0].metadata["nested"] == .dictionary([#"inner\n"#: .string(Self.shown)]))
        #expect(events[1].metadata["error.message"] == .string("no such stream \(Self.shown)"))
        for event in events {
            #expect(!hasRawControls(event.message) && !event.message.contains("\n"))
            #expect(!hasRawControls("\(event.metadata)") && !"\(event.metadata)".contains("\n"))
        }
    }

    static let app = AppIdentity(binary: hostile, name: hostile, appID: hostile, role: hostile, processID: 42)

    /// Every line is one line, with nothing raw in it, and shows the name as escaped.
    static func check(_ lines: [String], count: Int) {
        #expect(lines.count == count)
        for line in lines {
            #expect(!line.contains("\n") && !hasRawControls(line), "\(line.debugDescription)")
        }
        #expect(lines.last?.contains(shown) == true, "\(lines.last?.debugDescription ?? "none")")
    }

    @Test("audiosessionctl streams: one row per stream, names escaped")
    func streams() {
        let report = StreamReport(index: 7, direction: "playback", name: Self.hostile, application: Self.app,
                                  device: Self.hostile, corked: false, muted: false, volume: "100%")
        Self.check(Streams.table([report]), count: 2)
    }

    @Test("audiosessionctl devices: one row per device, the description escaped")
    func devices() {
        let report = DeviceReport(index: 1, direction: "output", name: Self.hostile, description: Self.hostile,
                                  portType: .usbAudio, portTypeFact: "device.bus=usb", bus: "usb", formFactor: nil,
                                  profile: Self.hostile, activePort: nil, isDefault: true, card: nil, state: "running",
                                  muted: false, volume: "100%")
        Self.check(Devices.table([report]), count: 2)
    }

    @Test("audiosessionctl policies explain: one line per stream, escaped")
    func explain() {
        let row = ExplainRow(stream: "playback #7", application: Self.app, category: "playback", mode: "default",
                             options: [], why: "role default for \(Self.hostile)")
        Self.check([row.line], count: 1)
    }

    @Test("audiosessionctl monitor: one line per event, escaped")
    func monitor() {
        let report = EventReport(time: "09:00:00", event: "new", facility: "sink-input", index: 7, name: Self.hostile,
                                 application: Self.app, detail: Self.hostile)
        Self.check([report.line], count: 1)
    }

    @Test("audiosessionctl log: an entry's line escaped")
    func log() throws {
        let port = PortDescription(type: .usbAudio, name: Self.hostile, uid: "usb")
        let json = "{\"time\":\"09:00\",\"reason\":\"newDeviceAvailable\",\"cause\":\"plugged\",\"sessions\":[],\"system\":true,"
            + "\"previousRoute\":{\"outputs\":[],\"inputs\":[]},\"route\":{\"outputs\":["
            + String(decoding: try JSONEncoder().encode(port), as: UTF8.self) + "],\"inputs\":[]}}"
        let entry = try JSONDecoder().decode(RouteLogEntry.self, from: Data(json.utf8))
        Self.check([Escape.forDisplay(entry.line)], count: 1)
    }
}

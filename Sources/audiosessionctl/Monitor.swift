import ArgumentParser
import AudioPolicy
import Foundation
import PolicyAgent
import PulseClient

/// One line of `audiosessionctl monitor --json`.
struct EventReport: Encodable {
    var time: String
    var event: String
    var facility: String?
    var index: UInt32?
    var name: String?
    var portType: PortType?
    var application: AppIdentity?
    var detail: String?
}

struct Monitor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print every server event as it happens, one per line (until interrupted).")

    @OptionGroup var options: ServerOptions

    @Option(name: .long, help: "Stop after this many events (for scripts and tests).")
    var count: Int?

    func run() async throws {
        try await reporting {
            let client = try await PulseClient.connect(
                .init(server: options.server, applicationName: "audiosessionctl monitor"))
            defer { client.close() }
            var seen = 0
            var last = Snapshot()
            for await event in client.events() {
                if case .connected(let snapshot) = event { last = snapshot }
                let report = EventReport(event, in: last)
                let line: String
                if options.json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                    line = Escape.inJSON(String(decoding: try encoder.encode(report), as: UTF8.self))
                } else {
                    line = report.line
                }
                // Unbuffered, so that a pipe sees each event as it happens.
                FileHandle.standardOutput.write(Data((line + "\n").utf8))
                last = client.snapshot
                seen += 1
                if let count, seen >= count { break }
            }
        }
    }
}

extension EventReport {
    init(_ event: PulseEvent, in snapshot: Snapshot) {
        time = Date().formatted(.iso8601.time(includingFractionalSeconds: true))
        self.event = event.kind
        switch event {
        case .connected(let s):
            detail = "\(s.server?.name ?? "server") \(s.server?.version ?? ""): \(s.sinks.count) sinks, "
                + "\(s.sources.count) sources, \(s.sinkInputs.count) playback and \(s.sourceOutputs.count) capture streams"
        case .disconnected(let reason):
            detail = reason
        case .other(let facility, let index, _):
            self.facility = facility.rawValue
            self.index = index
        case .added(let e), .removed(let e), .changed(_, let e):
            facility = e.facility.rawValue
            index = e.index
            switch e {
            case .sink(let d), .source(let d):
                name = d.name
                portType = snapshot.portType(of: d).type
                detail = d.description
            case .sinkInput(let s), .sourceOutput(let s):
                name = s.name
                application = snapshot.identity(of: s)
                detail = [s.isCorked ? "corked" : "running", s.isMuted ? "muted" : "unmuted", s.volume.description]
                    .joined(separator: " ")
            case .card(let c): name = c.name; detail = c.activeProfile.map { "profile \($0)" }
            case .client(let c): name = c.name
            case .module(let m): name = m.name; detail = m.argument.isEmpty ? nil : m.argument
            case .server(let s):
                detail = "default sink \(s.defaultSinkName ?? "-"), default source \(s.defaultSourceName ?? "-")"
            }
        }
    }

    /// The event as one human-readable line, escaped.
    var line: String { Escape.forDisplay(text) }

    /// The event as a line of text (names as the apps and devices give them).
    var text: String {
        var parts = [time, event]
        if let facility { parts.append(facility) }
        if let index { parts.append("#\(index)") }
        if let name { parts.append(name) }
        if let portType { parts.append("(\(portType.name))") }
        if let app = application {
            let who = [app.binary, app.appID, app.role.map { "role=\($0)" }, app.processID.map { "pid=\($0)" }]
                .compactMap { $0 }.joined(separator: " ")
            if !who.isEmpty { parts.append("[\(who)]") }
        }
        if let detail { parts.append("- \(detail)") }
        return parts.joined(separator: " ")
    }
}

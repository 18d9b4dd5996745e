import AudioPolicy
import ArgumentParser
import PolicyAgent
import PulseClient

/// One row of `audiosessionctl streams`.
struct StreamReport: Encodable {
    var index: UInt32
    var direction: String
    var name: String
    var application: AppIdentity
    var device: String?
    var corked: Bool
    var muted: Bool
    var volume: String
}

extension StreamReport {
    init(_ stream: AudioStream, in snapshot: Snapshot) {
        index = stream.id
        direction = stream.direction == .output ? "playback" : "capture"
        name = stream.name
        application = snapshot.identity(of: stream)
        device = snapshot.device(of: stream)?.name
        corked = stream.isCorked
        muted = stream.isMuted
        volume = stream.volume.description
    }
}

struct Streams: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every playback and capture stream with the application it belongs to.")

    @OptionGroup var options: ServerOptions

    func run() async throws {
        try await reporting {
            let client = try await options.connect()
            defer { client.close() }
            let snapshot = client.snapshot
            let reports = (snapshot.streams(.output) + snapshot.streams(.input)).map { StreamReport($0, in: snapshot) }
            if options.json { return try printJSON(reports) }
            for line in Self.table(reports) { print(line) }
        }
    }

    /// The human output: one row per stream, escaped.
    static func table(_ reports: [StreamReport]) -> [String] {
        escapedTable(
            ["#", "KIND", "BINARY", "APPLICATION", "APP-ID", "ROLE", "PID", "DEVICE", "STATE"],
            reports.map { r in
                let app = r.application
                let state = [r.corked ? "corked" : "running", r.muted ? "muted" : nil, r.volume].compactMap { $0 }
                return ["\(r.index)", r.direction, app.binary ?? "-", app.name ?? "-", app.appID ?? "-",
                        app.role ?? "-", app.processID.map(String.init) ?? "-", r.device ?? "-",
                        state.joined(separator: " ")]
            })
    }
}

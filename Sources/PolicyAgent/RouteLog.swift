public import AudioPolicy
public import FoundationEssentials
import Glibc

/// One line of the route-change log (SPEC.md section 6): JSON, one object per line.
public struct RouteLogEntry: Codable, Hashable, Sendable {
    public struct Route: Codable, Hashable, Sendable {
        public var outputs: [PortDescription]
        public var inputs: [PortDescription]
    }
    public var time: String
    public var reason: RouteChangeReason
    public var previousRoute: Route
    public var route: Route
    public var cause: String
    public var sessions: [String]
    /// True for the default devices, false for a session routed on its own.
    public var system: Bool

    public init(_ change: RouteChange, at date: Date) {
        time = date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        reason = change.reason
        previousRoute = Route(outputs: change.previousRoute.outputs, inputs: change.previousRoute.inputs)
        route = Route(outputs: change.route.outputs, inputs: change.route.inputs)
        cause = change.cause
        sessions = change.sessions.map(\.rawValue)
        system = change.isSystemRoute
    }

    /// The entry as one line of JSON. Names come from apps and devices: every control character in them
    /// is a JSON escape (`Escape.inJSON`), so that the line stays one line, in the file and on a terminal.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Escape.inJSON(String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self))
    }

    /// The entry for people: `12:00:01 newDeviceAvailable: speaker → usbAudio "USB Headset" (cause)`, with
    /// the names as they are (to be shown through `Escape.forDisplay`).
    public var line: String {
        func ports(_ list: [PortDescription]) -> String {
            list.isEmpty ? "none" : list.map { "\($0.type.name) \"\($0.name)\"" }.joined(separator: " + ")
        }
        var text = "\(time) \(reason.name) [\(system ? "default devices" : sessions.joined(separator: ", "))]: "
        if previousRoute == route {
            text += "route kept on \(ports(route.outputs)) (\(cause))"
            return text
        }
        if previousRoute.outputs != route.outputs || previousRoute.inputs == route.inputs {
            text += "output \(ports(previousRoute.outputs)) → \(ports(route.outputs))"
        }
        if previousRoute.inputs != route.inputs {
            if previousRoute.outputs != route.outputs { text += "; " }
            text += "input \(ports(previousRoute.inputs)) → \(ports(route.inputs))"
        }
        text += " (\(cause))"
        if system && !sessions.isEmpty { text += " sessions: \(sessions.joined(separator: ", "))" }
        return text
    }
}

/// Appends route changes to the log file (if any) and to stderr: one write(2) per line, to a file
/// opened for appending.
final class RouteLogWriter {
    let path: String?
    private var descriptor: Int32 = -1

    init(path: String?) {
        self.path = path
        if let path {
            if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
                try? FileManager.default.createDirectory(atPath: String(path[..<slash]), withIntermediateDirectories: true)
            }
            descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Writes the entry's JSON (control characters escaped by `RouteLogEntry.json`) to the file and,
    /// after `route-change `, to stderr: one line each, whatever the names hold.
    func write(_ entry: RouteLogEntry) {
        let line = entry.json
        if descriptor >= 0 { writeAll(line + "\n", to: descriptor) }
        writeAll("route-change " + line + "\n", to: 2)
    }
}

/// Writes all of `text` to `fd` (one write(2) unless the kernel takes less), for the logs and the
/// journal; false if it could not (errno says why).
@discardableResult
func writeAll(_ text: String, to fd: Int32) -> Bool {
    var text = text
    return text.withUTF8 { bytes in
        var done = 0
        while done < bytes.count {
            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { if n == 0 { errno = ENOSPC }; return false }
            done += n
        }
        return true
    }
}

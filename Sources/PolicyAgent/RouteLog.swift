public import AudioPolicy
public import Foundation

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

    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// The entry for people: `12:00:01 newDeviceAvailable: speaker → usbAudio "USB Headset" (cause)`.
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

/// Appends route changes to the log file (if any) and to stderr.
final class RouteLogWriter {
    let path: String?
    private var handle: FileHandle?

    init(path: String?) {
        self.path = path
        if let path {
            if !FileManager.default.fileExists(atPath: path) {
                try? FileManager.default.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                _ = FileManager.default.createFile(atPath: path, contents: nil)
            }
            handle = FileHandle(forWritingAtPath: path)
            _ = try? handle?.seekToEnd()
        }
    }

    func write(_ entry: RouteLogEntry) {
        handle?.write(Data((entry.json + "\n").utf8))
        FileHandle.standardError.write(Data(("route-change " + entry.json + "\n").utf8))
    }
}

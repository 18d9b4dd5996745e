import Glibc

/// Tells systemd how the service is doing (`Type=notify`): one datagram to `$NOTIFY_SOCKET`, a leading
/// `@` meaning an abstract socket. Nothing happens outside systemd (no variable).
enum ServiceNotify {
    /// Sends "READY=1", "STOPPING=1", "STATUS=..." lines; false if there is no socket or it failed.
    @discardableResult
    static func send(_ lines: [String]) -> Bool {
        guard let socketPath = getenv("NOTIFY_SOCKET").map({ String(cString: $0) }), !socketPath.isEmpty else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        let abstract = path.first == UInt8(ascii: "@")
        if abstract { path[0] = 0 }
        guard path.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (i, byte) in path.enumerated() { bytes[i] = byte }
        }
        // An abstract address is as long as its name; a path's includes its terminating zero.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (abstract ? 0 : 1))
        let message = Array((lines.joined(separator: "\n") + "\n").utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sockaddrPointer, length) }
            }
        }
        return sent == message.count
    }
}

/// When the agent is ready for systemd's `Type=notify`: the sound server connected and enforced, and the
/// session bus answered (the apps' name ours or refused, or no bus): `systemctl --user start` then
/// returns when an app can already call `GetSession`.
struct Readiness {
    private var server: String?
    private var waitsForSessionBus: Bool
    private var said = false

    init(waitsForSessionBus: Bool) { self.waitsForSessionBus = waitsForSessionBus }

    /// The status line to send with READY=1, once, when the batch completes what was waited for.
    mutating func take(_ batch: [TowerInput]) -> String? {
        guard !said else { return nil }
        for input in batch {
            switch input {
            case .server(.connected(let snapshot)) where server == nil: server = snapshot.server?.name ?? "the sound server"
            case .app(.served), .app(.unavailable), .players(.busGone): waitsForSessionBus = false
            default: continue
            }
        }
        guard let server, !waitsForSessionBus else { return nil }
        said = true
        return "managing \(server)"
    }
}

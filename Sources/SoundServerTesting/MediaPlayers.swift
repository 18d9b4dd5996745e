public import DBus
import Foundation
import Glibc
import PulseClient
import Synchronization

/// A D-Bus session bus of a test's own (`dbus-daemon --session`), in a folder of its own.
public final class PrivateSessionBus: Sendable {
    public let address: String
    private let daemon: Mutex<ChildProcess?>
    private let directory: String
    private let allowsAnonymous: Bool
    private var socket: String { "\(directory)/bus" }

    private init(address: String, directory: String, allowsAnonymous: Bool) {
        self.address = address; self.directory = directory; self.allowsAnonymous = allowsAnonymous; daemon = Mutex(nil)
    }

    /// `allowingAnonymous`: clients that cannot prove who they are may connect too (VLC, which will not
    /// run as root, runs in a user namespace as another user: its claim of its user does not match the
    /// socket's, and is refused otherwise). The others still connect as themselves.
    public static func start(allowingAnonymous: Bool = false) async throws -> PrivateSessionBus {
        let directory = NSTemporaryDirectory() + "audiosession-bus-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let bus = PrivateSessionBus(address: "unix:path=\(directory)/bus", directory: directory, allowsAnonymous: allowingAnonymous)
        try await bus.startDaemon()
        return bus
    }

    private func startDaemon() async throws {
        try? FileManager.default.removeItem(atPath: socket)
        var arguments = ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=\(address)"]
        if allowsAnonymous {
            let config = "\(directory)/bus.conf"
            try """
                <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
                 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
                <busconfig>
                  <type>session</type>
                  <listen>\(address)</listen>
                  <auth>EXTERNAL</auth>
                  <auth>ANONYMOUS</auth>
                  <allow_anonymous/>
                  <policy context="default">
                    <allow send_destination="*" eavesdrop="true"/>
                    <allow eavesdrop="true"/>
                    <allow own="*"/>
                  </policy>
                </busconfig>
                """.write(toFile: config, atomically: true, encoding: .utf8)
            arguments = ["dbus-daemon", "--config-file=\(config)", "--nofork", "--nopidfile"]
        }
        let child = try ChildProcess.spawn(arguments)
        daemon.withLock { $0 = child }
        // The daemon listens once a connection to its socket is accepted (the file appears at bind, a
        // moment before listen): tried every few milliseconds, as a socket gives no event to wait on.
        let deadline = ContinuousClock.now + .seconds(10)
        while !Self.accepts(socket) {
            guard ContinuousClock.now < deadline else { stop(); throw TimeoutError(what: "dbus-daemon to listen at \(address)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    public func connect() throws -> DBusConnection { try DBusConnection.connect(.session, address: address, name: "test") }

    /// Whether a Unix socket at `path` accepts a connection now.
    static func accepts(_ path: String) -> Bool {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { for (i, b) in bytes.enumerated() { $0[i] = b } }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
    }

    /// Kills the daemon with SIGKILL (every connection to it is lost, as when a desktop's bus dies).
    public func kill() async {
        guard let child = daemon.withLock({ $0 }) else { return }
        child.signal(SIGKILL)
        _ = await child.wait()
        daemon.withLock { $0 = nil }
    }

    /// A new daemon at the same address.
    public func startAgain() async throws { try await startDaemon() }

    public func stop() {
        daemon.withLock { $0 }?.signal(SIGKILL)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// mpv with Debian's mpv-mpris plugin: a real MPRIS player no one here wrote, playing a tone for ever
/// on a private server, its player on a private bus (`org.mpris.MediaPlayer2.mpv`, owned by mpv's
/// own process, which is also its stream's `application.process.id`).
public struct MPVPlayer: Sendable {
    public static let busName = "org.mpris.MediaPlayer2.mpv"
    public let process: ChildProcess

    /// The title its MPRIS player says (`xesam:title`).
    public static let title = "Sine at 440 Hz"

    /// Plays a 440 Hz sine (lavfi's, endless and not seekable), or `file`.
    public static func start(on server: PrivateServer, bus: PrivateSessionBus, file: String? = nil) throws -> MPVPlayer {
        let log = open("\(server.directory)/mpv.log", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(log) }
        return MPVPlayer(process: try ChildProcess.spawn(
            ["mpv", "--no-config", "--script=/usr/lib/mpv-mpris/mpris.so", "--no-video", "--ao=pulse", "--no-terminal",
             "--loop-file=inf", "--force-media-title=\(title)", file ?? "av://lavfi:sine=frequency=440"],
            environment: ["PULSE_SERVER": server.address, "DBUS_SESSION_BUS_ADDRESS": bus.address], stdout: log, stderr: log))
    }

    public func stop() async {
        process.signal()
        _ = await process.wait()
    }
}

/// VLC (`cvlc`, Debian's, with its D-Bus control: `org.mpris.MediaPlayer2.vlc`) looping a file on a
/// private server: a second real MPRIS player, of another make than mpv. VLC refuses to run as root, so
/// it runs in a user namespace as user 1000 (`unshare`), which needs a bus that lets it on anonymously
/// (`PrivateSessionBus.start(allowingAnonymous:)`). Its stream says `media.role=video`.
public struct VLCPlayer: Sendable {
    public static let busName = "org.mpris.MediaPlayer2.vlc"
    public let process: ChildProcess

    public static func start(on server: PrivateServer, bus: PrivateSessionBus, file: String) throws -> VLCPlayer {
        let log = open("\(server.directory)/vlc.log", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(log) }
        let home = "\(server.directory)/vlc-home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        chmod(home, 0o777)
        return VLCPlayer(process: try ChildProcess.spawn(
            ["unshare", "--map-user=1000", "--map-group=1000", "cvlc", "--intf", "dummy", "--extraintf", "dbus", "--no-video", "--loop", file],
            environment: ["PULSE_SERVER": server.address, "DBUS_SESSION_BUS_ADDRESS": bus.address, "HOME": home], stdout: log, stderr: log))
    }

    public func stop() async {
        process.signal()
        _ = await process.wait()
    }
}

/// The user's hand on a player, and the test's eyes: its status asked, commands sent, changes awaited
/// through PropertiesChanged (no polling).
public struct PlayerRemote: Sendable {
    public let connection: DBusConnection
    public let name: String

    public init(_ connection: DBusConnection, name: String) { self.connection = connection; self.name = name }

    public func status() async throws -> String? {
        try await connection.call(name, "/org/mpris/MediaPlayer2", "org.freedesktop.DBus.Properties", "Get",
                                  [.string("org.mpris.MediaPlayer2.Player"), .string("PlaybackStatus")]).first?.string
    }

    public func send(_ command: String) async throws {
        _ = try await connection.call(name, "/org/mpris/MediaPlayer2", "org.mpris.MediaPlayer2.Player", command)
    }

    /// Waits until the player's status is `wanted` (it may be already); the player may not be on the
    /// bus yet.
    public func wait(for wanted: String, timeout: Duration = .seconds(10)) async throws {
        let changes = connection.signals(matching: "type='signal',interface='org.freedesktop.DBus.Properties',"
            + "member='PropertiesChanged',path='/org/mpris/MediaPlayer2'")
        let owners = connection.signals(matching: "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(name)'")
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                // Subscribed first, then asked: a change in between is not missed.
                if (try? await status()) == wanted { return true }
                for await signal in changes {
                    // (This player's, not another's on the same path: two players' waits took each other's.)
                    guard signal.body.count >= 2, signal.body[1].stringDictionary?["PlaybackStatus"]?.string == wanted else { continue }
                    if let owner = try? await connection.callDaemon("GetNameOwner", [.string(name)]).first?.string, owner == signal.sender { return true }
                }
                return false
            }
            group.addTask {
                // The player came on the bus after the first question: ask again.
                for await _ in owners where (try? await status()) == wanted { return true }
                return false
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TimeoutError(what: "\(name) to be \(wanted) (it is \((try? await status()) ?? "not on the bus"))")
            }
            defer { group.cancelAll() }
            while let done = try await group.next() {
                if done { return }
            }
        }
    }
}

/// A stand-in for logind (scripts/fake-logind) on a private bus that plays the system bus: sleep and
/// wake, and the screen lock of the user's graphical session, on the test's command.
public struct PrivateLogind: Sendable {
    public let bus: PrivateSessionBus
    public let process: ChildProcess
    static var script: String { repositoryRoot.appendingPathComponent("scripts/fake-logind").path }

    public static func start() async throws -> PrivateLogind {
        let bus = try await PrivateSessionBus.start()
        do {
            let process = try await bus.spawnOwner(of: "org.freedesktop.login1", ["/usr/bin/python3", script, "serve", "--bus", bus.address],
                                                   what: "the stand-in logind")
            return PrivateLogind(bus: bus, process: process)
        } catch {
            bus.stop()
            throw error
        }
    }

    /// "sleep", "wake", "lock" or "unlock".
    public func send(_ action: String) async throws {
        _ = try await runCommand(["/usr/bin/python3", Self.script, action, "--bus", bus.address])
    }

    public func stop() {
        process.signal(SIGKILL)
        bus.stop()
    }
}

/// A stand-in for the desktop portal's permission store (scripts/fake-permission-store) on a
/// session bus: what the user decided about sandboxed apps, `TABLE/ID/APP=PERMISSION` entries.
public struct PrivatePermissionStore: Sendable {
    public let process: ChildProcess
    static var script: String { repositoryRoot.appendingPathComponent("scripts/fake-permission-store").path }

    /// With `hang`, a stuck portal: no Lookup is answered, each one held is told with the signal
    /// `org.audiosession.FakePermissionStore1.Held`.
    public static func start(on bus: PrivateSessionBus, entries: [String], hang: Bool = false) async throws -> PrivatePermissionStore {
        let command = ["/usr/bin/python3", script, "--bus", bus.address] + entries.flatMap { ["--entry", $0] } + (hang ? ["--hang"] : [])
        return PrivatePermissionStore(process: try await bus.spawnOwner(of: "org.freedesktop.impl.portal.PermissionStore", command,
                                                                        what: "the stand-in permission store"))
    }

    public func stop() { process.signal(SIGKILL) }
}

extension PrivateSessionBus {
    /// Returns once `name` has an owner on this bus (at once if it has one).
    public func waitForOwner(of name: String) async throws {
        let connection = try connect()
        defer { connection.close() }
        // Subscribed first, then asked: the name taken in between is not missed.
        let owners = connection.signals(matching: "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(name)'")
        if try await connection.callDaemon("NameHasOwner", [.string(name)]).first?.bool != true {
            for await _ in owners { break }
        }
    }

    /// Starts a program that takes `name` on this bus, and returns once it has it.
    public func spawnOwner(of name: String, _ command: [String], what: String, timeout: Duration = .seconds(10)) async throws -> ChildProcess {
        let watcher = try connect()
        defer { watcher.close() }
        // Subscribed first, then started: the name taken in between is not missed.
        let owners = watcher.signals(matching: "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(name)'")
        _ = try await watcher.callDaemon("GetId")
        let process = try ChildProcess.spawn(command)
        do {
            try await firstSignal(owners, within: timeout, "\(what) to own \(name)")
        } catch {
            process.signal(SIGKILL)
            throw error
        }
        return process
    }
}

/// Returns at the first signal of `signals`, or throws `TimeoutError(what)` after `timeout`.
public func firstSignal(_ signals: AsyncStream<DBusSignal>, within timeout: Duration, _ what: @escaping @autoclosure @Sendable () -> String) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { for await _ in signals { return } }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimeoutError(what: what())
        }
        defer { group.cancelAll() }
        try await group.next()
    }
}

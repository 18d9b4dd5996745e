import DBus
import Glibc

/// logind on the system bus: sleep and wake from the manager, the screen lock from our session's
/// LockedHint. Our session: the one logind gives for "auto" (the agent started inside the session), else
/// the user's graphical session (a systemd user service belongs to no session).
enum Logind {
    static let name = "org.freedesktop.login1"
    static let managerPath = "/org/freedesktop/login1"
    static let manager = "org.freedesktop.login1.Manager"
    static let session = "org.freedesktop.login1.Session"

    static func watch(_ bus: DBusConnection, _ deliver: @escaping @Sendable (TowerInput) -> Void) {
        let sleep = bus.signals(matching: "type='signal',sender='\(name)',interface='\(manager)',member='PrepareForSleep',path='\(managerPath)'")
        Task {
            for await signal in sleep {
                guard let start = signal.body.first?.bool else { continue }
                deliver(.desktop(start ? .sleeping : .woke))
            }
        }
        Task {
            guard let path = await ourSession(bus) else {
                deliver(.desktop(.unavailable(reason: "logind knows no session of ours: the screen lock is not followed")))
                return
            }
            // Subscribed before the first read: a change in between is not missed.
            let changes = bus.signals(matching: "type='signal',sender='\(name)',interface='org.freedesktop.DBus.Properties',"
                + "member='PropertiesChanged',path='\(path)',arg0='\(session)'")
            if let locked = try? await bus.call(name, path, "org.freedesktop.DBus.Properties", "Get",
                                                [.string(session), .string("LockedHint")]).first?.bool {
                deliver(.desktop(.screenLocked(locked)))
            }
            for await signal in changes {
                guard signal.body.count >= 2, let locked = signal.body[1].stringDictionary?["LockedHint"]?.bool else { continue }
                deliver(.desktop(.screenLocked(locked)))
            }
        }
    }

    /// Our session's object path.
    static func ourSession(_ bus: DBusConnection) async -> String? {
        func call(_ member: String, _ arguments: [DBusValue]) async -> String? {
            try? await bus.call(name, managerPath, manager, member, arguments).first?.string
        }
        if let id = getenv("XDG_SESSION_ID").map({ String(cString: $0) }), !id.isEmpty, let path = await call("GetSession", [.string(id)]) {
            return path
        }
        if let path = await call("GetSession", [.string("auto")]) { return path }
        guard let user = await call("GetUser", [.uint32(getuid())]),
              let display = try? await bus.call(name, user, "org.freedesktop.DBus.Properties", "Get",
                                                [.string("org.freedesktop.login1.User"), .string("Display")]).first?.unwrapped,
              case .structure(let fields) = display, fields.count == 2, let path = fields[1].string, path != "/" else { return nil }
        return path
    }
}

/// The desktops' own word for the lock, on the session bus (`ActiveChanged` of org.freedesktop.ScreenSaver
/// or org.gnome.ScreenSaver): where logind cannot be followed, the lock is still seen.
enum ScreenSaver {
    static func watch(_ bus: DBusConnection, _ deliver: @escaping @Sendable (TowerInput) -> Void) {
        let changes = bus.signals(matching: [
            "type='signal',interface='org.freedesktop.ScreenSaver',member='ActiveChanged'",
            "type='signal',interface='org.gnome.ScreenSaver',member='ActiveChanged'",
        ])
        Task {
            for await signal in changes {
                guard let active = signal.body.first?.bool else { continue }
                deliver(.desktop(.screenLocked(active)))
            }
        }
    }
}

import AudioPolicy
import Logging
import ServerModel

/// The server's default devices: the route of everything not routed otherwise. The core sets them
/// (last in wins, the display-audio guard ...); this tells each change the server reports apart from
/// our own request coming back, and hands the others to the core with what it needs to judge them (the
/// user choosing in pavucontrol or the desktop's settings, or the server choosing again by itself:
/// WirePlumber when a device goes, and several times while a Bluetooth card switches profile).
struct DefaultDevices: Hashable, Sendable {
    /// Devices we asked for and have not seen come back yet, per direction.
    private(set) var ours: [Direction: [String]] = [:]
    /// Our last request per direction, until the server shows a change: if by `lookAt` its default is
    /// still what it was (it took the request and did nothing: WirePlumber 0.5 under load, a device
    /// announced before its node was ready), the request goes again, a few times.
    private(set) var awaited: [Direction: Awaited] = [:]

    struct Awaited: Hashable, Sendable {
        var name: String
        /// The server's default when we asked.
        var before: String?
        var lookAt: Duration
        var attempts: Int
    }

    /// Whether `device` is the server's default for sure: its default now, and no request of ours not
    /// shown yet for another. (Unsure counts as not: a move judged off the default holds the server's
    /// memory, and a needless put-back of it writes what it was.)
    func isSurelyDefault(_ device: String, _ direction: Direction, current server: ServerInfo?) -> Bool {
        let current = server?.defaultDeviceName(direction)
        return device == current && (ours[direction] ?? []).allSatisfy { $0 == device } && (awaited[direction].map { $0.name == device } ?? true)
    }

    /// When the earliest request not shown yet is to be looked at again.
    var nextDeadline: Duration? { awaited.values.map(\.lookAt).min() }
    /// Where a connection's listing stands:
    ///
    ///     steady --startCollecting (a connection's snapshot announced)--> collecting([:])
    ///     collecting --want--> collecting(the core's wish per direction, the last wins)
    ///     collecting --sendCollected--> steady (each wish sent once)
    ///
    /// While the first snapshot is announced, the core's wishes are collected and sent once at the
    /// end: the agent starting moves nothing unless its rules say the route is elsewhere.
    enum Phase: Hashable, Sendable {
        case steady
        case collecting([Direction: String])
    }
    private(set) var phase = Phase.steady
    /// Changes not ours, judged once the batch they came in is through (a device's removal in the same
    /// batch is then known). `previous` is nil if the previous default was gone when the change came.
    private var toJudge: [Change] = []

    struct Change: Hashable, Sendable {
        var direction: Direction
        var previous: String?
        var new: String
    }

    /// The core wants this default device.
    mutating func want(_ name: String, _ direction: Direction, current server: ServerInfo?, settings: AgentSettings, at now: Duration,
                       _ out: inout Outbox) {
        if case .collecting(var wanted) = phase {
            wanted[direction] = name
            phase = .collecting(wanted)
            return
        }
        let current = server?.defaultDeviceName(direction)
        set(name, direction, changes: true, &out)
        // (A wish for the default the server has already is no request to look after: an older one goes.)
        awaited[direction] = name != current
            ? Awaited(name: name, before: current, lookAt: now + settings.defaultShowsWithin, attempts: 1) : nil
    }

    /// Looks again at the requests not shown in time: sent again while the server's default has not
    /// moved at all (and the device is there), each wait twice the last, given up after `defaultAttempts`.
    mutating func tick(in snapshot: Snapshot, settings: AgentSettings, at now: Duration, _ out: inout Outbox) {
        for (direction, request) in awaited.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where request.lookAt <= now {
            let current = snapshot.server?.defaultDeviceName(direction)
            guard current == request.before, snapshot.routableDevices.contains(where: { $0.name == request.name }) else {
                awaited[direction] = nil
                continue
            }
            let name = request.name
            guard request.attempts < settings.defaultAttempts else {
                awaited[direction] = nil
                out.log(.warning) { ("the server did not take our default device; given up", ["direction": "\(direction)", "device": "\(name)"]) }
                continue
            }
            out.log(.notice) { ("the server did not take our default device in time: asked again", ["direction": "\(direction)", "device": "\(name)"]) }
            // (`ours` holds the name from the first request still: one change to it is to come back.)
            set(name, direction, changes: false, &out)
            awaited[direction]?.attempts += 1
            awaited[direction]?.lookAt = now + settings.defaultShowsWithin * (1 << request.attempts)
        }
    }

    mutating func startCollecting() {
        guard phase == .steady else { preconditionFailure("a connection's listing began inside another's: \(phase)") }
        phase = .collecting([:])
    }

    /// Sends what was collected: even where the server already uses the device, PulseAudio then holds
    /// it as the configured default, and no longer picks a newly arrived device by its own priorities
    /// (a Bluetooth card's new sink in a profile switch, say) before the agent has decided.
    mutating func sendCollected(current server: ServerInfo?, _ out: inout Outbox) {
        guard case .collecting(let wanted) = phase else { preconditionFailure("the defaults collected were sent with no listing begun") }
        phase = .steady
        for (direction, name) in wanted.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let current = server?.defaultDeviceName(direction)
            set(name, direction, changes: name != current, &out)
        }
    }

    /// `changes` false when the server uses the device already (no change comes back).
    mutating func set(_ name: String, _ direction: Direction, changes: Bool, _ out: inout Outbox) {
        if changes { ours[direction, default: []].append(name); ours[direction] = ours[direction]!.suffix(8) }
        out.send(.setDefaultDevice(name, direction), for: .other("set the default \(direction) device to \(name)"))
        out.log(.info) { ("default device", ["direction": "\(direction)", "device": "\(name)"]) }
    }

    /// The server reports its defaults changed.
    mutating func serverChanged(from old: ServerInfo, to new: ServerInfo, in snapshot: Snapshot, _ out: inout Outbox) {
        for (direction, before, after) in [(Direction.output, old.defaultSinkName, new.defaultSinkName),
                                           (.input, old.defaultSourceName, new.defaultSourceName)] {
            guard let name = after, name != before else { continue }
            // (The server moved: our request came back, or what it did instead is judged below.)
            awaited[direction] = nil
            let mine = ours[direction] ?? []
            out.log(.debug) { ("the server's default changed", ["direction": "\(direction)", "from": "\(before ?? "none")",
                                                                "to": "\(name)", "ours": "\(mine)"]) }
            if let i = mine.firstIndex(of: name) {
                ours[direction] = Array(mine[(i + 1)...])  // our own request coming back
            } else {
                let there = before.map { b in snapshot.routableDevices.contains { $0.name == b } } ?? false
                toJudge.append(Change(direction: direction, previous: there ? before : nil, new: name))
            }
        }
    }

    /// The changes that were not ours, once the batch they came in is through, for the core: each that
    /// still stands, to a device the routes know, with whether the device it replaced is still there.
    mutating func notOurs(in snapshot: Snapshot, _ out: inout Outbox) -> [PolicyEvent] {
        let judging = toJudge
        toJudge = []
        var told: [PolicyEvent] = []
        for change in judging {
            let (direction, previous, new) = (change.direction, change.previous, change.new)
            guard snapshot.routableDevices.contains(where: { $0.name == new }) else { continue }
            let current = snapshot.server?.defaultDeviceName(direction)
            guard current == new else { continue }  // superseded meanwhile
            let there = previous.map { p in snapshot.routableDevices.contains { $0.name == p } } ?? false
            out.log(.info) { ("the default device changed, not at our request", ["direction": "\(direction)", "device": "\(new)",
                                                                                 "the device it replaced": there ? "still there" : "gone"]) }
            told.append(.defaultDeviceChanged(direction, to: new, previousStillThere: there))
        }
        return told
    }

    /// The server went away: nothing of ours is on its way back.
    mutating func serverLost() {
        ours = [:]
        awaited = [:]
        toJudge = []
    }
}

import Logging
import ServerModel

/// PulseAudio's own policy modules would fight the agent: role-cork, role-ducking and switch-on-connect
/// cork, duck and switch on their own, so they are unloaded while the agent runs and loaded again when
/// it stops. module-bluetooth-policy's `auto_switch` would switch a headset to hands-free for any
/// recording with the phone role, and back, on its own schedule: while the agent runs the module is
/// loaded again with `auto_switch=0` (its other duties stay), and with its own arguments once the agent
/// stops. module-switch-on-port-available only selects the port a jack brings on its own card: the
/// agent sees that as the device's new port and routes by it, so the two cooperate. (pipewire-pulse
/// has none of these; WirePlumber honours the default devices the agent sets, as the user's choice.)
///
/// Every module is journaled before it is unloaded: killed in between, the next agent finds it still
/// loaded (and takes it over itself) rather than gone with no record of it.
struct ModuleTakeover: Hashable, Sendable {
    /// One command of taking over or giving back, for its answer.
    enum Step: Hashable, Sendable {
        case unload(name: String, argument: String)
        case loadCopy(name: String, argument: String)
        /// The copy is unloaded first, and the module loaded again once that is answered: PulseAudio
        /// unloads a module a moment after it answers, and a second module-bluetooth-policy cannot load
        /// while the first is there.
        case unloadCopy(name: String, argument: String)
        case giveBack
    }

    struct Taken: Hashable, Sendable {
        var name: String
        /// The module's own arguments, to load it with again.
        var argument: String
        /// The copy loaded in its place while the agent runs, if any.
        var copy: UInt32?
    }

    /// Where the take-over stands:
    ///
    ///     off (not asked to: `--keep-server-modules`)
    ///     taking --giveBack (the agent stops)--> givingBack
    ///
    /// Taking: each connection takes over the modules the server has. Giving back: what was taken is
    /// loaded again as it was, and a take-over still under way is given back as soon as it is answered
    /// (a connection during the stop takes over again, and gives back what it took).
    enum Phase: Hashable, Sendable {
        case off
        case taking
        case givingBack
    }
    private(set) var phase: Phase
    /// What the agent has taken over on this server, in the order taken.
    private(set) var taken: [Taken] = []

    init(enabled: Bool) { phase = enabled ? .taking : .off }

    static let unloaded = ["module-role-cork", "module-role-ducking", "module-switch-on-connect"]
    static let bluetoothPolicy = "module-bluetooth-policy"

    /// Connected (again): what a previous run left taken over is ours to give back; the modules the
    /// server has now are taken over (after a server restart, copies loaded into the old one are gone).
    mutating func connected(_ snapshot: Snapshot, leftovers: [(module: String, argument: String)], _ out: inout Outbox) {
        guard phase != .off else { return }
        taken.removeAll { $0.copy.map { snapshot.modules[$0]?.name == nil } ?? false }
        for (name, argument) in leftovers where !taken.contains(where: { $0.name == name && $0.argument == argument }) {
            if name == Self.bluetoothPolicy,
               let copy = snapshot.modules.values.first(where: { $0.name == name && $0.argument != argument }) {
                taken.append(Taken(name: name, argument: argument, copy: copy.id))
            } else if !snapshot.modules.values.contains(where: { $0.name == name }) {
                taken.append(Taken(name: name, argument: argument))
            }
        }
        for module in snapshot.modules.values.sorted(by: { $0.id < $1.id }) {
            if Self.unloaded.contains(module.name) {
                out.journal(.tookOver(module: module.name, argument: module.argument))
                out.send(.unloadModule(module.id), for: .module(.unload(name: module.name, argument: module.argument)))
            } else if module.name == Self.bluetoothPolicy, !taken.contains(where: { $0.copy == module.id }) {
                let argument = Self.argument(module.argument, setting: "auto_switch", to: "0")
                guard argument != module.argument else { continue }
                out.journal(.tookOver(module: module.name, argument: module.argument))
                out.send(.unloadModule(module.id), for: .module(.unload(name: module.name, argument: module.argument)))
            }
        }
    }

    mutating func answered(_ step: Step, _ result: Result<ServerAnswer, PulseError>, _ out: inout Outbox) {
        guard phase != .off else { preconditionFailure("a module command answered while the take-over is off: \(step)") }
        if case .unloadCopy(let name, let argument) = step {
            if case .failure(let error) = result { out.log(.warning) { ("could not unload our copy of \(name)", ["error": "\(error)"]) } }
            out.send(.loadModule(name: name, arguments: argument), for: .module(.giveBack))
            return
        }
        if phase == .givingBack {
            switch (step, result) {
            case (.unload(let name, let argument), .success), (.loadCopy(let name, let argument), .failure):
                out.send(.loadModule(name: name, arguments: argument), for: .module(.giveBack))
            case (.loadCopy(let name, let argument), .success(.index(let copy))):
                out.send(.unloadModule(copy), for: .module(.unloadCopy(name: name, argument: argument)))
            default: break
            }
            return
        }
        switch (step, result) {
        case (.unload(let name, let argument), .success):
            if name == Self.bluetoothPolicy {
                out.send(.loadModule(name: name, arguments: Self.argument(argument, setting: "auto_switch", to: "0")),
                         for: .module(.loadCopy(name: name, argument: argument)))
            } else {
                if !taken.contains(where: { $0.name == name && $0.argument == argument }) { taken.append(Taken(name: name, argument: argument)) }
                out.log(.notice) { ("took over from the server's module", ["module": "\(name)"]) }
            }
        case (.loadCopy(let name, let argument), .success(let answer)):
            let copy: UInt32? = if case .index(let index) = answer { index } else { nil }
            taken.append(Taken(name: name, argument: argument, copy: copy))
            out.log(.notice) { ("took over the server's Bluetooth profile switching", ["module": "\(name)"]) }
        case (.loadCopy(let name, let argument), .failure(let error)):
            taken.append(Taken(name: name, argument: argument))
            out.log(.warning) { ("could not load \(name) again", ["error": "\(error)"]) }
        case (.unload(let name, _), .failure(let error)):
            out.log(.warning) { ("could not unload \(name)", ["error": "\(error)"]) }
        case (.giveBack, .failure(let error)):
            out.log(.warning) { ("could not give a module back", ["error": "\(error)"]) }
        case (.giveBack, .success), (.unloadCopy, _):
            break
        }
    }

    /// Stopping: every module back as it was.
    mutating func giveBack(_ out: inout Outbox) {
        guard phase != .off else { return }
        phase = .givingBack
        for module in taken {
            if let copy = module.copy {
                out.send(.unloadModule(copy), for: .module(.unloadCopy(name: module.name, argument: module.argument)))
            } else {
                out.send(.loadModule(name: module.name, arguments: module.argument), for: .module(.giveBack))
            }
        }
        taken = []
    }

    /// A module argument string with one `key=value` set (added if absent).
    static func argument(_ argument: String, setting key: String, to value: String) -> String {
        var parts = argument.split(separator: " ").map(String.init)
        if let i = parts.firstIndex(where: { $0.hasPrefix("\(key)=") }) { parts[i] = "\(key)=\(value)" } else { parts.append("\(key)=\(value)") }
        return parts.joined(separator: " ")
    }
}

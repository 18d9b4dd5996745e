package import AgentTower
package import AudioPolicy
package import ServerModel

/// A sound server in memory, for unit tests of the agent's shell: devices, clients and streams as the
/// real servers report them, commands carried out at once with their events, and the server's memory
/// of streams the way each real server keeps it (what the README's "differences between the servers"
/// says, and the integration tests check on the real ones):
///
/// - PulseAudio: the memory is given to a stream as it is created; every mute or volume a client sets
///   is saved (ours included); ext-stream-restore reads, writes and deletes it.
/// - WirePlumber 0.4 (pipewire-pulse 0.3): the same, but a delete does nothing.
/// - WirePlumber 0.5 (pipewire-pulse 1.x): the memory cannot be read, written or deleted through the
///   pulse protocol at all; a stream of the key given a volume and mute saves them (what the agent's
///   write through its own streams does).
package final class InMemoryServer {
    package enum Kind: CaseIterable, CustomStringConvertible {
        case pulseAudio, wirePlumber04, wirePlumber05
        package var description: String {
            switch self {
            case .pulseAudio: "PulseAudio"
            case .wirePlumber04: "WirePlumber 0.4"
            case .wirePlumber05: "WirePlumber 0.5"
            }
        }
    }

    package let kind: Kind
    /// This many requests for a default device are answered and not carried out.
    package var defaultsIgnored = 0
    package private(set) var snapshot = Snapshot()
    /// What the server remembers per app or role.
    package var memory: [String: StreamRestoreEntry] = [:]
    /// WirePlumber 0.4: what pipewire-pulse last wrote to the "route-settings" metadata for a key.
    /// WirePlumber takes a write into its memory only when it changes that value; a stream's own save
    /// goes to the memory, not there.
    private var routeSettings: [String: StreamRestoreEntry] = [:]
    /// Events not yet delivered, in order.
    package private(set) var events: [PulseEvent] = []
    private var nextIndex: UInt32 = 0
    /// PipeWire under load: WirePlumber's memory and the link reach the client in one report (a new
    /// stream's first report with a device has the remembered mute and volume in it).
    package var linksWithMemory = false
    /// PipeWire: a new stream stays unlinked, at volume 0 and with no device (as pipewire-pulse shows it
    /// until WirePlumber links it), until `link` is called; what the agent does to it meanwhile (a move)
    /// is carried out on it, and WirePlumber's memory comes with the link. On WirePlumber 0.5 it is
    /// meanwhile shown running, as pipewire-pulse 1.4 shows the client's own cork state (0.3.65 shows an
    /// unlinked stream corked).
    package var linksLater = false
    /// Per stream left unlinked: the stream as it would have come linked, and whether its app asked for a volume.
    private var waitingForLink: [UInt32: (linked: AudioStream, asked: Bool)] = [:]
    /// Commands the server refuses (for tests of failures).
    package var refuse: (ServerCommand) -> Bool = { _ in false }
    /// Tell of a module after the sink it makes, as PulseAudio does (default: before).
    package var modulesAfterTheirSinks = false
    /// A server too busy to answer (pipewire-pulse under load): while wedged, every command is told it
    /// timed out, and carried out later, in order, when `unwedge()` is called.
    package private(set) var wedged = false
    /// While set, a write of the memory through streams takes effect only at `landWrites` (it reaches
    /// WirePlumber after a change the user made meanwhile, which it then overwrites).
    package var writesLandLate = false
    private var lateWrites: [StreamRestoreEntry] = []
    private var backlog: [ServerCommand] = []

    package init(_ kind: Kind) {
        self.kind = kind
        snapshot.server = ServerInfo(name: kind == .pulseAudio ? "pulseaudio"
                                         : kind == .wirePlumber04 ? "PulseAudio (on PipeWire 0.3.65)" : "PulseAudio (on PipeWire 1.4.2)",
                                     version: "16.1", defaultSinkName: nil, defaultSourceName: nil)
        plug(sink: "builtin_speaker", description: "Built-in Audio Analog Stereo",
             properties: ["device.bus": "pci", "device.form_factor": "internal", "device.class": "sound"])
        plug(source: "builtin_mic", description: "Built-in Audio Internal Microphone",
             properties: ["device.bus": "pci", "device.form_factor": "internal", "device.class": "sound"])
        snapshot.server?.defaultSinkName = "builtin_speaker"
        snapshot.server?.defaultSourceName = "builtin_mic"
        events = []
    }

    private func index() -> UInt32 {
        defer { nextIndex += 1 }
        return nextIndex
    }

    /// Takes the events to deliver.
    package func takeEvents() -> [PulseEvent] {
        defer { events = [] }
        return events
    }

    package func connectedEvent() -> PulseEvent { .connected(snapshot) }

    // MARK: what the world does

    @discardableResult
    package func plug(sink name: String, description: String, properties: Properties = [:]) -> UInt32 {
        let id = index()
        let sink = Device(id: id, direction: .output, name: name, description: description, properties: properties)
        snapshot.sinks[id] = sink
        events.append(.added(.sink(sink)))
        return id
    }

    /// A sink goes away: its streams move to the speaker, which becomes the default if it was.
    package func unplug(sink id: UInt32) {
        guard let sink = snapshot.sinks.removeValue(forKey: id) else { return }
        let fallback = snapshot.sinks.values.first { $0.name == "builtin_speaker" }
        if snapshot.server?.defaultSinkName == sink.name, let fallback {
            let old = snapshot.server!
            snapshot.server?.defaultSinkName = fallback.name
            events.append(.changed(old: .server(old), new: .server(snapshot.server!)))
        }
        for var stream in snapshot.sinkInputs.values where stream.device == id {
            stream.device = fallback?.id
            store(stream, new: false)
        }
        events.append(.removed(.sink(sink)))
    }

    /// A Bluetooth card with an A2DP and a hands-free profile (no devices of its own: enough for what
    /// the tower does with cards it finds switched).
    @discardableResult
    package func plug(bluetoothCard name: String, active: String) -> UInt32 {
        let id = index()
        let card = Card(id: id, name: name, profiles: ["a2dp-sink", "headset-head-unit"], activeProfile: active,
                        properties: ["device.api": "bluez5", "device.bus": "bluetooth"])
        snapshot.cards[id] = card
        events.append(.added(.card(card)))
        return id
    }

    @discardableResult
    package func plug(source name: String, description: String, properties: Properties = [:]) -> UInt32 {
        let id = index()
        let source = Device(id: id, direction: .input, name: name, description: description, properties: properties)
        snapshot.sources[id] = source
        events.append(.added(.source(source)))
        return id
    }

    /// An app starts a stream (its own client); returns the stream's index.
    @discardableResult
    /// `device`: the device the app asks for itself (else the server's memory of its key, else the default).
    package func play(_ properties: Properties, name: String = "Player", pid: Int = 4242, binary: String = "player",
              direction: Direction = .output, volume: ChannelVolumes? = nil, device asked: String? = nil) -> UInt32 {
        let clientID = index()
        let client = Client(id: clientID, name: name, properties: [
            "application.name": name, "application.process.id": "\(pid)", "application.process.binary": binary,
        ])
        snapshot.clients[clientID] = client
        events.append(.added(.client(client)))
        var props = properties
        props["application.name"] = name
        props["application.process.id"] = "\(pid)"
        props["application.process.binary"] = binary
        let key = Self.memoryKey(props, direction: direction)
        props["module-stream-restore.id"] = key
        // Where the server remembers the key's streams go, if that device is there; else the default.
        let device = asked.flatMap { snapshot.device(named: $0, direction)?.id }
            ?? memory[key]?.device.flatMap { snapshot.device(named: $0, direction)?.id }
            ?? (direction == .output ? snapshot.defaultSink?.id : snapshot.defaultSource?.id)
        var stream = AudioStream(id: index(), direction: direction, name: name, client: clientID, device: device,
                                 volume: volume, properties: props)
        // pipewire-pulse announces a new stream corked, unlinked, at volume 0; WirePlumber gives it the
        // memory, then links it. PulseAudio gives the memory as the stream is created.
        let linked = stream
        if kind != .pulseAudio {
            stream.device = nil
            stream.isCorked = true
            stream.volume = ChannelVolumes(channels: stream.channelMap.count, volume: .muted)
            store(stream, new: true)
            if linksLater {
                waitingForLink[stream.id] = (linked, volume != nil)
                if kind == .wirePlumber05 && !linked.isCorked {
                    stream.isCorked = false
                    store(stream, new: false)
                }
                return stream.id
            }
            stream.volume = linked.volume
        }
        if volume == nil { giveMemory(to: &stream) }
        if kind != .pulseAudio {
            if !linksWithMemory { store(stream, new: false) }
            stream.device = linked.device
            stream.isCorked = linked.isCorked
            store(stream, new: false)
        } else {
            store(stream, new: true)
        }
        return stream.id
    }

    /// WirePlumber links a stream `play` left unlinked (`linksLater`): its memory of the stream's key as
    /// it is now, and the device the stream was moved to meanwhile, else the one it was going to.
    package func link(_ id: UInt32) {
        guard var stream = stream(id), let waiting = waitingForLink.removeValue(forKey: id) else { return }
        stream.volume = waiting.linked.volume
        if !waiting.asked { giveMemory(to: &stream) }
        stream.device = stream.device ?? waiting.linked.device
        stream.isCorked = waiting.linked.isCorked
        store(stream, new: false)
    }

    /// What the server remembers of the stream's key, given to it (its mute, and its volume if one).
    private func giveMemory(to stream: inout AudioStream) {
        guard let key = stream.properties["module-stream-restore.id"], let remembered = memory[key] else { return }
        stream.isMuted = remembered.isMuted
        if let v = remembered.volume {
            stream.volume = v.values.count == stream.channelMap.count ? v : ChannelVolumes(channels: stream.channelMap.count, volume: v.overall)
        }
    }

    /// The output half of a loopback inside the server (a role sink of WirePlumber's role-based policy,
    /// a filter chain): no client of the PulseAudio protocol, a link group, on the default sink.
    package func loopbackOutput(name: String) -> UInt32 {
        let stream = AudioStream(id: index(), direction: .output, name: name, client: nil, device: snapshot.defaultSink?.id,
                                 volume: nil, properties: ["node.name": name, "node.link-group": "loopback-1-11", "node.passive": "true",
                                                           "media.role": "Loopback"])
        store(stream, new: true)
        return stream.id
    }

    /// The app stops its stream.
    package func stop(_ id: UInt32, direction: Direction = .output) {
        guard let stream = self.stream(id, direction) else { return }
        if direction == .output { snapshot.sinkInputs[id] = nil } else { snapshot.sourceOutputs[id] = nil }
        events.append(.removed(direction == .output ? .sinkInput(stream) : .sourceOutput(stream)))
        if let client = stream.client, let c = snapshot.clients.removeValue(forKey: client) { events.append(.removed(.client(c))) }
    }

    /// A sink's monitor source (what a screen recorder captures).
    @discardableResult
    package func plugMonitor(of sink: UInt32, name: String) -> UInt32 {
        let id = index()
        let source = Device(id: id, direction: .input, name: name, description: "Monitor of \(name)", monitorOf: sink)
        snapshot.sources[id] = source
        events.append(.added(.source(source)))
        return id
    }

    /// The user moves a capture stream to another source (pavucontrol's Recording tab).
    package func moveCapture(_ id: UInt32, to source: UInt32) {
        guard var stream = self.stream(id, .input) else { return }
        stream.device = source
        store(stream, new: false)
    }

    /// The user (a mixer) sets a stream's volume or mute: saved like any client's change.
    package func userSetVolume(_ id: UInt32, _ fraction: Double) {
        guard var stream = self.stream(id, .output) else { return }
        stream.volume = ChannelVolumes(channels: stream.channelMap.count, volume: Volume(fraction: fraction))
        store(stream, new: false)
        save(stream)
    }

    package func userSetMute(_ id: UInt32, _ muted: Bool) {
        guard var stream = self.stream(id, .output) else { return }
        stream.isMuted = muted
        store(stream, new: false)
        save(stream)
    }

    /// The app pauses or plays its stream (a player's pause corks it).
    package func setCorked(_ id: UInt32, _ corked: Bool) {
        guard var stream = self.stream(id, .output), stream.isCorked != corked else { return }
        stream.isCorked = corked
        store(stream, new: false)
    }

    /// The server dies and comes back: every stream and client gone; the memory stays.
    package func restart() {
        snapshot.sinkInputs = [:]
        snapshot.sourceOutputs = [:]
        snapshot.clients = [:]
        events.append(.disconnected(reason: "Connection terminated"))
        events.append(.connected(snapshot))
    }

    /// The agent's connection is taken as lost while the server lives on (it stalled, and the agent stopped
    /// waiting): the streams stay as they are, with what the agent set on them.
    package func dropConnection(reason: String = "the sound server stopped answering (no answer for 10 s)") {
        events.append(.disconnected(reason: reason))
    }

    /// The agent connects again to the same server: told everything as it is.
    package func connectAgain() { events.append(.connected(snapshot)) }

    /// A new client connects (a restarted agent): it is told everything as it is.
    package func forgetEvents() { events = [] }

    package func stream(_ id: UInt32, _ direction: Direction = .output) -> AudioStream? {
        direction == .output ? snapshot.sinkInputs[id] : snapshot.sourceOutputs[id]
    }

    // MARK: commands

    package func perform(_ command: ServerCommand) -> Result<ServerAnswer, PulseError> {
        if refuse(command) { return .failure(.failed(operation: command.description, reason: "Access denied")) }
        if wedged {
            backlog.append(command)
            return .failure(.timedOut(operation: command.description))
        }
        return carryOut(command)
    }

    package func wedge() { wedged = true }

    /// The writes through streams held back by `writesLandLate` take effect, in order.
    package func landWrites() {
        for entry in lateWrites { saveThroughStream(entry) }
        lateWrites = []
    }

    private func saveThroughStream(_ entry: StreamRestoreEntry) {
        // A stream of the key given the values saves them, on every server (its volume only if it has
        // one: a stream keeps the volume it was given otherwise).
        var saved = entry
        saved.volume = entry.volume ?? memory[entry.name]?.volume
        saved.device = memory[entry.name]?.device
        memory[entry.name] = saved
    }

    /// The server catches up: what it was sent while wedged is carried out, in order.
    package func unwedge() {
        wedged = false
        for command in backlog { _ = carryOut(command) }
        backlog = []
    }

    /// The server serves again having dropped what it was sent while wedged (the connection it came on
    /// was closed before it read it).
    package func unwedgeDroppingBacklog() {
        wedged = false
        backlog = []
    }

    private func carryOut(_ command: ServerCommand) -> Result<ServerAnswer, PulseError> {
        switch command {
        case .setStreamMute(let s, let muted):
            guard var stream = stream(s.index, s.direction) else { return .failure(.failed(operation: command.description, reason: "No such entity")) }
            stream.isMuted = muted
            store(stream, new: false)
            save(stream)
        case .setStreamVolume(let s, let volume):
            guard var stream = stream(s.index, s.direction) else { return .failure(.failed(operation: command.description, reason: "No such entity")) }
            stream.volume = volume
            store(stream, new: false)
            save(stream)
        case .moveStream(let s, let name):
            guard var stream = stream(s.index, s.direction), let device = snapshot.device(named: name, s.direction) else {
                return .failure(.failed(operation: command.description, reason: "No such entity"))
            }
            // (PulseAudio does nothing of a move to the device a stream is on: what it remembers stays.)
            if kind == .pulseAudio && stream.device == device.id { break }
            stream.device = device.id
            store(stream, new: false)
            // Both servers remember where a key's stream was moved (a move to the default: nowhere).
            if let key = stream.properties["module-stream-restore.id"] {
                let isDefault = name == snapshot.server?.defaultDeviceName(s.direction)
                var entry = memory[key] ?? StreamRestoreEntry(name: key, channelMap: stream.channelMap, volume: stream.volume, device: nil, isMuted: stream.isMuted)
                entry.device = isDefault ? nil : name
                memory[key] = entry
            }
        case .killStream(let s):
            stop(s.index, direction: s.direction)
        case .setDefaultDevice(let name, let direction):
            // (Taken and not carried out, as WirePlumber 0.5 once did under load with a device just plugged.)
            if defaultsIgnored > 0 {
                defaultsIgnored -= 1
                return .success(.done)
            }
            let old = snapshot.server!
            if direction == .output { snapshot.server?.defaultSinkName = name } else { snapshot.server?.defaultSourceName = name }
            if old != snapshot.server { events.append(.changed(old: .server(old), new: .server(snapshot.server!))) }
        case .readStreamRestore:
            guard kind != .wirePlumber05 else { return .success(.restoreEntries([])) }
            return .success(.restoreEntries(memory.values.sorted { $0.name < $1.name }))
        case .writeStreamRestore(let entries, _, _):
            guard kind != .wirePlumber05 else { break }
            for entry in entries {
                var entry = entry
                if kind == .wirePlumber04 {
                    guard routeSettings[entry.name] != entry else { continue }
                    routeSettings[entry.name] = entry
                    // (WirePlumber takes no device from route-settings: its target is left as it was.)
                    entry.device = memory[entry.name]?.device
                }
                memory[entry.name] = entry
            }
        case .writeMemoryThroughStream(let entry, let device):
            if writesLandLate { lateWrites.append(entry) } else { saveThroughStream(entry) }
            if case .set(let name) = device { memory[entry.name]?.device = name }
        case .deleteStreamRestore(let names):
            guard kind == .pulseAudio else { break }
            for name in names { memory[name] = nil }
        case .loadModule(let name, let arguments):
            let id = index()
            snapshot.modules[id] = Module(id: id, name: name, argument: arguments)
            let moduleEvent = PulseEvent.added(.module(snapshot.modules[id]!))
            if !modulesAfterTheirSinks { events.append(moduleEvent) }
            // A combine sink: a filter sink of the module's (its streams to the slaves are not modelled).
            if name == "module-combine-sink", let sinkName = arguments.split(separator: " ").first(where: { $0.hasPrefix("sink_name=") })?.dropFirst(10) {
                let sinkID = index()
                var sink = Device(id: sinkID, direction: .output, name: String(sinkName), description: "Simultaneous output",
                                  properties: ["device.class": "filter"])
                sink.ownerModule = id
                snapshot.sinks[sinkID] = sink
                events.append(.added(.sink(sink)))
            }
            if modulesAfterTheirSinks { events.append(moduleEvent) }
            return .success(.index(id))
        case .unloadModule(let id):
            guard let module = snapshot.modules.removeValue(forKey: id) else { return .failure(.failed(operation: command.description, reason: "No such entity")) }
            for sink in snapshot.sinks.values where sink.ownerModule == id { unplug(sink: sink.id) }
            events.append(.removed(.module(module)))
        case .setCardProfile(let name, let profile):
            guard let old = snapshot.cards.values.first(where: { $0.name == name }),
                  old.profiles.contains(where: { $0.name == profile }) else {
                return .failure(.failed(operation: command.description, reason: "No such entity"))
            }
            var card = old
            card.activeProfile = profile
            snapshot.cards[card.id] = card
            if old != card { events.append(.changed(old: .card(old), new: .card(card))) }
        case .setActivePort, .updateClientProperties:
            break
        }
        return .success(.done)
    }

    // MARK: inside

    private func store(_ stream: AudioStream, new: Bool) {
        let old = stream.direction == .output ? snapshot.sinkInputs.updateValue(stream, forKey: stream.id)
            : snapshot.sourceOutputs.updateValue(stream, forKey: stream.id)
        let entity: Entity = stream.direction == .output ? .sinkInput(stream) : .sourceOutput(stream)
        if let old, !new {
            if old != stream { events.append(.changed(old: stream.direction == .output ? .sinkInput(old) : .sourceOutput(old), new: entity)) }
        } else {
            events.append(.added(entity))
        }
    }

    /// Both servers save every client's mute and volume of a stream under its key.
    private func save(_ stream: AudioStream) {
        guard let key = stream.properties["module-stream-restore.id"] else { return }
        memory[key] = StreamRestoreEntry(name: key, channelMap: stream.channelMap, volume: stream.volume, device: memory[key]?.device,
                                         isMuted: stream.isMuted)
    }

    /// How both servers key their memory: by role if the stream has one, else by app.
    package static func memoryKey(_ properties: Properties, direction: Direction) -> String {
        let prefix = direction == .output ? "sink-input" : "source-output"
        if let role = properties["media.role"] { return "\(prefix)-by-media-role:\(role)" }
        return "\(prefix)-by-application-name:\(properties["application.name"] ?? "")"
    }
}

/// The control tower on an in-memory server, with a clock the test moves: every command is carried out
/// at once, its answer and events delivered in the next batch, until nothing is left to deliver.
package struct TowerWorld {
    package var tower: ControlTower
    package let server: InMemoryServer
    package var now: Duration = .seconds(100)
    /// Everything the tower logged, in words.
    package var log: [String] = []
    private var answers: [TowerInput] = []
    /// While set, the server's answers wait (a slow server: a write through streams, say) until
    /// `releaseAnswers`.
    package var holdsAnswers = false
    /// Media players on an imitation session bus, by name: what the tower's commands do to them.
    package var playerStatuses: [String: PlaybackStatus] = [:]
    /// The commands the tower sent to players, in order.
    package var playerCommands: [String] = []
    /// The stream each player plays (corked while it is not playing).
    package var playerStreams: [String: UInt32] = [:]
    private var heldAnswers: [TowerInput] = []
    /// The tower's answers to apps' calls, by token, and what it told declared sessions (in order).
    package var appReplies: [UInt64: AppReply] = [:]
    package var appSignals: [(path: String, SessionNotification)] = []
    private var nextToken: UInt64 = 0
    /// While set, the players are slow: the tower's commands reach them at `playersCatchUp`.
    package var playersAreSlow = false
    private var commandsOnTheirWay: [(String, PlayerCommand)] = []

    /// The streams the tower meters now, and those that write silence (the others sound).
    package var metered: Set<UInt32> = []
    package var silent: Set<UInt32> = []
    /// The captures whose microphone is metered, and whether someone speaks into it.
    package var meteredMicrophones: Set<UInt32> = []
    package var speaking = false

    /// The positions the agent's MPRIS player said it jumped to (`Seeked`), in order.
    package var nowPlayingSeeks: [Duration] = []
    /// What the agent's MPRIS player was told to show, in order (`TowerEffect.nowPlayingChanged`).
    package var nowPlayingShown: [NowPlayingProperties] = []
    /// What the tower last asked to keep of the user's settings (`TowerEffect.keep`).
    package var kept: KeptSettings?

    /// The journal the tower's changes go to, when there is one (for a successor after a "kill -9").
    package var journalFile: (any JournalKeeping)?
    /// Every effect the tower asked for in the last `run` (and the runs `deliver` and `advance` make), in order.
    package var effects: [TowerEffect] = []

    package init(_ kind: InMemoryServer.Kind, settings: AgentSettings = AgentSettings(), policies: [AppPolicy] = [],
         leftovers: JournalLeftovers? = nil, parents: [Int: Int] = [:]) {
        self.init(server: InMemoryServer(kind), settings: settings, policies: policies, leftovers: leftovers, parents: parents)
    }

    /// A tower on a server that is already there (a restarted agent's), with what a predecessor left.
    package init(server: InMemoryServer, settings: AgentSettings = AgentSettings(), policies: [AppPolicy] = [],
         leftovers: JournalLeftovers? = nil, kept: KeptSettings? = nil, journal: (any JournalKeeping)? = nil, now: Duration = .seconds(100),
         parents: [Int: Int] = [:]) {
        self.server = server
        self.now = now
        journalFile = journal
        tower = ControlTower(settings: settings, parentProcess: { parents[$0] })
        var first: [TowerInput] = [.policies(PolicySet(policies: policies, errors: []))]
        if let leftovers { first.append(.recovered(leftovers)) }
        if let kept { first.append(.kept(kept, problem: nil)) }
        first.append(.server(server.connectedEvent()))
        run(first)
    }

    /// Delivers what the server has to say (and the answers to commands), until it is quiet.
    package mutating func deliver() { run([]) }

    package mutating func run(_ inputs: [TowerInput]) {
        var batch = inputs + answers + server.takeEvents().map(TowerInput.server)
        answers = []
        effects = []
        var rounds = 0
        while !batch.isEmpty {
            rounds += 1
            precondition(rounds < 10_000, "the tower and the server never settle")
            // (As the agent's loop: the mutes a new stream brings, decided ahead, carried out first.)
            let ahead = tower.reflex(batch, at: now)
            effects += ahead
            for effect in ahead { perform(effect) }
            let told = tower.handle(batch, at: now)
            effects += told
            for effect in told { perform(effect) }
            tower.noteStateTimes()
            batch = answers + server.takeEvents().map(TowerInput.server)
            answers = []
        }
    }

    /// Carries out effects the tower returned to a caller of `tower.handle` (the benchmark's, which
    /// times the handling alone), then delivers what follows.
    package mutating func carryOut(_ effects: [TowerEffect]) {
        for effect in effects { perform(effect) }
        deliver()
    }

    private mutating func perform(_ effect: TowerEffect) {
        switch effect {
        case .send(let id, let command):
            log.append("\(now) send \(command)")
            let answer = TowerInput.answered(id, server.perform(command))
            if holdsAnswers { heldAnswers.append(answer) } else { answers.append(answer) }
        case .journal(let change):
            journalFile?.keep(change)
        case .routeLog: break
        case .log(let line):
            let (message, metadata) = line.said
            log.append("\(now) \(message) \(metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))")
        case .player(let name, let command):
            playerCommands.append("\(command.rawValue) \(name)")
            if playersAreSlow { commandsOnTheirWay.append((name, command)) } else { carryOut(command, by: name) }
        case .appReply(let token, let reply):
            appReplies[token] = reply
        case .appSignal(let path, let notification):
            appSignals.append((path, notification))
        case .meter(let stream, let on) where stream.direction == .input:
            log.append("\(now) meter microphone of \(stream) \(on)")
            if on {
                meteredMicrophones.insert(stream.index)
                // (The microphone's first block: silent unless someone speaks.)
                answers.append(.sound(speaking ? .heard(stream: stream.index, direction: .input) : .silent(stream: stream.index, direction: .input)))
            } else {
                meteredMicrophones.remove(stream.index)
            }
        case .meter(let reference, let on):
            let stream = reference.index
            log.append("\(now) meter \(stream) \(on)")
            if on {
                metered.insert(stream)
                // (A meter's first block: audible unless the stream writes silence.)
                answers.append(.sound(silent.contains(stream) ? .silent(stream: stream) : .heard(stream: stream)))
            } else {
                metered.remove(stream)
            }
        case .keep(let settings):
            kept = settings
        case .nowPlayingSeeked(let position):
            nowPlayingSeeks.append(position)
        case .nowPlayingChanged(let shown):
            nowPlayingShown.append(shown)
        case .remote(let name, let command):
            playerCommands.append("\(command.rawValue) \(name)")
            carryOut(command, by: name, answering: false)
        case .finished: break
        }
    }

    /// The stream starts (true) or stops writing sound; its meter, if it has one, says so.
    package mutating func sounds(_ stream: UInt32, _ heard: Bool) {
        if heard { silent.remove(stream) } else { silent.insert(stream) }
        if metered.contains(stream) { run([.sound(heard ? .heard(stream: stream) : .silent(stream: stream))]) }
    }

    /// Someone starts (true) or stops speaking into the microphone; the meters of the captures on it
    /// say so (silent for `silentFor` already, when it stops).
    package mutating func speaks(_ on: Bool, silentFor: Duration = .zero) {
        speaking = on
        let reports: [TowerInput] = meteredMicrophones.sorted().map {
            .sound(on ? .heard(stream: $0, direction: .input) : .silent(stream: $0, for: silentFor, direction: .input))
        }
        if !reports.isEmpty { run(reports) }
    }

    /// An app's call on the imitation session bus, and the tower's answer.
    package mutating func app(_ client: AppClient, _ request: AppRequest) -> AppReply? {
        nextToken += 1
        let token = nextToken
        run([.app(.call(token: token, from: client, request))])
        return appReplies.removeValue(forKey: token)
    }

    /// A player does what it was told, and says so.
    private mutating func carryOut(_ command: PlayerCommand, by name: String, answering: Bool = true) {
        // (A player does what a real one does: Next and Previous leave it as it was.)
        let status: PlaybackStatus? = switch command {
        case .pause: .paused
        case .play: .playing
        case .playPause: playerStatuses[name] == .playing ? .paused : .playing
        case .stop: .stopped
        case .next, .previous: playerStatuses[name]
        }
        if let status, playerStatuses[name] != nil, playerStatuses[name] != status {
            playerStatuses[name] = status
            if let stream = playerStreams[name] { server.setCorked(stream, status != .playing) }
            answers.append(.players(.statusChanged(name: name, status)))
        }
        if answering { answers.append(.playerAnswered(name: name, command, error: playerStatuses[name] == nil ? "no such player" : nil)) }
    }

    /// The slow players take the commands on their way, in order, and say what they did.
    package mutating func playersCatchUp() {
        playersAreSlow = false
        for (name, command) in commandsOnTheirWay { carryOut(command, by: name) }
        commandsOnTheirWay = []
        deliver()
    }

    /// A player comes on the imitation bus (owned by process `pid`).
    package mutating func playerAppears(_ name: String, pid: Int?, appID: String? = nil, _ status: PlaybackStatus, playing stream: UInt32? = nil) {
        if !tower.playerBusConnected { run([.players(.busConnected(address: "unix:path=/imitation"))]) }
        playerStatuses[name] = status
        playerStreams[name] = stream
        run([.players(.appeared(name: name, processID: pid, appID: appID, status: status))])
    }

    /// The user's hand on a player.
    package mutating func userSets(_ name: String, _ status: PlaybackStatus) {
        playerStatuses[name] = status
        if let stream = playerStreams[name] { server.setCorked(stream, status != .playing) }
        run([.players(.statusChanged(name: name, status))])
    }

    /// Moves the clock, delivering the ticks the tower asks for on the way.
    package mutating func advance(_ duration: Duration) {
        deliver()
        let end = now + duration
        while let deadline = tower.nextDeadline, deadline <= end {
            now = max(now, deadline)
            run([.tick])
        }
        now = end
        deliver()
    }

    package mutating func stop() { run([.stop]) }

    /// The answers held so far come, and whatever follows them.
    package mutating func releaseAnswers() {
        holdsAnswers = false
        answers += heldAnswers
        heldAnswers = []
        deliver()
    }

    package func stream(_ id: UInt32) -> AudioStream? { server.stream(id) }
    package func volume(_ id: UInt32) -> Double? { stream(id)?.volume.values.first?.fraction }
    package func muted(_ id: UInt32, _ direction: Direction = .output) -> Bool? { server.stream(id, direction)?.isMuted }
}

/// Where a world's tower journals its changes: the shell's journal file, in the shell's tests (the
/// tower's own tests keep none).
package protocol JournalKeeping: AnyObject {
    func keep(_ change: JournalChange)
}

/// Streams' properties as the apps in the tests set them.
package let music: Properties = ["media.role": "music"]
package let phone: Properties = ["media.role": "phone"]
package let reader: Properties = ["media.role": "a11y"]
package let mixer = AppPolicy(name: "mixer", match: .init(name: ["Mixer"]), configuration: SessionConfiguration(.playback, options: .mixWithOthers))

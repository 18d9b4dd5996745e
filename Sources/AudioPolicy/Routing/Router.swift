/// SPEC.md section 6, "Routing rules": which ports each session uses, why a route changed, the
/// default devices, stream moves and the Bluetooth hands-free switch.
extension PolicyMachine {
    // MARK: eligibility

    /// May a session of this configuration play to the port?
    static func mayPlay(to port: Port, _ c: SessionConfiguration) -> Bool {
        guard c.category.hasOutput, port.direction == .output, port.type != .virtual else { return false }
        let options = c.effectiveOptions
        switch port.type {
        case .airPlay, .network:
            // AirPlay and network sinks only where the category allows them.
            switch c.category {
            case .ambient, .soloAmbient, .playback: return true
            case .playAndRecord: return options.contains(.allowAirPlay)
            default: return false
            }
        case .bluetoothA2DP:
            // Output-only categories always may; recording ones with A2DP allowed, or hands-free
            // allowed (the headset is then switched to its hands-free profile).
            return !c.category.hasInput || options.contains(.allowBluetoothA2DP) || options.contains(.allowBluetooth)
        case .bluetoothHFP, .bluetoothLE:
            return !c.category.hasInput || options.contains(.allowBluetooth)
        default:
            return true
        }
    }

    /// May a session of this configuration record from the port?
    static func mayRecord(from port: Port, _ c: SessionConfiguration) -> Bool {
        guard c.category.hasInput, port.direction == .input, port.type != .virtual else { return false }
        if port.type == .bluetoothHFP || port.type == .bluetoothLE { return c.effectiveOptions.contains(.allowBluetooth) }
        return true
    }

    /// Headset-class outputs, which calls prefer (SPEC.md section 6).
    static func isHeadsetClass(_ type: PortType) -> Bool {
        switch type {
        case .headphones, .headsetMic, .bluetoothHFP, .bluetoothA2DP, .bluetoothLE, .usbAudio, .carAudio: true
        default: false
        }
    }

    // MARK: choosing

    /// Every port the routes may use, the most recent first, display audio that came by itself last:
    /// worked out once per recomputation, and filtered per configuration (a filter keeps the order).
    /// Bluetooth ports gone while their card has not shown why still hold their place: a route that
    /// used one stays on it until the card's new ports come (one change, not two).
    func rankedPorts() -> [Port] {
        let all = Array(state.ports.values) + state.departed.values.map(\.port).filter { state.ports[$0.uid] == nil }
        guard all.count > 1 else { return all }
        // (A machine has a few devices: a look along the arrivals costs less than hashing their names.)
        let keys = all.map {
            (guarded: !state.guardedPorts.isEmpty && state.guardedPorts.contains($0.uid), order: state.arrivals.lastIndex(of: $0.uid) ?? -1)
        }
        return all.indices.sorted {
            let (a, b) = (keys[$0], keys[$1])
            if a.guarded != b.guarded { return !a.guarded }
            return a.order > b.order
        }.map { all[$0] }
    }

    /// Call preference: headsets first; then the receiver, or the speaker with defaultToSpeaker.
    static func callRank(_ type: PortType, defaultToSpeaker: Bool) -> Int {
        if isHeadsetClass(type) { return 0 }
        switch type {
        case .builtInReceiver: return defaultToSpeaker ? 2 : 1
        case .builtInSpeaker: return defaultToSpeaker ? 1 : 2
        default: return 3
        }
    }

    /// The route a session with this configuration uses now, chosen among `ranked` (`rankedPorts()`).
    ///
    /// The ports keep their recency order but for the preferences, each of which outranks the ones
    /// before it: the user's explicit choice of the default; a call's own order (a private output when one is there,
    /// headsets first, then the user's choice, then the receiver or the speaker, a public output
    /// elsewhere last); the session's preferred outputs (its policy file's, first present wins); a video
    /// recording's USB input; the user's choice for its category or app (`userRoute`); the session's
    /// override to the speaker; its preferred input.
    func route(
        for c: SessionConfiguration, overridesToSpeaker: Bool = false, preferredInput: String? = nil,
        preferredOutputs: [OutputPreference] = [], userRoute: String? = nil, ranked: [Port]
    ) -> RouteDescription {
        let chosenOut = state.userChoice[.output], chosenIn = state.userChoice[.input]
        let speaker = c.effectiveOptions.contains(.defaultToSpeaker)
        // Positions in `ranked`, in the order the preferences give: `key` packs them, most significant
        // first (each below 8), ties kept in recency order.
        func ordered(_ eligible: (Port) -> Bool, _ key: (Port) -> Int) -> [Int] {
            let positions = ranked.indices.filter { eligible(ranked[$0]) }
            guard positions.count > 1 else { return positions }
            let keys = positions.map { key(ranked[$0]) }
            guard keys.contains(where: { $0 != keys[0] }) else { return positions }
            return positions.indices.sorted { (keys[$0], $0) < (keys[$1], $1) }.map { positions[$0] }
        }
        let outputs = ordered({ Self.mayPlay(to: $0, c) }) { port in
            let override = overridesToSpeaker && port.type != .builtInSpeaker ? 1 : 0
            // (The first preference the port answers, 0 to 6; 7: none. A call's only among private outputs:
            // a rule never sends a call to a public one, only the user does.)
            let preferred = preferredOutputs.isEmpty ? 0
                : c.isCall && !port.type.isPrivate ? 7
                : min(7, preferredOutputs.prefix(7).firstIndex { $0.matches(port.description) } ?? 7)
            let call = !c.isCall || Self.isHeadsetClass(port.type) ? 0
                : port.uid == chosenOut ? 1 : 1 + Self.callRank(port.type, defaultToSpeaker: speaker)
            let chosen = chosenOut.map { port.uid == $0 ? 0 : 1 } ?? 0
            let user = userRoute.map { port.uid == $0 ? 0 : 1 } ?? 0
            return override << 10 | user << 9 | preferred << 6 | call << 3 | chosen
        }
        let inputs = ordered({ Self.mayRecord(from: $0, c) }) { port in
            let preferred = preferredInput.map { port.uid == $0 ? 0 : 1 } ?? 0
            let video = c.mode == .videoRecording && port.type != .usbAudio ? 1 : 0
            let call = !c.isCall || Self.isHeadsetClass(port.type) ? 0 : port.uid == chosenIn ? 1 : 2
            let chosen = chosenIn.map { port.uid == $0 ? 0 : 1 } ?? 0
            return preferred << 9 | video << 6 | call << 3 | chosen
        }

        var chosenOutputs: [Int]
        if c.category == .multiRoute {
            // Every eligible output; the built-in speaker only when nothing else is there.
            let others = outputs.filter { ranked[$0].type != .builtInSpeaker && !state.guardedPorts.contains(ranked[$0].uid) }
            chosenOutputs = others.isEmpty ? Array(outputs.prefix(1)) : others
        } else {
            chosenOutputs = Array(outputs.prefix(1))
            // Everywhere (alarms, ringtones): the built-in speaker too, where it is not the output already
            // (never for a call: the speaker is public).
            if !c.isCall, preferredOutputs.contains(.everywhere), let first = chosenOutputs.first,
               ranked[first].type != .builtInSpeaker, let speaker = outputs.first(where: { ranked[$0].type == .builtInSpeaker }) {
                chosenOutputs.append(speaker)
            }
        }
        var chosenInput = inputs.first

        // Bluetooth hands-free input and output move together.
        if let input = chosenInput, let card = ranked[input].bluetooth?.card, c.category != .multiRoute,
           let sameCard = outputs.first(where: { ranked[$0].bluetooth?.card == card }) {
            chosenOutputs = [sameCard]
        } else if let output = chosenOutputs.first, let card = ranked[output].bluetooth?.card, c.category.hasInput,
                  let sameCard = inputs.first(where: { ranked[$0].bluetooth?.card == card }) {
            chosenInput = sameCard
        }
        return RouteDescription(
            inputs: c.category.hasInput ? chosenInput.map { [ranked[$0].description] } ?? [] : [],
            outputs: c.category.hasOutput ? chosenOutputs.map { ranked[$0].description } : [])
    }

    /// The output the user chose for the session's app, else for its category.
    func userRoute(for session: Session) -> String? {
        state.userRoutes.isEmpty ? nil
            : session.appName.flatMap { state.userRoutes[.app($0)] } ?? state.userRoutes[.category(session.activeConfiguration.category)]
    }

    func route(for session: Session, ranked: [Port]) -> RouteDescription {
        let chosen = userRoute(for: session)
        return route(for: session.activeConfiguration, overridesToSpeaker: session.overridesToSpeaker,
                     preferredInput: session.preferredInput, preferredOutputs: preferredOutputs(for: session), userRoute: chosen, ranked: ranked)
    }

    /// Where a session would rather play: its app's list in the configuration, else its own (its policy
    /// file's `output:`), else its category's in the configuration (SPEC.md section 10).
    public func preferredOutputs(for session: Session) -> [OutputPreference] {
        guard !state.outputRoutes.isEmpty else { return session.preferredOutputs }
        if let app = session.appName, let list = state.outputRoutes.apps[app] { return list }
        if !session.preferredOutputs.isEmpty { return session.preferredOutputs }
        return state.outputRoutes.categories[session.activeConfiguration.category] ?? []
    }

    /// The default devices: where playback goes and what recording hears when nothing says otherwise.
    func systemRoute(ranked: [Port]) -> RouteDescription {
        RouteDescription(
            inputs: route(for: SessionConfiguration(.record, options: .allowBluetooth), ranked: ranked).inputs,
            outputs: route(for: SessionConfiguration(.playback), ranked: ranked).outputs)
    }

    // MARK: the user's choices per set of devices

    /// The devices connected now, as choices are remembered against them: the outputs but virtual ones,
    /// a Bluetooth device by its card (its ports change with its profile; departed ones still count).
    /// Outputs only: a USB headset's output and microphone come as two events, and a set with one and
    /// not the other would be a set of its own for a moment (the choices going and coming back).
    func currentDeviceSet() -> DeviceSet {
        let ports = Array(state.ports.values) + state.departed.values.map(\.port)
        return DeviceSet(ports.filter { $0.direction == .output && $0.type != .virtual && !$0.isServerRoleTarget }.map { $0.bluetooth?.card ?? $0.uid })
    }

    /// The user's choices now, remembered against the devices connected (and kept for the next run).
    mutating func rememberChoices(_ actions: inout [PolicyAction]) {
        let set = state.deviceSet ?? currentDeviceSet()
        let choices = RouteChoices(output: state.userChoice[.output], input: state.userChoice[.input], scoped: state.userRoutes)
        guard state.rememberedRoutes[set] != choices else { return }
        state.rememberedRoutes.remember(choices, for: set)
        actions.append(.keepRoutes(state.rememberedRoutes))
    }

    /// The devices connected changed (or were all listed): a set seen before brings back the user's
    /// choices for it; with a set never seen, the usual rules apply (the choices per category or app
    /// made with other devices hold no more). Said in the route change's cause.
    mutating func noteDeviceSet(_ cause: inout RouteCause, _ actions: inout [PolicyAction]) {
        guard state.devicesListed else { return }
        let set = currentDeviceSet()
        guard set != state.deviceSet else { return }
        state.deviceSet = set
        if let choices = state.rememberedRoutes[set], !choices.isEmpty {
            for (direction, uid) in [(StreamKey.Direction.output, choices.output), (.input, choices.input)] {
                guard let uid, state.ports[uid]?.direction == direction else { continue }
                state.userChoice[direction] = uid
                state.guardedPorts.remove(uid)
                state.arrivals.removeAll { $0 == uid }
                state.arrivals.append(uid)
            }
            state.userRoutes = choices.scoped
            state.rememberedRoutes.touch(set)
            actions.append(.keepRoutes(state.rememberedRoutes))
            let said = [choices.output.map { "out \($0)" }, choices.input.map { "in \($0)" }].compactMap { $0 }
                + choices.scoped.sorted { $0.key < $1.key }.map { "\($0.key) on \($0.value)" }
            cause.text += (cause.text.isEmpty ? "" : "; ") + "a set of devices seen before: the user's choices for it come back (\(said.joined(separator: ", ")))"
            if cause.reason == nil { cause.reason = .override }
            cause.logged = true
        } else {
            state.userRoutes = [:]
            let seen = state.rememberedRoutes[set] != nil
            // A pick of the default still in force (a device went, which takes no pick away; one that
            // comes does) holds with this set too: remembered for it, and said.
            let kept = RouteChoices(output: state.userChoice[.output].flatMap { state.ports[$0] != nil ? $0 : nil },
                                    input: state.userChoice[.input].flatMap { state.ports[$0] != nil ? $0 : nil })
            state.rememberedRoutes.remember(kept, for: set)
            actions.append(.keepRoutes(state.rememberedRoutes))
            let said = [kept.output.map { "out \($0)" }, kept.input.map { "in \($0)" }].compactMap { $0 }
            let rules = said.isEmpty ? "the usual rules apply" : "the user's pick of the default stays (\(said.joined(separator: ", "))), the rest as usual"
            cause.text += (cause.text.isEmpty ? "" : "; ")
                + (seen ? "a set of devices seen before, with no choice of the user's for it: \(rules)" : "a set of devices never seen before: \(rules)")
        }
    }

    // MARK: changes and their reasons

    func reason(for cause: RouteCause, from previous: RouteDescription, to new: RouteDescription, needsOutput: Bool,
                needsInput: Bool) -> RouteChangeReason {
        if (needsOutput && new.outputs.isEmpty) || (needsInput && new.inputs.isEmpty) { return .noSuitableRouteForCategory }
        // Same devices, other ports or settings; but a device re-created under its name as another kind
        // of port (WirePlumber's Bluetooth node in a profile switch) changed as the cause says.
        if previous.outputs.map(\.uid) == new.outputs.map(\.uid) && previous.inputs.map(\.uid) == new.inputs.map(\.uid)
            && (previous.outputs + previous.inputs).map(\.type) == (new.outputs + new.inputs).map(\.type) {
            return .routeConfigurationChange
        }
        return cause.reason ?? .unknown
    }

    /// Recomputes the routes of every session (`only` nil) or of the named ones, and the default devices.
    mutating func recomputeRoutes(cause: RouteCause, only: Set<SessionID>?, _ actions: inout [PolicyAction]) {
        var changes: [RouteChange] = []
        let ranked = rankedPorts()
        for id in (only.map { Array($0) } ?? Array(state.sessions.keys)).sorted() {
            guard let session = state.sessions[id] else { continue }
            let new = route(for: session, ranked: ranked)
            guard new != session.route else { continue }
            state.sessions[id]?.route = new
            // A session's first route is no change, unless it takes the session away from the default
            // devices (its preferred output: its streams are moved).
            if session.route == .none && cause.reason == .categoryChange && !session.status.isActive
                && new.outputs.first?.uid == state.systemRoute.outputs.first?.uid { continue }
            let c = session.activeConfiguration
            let why = reason(for: cause, from: session.route, to: new, needsOutput: c.category.hasOutput,
                             needsInput: c.category.hasInput)
            actions.append(.notify(id, .routeChange(reason: why, previousRoute: session.route)))
            // Private listening ended (headphones, a headset, Bluetooth): playback pauses rather than
            // going on out loud, as iOS apps do on oldDeviceUnavailable.
            if why == .oldDeviceUnavailable, session.origin == .inferred,
               c.category == .playback || c.category == .soloAmbient,
               session.route.outputs.contains(where: { Self.isHeadsetClass($0.type) }) {
                if session.status.isActive {
                    actions.append(.pausePlayer(id, why: .privateListeningEnded))
                } else if case .interrupted = session.status {
                    // Paused already: the end of the interruption must not start it out loud.
                    state.sessions[id]?.pausedByUser = true
                }
            }
            // A call on a public output (no private one left, and not the user's choice) says so.
            var text = cause.text
            if c.isCall, let out = new.outputs.first, !out.type.isPrivate, out.uid != state.userChoice[.output],
               out.uid != userRoute(for: session) {
                text += "; no private output left: the call plays on a public one (\(out.type.name) \(out.uid))"
            }
            if let i = changes.firstIndex(where: { $0.previousRoute == session.route && $0.route == new && $0.reason == why && $0.cause == text }) {
                changes[i].sessions.append(id)
            } else {
                changes.append(RouteChange(reason: why, previousRoute: session.route, route: new, cause: text,
                                           sessions: [id], isSystemRoute: false))
            }
        }

        let system = systemRoute(ranked: ranked)
        if system != state.systemRoute {
            let previous = state.systemRoute
            state.systemRoute = system
            if let out = system.outputs.first?.uid, out != previous.outputs.first?.uid { actions.append(.setDefaultDevice(.output, out)) }
            if let inp = system.inputs.first?.uid, inp != previous.inputs.first?.uid { actions.append(.setDefaultDevice(.input, inp)) }
            let why = reason(for: cause, from: previous, to: system, needsOutput: true, needsInput: false)
            // Sessions whose own change is this one are logged with it.
            var sessions: [SessionID] = []
            if let i = changes.firstIndex(where: { $0.previousRoute.outputs == previous.outputs && $0.route.outputs == system.outputs }) {
                sessions = changes[i].sessions
                changes.remove(at: i)
            }
            changes.insert(RouteChange(reason: why, previousRoute: previous, route: system, cause: cause.text,
                                       sessions: sessions, isSystemRoute: true), at: 0)
        }
        if (cause.guardedPort != nil || cause.logged) && !changes.contains(where: \.isSystemRoute) {
            // The display-audio guard, or the user's choices for this set of devices, held the route: log
            // the arrival all the same (SPEC.md sections 6 and 10).
            changes.insert(RouteChange(reason: cause.guardedPort != nil ? .newDeviceAvailable : cause.reason ?? .override,
                                       previousRoute: state.systemRoute, route: state.systemRoute,
                                       cause: cause.text, sessions: [], isSystemRoute: true), at: 0)
        }
        actions.append(contentsOf: changes.map(PolicyAction.logRouteChange))
        moveStreams(&actions)
        planBluetoothSwitches()
    }

    /// Streams of sessions routed away from the default devices go where their session's route is;
    /// multiRoute streams are never moved. (Streams that follow the default devices are moved by the
    /// server when the agent sets those: a Bluetooth card's new ports after a profile switch, say.) A
    /// stream we moved away no longer follows the default: when its session's route is the default
    /// again, it is moved there (which also makes it follow the default again).
    mutating func moveStreams(_ actions: inout [PolicyAction]) {
        guard !state.stopping else { return }
        let system = (output: state.systemRoute.outputs.first?.uid, input: state.systemRoute.inputs.first?.uid)
        // Only sessions routed away from the default devices (or to several outputs at once), or with a
        // stream we moved, have streams to move. (One look over the sessions finds both.)
        var movable: Set<SessionID> = []
        var needed: [String: [String]] = [:]
        var through: [SessionID: String] = [:]
        for session in state.sessions.values where session.status.isActive && session.activeConfiguration.category != .multiRoute {
            if let name = combination(for: session) {
                needed[name] = session.route.outputs.map(\.uid)
                through[session.id] = name
            }
            if session.route.outputs.first?.uid != system.output || session.route.inputs.first?.uid != system.input
                || session.route.outputs.count > 1 {
                movable.insert(session.id)
            }
        }
        planCombinations(needed, &actions)
        for stream in state.streams.values where stream.pinned { movable.insert(stream.session) }
        guard !movable.isEmpty else { return }
        for key in state.streams.keys.sorted() where movable.contains(state.streams[key]!.session) {
            guard let stream = state.streams[key], !stream.userOwnsDevice, !stream.moveBeingJudged, let session = state.sessions[stream.session], session.status.isActive,
                  session.activeConfiguration.category != .multiRoute else { continue }
            var (mine, system) = key.direction == .output
                ? (session.route.outputs.first?.uid, state.systemRoute.outputs.first?.uid)
                : (session.route.inputs.first?.uid, state.systemRoute.inputs.first?.uid)
            // Several outputs at once: through their combination once it is there (till then, where it
            // plays), and not one on its way out.
            if key.direction == .output, let name = through[session.id] {
                guard state.combinationPorts.contains(name), !state.strayCombinations.contains(name) else { continue }
                mine = name
            }
            // (A pinned stream the default came to stays pinned: PulseAudio does nothing of a move to
            // the device a stream is on, and would go on sending it there; the next default moves it.)
            guard let target = mine, target != system || stream.pinned, stream.device != target else { continue }
            // (Linked to a role sink by the server's own role-based policy: left where it put it.)
            if let device = stream.device, state.ports[device]?.isServerRoleTarget == true { continue }
            actions.append(.moveStream(key, toDevice: target))
            state.streams[key]?.device = target
            state.streams[key]?.pinned = target != system
        }
    }

    /// The sink a session's output streams go through: its outputs' combination, when its route plays
    /// on several at once (not multiRoute's, whose streams are never moved).
    public func combination(for session: Session) -> String? {
        guard session.route.outputs.count > 1, session.activeConfiguration.category != .multiRoute else { return nil }
        return CombinedOutputs.name(session.route.outputs.map(\.uid))
    }

    /// The combinations the active sessions' routes need (`needed`, by name, with their outputs) are
    /// asked for (again if one went); one no longer needed goes `combinationLingers` after (on a tick),
    /// its streams moved back to the default first (one found, `combinationAppeared`, has lingered).
    mutating func planCombinations(_ needed: [String: [String]], _ actions: inout [PolicyAction]) {
        guard !needed.isEmpty || !state.combinations.isEmpty else { return }
        for (name, outputs) in needed.sorted(by: { $0.key < $1.key }) {
            var combination = state.combinations[name] ?? Combination()
            combination.unusedSince = nil
            combination.outputs = outputs
            if state.combinationPorts.contains(name) {
                combination.made = true
            } else if !combination.made && state.devicesListed {
                // (Not before the devices are listed: one there already, a predecessor's or ours from
                // before the server stalled, is found then.)
                combination.made = true
                actions.append(.makeCombination(name: name, outputs: outputs))
            }
            state.combinations[name] = combination
        }
        for name in state.combinations.keys.sorted() where needed[name] == nil {
            // One that lost an output goes at once rather than wait for the output to come back: PipeWire
            // 0.3.65's pipewire-pulse died in the soak when a USB headset that had gone came back to the
            // combine sink an alarm played through (its module-combine-stream: "unknown resource"), twice
            // in a full suite. A new one is made when the outputs are all there again.
            let lostAnOutput = state.combinations[name]?.outputs.contains { state.ports[$0] == nil } == true
            if !lostAnOutput {
                guard let since = state.combinations[name]?.unusedSince else {
                    state.combinations[name]?.unusedSince = state.now
                    continue
                }
                guard since + state.settings.combinationLingers <= state.now else { continue }
            }
            state.combinations[name] = nil
            // (Never shown: its make failed, or it is still coming, and goes as a stray when it shows.)
            guard state.combinationPorts.contains(name), !state.strayCombinations.contains(name) else { continue }
            for key in state.streams.keys.sorted() where state.streams[key]!.device == name {
                if let device = key.direction == .output ? state.systemRoute.outputs.first?.uid : nil {
                    actions.append(.moveStream(key, toDevice: device))
                    state.streams[key]?.device = device
                }
                state.streams[key]?.pinned = false
            }
            state.strayCombinations.insert(name)
            actions.append(.removeCombination(name: name))
        }
    }

    /// An active call or recording that may use Bluetooth hands-free (SPEC.md section 6).
    func needsHandsFree(_ session: Session) -> Bool {
        let c = session.activeConfiguration
        return session.status.isActive && (c.category == .record || c.category == .playAndRecord)
            && c.effectiveOptions.contains(.allowBluetooth)
    }

    // MARK: data sources

    /// An active session's preferred data source on the input it uses is selected on the device
    /// (SPEC.md section 6, "preferred data source").
    mutating func selectDataSources(_ actions: inout [PolicyAction]) {
        for session in state.sessions.values.filter({ !$0.preferredDataSources.isEmpty && $0.status.isActive }).sorted(by: { $0.id < $1.id }) {
            for (uid, wanted) in session.preferredDataSources.sorted(by: { $0.key < $1.key }) {
                guard session.route.inputs.contains(where: { $0.uid == uid }), let port = state.ports[uid],
                      port.description.selectedDataSource != wanted,
                      port.description.dataSources.contains(where: { $0.id == wanted }) else { continue }
                actions.append(.setActivePort(device: uid, port: wanted))
                // Selected as far as we know: the server's change confirms it (routeConfigurationChange).
                state.ports[uid]?.description.selectedDataSource = wanted
            }
        }
    }

    // MARK: Bluetooth hands-free switch

    /// Cards that an active call or recording with allowBluetooth routes to: they must be in their
    /// hands-free profile (after the debounce); cards no longer needed go back (after the restore delay).
    mutating func planBluetoothSwitches() {
        var needed: [String: BluetoothCard] = [:]
        for session in state.sessions.values where needsHandsFree(session) {
            for uid in (session.route.outputs + session.route.inputs).map(\.uid) {
                if let card = state.ports[uid]?.bluetooth, card.hfpProfile != nil { needed[card.card] = card }
            }
        }
        for (name, card) in needed {
            guard let hfp = card.hfpProfile else { continue }
            if var existing = state.bluetoothSwitches[name] {
                if existing.target != hfp {
                    // A restore was pending: the card is still in hands-free, keep it there.
                    existing.target = hfp
                    existing.done = true
                    state.bluetoothSwitches[name] = existing
                }
            } else if card.activeProfile != hfp {
                state.bluetoothSwitches[name] = BluetoothSwitch(
                    card: name, target: hfp, at: state.now + state.settings.bluetoothSwitchDelay,
                    original: card.activeProfile, done: false)
            }
        }
        for (name, pending) in state.bluetoothSwitches where needed[name] == nil && pending.target != pending.original {
            if !pending.done {
                state.bluetoothSwitches[name] = nil  // debounced away: never switched
            } else {
                state.bluetoothSwitches[name] = BluetoothSwitch(
                    card: name, target: pending.original, at: state.now + state.settings.bluetoothRestoreDelay,
                    original: pending.original, done: false)
            }
        }
    }

    /// On a tick: carry out the switches whose time has come.
    mutating func advanceBluetoothSwitches(_ actions: inout [PolicyAction]) -> RouteCause {
        var switched: [String] = []
        for name in state.bluetoothSwitches.keys.sorted() {
            guard var pending = state.bluetoothSwitches[name], !pending.done, pending.at <= state.now else { continue }
            actions.append(.setCardProfile(card: name, profile: pending.target, from: pending.target == pending.original ? nil : pending.original))
            state.cards[name] = .switching(since: state.now)
            switched.append("\(name) to \(pending.target)")
            if pending.target == pending.original {
                state.bluetoothSwitches[name] = nil
            } else {
                pending.done = true
                state.bluetoothSwitches[name] = pending
            }
        }
        return switched.isEmpty ? .none : RouteCause(.categoryChange, "switched \(switched.joined(separator: ", "))")
    }
}

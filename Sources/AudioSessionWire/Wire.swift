public import AudioPolicy
public import DBus

/// `org.audiosession` on the session bus (SPEC.md section 9): its names, and how values travel. The agent
/// (which answers), the library (which calls and listens), the CLI and the benchmark all use this one
/// definition, so that the two ends cannot drift apart. The words that name the core's values (category,
/// mode, options) are `SessionWords`, in AudioPolicy.
public enum Wire {
    /// The agent's well-known name, its object and the interfaces.
    public static let busName = "org.audiosession.Agent1"
    public static let agentPath = "/org/audiosession/Agent1"
    public static let agentInterface = "org.audiosession.Agent1"
    public static let sessionInterface = "org.audiosession.Session1"
    /// A session's object: this, then its number (`/org/audiosession/Session1`).
    public static let sessionPathPrefix = SessionWords.sessionPathPrefix

    // MARK: what an app sends

    /// SetCategory's arguments: the category's and the mode's words, and the options' names (`ssas`).
    public static func setCategoryArguments(_ configuration: SessionConfiguration) -> [DBusValue] {
        [.string(configuration.category.rawValue), .string(configuration.mode.rawValue),
         .array(elementSignature: "s", configuration.options.names.map(DBusValue.string))]
    }

    // (SetActive's option names, and the words the agent reads back: `SessionWords`, beside the values.)

    // MARK: errors

    static let errorPrefix = "org.audiosession.Error."

    /// `org.audiosession.Error.InsufficientPriority` and the like: SPEC.md's code, capitalised.
    public static func errorName(_ code: SessionError.Code) -> String {
        errorPrefix + code.name.prefix(1).uppercased() + code.name.dropFirst()
    }

    /// The code an error name of ours carries; nil for any other name.
    public static func errorCode(named name: String) -> SessionError.Code? {
        guard name.hasPrefix(errorPrefix) else { return nil }
        return SessionError.Code.all.first { errorName($0) == name }
    }

    // MARK: notifications (signals on a session's object)

    static let interruptionReasons: [(InterruptionReason, String)] = [
        (.default, "default"), (.appWasSuspended, "appWasSuspended"), (.builtInMicMuted, "builtInMicMuted"),
        (.routeDisconnected, "routeDisconnected"),
    ]

    /// A notification as the signal that tells it: its member and body.
    public static func signal(_ notification: SessionNotification) -> (member: String, body: [DBusValue]) {
        switch notification {
        case .interruption(let type, let options, let reason):
            let reasonName = interruptionReasons.first { $0.0 == reason }?.1 ?? "default"
            return ("Interruption", [.string(type == .began ? "began" : "ended"),
                                     .array(elementSignature: "s", options.contains(.shouldResume) ? [.string("shouldResume")] : []),
                                     .string(reasonName)])
        case .routeChange(let reason, let previous):
            return ("RouteChange", [.string(reason.name), route(previous)])
        case .silenceSecondaryAudioHint(let type):
            return ("SilenceSecondaryAudioHint", [.string(type == .begin ? "begin" : "end")])
        case .mediaServicesWereLost:
            return ("MediaServicesWereLost", [])
        case .mediaServicesWereReset:
            return ("MediaServicesWereReset", [])
        case .inputMuteChanged(let muted):
            return ("InputMuteChanged", [.bool(muted)])
        case .remoteCommand(let command):
            return ("RemoteCommand", [.string(command)])
        case .mutedSpeechActivity(let started):
            return ("MutedSpeechActivity", [.string(started ? "started" : "ended")])
        }
    }

    /// The notification a signal tells; nil for a member or body that is not one of ours.
    public static func notification(member: String, body: [DBusValue]) -> SessionNotification? {
        switch member {
        case "Interruption":
            guard body.count == 3, let type = body[0].string, let reason = body[2].string else { return nil }
            let options: InterruptionOptions = (body[1].array ?? []).contains { $0.string == "shouldResume" } ? .shouldResume : []
            return .interruption(type: type == "began" ? .began : .ended, options: options,
                                 reason: interruptionReasons.first { $0.1 == reason }?.0 ?? .default)
        case "RouteChange":
            guard body.count == 2, let name = body[0].string else { return nil }
            let reason = RouteChangeReason.named.first { $0.name == name }?.reason ?? .unknown
            return .routeChange(reason: reason, previousRoute: route(from: body[1]))
        case "SilenceSecondaryAudioHint":
            guard let type = body.first?.string else { return nil }
            return .silenceSecondaryAudioHint(type == "begin" ? .begin : .end)
        case "MediaServicesWereLost": return .mediaServicesWereLost
        case "MediaServicesWereReset": return .mediaServicesWereReset
        case "InputMuteChanged":
            guard body.count == 1, let muted = body[0].bool else { return nil }
            return .inputMuteChanged(muted)
        case "RemoteCommand":
            guard body.count == 1, let command = body[0].string else { return nil }
            return .remoteCommand(command)
        case "MutedSpeechActivity":
            guard body.count == 1, let activity = body[0].string, activity == "started" || activity == "ended" else { return nil }
            return .mutedSpeechActivity(started: activity == "started")
        default: return nil
        }
    }

    // MARK: routes and ports

    /// Ports as `aa{sv}`: `type`, `name`, `uid`, and an input's `dataSources` (`aa{sv}` of `id`, `name`).
    public static func ports(_ list: [PortDescription]) -> DBusValue {
        .array(elementSignature: "a{sv}", list.map { port in
            var fields: [DBusValue: DBusValue] = [
                .string("type"): .variant(.string(port.type.name)), .string("name"): .variant(.string(port.name)),
                .string("uid"): .variant(.string(port.uid)),
            ]
            if !port.dataSources.isEmpty {
                fields[.string("dataSources")] = .variant(.array(elementSignature: "a{sv}", port.dataSources.map { source in
                    .dictionary(keySignature: "s", valueSignature: "v", [
                        .string("id"): .variant(.string(source.id)), .string("name"): .variant(.string(source.name)),
                    ])
                }))
            }
            return .dictionary(keySignature: "s", valueSignature: "v", fields)
        })
    }

    /// The ports an `aa{sv}` says; entries without a uid are none.
    public static func ports(from value: DBusValue) -> [PortDescription] {
        (value.array ?? []).compactMap { item in
            guard let fields = item.stringDictionary, let uid = fields["uid"]?.string else { return nil }
            let sources = (fields["dataSources"]?.array ?? []).compactMap { source -> DataSourceDescription? in
                guard let f = source.stringDictionary, let id = f["id"]?.string else { return nil }
                return DataSourceDescription(id: id, name: f["name"]?.string ?? id)
            }
            return PortDescription(type: fields["type"]?.string.flatMap(PortType.init(name:)) ?? .virtual,
                                   name: fields["name"]?.string ?? uid, uid: uid, dataSources: sources)
        }
    }

    /// A route as `a{sv}`: `outputs` and `inputs`, each an `aa{sv}` of ports.
    public static func route(_ route: RouteDescription) -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "v", [
            .string("outputs"): .variant(ports(route.outputs)), .string("inputs"): .variant(ports(route.inputs)),
        ])
    }

    public static func route(from value: DBusValue) -> RouteDescription {
        let fields = value.stringDictionary ?? [:]
        return RouteDescription(inputs: ports(from: fields["inputs"] ?? .array(elementSignature: "a{sv}", [])),
                                outputs: ports(from: fields["outputs"] ?? .array(elementSignature: "a{sv}", [])))
    }
}

extension Wire {
    // MARK: what is playing (MPRIS Metadata, SetNowPlayingInfo)

    /// What is playing as MPRIS `Metadata` (`a{sv}`), with no track id.
    public static func metadata(_ info: NowPlayingInfo) -> [DBusValue: DBusValue] {
        var fields: [DBusValue: DBusValue] = [:]
        if let title = info.title { fields[.string("xesam:title")] = .variant(.string(title)) }
        if !info.artists.isEmpty { fields[.string("xesam:artist")] = .variant(.array(elementSignature: "s", info.artists.map(DBusValue.string))) }
        if let album = info.album { fields[.string("xesam:album")] = .variant(.string(album)) }
        if let length = info.length { fields[.string("mpris:length")] = .variant(.int64(length)) }
        if let art = info.artURL { fields[.string("mpris:artUrl")] = .variant(.string(art)) }
        if let elapsed = info.elapsed { fields[.string(elapsedKey)] = .variant(.int64(elapsed)) }
        return fields
    }

    /// What an `a{sv}` of xesam and mpris keys says is playing (other keys, and values of other types,
    /// are left out; texts and lists bounded as `NowPlayingInfo` keeps them).
    public static func nowPlayingInfo(from value: DBusValue) -> NowPlayingInfo {
        guard let fields = value.stringDictionary else { return NowPlayingInfo() }
        func text(_ key: String) -> String? { fields[key]?.string }
        let artists = fields["xesam:artist"]?.array?.prefix(NowPlayingInfo.artistLimit).compactMap(\.string) ?? text("xesam:artist").map { [$0] } ?? []
        let length = fields["mpris:length"]?.integer
        return NowPlayingInfo(title: text("xesam:title"), artists: artists, album: text("xesam:album"), length: length, artURL: text("mpris:artUrl"),
                              elapsed: fields[elapsedKey]?.integer)
    }

    /// The key of `NowPlayingInfo.elapsed` in `SetNowPlayingInfo`'s dictionary (not MPRIS metadata: the
    /// agent's player says it as its `Position`).
    public static let elapsedKey = "audiosession:elapsed"
}

import AudioPolicy
import AudioSessionWire
import DBus
import Testing

/// org.audiosession's one definition: what the agent sends, the library reads back as the same value.
@Suite("the apps' wire")
struct WireTests {
    static let route = RouteDescription(
        inputs: [PortDescription(type: .builtInMic, name: "Built-in Audio Internal Microphone", uid: "builtin_mic",
                                 dataSources: [DataSourceDescription(id: "analog-input-internal-mic", name: "Internal Microphone"),
                                               DataSourceDescription(id: "analog-input-headset-mic", name: "Headset Microphone")])],
        outputs: [PortDescription(type: .bluetoothA2DP, name: "WH-1000XM4", uid: "bt_a2dp_headphones")])

    @Test("every notification reads back as itself")
    func notificationsRoundTrip() {
        var all: [SessionNotification] = [.mediaServicesWereLost, .mediaServicesWereReset,
                                          .silenceSecondaryAudioHint(.begin), .silenceSecondaryAudioHint(.end),
                                          .inputMuteChanged(true), .inputMuteChanged(false), .remoteCommand("play-pause")]
        for type in [InterruptionType.began, .ended] {
            for options in [InterruptionOptions(), .shouldResume] {
                for reason in [InterruptionReason.default, .appWasSuspended, .builtInMicMuted, .routeDisconnected] {
                    all.append(.interruption(type: type, options: options, reason: reason))
                }
            }
        }
        for (_, reason) in RouteChangeReason.named { all.append(.routeChange(reason: reason, previousRoute: Self.route)) }
        for notification in all {
            let (member, body) = Wire.signal(notification)
            #expect(Wire.notification(member: member, body: body) == notification, "\(member) \(body)")
        }
        #expect(Wire.notification(member: "Interruption", body: []) == nil, "a body that is not one of ours")
        #expect(Wire.notification(member: "Something", body: []) == nil)
    }

    @Test("what is playing (MPRIS Metadata, SetNowPlayingInfo) reads back as itself; other keys and types are left out; an app's texts and lists are bounded")
    func nowPlayingInfo() {
        let info = NowPlayingInfo(title: "Clair de lune", artists: ["Debussy", "Someone"], album: "Suite bergamasque",
                                  length: 300_000_000, artURL: "file:///tmp/cover.png", elapsed: 12_000_000)
        let value = DBusValue.dictionary(keySignature: "s", valueSignature: "v", Wire.metadata(info))
        #expect(Wire.nowPlayingInfo(from: value) == info)
        #expect(Wire.nowPlayingInfo(from: .variant(value)) == info, "as a property's value")
        let odd = DBusValue.dictionary(keySignature: "s", valueSignature: "v", [
            .string("xesam:title"): .variant(.int32(3)), .string("xesam:artist"): .variant(.string("One")),
            .string("mpris:length"): .variant(.uint64(UInt64.max)), .string("xesam:genre"): .variant(.string("x")),
        ])
        #expect(Wire.nowPlayingInfo(from: odd) == NowPlayingInfo(artists: ["One"]), "a title of the wrong type, a length out of range")
        let huge = DBusValue.dictionary(keySignature: "s", valueSignature: "v", [
            .string("xesam:title"): .variant(.string(String(repeating: "é", count: 100_000))),
            .string("xesam:artist"): .variant(.array(elementSignature: "s", (0..<1000).map { .string("artist \($0)") })),
        ])
        let bounded = Wire.nowPlayingInfo(from: huge)
        #expect(bounded.title?.count == NowPlayingInfo.textLimit && bounded.artists.count == NowPlayingInfo.artistLimit)
        #expect(Wire.nowPlayingInfo(from: .string("not a dictionary")).isEmpty)
        let far = DBusValue.dictionary(keySignature: "s", valueSignature: "v", [.string(Wire.elapsedKey): .variant(.int64(Int64.max))])
        #expect(Wire.nowPlayingInfo(from: far).elapsed == NowPlayingInfo.elapsedLimit, "an elapsed time within a thousand days")
    }

    @Test("every error code's name reads back as the code; other names are none")
    func errorNamesRoundTrip() {
        for code in SessionError.Code.all { #expect(Wire.errorCode(named: Wire.errorName(code)) == code) }
        #expect(Wire.errorName(.insufficientPriority) == "org.audiosession.Error.InsufficientPriority")
        #expect(Wire.errorCode(named: "org.freedesktop.DBus.Error.AccessDenied") == nil)
        #expect(Wire.errorCode(named: "org.audiosession.Error.NoSuchThing") == nil)
    }

    @Test("a route with data sources reads back as itself")
    func routesRoundTrip() {
        #expect(Wire.route(from: Wire.route(Self.route)) == Self.route)
        #expect(Wire.route(from: .string("not a route")) == RouteDescription())
    }

    @Test("what an app sends (category, mode, options; SetActive's options) reads back as what it meant; an unknown word is named")
    func wordsRoundTrip() {
        for category in AudioPolicy.Category.allCases {
            for mode in Mode.allCases {
                for (_, option) in CategoryOptions.named {
                    let configuration = SessionConfiguration(category, mode: mode, options: [option, .mixWithOthers])
                    let args = Wire.setCategoryArguments(configuration)
                    let decoded = SessionWords.configuration(category: args[0].string ?? "", mode: args[1].string ?? "",
                                                     options: (args[2].array ?? []).compactMap(\.string))
                    #expect(decoded == .success(configuration))
                }
            }
        }
        for options in [SetActiveOptions(), .notifyOthersOnDeactivation] {
            #expect(SessionWords.setActiveOptions(SessionWords.setActiveOptionNames(options)) == .success(options))
        }
        #expect(SessionWords.configuration(category: "recrod", mode: "", options: []) == .failure(.category("recrod")))
        #expect(SessionWords.configuration(category: "playback", mode: "loud", options: []) == .failure(.mode("loud")))
        #expect(SessionWords.configuration(category: "playback", mode: "", options: ["sometimes"]) == .failure(.option("sometimes")))
        #expect(SessionWords.setActiveOptions(["later"]) == .failure(.setActiveOption("later")))
    }
}

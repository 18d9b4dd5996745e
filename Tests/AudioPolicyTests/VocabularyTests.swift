import AudioPolicy
import Testing

/// SPEC.md sections 2-4: the tables of categories, modes and options, row by row.
struct VocabularyTests {
    /// SPEC.md section 3: mode → categories that accept it.
    static let modeTable: [(Mode, [Category])] = [
        (.default, Category.allCases),
        (.voiceChat, [.playAndRecord]),
        (.videoChat, [.playAndRecord]),
        (.gameChat, [.playAndRecord]),
        (.videoRecording, [.playAndRecord, .record]),
        (.moviePlayback, [.playback]),
        (.spokenAudio, [.playback]),
        (.measurement, [.playAndRecord, .record, .playback]),
    ]

    /// SPEC.md section 4: option → categories that accept it.
    static let optionTable: [(String, CategoryOptions, [Category])] = [
        ("mixWithOthers", .mixWithOthers, [.playback, .playAndRecord, .multiRoute]),
        ("duckOthers", .duckOthers, [.ambient, .playback, .playAndRecord, .multiRoute]),
        ("interruptSpokenAudioAndMixWithOthers", .interruptSpokenAudioAndMixWithOthers, [.playback, .playAndRecord, .multiRoute]),
        ("allowBluetooth", .allowBluetooth, [.record, .playAndRecord]),
        ("allowBluetoothA2DP", .allowBluetoothA2DP, [.playAndRecord]),
        ("allowAirPlay", .allowAirPlay, [.playAndRecord]),
        ("defaultToSpeaker", .defaultToSpeaker, [.playAndRecord]),
    ]

    @Test("every mode/category pair of SPEC.md section 3", arguments: Mode.allCases)
    func modeCategoryPairs(_ mode: Mode) throws {
        let accepted = try #require(Self.modeTable.first { $0.0 == mode }?.1)
        for category in Category.allCases {
            let configuration = SessionConfiguration(category, mode: mode)
            if accepted.contains(category) {
                #expect(throws: Never.self) { try configuration.validate() }
            } else {
                let error = #expect(throws: SessionError.self) { try configuration.validate() }
                #expect(error?.code == .incompatibleCategory)
                #expect(error?.message.contains("mode \(mode)") == true, "names the offending value")
                #expect(error?.message.contains("accepted by") == true, "names the accepted ones")
            }
        }
    }

    @Test("every option/category pair of SPEC.md section 4")
    func optionCategoryPairs() {
        for (name, option, accepted) in Self.optionTable {
            for category in Category.allCases {
                let configuration = SessionConfiguration(category, options: option)
                if accepted.contains(category) {
                    #expect(throws: Never.self, "\(name) on \(category)") { try configuration.validate() }
                } else {
                    let error = #expect(throws: SessionError.self, "\(name) on \(category)") { try configuration.validate() }
                    #expect(error?.code == .incompatibleCategory)
                    #expect(error?.message.contains(name) == true)
                }
            }
        }
    }

    @Test("implied options: duckOthers and interruptSpokenAudio imply mixWithOthers; voiceChat allowBluetooth; videoChat and gameChat also defaultToSpeaker")
    func impliedOptions() {
        #expect(SessionConfiguration(.playback, options: .duckOthers).effectiveOptions.contains(.mixWithOthers))
        #expect(SessionConfiguration(.playback, options: .interruptSpokenAudioAndMixWithOthers).effectiveOptions.contains(.mixWithOthers))
        #expect(SessionConfiguration(.playAndRecord, mode: .voiceChat).effectiveOptions == .allowBluetooth)
        #expect(SessionConfiguration(.playAndRecord, mode: .videoChat).effectiveOptions == [.allowBluetooth, .defaultToSpeaker])
        #expect(SessionConfiguration(.playAndRecord, mode: .gameChat).effectiveOptions == [.allowBluetooth, .defaultToSpeaker])
        #expect(SessionConfiguration(.ambient, options: .duckOthers).isMixable)
    }

    @Test("SPEC.md section 2: which categories are mixable, silenced, have input and output")
    func categoryTable() {
        let rows: [(Category, mixable: Bool, silenced: Bool, input: Bool, output: Bool)] = [
            (.ambient, true, true, false, true),
            (.soloAmbient, false, true, false, true),
            (.playback, false, false, false, true),
            (.record, false, false, true, false),
            (.playAndRecord, false, false, true, true),
            (.multiRoute, false, false, true, true),
            (.audioProcessing, false, false, false, false),
        ]
        for row in rows {
            #expect(SessionConfiguration(row.0).isMixable == row.mixable, "\(row.0) mixable")
            #expect(row.0.isSilencedBySilentMode == row.silenced, "\(row.0) silenced")
            #expect(row.0.hasInput == row.input, "\(row.0) input")
            #expect(row.0.hasOutput == row.output, "\(row.0) output")
        }
        #expect(SessionConfiguration(.playback, options: .mixWithOthers).isMixable)
        #expect(SessionConfiguration(.playAndRecord, mode: .voiceChat).isCall)
        #expect(!SessionConfiguration(.playAndRecord).isCall)
    }

    @Test("raw values are Apple's: options, reasons, interruption types, error codes")
    func rawValues() {
        #expect(CategoryOptions.mixWithOthers.rawValue == 1)
        #expect(CategoryOptions.duckOthers.rawValue == 2)
        #expect(CategoryOptions.allowBluetooth.rawValue == 4)
        #expect(CategoryOptions.defaultToSpeaker.rawValue == 8)
        #expect(CategoryOptions.interruptSpokenAudioAndMixWithOthers.rawValue == 0x11)
        #expect(CategoryOptions.allowBluetoothA2DP.rawValue == 0x20)
        #expect(CategoryOptions.allowAirPlay.rawValue == 0x40)
        let reasons: [(RouteChangeReason, UInt, String)] = [
            (.unknown, 0, "unknown"), (.newDeviceAvailable, 1, "newDeviceAvailable"),
            (.oldDeviceUnavailable, 2, "oldDeviceUnavailable"), (.categoryChange, 3, "categoryChange"),
            (.override, 4, "override"), (.wakeFromSleep, 6, "wakeFromSleep"),
            (.noSuitableRouteForCategory, 7, "noSuitableRouteForCategory"),
            (.routeConfigurationChange, 8, "routeConfigurationChange"),
        ]
        for (reason, value, name) in reasons {
            #expect(reason.rawValue == value)
            #expect(reason.name == name)
        }
        #expect(InterruptionType.began.rawValue == 1 && InterruptionType.ended.rawValue == 0)
        #expect(InterruptionOptions.shouldResume.rawValue == 1)
        #expect(SilenceSecondaryAudioHintType.begin.rawValue == 1)
        #expect(SessionError.Code.insufficientPriority.rawValue == 0x2170_7269)  // '!pri'
        #expect(SessionError.Code.badParam.rawValue == -50)
        #expect(SessionError.Code(rawValue: 0x2163_6174) == .incompatibleCategory)  // '!cat'
        #expect(CategoryOptions([.duckOthers, .allowAirPlay]).names == ["duckOthers", "allowAirPlay"])
        #expect(CategoryOptions.interruptSpokenAudioAndMixWithOthers.names == ["interruptSpokenAudioAndMixWithOthers"])
        #expect(CategoryOptions(name: "defaultToSpeaker") == .defaultToSpeaker)
    }
}

/// SPEC.md section 8: policies and role defaults.
struct ClassificationTests {
    @Test("the role-default table, row by row")
    func roleDefaults() {
        let rows: [(String?, SessionConfiguration)] = [
            ("phone", SessionConfiguration(.playAndRecord, mode: .voiceChat)),
            ("music", SessionConfiguration(.playback)),
            ("video", SessionConfiguration(.playback, mode: .moviePlayback)),
            ("game", SessionConfiguration(.ambient)),
            ("animation", SessionConfiguration(.ambient)),
            ("event", SessionConfiguration(.ambient)),
            ("a11y", SessionConfiguration(.playback, mode: .spokenAudio, options: .duckOthers)),
            ("production", SessionConfiguration(.playback, options: .mixWithOthers)),
            (nil, SessionConfiguration(.playback, options: .mixWithOthers)),
            ("something-else", SessionConfiguration(.playback, options: .mixWithOthers)),
        ]
        for (role, expected) in rows {
            let c = Classifier.classify(AppIdentity(binary: "paplay", role: role), policies: [])
            #expect(c.configuration == expected, "role \(role ?? "none")")
            #expect(c.source == .roleDefault(role: role))
            #expect(throws: Never.self) { try expected.validate() }
        }
    }

    static let spotify = AppPolicy(name: "spotify", source: "policies/spotify.yaml",
                                   match: .init(binary: ["spotify"], appID: ["com.spotify.Client"]),
                                   configuration: SessionConfiguration(.playback))
    static let firefox = AppPolicy(name: "firefox", match: .init(binary: ["firefox", "firefox-esr"], name: ["Firefox"]),
                                   configuration: SessionConfiguration(.playback, options: .mixWithOthers))
    static let firefoxCalls = AppPolicy(name: "firefox-calls", match: .init(binary: ["firefox"], role: ["phone"]),
                                        configuration: SessionConfiguration(.playAndRecord, mode: .videoChat))
    static let anyPhone = AppPolicy(name: "phone", match: .init(role: ["phone"]),
                                    configuration: SessionConfiguration(.playAndRecord, mode: .voiceChat), microphoneAllowed: true)

    @Test("a policy matches by app id, binary or name, and says which fact matched")
    func policyMatches() {
        let byID = Classifier.classify(AppIdentity(appID: "com.spotify.Client"), policies: [Self.spotify, Self.firefox])
        #expect(byID.source == .policy(name: "spotify", source: "policies/spotify.yaml", matched: "app-id=com.spotify.Client"))
        let byBinary = Classifier.classify(AppIdentity(binary: "firefox-esr", role: "video"), policies: [Self.spotify, Self.firefox])
        #expect(byBinary.configuration == SessionConfiguration(.playback, options: .mixWithOthers))
        #expect(byBinary.explanation.contains("binary=firefox-esr"))
        let none = Classifier.classify(AppIdentity(binary: "mpv", role: "video"), policies: [Self.spotify, Self.firefox])
        #expect(none.source == .roleDefault(role: "video"))
    }

    @Test("a browser's call tab and its music tab classify differently (one session per classification)")
    func callTabAndMusicTab() {
        let policies = [Self.firefox, Self.firefoxCalls]
        let tab = Classifier.classify(AppIdentity(binary: "firefox", role: "music"), policies: policies)
        let callTab = Classifier.classify(AppIdentity(binary: "firefox", role: "phone"), policies: policies)
        #expect(tab.configuration == Self.firefox.configuration)
        #expect(callTab.configuration == Self.firefoxCalls.configuration)
        // Without a role-specific policy, media.role=phone still makes a call (SPEC.md 5.1).
        let plain = Classifier.classify(AppIdentity(binary: "firefox", role: "phone"), policies: [Self.firefox])
        #expect(plain.configuration.isCall)
    }

    @Test("the more specific policy wins; a role-only policy is the last resort before the defaults")
    func specificity() {
        let c = Classifier.classify(AppIdentity(binary: "spotify", appID: "com.spotify.Client", role: "phone"),
                                    policies: [Self.anyPhone, Self.spotify])
        #expect(c.configuration.isCall, "the app policy is no call, so the phone role wins")
        let d = Classifier.classify(AppIdentity(binary: "linphone", role: "phone"), policies: [Self.anyPhone, Self.spotify])
        #expect(d.source == .policy(name: "phone", source: "", matched: "role=phone"))
    }
}

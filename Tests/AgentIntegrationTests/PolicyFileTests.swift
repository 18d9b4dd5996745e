import AudioPolicy
@testable import AgentTower
@testable import PolicyAgent
import Testing

/// Policy files on their own (no server): what is accepted, and what each mistake is told as.
@Suite("policy files")
struct PolicyFileTests {
    func parse(_ text: String) throws(PolicyFileError) -> AppPolicy {
        try PolicyFiles.parse(text, name: "app", path: "app.yaml")
    }

    func error(_ text: String) -> String? {
        do { _ = try parse(text); return nil } catch { return error.description }
    }

    @Test("flow lists and mappings, block lists, quotes, comments and a leading --- all read the same")
    func forms() throws {
        let flow = try parse("""
            match:
              binary: [spotify, "spotify-client"]
              app-id: ['com.spotify.Client']
            category: playback
            options: [mixWithOthers, duckOthers]
            duck-level: 0.3
            """)
        let block = try parse("""
            --- # a player
            # the apps
            match:
              binary:
                - spotify        # the binary
                - "spotify-client"
              app-id:
              - 'com.spotify.Client'
            category: "playback"
            options:
              - mixWithOthers
              - duckOthers
            duck-level: 0.3
            """)
        let mapping = try parse("""
            match: {binary: [spotify, "spotify-client"], 'app-id': ['com.spotify.Client']}
            category: playback
            options: [mixWithOthers, duckOthers]
            duck-level: 0.3
            """)
        #expect(flow.match == block.match)
        #expect(mapping.match == flow.match)
        #expect(flow.match.binary == ["spotify", "spotify-client"])
        #expect(flow.configuration == block.configuration)
        #expect(flow.duckLevel == 0.3 && block.duckLevel == 0.3)
    }

    @Test("output: port types by name or Apple's value, and device names, in order")
    func output() throws {
        let policy = try parse("""
            match: {name: [Player]}
            category: playback
            output: [alsa_output.usb-FiiO_K3-00.analog-stereo, USBAudio, headphones]
            """)
        #expect(policy.preferredOutputs == [.device("alsa_output.usb-FiiO_K3-00.analog-stereo"), .type(.usbAudio), .type(.headphones)])
        let one = try parse("match: {name: [Player]}\ncategory: playback\noutput: builtInSpeaker\n")
        #expect(one.preferredOutputs == [.type(.builtInSpeaker)])
        let alarm = try parse("match: {name: [Alarm]}\ncategory: ambient\noutput: [headphones, everywhere]\n")
        #expect(alarm.preferredOutputs == [.type(.headphones), .everywhere])
    }

    @Test("quoted text keeps what plain text cannot hold")
    func quoting() throws {
        let policy = try parse(#"""
            description: "A \"quoted\" name: with a colon # and a hash, and \u00e9"
            match:
              name: ['It''s Mine', "Tab\there"]
            category: ambient
            """#)
        #expect(policy.match.name == ["It's Mine", "Tab\there"])
    }

    @Test("each mistake names its line and column and what is accepted", arguments: [
        ("match:\n  binary: [a]\ncategory: recrod\n", "app.yaml:3:11: unknown category 'recrod' (accepted: ambient, soloAmbient, playback, record, playAndRecord, multiRoute, audioProcessing)"),
        ("match:\n  binary: [a]\ncategory: playback\ncolour: red\n", "app.yaml:4:1: unknown key 'colour' (accepted: match, category, mode, options, microphone, duck-level, declare, infer-calls, output, description)"),
        ("match:\n  binery: [a]\ncategory: playback\n", "app.yaml:2:3: unknown key match.binery (accepted: binary, app-id, name, role)"),
        ("match:\n  binary: [a]\ncategory: playback\noptions: [duckOthers, loud]\n", "app.yaml:4:23: unknown option 'loud'"),
        ("match:\n  binary: [a]\ncategory: playback\nmode: voiceChat\n", "app.yaml:1:1: "),
        ("match:\n  binary: [a]\ncategory: [playback]\n", "app.yaml:3:11: category: expected a single value"),
        ("match:\n  binary: [a]\ncategory: playback\nduck-level: loud\n", "app.yaml:4:13: duck-level: expected a number from 0 to 1"),
        ("match:\n  binary: [a]\ncategory: playback\nmicrophone: maybe\n", "app.yaml:4:13: microphone: 'maybe' is neither allow nor deny"),
        ("match:\n  binary: [a]\ncategory: playback\ndeclare: sometimes\n", "app.yaml:4:10: declare: 'sometimes' is none of allow, no-calls, deny"),
        ("match:\n  binary: [a]\ncategory: playback\ninfer-calls: maybe\n", "app.yaml:4:14: infer-calls: 'maybe' is neither yes nor no"),
        ("match:\n  binary: [a]\ncategory: playback\noutput: [usbAudio, builtInMic]\n", "app.yaml:4:20: output: 'builtInMic' is no output a session can be sent to"),
        ("match:\n  binary: [a]\ncategory: playback\noutput: {a: b}\n", "app.yaml:4:9: output: expected a list of port types or device names, the first connected wins"),
        ("match:\n  binary: [a]\ncategory: playback\noutput: ['usb dac']\n", "app.yaml:4:10: output: 'usb dac' is neither a port type"),
        ("match:\n  binary: [a]\ncategory: playback\noutput: [a, b, c, d, e, f, g, h]\n", "app.yaml:4:9: output: 8 places; at most 7"),
        ("match:\n  binary: [a]\ncategory: record\noutput: usbAudio\n", "app.yaml:4:9: output: a record session plays nothing"),
        ("match:\n  binary: [a]\ncategory: playAndRecord\nmode: voiceChat\noutput: [everywhere]\n", "app.yaml:5:9: output: everywhere (the speaker too) is for alarms and ringtones: a call never plays out loud by a rule"),
        ("category: playback\n", "app.yaml:1:1: match is missing or empty"),
        ("match:\n  binary: [a]\n", "app.yaml:1:1: category is missing"),
        ("match:\n  binary: [a]\ncategory: playback\ncategory: record\n", "app.yaml:4:1: not valid YAML: duplicated key 'category'"),
        ("match:\n\tbinary: [a]\n", "app.yaml:2:1: not valid YAML: tabs cannot indent YAML"),
        ("match:\n  binary: [a\ncategory: playback\n", "app.yaml:4:1: not valid YAML: the list opened at 2:11 is not closed"),
        ("match:\n  binary: \"a\ncategory: playback\n", "app.yaml:2:11: not valid YAML: the quoted text is not closed on its line"),
        ("match: &m\n  binary: [a]\n", "app.yaml:1:8: not valid YAML: anchors and aliases are not used in policy files"),
        ("description: |\n  text\n", "app.yaml:1:14: not valid YAML: block scalars"),
        ("match:\n  binary: [a]\n    name: [b]\n", "app.yaml:3:5: not valid YAML: this line is indented more than the key before it"),
        ("match:\n  binary: [a]\ncategory: playback\n---\nmatch: {}\n", "app.yaml:4:1: not valid YAML: a policy file holds one document"),
        ("- a\n- b\n", "app.yaml:1:1: expected a mapping of match, category"),
        ("match: {binary: [a]\ncategory: playback\n", "app.yaml:3:1: not valid YAML: the mapping opened at 1:8 is not closed"),
        ("match: {binary: [a], binary: [b]}\n", "app.yaml:1:22: not valid YAML: duplicated key 'binary'"),
        ("match: {binary [a]}\n", "app.yaml:1:9: not valid YAML: expected 'key: value' in the mapping"),
        ("match: {binary: {x: y}}\n", "app.yaml:1:17: not valid YAML: mappings inside {...}"),
        ("", "app.yaml:1:1: the file is empty"),
    ])
    func mistakes(_ text: String, _ expected: String) {
        let got = error(text)
        #expect(got?.hasPrefix(expected) == true, "got \(got ?? "no error")")
    }

    @Test("every shipped policy reads")
    func shipped() {
        let (policies, errors) = PolicyFiles.load(layers: PolicyFiles.shippedDirectories)
        #expect(errors.isEmpty, "\(errors)")
        #expect(policies.count >= 20)
    }
}

import AudioPolicy
import DBus
import Foundation
import PolicyAgent
import PulseClient
import SoundServerTesting
import Testing

/// The `audiosessiond` binary as users run it: signals, and what a killed agent leaves behind.
enum AgentProcessScenarios {
    /// The built audiosessiond, next to the test bundle.
    /// (AUDIOSESSION_AGENT_BINARY runs the tests against another build: an earlier commit's, to see a
    /// test fail without its fix.)
    static var binary: String {
        ProcessInfo.processInfo.environment["AUDIOSESSION_AGENT_BINARY"] ?? builtExecutable("audiosessiond")
    }

    /// Starts an agent (on the session bus at `bus`, or none); what it says goes to `agent.log` in the
    /// state directory's folder (appended).
    static func start(_ server: PrivateServer, state: String, bus: String? = nil, options: [String] = []) throws -> ChildProcess {
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let log = open("\(state)/../agent.log", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(log) }
        return try ChildProcess.spawn([binary, "--session-bus", bus ?? "none", "--system-bus", "none", "--server", server.address, "--state-dir", state, "--verbose",
                                       "--route-log", "\(state)/routes.jsonl"] + options, stderr: log)
    }

    /// Waits until this agent process is a client of the server (by its process id: a killed
    /// predecessor's client may still be listed a moment after it died) and has taken in what it found.
    static func connected(_ agent: ChildProcess, _ observer: PulseClient) async throws {
        try await observer.waitForAgentClient(processID: agent.pid)
    }

    /// Whether the agent's journal comes to contain `text` within 5 s (recorded as an issue if not). A
    /// file gives no event to wait on: it is read again every few milliseconds.
    static func journal(in state: String, comesToContain text: String) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while !((try? String(contentsOfFile: "\(state)/held.log", encoding: .utf8)) ?? "").contains(text) {
            guard ContinuousClock.now < deadline else { Issue.record("the journal never had \(text)"); return false }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// Whether the agents' log (`agent.log`, next to `state`) comes to contain every one of `texts` on
    /// one line within `timeout` (recorded as an issue if not); read again every few milliseconds, as
    /// the journal is.
    /// `after`: what was in the log before (its length in bytes, `agentLogSize`) is not looked at.
    static func agentLog(of state: String, comesToContain texts: [String], after: Int = 0, timeout: Duration = .seconds(30)) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !((try? Data(contentsOf: URL(fileURLWithPath: "\(state)/../agent.log"))).map { String(decoding: $0.dropFirst(after), as: UTF8.self) } ?? "")
            .split(separator: "\n").contains(where: { line in texts.allSatisfy { line.contains($0) } }) {
            guard ContinuousClock.now < deadline else {
                let log = (try? Data(contentsOf: URL(fileURLWithPath: "\(state)/../agent.log"))).map { String(decoding: $0.dropFirst(after), as: UTF8.self) } ?? ""
                Issue.record("the agent's log never had \(texts); since the mark:\n\(log.split(separator: "\n").suffix(60).joined(separator: "\n"))")
                return false
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// The agents' log's length in bytes now.
    static func agentLogSize(of state: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: "\(state)/../agent.log"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// An agent started with `state`, music playing, and a call that the agent has muted the music for.
    static func musicMutedByCall(_ server: PrivateServer, _ observer: PulseClient, state: String, bus: String? = nil) async throws
        -> (agent: ChildProcess, song: ClientStream, call: ClientStream) {
        let agent = try start(server, state: state, bus: bus)
        let song = try ClientStream.start(on: server, properties: ["media.role": "music"])
        try await observer.wait(for: song)
        let call = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
        try await observer.wait(for: "the music muted by the agent") { s in song.find(in: s).flatMap { $0.isMuted ? true : nil } }
        return (agent, song, call)
    }

    /// SIGTERM: the agent undoes what it holds and exits 0.
    static func sigtermUndoesAndExits(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let (agent, song, call) = try await musicMutedByCall(server, observer, state: server.directory + "/agent-state")
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
            // The agent has its unmute acknowledged before it exits; the observer hears of it on its own
            // connection, which may come after the agent has gone (on PipeWire 1.4 under load the
            // snapshot still said muted at the exit): wait for the report. A lost unmute still fails.
            try await observer.wait(for: "the music unmuted by the stopped agent", timeout: .seconds(2)) { s in
                song.find(in: s).flatMap { $0.isMuted ? nil : true }
            }
            withExtendedLifetime(call) {}
        }
    }

    /// kill -9 while the music is muted by a call; the call ends meanwhile; the next agent undoes the
    /// mute the dead one left (SPEC.md 5.12).
    static func killNineThenRestartUndoesLeftovers(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            let (first, song, call) = try await musicMutedByCall(server, observer, state: state)
            first.signal(SIGKILL)
            _ = await first.wait()
            call.stop()
            try await observer.wait(for: "the call gone") { s in call.find(in: s) == nil ? true : nil }
            #expect(song.find(in: observer.snapshot)?.isMuted == true, "the dead agent left the music muted")
            let second = try start(server, state: state)
            try await observer.wait(for: "the next agent to unmute the music") { s in song.find(in: s).flatMap { $0.isMuted ? nil : true } }
            second.signal(SIGTERM)
            #expect(await second.wait() == 0)
        }
    }
}

extension AgentProcessScenarios {
    /// kill -9 while the music is muted by a call; the music app and the call both end while no agent
    /// runs, so no stream is left to unmute. The server still remembers "music: muted" from the dead
    /// agent's mute: the next agent puts that memory back as it was, and a fresh music stream plays.
    static func killNineLeavesNoRememberedMute(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            let (first, song, call) = try await musicMutedByCall(server, observer, state: state)
            // The journal has the memory as it was once the agent's read of it has come back.
            guard try await journal(in: state, comesToContain: "\"remembered\"") else { return }
            first.signal(SIGKILL)
            _ = await first.wait()
            song.stop()
            call.stop()
            try await observer.wait(for: "both gone") { s in s.sinkInputs.isEmpty ? true : nil }
            let second = try start(server, state: state)
            try await connected(second, observer)
            let fresh = try ClientStream.start(on: server, applicationName: "Fresh", properties: ["media.role": "music"])
            try await observer.wait(for: "the fresh music stream to play unmuted", timeout: .seconds(10)) { s in
                fresh.find(in: s).flatMap { $0.device != nil && !$0.isCorked && !$0.isMuted ? true : nil }
            }
            // And it stays so: the next agent has nothing to hold and the server's memory says unmuted.
            // (WirePlumber 0.5 does not show its music entry through ext-stream-restore: its saved file
            // is read instead.)
            if kind == .pipewire14 {
                try await server.waitForWirePlumberMemory("Output/Audio:media.role:Music") { $0.isMuted == false }
            } else {
                let entries = try await observer.readStreamRestore()
                #expect(entries.first { $0.name == "sink-input-by-media-role:music" }?.isMuted != true, "\(entries)")
            }
            second.signal(SIGTERM)
            #expect(await second.wait() == 0)
        }
    }

    /// Issue 23: kill -9 while a stream the agent moved off the default plays. The journal says the
    /// stream was moved: the successor puts back where its role's streams go (the server remembered the
    /// speaker, and would have sent the role's next stream there for good). `goneFirst`: the stream ends
    /// before the successor starts; else it plays on, and the successor, with no policy sending it
    /// anywhere, moves it back to the default (it no longer followed the default).
    static func killNineWhileMovedLeavesNoDeviceMemory(_ kind: ServerKind, goneFirst: Bool) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let policies = server.directory + "/policies"
            try FileManager.default.createDirectory(atPath: policies, withIntermediateDirectories: true)
            try "match:\n  name: [Speakers Only]\ncategory: playback\noutput: [builtInSpeaker]\n"
                .write(toFile: "\(policies)/speakers-only.yaml", atomically: true, encoding: .utf8)
            let state = server.directory + "/agent-state"
            let first = try start(server, state: state, options: ["--policies", policies])
            try await connected(first, observer)
            // (Plugged once the agent runs: the last device in is the default by its rule.)
            try await server.plug(.usbHeadset)
            try await observer.wait(for: "the headset the server's default", timeout: .seconds(30)) { $0.defaultSink?.name == "usb_headset" ? true : nil }
            let song = try ClientStream.start(on: server, applicationName: "Speakers Only", properties: ["media.role": "music"])
            try await observer.wait(for: "the music moved to the speaker", timeout: .seconds(20), on(song, "builtin_speaker"))
            guard try await journal(in: state, comesToContain: "\"moved\":true") else { return }
            first.signal(SIGKILL)
            _ = await first.wait()
            if goneFirst {
                song.stop()
                try await observer.wait(for: "the music gone") { s in s.sinkInputs.isEmpty ? true : nil }
            }
            // The successor has no policy sending anything anywhere; it stops once it has put back.
            let logged = agentLogSize(of: state)
            let second = try start(server, state: state)
            try await connected(second, observer)
            if !goneFirst {
                try await observer.wait(for: "the music back on the default", timeout: .seconds(10), on(song, "usb_headset"))
            }
            // The memory put back while the successor runs (through streams of its own on PipeWire:
            // seconds under load, more than a stop waits for).
            guard try await agentLog(of: state, comesToContain: ["the server's memory is back", "sink-input-by-media-role:music"], after: logged) else { return }
            second.signal(SIGTERM)
            #expect(await second.wait() == 0)
            song.stop()
            let next = try ClientStream.start(on: server, applicationName: "Another Player", properties: ["media.role": "music"])
            try await observer.wait(for: "the role's next stream, no agent running, on the default", timeout: .seconds(10), on(next, "usb_headset"))
        }
    }

    /// Issue 23: kill -9 while an alarm plays on every output, through the agent's own sink for the
    /// headset and the speaker; the alarm ends. The next agent (no policy sends anything anywhere)
    /// removes the sink its predecessor left, and puts back where the alarm role's streams go: the
    /// next alarm, with no agent running, plays on the default.
    static func killNineWhileAnAlarmPlaysEverywhere(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let policies = server.directory + "/policies"
            try FileManager.default.createDirectory(atPath: policies, withIntermediateDirectories: true)
            try "match:\n  name: [Alarm Clock]\ncategory: ambient\noutput: [everywhere]\n"
                .write(toFile: "\(policies)/alarm-clock.yaml", atomically: true, encoding: .utf8)
            let state = server.directory + "/agent-state"
            let first = try start(server, state: state, options: ["--policies", policies])
            try await connected(first, observer)
            try await server.plug(.usbHeadset)
            try await observer.wait(for: "the headset the server's default", timeout: .seconds(30)) { $0.defaultSink?.name == "usb_headset" ? true : nil }
            let both = CombinedOutputs.name(["usb_headset", "builtin_speaker"])
            let alarm = try ClientStream.start(on: server, applicationName: "Alarm Clock", properties: ["media.role": "alarm"])
            try await observer.wait(for: "the alarm on the sink for both", timeout: .seconds(20), on(alarm, both))
            guard try await journal(in: state, comesToContain: "\"moved\":true") else { return }
            first.signal(SIGKILL)
            _ = await first.wait()
            alarm.stop()
            try await observer.wait(for: "the alarm gone") { s in s.sinkInputs.values.contains { $0.client != nil } ? nil : true }
            #expect(observer.snapshot.sink(named: both) != nil, "the killed agent's sink is still there")
            let logged = agentLogSize(of: state)
            let second = try start(server, state: state)
            try await connected(second, observer)
            try await observer.wait(for: "the predecessor's sink removed", timeout: .seconds(10)) { s in
                s.sinks.values.contains { CombinedOutputs.isCombination($0.name) } ? nil : true
            }
            guard try await agentLog(of: state, comesToContain: ["the server's memory is back", "sink-input-by-media-role:alarm"], after: logged) else { return }
            second.signal(SIGTERM)
            #expect(await second.wait() == 0)
            let next = try ClientStream.start(on: server, applicationName: "Alarm Clock", properties: ["media.role": "alarm"])
            try await observer.wait(for: "the next alarm, no agent running, on the default", timeout: .seconds(10), on(next, "usb_headset"))
        }
    }

    /// Issue 23: a call never moves to a TV by a rule. The monitor's HDMI output is the server's
    /// default when the agent starts (so the default route by the agent's rules too: no choice of the
    /// user's); a call plays on the USB headset (private first); the headset goes: the server sends the
    /// call to its default, the TV, and the agent moves it to the speaker, its route change (in the
    /// log) saying that no private output is left.
    static func callNeverMovesToTheTV(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic, .hdmi, .usbHeadset]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            try await server.pactl("set-default-sink", "hdmi_monitor")
            try await observer.wait(for: "the TV the server's default", timeout: .seconds(30)) { $0.defaultSink?.name == "hdmi_monitor" ? true : nil }
            let state = server.directory + "/agent-state"
            let agent = try start(server, state: state)
            try await connected(agent, observer)
            let call = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
            try await observer.wait(for: "the call on the headset", timeout: .seconds(20), on(call, "usb_headset"))
            let logged = agentLogSize(of: state)
            try await server.unplug(.usbHeadset)
            try await observer.wait(for: "the call on the speaker", timeout: .seconds(20), on(call, "builtin_speaker"))
            guard try await agentLog(of: state, comesToContain: ["no private output left: the call plays on a public one (builtInSpeaker builtin_speaker)"],
                                     after: logged) else { return }
            #expect(try await server.defaultSinkName() == "hdmi_monitor", "the default stays the TV: \((try? String(contentsOfFile: server.directory + "/agent.log", encoding: .utf8)) ?? "")")
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
        }
    }

    /// PulseAudio's own role-cork would mute the music too (a double mute that outlives the agent's
    /// decision): the agent unloads it while it runs and loads it again when it stops.
    static func takesOverServerModules() async throws {
        try await withPrivateServer(.pulseaudio, devices: [.speaker]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            try await observer.loadModule("module-role-cork", arguments: "trigger_roles=phone cork_roles=music")
            try await observer.wait(for: "role-cork loaded") { s in s.modules.values.contains { $0.name == "module-role-cork" } ? true : nil }
            let log = server.directory + "/agent.log"
            let logFD = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            defer { close(logFD) }
            let agent = try ChildProcess.spawn([binary, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", server.directory + "/s"], stderr: logFD)
            try await observer.wait(for: "role-cork unloaded") { s in s.modules.values.contains { $0.name == "module-role-cork" } ? nil : true }
            agent.signal(SIGTERM)
            let status = await agent.wait()
            #expect(status == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            // The agent is gone: a module the observer hears of now was loaded by it before it exited.
            let back = try await observer.wait(for: "role-cork loaded again") { s in s.modules.values.first { $0.name == "module-role-cork" } }
            #expect(back.argument == "trigger_roles=phone cork_roles=music")
        }
    }

    /// PulseAudio's module-bluetooth-policy would switch headsets to hands-free on its own: while the
    /// agent runs it is loaded with auto_switch=0, and with its own arguments again once the agent stops.
    static func takesOverBluetoothSwitching() async throws {
        try await withPrivateServer(.pulseaudio, devices: [.speaker]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            try await observer.loadModule("module-bluetooth-policy", arguments: "auto_switch=1 a2dp_source=1")
            @Sendable func policy(_ s: Snapshot) -> [String] { s.modules.values.filter { $0.name == "module-bluetooth-policy" }.map(\.argument) }
            let log = server.directory + "/agent.log"
            let logFD = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            defer { close(logFD) }
            let agent = try ChildProcess.spawn([binary, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", server.directory + "/s"], stderr: logFD)
            try await observer.wait(for: "bluetooth-policy without auto_switch") { s in
                policy(s) == ["auto_switch=0 a2dp_source=1"] ? true : nil
            }
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
            do {
                try await observer.wait(for: "bluetooth-policy as it was") { s in policy(s) == ["auto_switch=1 a2dp_source=1"] ? true : nil }
            } catch {
                Issue.record("\(error): \(policy(observer.snapshot)); the agent said:\n\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            }
        }
    }

    /// kill -9 while the agent has PulseAudio's modules taken over: the next agent, once stopped, puts
    /// them back as they were (the journal knows them).
    static func killNineThenModulesComeBack() async throws {
        try await withPrivateServer(.pulseaudio, devices: [.speaker]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            try await observer.loadModule("module-role-cork", arguments: "trigger_roles=phone cork_roles=music")
            try await observer.loadModule("module-bluetooth-policy", arguments: "auto_switch=1")
            @Sendable func modules(_ s: Snapshot) -> [String] {
                s.modules.values.filter { $0.name == "module-role-cork" || $0.name == "module-bluetooth-policy" }
                    .map { "\($0.name) \($0.argument)" }.sorted()
            }
            let asTheyWere = ["module-bluetooth-policy auto_switch=1", "module-role-cork trigger_roles=phone cork_roles=music"]
            try await observer.wait(for: "both loaded") { s in modules(s) == asTheyWere ? true : nil }
            let state = server.directory + "/agent-state"
            let first = try start(server, state: state)
            try await observer.wait(for: "taken over") { s in modules(s) == ["module-bluetooth-policy auto_switch=0"] ? true : nil }
            // The journal knows them once the copy is loaded: give it the time to say so.
            guard try await journal(in: state, comesToContain: "module-role-cork") else { return }
            first.signal(SIGKILL)
            _ = await first.wait()
            let log = server.directory + "/second.log"
            let logFD = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            defer { close(logFD) }
            let second = try ChildProcess.spawn([binary, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", state], stderr: logFD)
            try await connected(second, observer)
            second.signal(SIGTERM)
            let status = await second.wait()
            #expect(status == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            do {
                try await observer.wait(for: "the modules as they were") { s in modules(s) == asTheyWere ? true : nil }
            } catch {
                Issue.record("\(error): \(modules(observer.snapshot)); the agent said:\n\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            }
        }
    }

    /// SIGHUP with a broken policy file: the agent reports it and keeps running with the last good set.
    static func sighupReloadKeepsRunning(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let policies = server.directory + "/policies"
            try FileManager.default.createDirectory(atPath: policies, withIntermediateDirectories: true)
            try "match:\n  app-id: [org.example.Recorder]\ncategory: record\n"
                .write(toFile: "\(policies)/recorder.yaml", atomically: true, encoding: .utf8)
            let log = server.directory + "/agent.log"
            let logFD = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            defer { close(logFD) }
            let agent = try ChildProcess.spawn([binary, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", server.directory + "/s",
                                                "--policies", policies], stderr: logFD)
            try await connected(agent, observer)
            try "match:\n  app-id: [org.example.Recorder]\ncategory: [record\n"
                .write(toFile: "\(policies)/recorder.yaml", atomically: true, encoding: .utf8)
            agent.signal(SIGHUP)
            // The recorder policy still works: recording silences the music.
            let song = try ClientStream.start(on: server, properties: ["media.role": "music"])
            try await observer.wait(for: song)
            let recording = try ClientStream.start(on: server, direction: .input, applicationName: "Recorder",
                                                   properties: ["application.id": "org.example.Recorder"])
            try await observer.wait(for: "recording silences the music") { s in song.find(in: s).flatMap { $0.isMuted ? true : nil } }
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
            let text = try String(contentsOfFile: log, encoding: .utf8)
            #expect(text.contains("recorder.yaml:4:1: not valid YAML"), "the error names file, line and column")
            withExtendedLifetime(recording) {}
        }
    }
}

extension AgentProcessScenarios {
    /// systemd's Type=notify: the agent says READY=1 on $NOTIFY_SOCKET once it manages the server and
    /// the apps can find it on the session bus (an abstract socket, as systemd gives), and STOPPING=1 on
    /// SIGTERM.
    static func readinessIsSaid(_ kind: ServerKind) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        try await withPrivateServer(kind, devices: [.speaker]) { server in
            let name = "audiosession-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            #expect(fd >= 0)
            defer { close(fd) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = [UInt8(0)] + Array(name.utf8)
            withUnsafeMutableBytes(of: &address.sun_path) { bytes in for (i, b) in path.enumerated() { bytes[i] = b } }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sa_family_t>.size + path.count)) }
            }
            #expect(bound == 0, "bind: \(String(cString: strerror(errno)))")
            let state = "\(server.directory)/agent"
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            let agent = try ChildProcess.spawn([binary, "--session-bus", bus.address, "--system-bus", "none", "--server", server.address, "--state-dir", state],
                                               environment: ["NOTIFY_SOCKET": "@" + name])
            /// The next datagram, within 10 s (poll: a socket gives no other event).
            func next() -> String? {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 10_000) == 1 else { return nil }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = recv(fd, &buffer, buffer.count, 0)
                return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
            }
            let ready = next()
            #expect(ready?.split(separator: "\n").contains("READY=1") == true, "\(ready ?? "nothing")")
            // Ready means managing: the agent is a client of the server by then.
            let observer = try await server.connect()
            defer { observer.close() }
            #expect(observer.snapshot.clients.values.contains { $0.properties["application.process.id"] == "\(agent.pid)" })
            // And the apps' API is on the bus: an app started by the same unit finds it at once.
            let connection = try bus.connect()
            defer { connection.close() }
            let owner = try? await connection.callDaemon("GetNameOwner", [.string("org.audiosession.Agent1")]).first?.string
            #expect(owner?.hasPrefix(":") == true, "org.audiosession.Agent1 is owned once READY=1 is said")
            agent.signal(SIGTERM)
            let stopping = next()
            #expect(stopping?.contains("STOPPING=1") == true, "\(stopping ?? "nothing")")
            #expect(await agent.wait() == 0)
        }
    }
}

/// Issue 20, cases 4 and 5: who decides that an agent runs, and whether apps reach it.
extension AgentProcessScenarios {
    /// Starts an agent on `bus` with a log of its own (truncated), and returns both.
    static func startLogged(_ server: PrivateServer, state: String, bus: PrivateSessionBus, log name: String) throws -> (ChildProcess, String) {
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let log = "\(server.directory)/\(name)"
        let fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer { close(fd) }
        let agent = try ChildProcess.spawn([binary, "--session-bus", bus.address, "--system-bus", "none", "--server", server.address,
                                            "--state-dir", state, "--verbose"], stderr: fd)
        return (agent, log)
    }

    /// Case 4: a client of the server that calls itself an agent (application.id=org.audiosession.agent,
    /// application.process.id=1: its own word, which no server verifies) made the agent refuse to start.
    /// Now it starts, and manages the server (a call mutes the music). (The client says both what agents
    /// said then and what they say now, `audiosession.agent`.)
    static func aForgedAgentClientDoesNotKeepTheAgentOut(_ kind: ServerKind) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let forged = try ChildProcess.spawn(["pactl", "subscribe"], environment: [
                "PULSE_SERVER": server.address,
                "PULSE_PROP": "application.id=org.audiosession.agent audiosession.agent=org.audiosession.agent application.process.id=1",
            ])
            defer { forged.signal(SIGKILL) }
            try await observer.wait(for: "the forged agent client") { s in
                s.clients.values.contains { $0.properties[Agent.clientProperty] == Agent.applicationID && $0.properties["application.process.id"] == "1" } ? true : nil
            }
            let (agent, log) = try startLogged(server, state: server.directory + "/agent-state", bus: bus, log: "agent.log")
            do {
                try await connected(agent, observer)
            } catch {
                Issue.record("\(error); the agent said:\n\(tail(of: log))")
                agent.signal(SIGKILL)
                _ = await agent.wait()
                return
            }
            let song = try ClientStream.start(on: server, properties: music)
            try await observer.wait(for: song)
            let call = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
            try await observer.wait(for: "the call mutes the music") { s in song.find(in: s).flatMap { $0.isMuted ? true : nil } }
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
            withExtendedLifetime(call) {}
        }
    }

    /// Case 4: two agents with state directories of their own started at the same moment on one server,
    /// round after round: exactly one runs, the other says who runs and exits 1. (Before, both could
    /// see each other among the server's clients and refuse, or neither, and both run.)
    static func twoAgentsStartedTogetherExactlyOneRuns(_ kind: ServerKind, rounds: Int = 5) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            for round in 1...rounds {
                let (a, logA) = try startLogged(server, state: "\(server.directory)/a\(round)", bus: bus, log: "a\(round).log")
                let (b, logB) = try startLogged(server, state: "\(server.directory)/b\(round)", bus: bus, log: "b\(round).log")
                // The first to exit is the one that gave way; if none does within 10 s, both run.
                let (exits, exited) = AsyncStream.makeStream(of: (pid: pid_t, status: Int32).self)
                for agent in [a, b] { Task { exited.yield((agent.pid, await agent.wait())) } }
                let timer = Task { if (try? await Task.sleep(for: .seconds(10))) != nil { exited.yield((0, -1)) } }
                var next = exits.makeAsyncIterator()
                guard let first = await next.next(), first.pid != 0 else {
                    Issue.record("round \(round): both agents ran; they said:\n\(tail(of: logA))\n---\n\(tail(of: logB))")
                    a.signal(SIGKILL)
                    b.signal(SIGKILL)
                    _ = await next.next()
                    _ = await next.next()
                    continue
                }
                timer.cancel()
                let (winner, loserLog, winnerLog) = first.pid == a.pid ? (b, logA, logB) : (a, logB, logA)
                #expect(first.status == 1, "round \(round): the agent that gave way exited \(first.status): \(tail(of: loserLog))")
                #expect(tail(of: loserLog).contains("another audiosessiond"), "round \(round): \(tail(of: loserLog))")
                do {
                    try await connected(winner, observer)
                } catch {
                    Issue.record("round \(round): the other agent does not run either: \(error); it said:\n\(tail(of: winnerLog))")
                }
                winner.signal(SIGTERM)
                let last = await next.next()
                #expect(last?.pid == winner.pid && last?.status == 0, "round \(round): \(String(describing: last)): \(tail(of: winnerLog))")
            }
        }
    }

    /// Case 5: a process that owns org.audiosession.Agent1 when the agent starts: the agent queues for the
    /// name and takes it when that process leaves; meanwhile `audiosessionctl status` says apps cannot
    /// reach the agent (exit status 3), and once the name is the agent's, 0.
    static func theAppsNameIsTakenWhenTheSquatterLeaves(_ kind: ServerKind) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let squatter = try bus.connect()
            try await squatter.requestName("org.audiosession.Agent1")
            let (agent, log) = try startLogged(server, state: server.directory + "/agent-state", bus: bus, log: "agent.log")
            @Sendable func apps(_ s: Snapshot) -> String? {
                s.clients.values.first { $0.properties["application.process.id"] == "\(agent.pid)" }?.properties[ControlTower.appsProperty]
            }
            let ctl = builtExecutable("audiosessionctl")
            do {
                try await observer.wait(for: "the agent to say apps cannot reach it") { s in apps(s)?.hasPrefix("not served") == true ? true : nil }
                let status = try await runCommand([ctl, "status", "--server", server.address, "--bus", bus.address], check: false)
                #expect(status.status == 3, "exit status \(status.status): \(status.stdout)\(status.stderr)")
                #expect(status.stdout.contains("apps: cannot reach the agent: not served: org.audiosession.Agent1 is owned by process \(getpid())"),
                        "\(status.stdout)")
                squatter.close()
                try await observer.wait(for: "the agent to take the name once the squatter left") { s in apps(s) == "served" ? true : nil }
            } catch {
                Issue.record("\(error); the agent said:\n\(tail(of: log))")
                squatter.close()
                agent.signal(SIGKILL)
                _ = await agent.wait()
                return
            }
            let connection = try bus.connect()
            defer { connection.close() }
            let owner = try await connection.callDaemon("GetNameOwner", [.string("org.audiosession.Agent1")]).first?.string ?? ""
            let pid = try await connection.callDaemon("GetConnectionUnixProcessID", [.string(owner)]).first?.integer
            #expect(pid == Int64(agent.pid), "org.audiosession.Agent1 is the agent's")
            let status = try await runCommand([ctl, "status", "--server", server.address, "--bus", bus.address], check: false)
            #expect(status.status == 0, "exit status \(status.status): \(status.stdout)\(status.stderr)")
            #expect(status.stdout.contains("apps: served on the session bus"), "\(status.stdout)")
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
        }
    }
}

/// Issue 23 with the real binaries: `audiosessionctl route` over the session bus, and the choice kept
/// in the state directory for the next run.
extension AgentProcessScenarios {
    static func routeChoiceOutlivesTheAgent(_ kind: ServerKind) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        try await withPrivateServer(kind, devices: [.speaker, .internalMic, .usbHeadset]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let ctl = builtExecutable("audiosessionctl")
            let state = server.directory + "/agent-state"
            let (agent, log) = try startLogged(server, state: state, bus: bus, log: "agent.log")
            do {
                try await connected(agent, observer)
                try await bus.waitForOwner(of: "org.audiosession.Agent1")
                let pick = try await runCommand([ctl, "route", "builtin_speaker", "--bus", bus.address], check: false)
                #expect(pick.status == 0 && pick.stdout.hasPrefix("default output on builtin_speaker (remembered with "), "\(pick.stdout)\(pick.stderr)")
                let chosen = try await runCommand([ctl, "route", "--category", "playback", "usb_headset", "--bus", bus.address], check: false)
                #expect(chosen.status == 0 && chosen.stdout.hasPrefix("category playback on usb_headset"), "\(chosen.stdout)\(chosen.stderr)")
                let bad = try await runCommand([ctl, "route", "--category", "playback", "nowhere", "--bus", bus.address], check: false)
                #expect(bad.status != 0 && bad.stderr.contains("no output device 'nowhere' (connected: builtin_speaker, usb_headset)"), "\(bad.stderr)")
                let shown = try await runCommand([ctl, "route", "--bus", bus.address], check: false)
                #expect(shown.stdout.contains("choices: default output builtin_speaker; category playback on usb_headset"), "\(shown.stdout)")
                _ = try await observer.wait(for: "the speaker the default", timeout: .seconds(20)) { $0.defaultSink?.name == "builtin_speaker" ? true : nil }
                let song = try ClientStream.start(on: server, applicationName: "Music", properties: music)
                _ = try await observer.wait(for: "the music on the headset", timeout: .seconds(20), on(song, "usb_headset"))
                agent.signal(SIGTERM)
                #expect(await agent.wait() == 0)
                song.stop()
            } catch {
                Issue.record("\(error); the agent said:\n\(tail(of: log))")
                agent.signal(SIGKILL)
                _ = await agent.wait()
                return
            }
            // The next run: the choice comes back from the state directory.
            let (next, nextLog) = try startLogged(server, state: state, bus: bus, log: "next.log")
            do {
                try await connected(next, observer)
                let song = try ClientStream.start(on: server, applicationName: "Music", properties: music)
                _ = try await observer.wait(for: "the next run's music on the headset", timeout: .seconds(20), on(song, "usb_headset"))
                #expect(try await server.defaultSinkName() == "builtin_speaker")
                next.signal(SIGTERM)
                #expect(await next.wait() == 0)
                withExtendedLifetime(song) {}
            } catch {
                Issue.record("\(error); the next agent said:\n\(tail(of: nextLog))")
                next.signal(SIGKILL)
                _ = await next.wait()
            }
        }
    }
}

/// Issue 20, cases 7a and 8a, with the real binary.
extension AgentProcessScenarios {
    /// Case 7a: the agent killed in the middle of a duck's ramp, the server restarted, a music stream
    /// started before the next agent: the server gives it the volume it remembered on the ramp's way
    /// (43 % was seen), and the next agent left it there (its predecessor's journal said the duck's
    /// level only); on PipeWire 0.3 every later music stream started there, agent or not. The kill is
    /// sent as soon as the ramp is seen under way, and the ramp made to last 2 s (`--duck-fade`): at the
    /// default 150 ms, a full suite on two busy cores had the kill land after the ramp in 4 rounds of 4.
    /// Rounds are played until one kill lands mid-ramp.
    static func killNineMidRampThenServerRestartLeavesNoTrace(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            let log = server.directory + "/agent.log"
            var midRamp: [Double] = []
            for round in 1...4 where midRamp.isEmpty {
                let agent = try start(server, state: state, options: ["--duck-fade", "2000"])
                try await connected(agent, observer)
                let song = try ClientStream.start(on: server, applicationName: "Music", properties: music)
                try await observer.wait(for: song)
                let voice = try ClientStream.start(on: server, applicationName: "Reader", properties: reader)
                try await observer.wait(for: "round \(round): the duck's ramp under way") { s in
                    song.find(in: s).flatMap { $0.volume.overall.fraction < 0.95 ? true : nil }
                }
                agent.signal(SIGKILL)
                _ = await agent.wait()
                try await observerCaughtUp(observer)
                let left = song.find(in: observer.snapshot)?.volume.overall.fraction ?? 0
                if left > 0.6 && left < 0.95 { midRamp.append(left) }
                voice.stop()
                song.stop()
                try await server.restart()
                _ = try await observer.wait(for: "round \(round): the observer back") { _ in observer.isConnected ? true : nil }
                // Before the next agent, a music stream: given what the server remembers.
                let early = try ClientStream.start(on: server, applicationName: "Music", properties: music)
                _ = try await observer.wait(for: "round \(round): the early stream linked") { s in early.find(in: s).flatMap { $0.device != nil ? true : nil } }
                let next = try start(server, state: state)
                try await connected(next, observer)
                try await waitVolume(observer, early, 1.0, "round \(round) (killed at \(Int(left * 100)) %): the next agent puts the early stream back", log: log)
                next.signal(SIGTERM)
                #expect(await next.wait() == 0)
                early.stop()
                try await freshStream(server, observer, name: "Music", expect: 1.0, "round \(round), no agent running", log: log)
            }
            #expect(!midRamp.isEmpty, "no kill landed in the middle of the ramp in 4 rounds")
        }
    }

    /// Waits until the observer has been told everything the server did before now: a marker sink's
    /// appearance comes after it.
    static func observerCaughtUp(_ observer: PulseClient) async throws {
        let name = "marker_\(UInt32.random(in: 0...UInt32.max))"
        let index = try await observer.loadModule("module-null-sink", arguments: "sink_name=\(name)")
        _ = try await observer.wait(for: "the marker sink") { s in s.sinks.values.contains { $0.name == name } ? true : nil }
        try await observer.unloadModule(index)
    }

    /// Case 8a: an agent started while a call already runs mutes the music and pauses its player (its
    /// listing of the players came after its decision: mpv played on, muted, through the call), and
    /// plays it again after the call.
    /// `callFirst`: the call's stream is there before mpv's (PipeWire's indexes say nothing of which
    /// came first either way): the agent found the player after the call, muted it and never paused it.
    static func startedDuringACallPausesThePlayer(_ kind: ServerKind, callFirst: Bool = false) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let bus = try await PrivateSessionBus.start()
            defer { bus.stop() }
            var early: ClientStream?
            if callFirst {
                early = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
                try await observer.wait(for: early!)
            }
            let mpv = try MPVPlayer.start(on: server, bus: bus)
            let connection = try bus.connect()
            defer { connection.close() }
            let remote = PlayerRemote(connection, name: MPVPlayer.busName)
            do {
                try await remote.wait(for: "Playing")
                // (mpv says Playing before its stream is there: the music must play before the call.)
                _ = try await observer.wait(for: "mpv's stream running") { s in
                    s.sinkInputs.values.first { $0.properties["application.process.id"] == "\(mpv.process.pid)" && !$0.isCorked && $0.device != nil }
                }
                let call = try early ?? ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
                try await observer.wait(for: call)
                let state = server.directory + "/agent-state"
                let agent = try start(server, state: state, bus: bus.address)
                try await connected(agent, observer)
                try await remote.wait(for: "Paused", timeout: .seconds(20))
                _ = try await observer.wait(for: "mpv muted under the call") { s in
                    s.sinkInputs.values.first { $0.properties["application.process.id"] == "\(mpv.process.pid)" && $0.isMuted }
                }
                call.stop()
                try await remote.wait(for: "Playing", timeout: .seconds(20))
                _ = try await observer.wait(for: "mpv unmuted after the call") { s in
                    s.sinkInputs.values.first { $0.properties["application.process.id"] == "\(mpv.process.pid)" && !$0.isMuted }
                }
                agent.signal(SIGTERM)
                #expect(await agent.wait() == 0)
            } catch {
                Issue.record("the agent said:\n\(tail(of: server.directory + "/agent.log"))")
                await mpv.stop()
                throw error
            }
            await mpv.stop()
        }
    }
}

@Suite("audiosessiond process on PulseAudio", .serialized, .timeLimit(.minutes(2)))
struct AgentProcessOnPulseAudio {
    @Test("PulseAudio: agent process: audiosessionctl route chooses the default and a category's output, and the next run brings them back (issue 23)")
    func routeChoiceOutlivesTheAgent() async throws { try await AgentProcessScenarios.routeChoiceOutlivesTheAgent(.pulseaudio) }
    @Test("PulseAudio: agent process: killed in the middle of a duck's ramp, the server restarted: a music stream started before the next agent is put back, and none after starts lower (issue 20 case 7a)")
    func killNineMidRamp() async throws { try await AgentProcessScenarios.killNineMidRampThenServerRestartLeavesNoTrace(.pulseaudio) }
    @Test("PulseAudio: agent process: started while a call runs, it pauses the playing mpv and plays it again after (issue 20 case 8a)")
    func startedDuringACall() async throws { try await AgentProcessScenarios.startedDuringACallPausesThePlayer(.pulseaudio) }
    @Test("PulseAudio: agent process: started while a call runs whose stream came before mpv's, it pauses mpv too, and plays it again after (issue 20 case 8a)")
    func startedDuringAnEarlierCall() async throws { try await AgentProcessScenarios.startedDuringACallPausesThePlayer(.pulseaudio, callFirst: true) }
    @Test("PulseAudio: agent process: says READY=1 to systemd once it manages the server, STOPPING=1 on SIGTERM")
    func readiness() async throws { try await AgentProcessScenarios.readinessIsSaid(.pulseaudio) }
    @Test("PulseAudio: agent process: takes over role-cork and gives it back")
    func takeover() async throws { try await AgentProcessScenarios.takesOverServerModules() }
    @Test("PulseAudio: agent process: SIGHUP with a bad policy file keeps running")
    func sighup() async throws { try await AgentProcessScenarios.sighupReloadKeepsRunning(.pulseaudio) }
    @Test("PulseAudio: agent process: SIGTERM undoes and exits")
    func sigterm() async throws { try await AgentProcessScenarios.sigtermUndoesAndExits(.pulseaudio) }
    @Test("PulseAudio: agent process: kill -9, streams gone, the next agent puts the server's memory back")
    func killNineLeavesNoRememberedMute() async throws { try await AgentProcessScenarios.killNineLeavesNoRememberedMute(.pulseaudio) }
    @Test("PulseAudio: agent process: kill -9 while a stream it moved plays, the stream gone, the next agent puts back where its role's streams go")
    func killNineWhileMoved() async throws { try await AgentProcessScenarios.killNineWhileMovedLeavesNoDeviceMemory(.pulseaudio, goneFirst: true) }
    @Test("PulseAudio: agent process: kill -9 while a stream it moved plays on, the next agent moves it back to the default and leaves nothing remembered")
    func killNineWhileMovedPlaysOn() async throws { try await AgentProcessScenarios.killNineWhileMovedLeavesNoDeviceMemory(.pulseaudio, goneFirst: false) }
    @Test("PulseAudio: agent process: kill -9 while an alarm plays on every output through the agent's sink, the next agent removes the sink and leaves nothing remembered (issue 23)")
    func killNineWhileAnAlarmPlaysEverywhere() async throws { try await AgentProcessScenarios.killNineWhileAnAlarmPlaysEverywhere(.pulseaudio) }
    @Test("PulseAudio: agent process: a call whose headset goes while the default is the TV goes to the speaker, never the TV, and says no private output is left (issue 23)")
    func callNeverMovesToTheTV() async throws { try await AgentProcessScenarios.callNeverMovesToTheTV(.pulseaudio) }

    @Test("PulseAudio: agent process: module-bluetooth-policy's automatic switching is off while the agent runs")
    func takesOverBluetoothSwitching() async throws { try await AgentProcessScenarios.takesOverBluetoothSwitching() }

    @Test("PulseAudio: agent process: kill -9 while the server's modules are taken over, the next agent puts them back")
    func killNineThenModulesComeBack() async throws { try await AgentProcessScenarios.killNineThenModulesComeBack() }

    @Test("PulseAudio: agent process: kill -9 then restart undoes leftovers")
    func killNine() async throws { try await AgentProcessScenarios.killNineThenRestartUndoesLeftovers(.pulseaudio) }

    @Test("PulseAudio: agent process: kill -9 with a headset switched to hands-free, the next agent switches it back")
    func killNineDuringHandsFree() async throws { try await AgentProcessScenarios.killNineDuringHandsFreeThenRestartSwitchesBack(.pulseaudio) }
    @Test("PulseAudio: agent process: SIGTERM with a headset switched to hands-free switches it back")
    func sigtermDuringHandsFree() async throws { try await AgentProcessScenarios.sigtermDuringHandsFreeSwitchesBack(.pulseaudio) }
    @Test("PulseAudio: agent process: kill -9 during a duck, three rounds: the music goes back to its volume, never lower (issue 10 case 1)")
    func killNineDuringADuck() async throws { try await AgentProcessScenarios.killNineDuringADuckLeavesTheMusicAtItsVolume(.pulseaudio) }
    @Test("PulseAudio: agent process: the server restarted during a duck leaves no trace in its memory (issue 10 case 3)")
    func serverRestartDuringADuck() async throws { try await AgentProcessScenarios.serverRestartDuringADuckLeavesNoTrace(.pulseaudio) }
    @Test("PulseAudio: agent process: kill -9 after a history of holds: a fresh stream starts at the user's volume (issue 10 case 4)")
    func killNineAfterAHistoryOfHolds() async throws { try await AgentProcessScenarios.killNineAfterAHistoryOfHolds(.pulseaudio) }
    @Test("PulseAudio: agent process: a second agent on the same server refuses to run (issue 10 case 6)")
    func secondAgent() async throws { try await AgentProcessScenarios.aSecondAgentRefusesToRun(.pulseaudio) }
    @Test("PulseAudio: agent process: the microphone muted for every app stays muted across kill -9 and the next start (issue 24)")
    func microphoneStaysMuted() async throws { try await AgentProcessScenarios.theMicrophoneStaysMutedAcrossARestart(.pulseaudio) }

    @Test("PulseAudio: agent process: a client that claims to be an agent does not keep the agent from starting (issue 20 case 4)")
    func forgedAgentClient() async throws { try await AgentProcessScenarios.aForgedAgentClientDoesNotKeepTheAgentOut(.pulseaudio) }
    @Test("PulseAudio: agent process: two agents started together, five rounds: exactly one runs (issue 20 case 4)")
    func twoAgentsTogether() async throws { try await AgentProcessScenarios.twoAgentsStartedTogetherExactlyOneRuns(.pulseaudio) }
    @Test("PulseAudio: agent process: org.audiosession.Agent1 taken when its squatter leaves; status says apps cannot reach the agent meanwhile (issue 20 case 5)")
    func squattedAppsName() async throws { try await AgentProcessScenarios.theAppsNameIsTakenWhenTheSquatterLeaves(.pulseaudio) }

    @Test("PulseAudio: agent process: a full disk under the journal is said, and the agent works on (issue 10 case 7)")
    func fullDisk() async throws { try await AgentProcessScenarios.anUnwritableJournalIsSaid(.pulseaudio, readOnly: false) }
    @Test("PulseAudio: agent process: a read-only state directory is said, and the agent works on (issue 10 case 7)")
    func readOnlyState() async throws { try await AgentProcessScenarios.anUnwritableJournalIsSaid(.pulseaudio, readOnly: true) }

}

@Suite("audiosessiond process on PipeWire", .serialized, .timeLimit(.minutes(2)))
struct AgentProcessOnPipeWire {
    @Test("PipeWire: agent process: audiosessionctl route chooses the default and a category's output, and the next run brings them back (issue 23)")
    func routeChoiceOutlivesTheAgent() async throws { try await AgentProcessScenarios.routeChoiceOutlivesTheAgent(.pipewire) }
    @Test("PipeWire: agent process: killed in the middle of a duck's ramp, the server restarted: a music stream started before the next agent is put back, and none after starts lower (issue 20 case 7a)")
    func killNineMidRamp() async throws { try await AgentProcessScenarios.killNineMidRampThenServerRestartLeavesNoTrace(.pipewire) }
    @Test("PipeWire: agent process: started while a call runs, it pauses the playing mpv and plays it again after (issue 20 case 8a)")
    func startedDuringACall() async throws { try await AgentProcessScenarios.startedDuringACallPausesThePlayer(.pipewire) }
    @Test("PipeWire: agent process: started while a call runs whose stream came before mpv's, it pauses mpv too, and plays it again after (issue 20 case 8a)")
    func startedDuringAnEarlierCall() async throws { try await AgentProcessScenarios.startedDuringACallPausesThePlayer(.pipewire, callFirst: true) }
    @Test("PipeWire: agent process: says READY=1 to systemd once it manages the server, STOPPING=1 on SIGTERM")
    func readiness() async throws { try await AgentProcessScenarios.readinessIsSaid(.pipewire) }
    @Test("PipeWire: agent process: SIGHUP with a bad policy file keeps running")
    func sighup() async throws { try await AgentProcessScenarios.sighupReloadKeepsRunning(.pipewire) }
    @Test("PipeWire: agent process: SIGTERM undoes and exits")
    func sigterm() async throws { try await AgentProcessScenarios.sigtermUndoesAndExits(.pipewire) }
    @Test("PipeWire: agent process: kill -9, streams gone, the next agent puts the server's memory back")
    func killNineLeavesNoRememberedMute() async throws { try await AgentProcessScenarios.killNineLeavesNoRememberedMute(.pipewire) }
    @Test("PipeWire: agent process: kill -9 while a stream it moved plays, the stream gone, the next agent puts back where its role's streams go")
    func killNineWhileMoved() async throws { try await AgentProcessScenarios.killNineWhileMovedLeavesNoDeviceMemory(.pipewire, goneFirst: true) }
    @Test("PipeWire: agent process: kill -9 while a stream it moved plays on, the next agent moves it back to the default and leaves nothing remembered")
    func killNineWhileMovedPlaysOn() async throws { try await AgentProcessScenarios.killNineWhileMovedLeavesNoDeviceMemory(.pipewire, goneFirst: false) }
    @Test("PipeWire: agent process: kill -9 while an alarm plays on every output through the agent's sink, the next agent removes the sink and leaves nothing remembered (issue 23)")
    func killNineWhileAnAlarmPlaysEverywhere() async throws { try await AgentProcessScenarios.killNineWhileAnAlarmPlaysEverywhere(.pipewire) }
    @Test("PipeWire: agent process: a call whose headset goes while the default is the TV goes to the speaker, never the TV, and says no private output is left (issue 23)")
    func callNeverMovesToTheTV() async throws { try await AgentProcessScenarios.callNeverMovesToTheTV(.pipewire) }

    @Test("PipeWire: agent process: kill -9 then restart undoes leftovers")
    func killNine() async throws { try await AgentProcessScenarios.killNineThenRestartUndoesLeftovers(.pipewire) }

    @Test("PipeWire: agent process: kill -9 with a headset switched to hands-free, the next agent switches it back")
    func killNineDuringHandsFree() async throws { try await AgentProcessScenarios.killNineDuringHandsFreeThenRestartSwitchesBack(.pipewire) }
    @Test("PipeWire: agent process: SIGTERM with a headset switched to hands-free switches it back")
    func sigtermDuringHandsFree() async throws { try await AgentProcessScenarios.sigtermDuringHandsFreeSwitchesBack(.pipewire) }
    @Test("PipeWire: agent process: kill -9 during a duck, three rounds: the music goes back to its volume, never lower (issue 10 case 1)")
    func killNineDuringADuck() async throws { try await AgentProcessScenarios.killNineDuringADuckLeavesTheMusicAtItsVolume(.pipewire) }
    @Test("PipeWire: agent process: the server restarted during a duck leaves no trace in its memory (issue 10 case 3)")
    func serverRestartDuringADuck() async throws { try await AgentProcessScenarios.serverRestartDuringADuckLeavesNoTrace(.pipewire) }
    @Test("PipeWire: agent process: kill -9 after a history of holds: a fresh stream starts at the user's volume (issue 10 case 4)")
    func killNineAfterAHistoryOfHolds() async throws { try await AgentProcessScenarios.killNineAfterAHistoryOfHolds(.pipewire) }
    @Test("PipeWire: agent process: a second agent on the same server refuses to run (issue 10 case 6)")
    func secondAgent() async throws { try await AgentProcessScenarios.aSecondAgentRefusesToRun(.pipewire) }
    @Test("PipeWire: agent process: the microphone muted for every app stays muted across kill -9 and the next start (issue 24)")
    func microphoneStaysMuted() async throws { try await AgentProcessScenarios.theMicrophoneStaysMutedAcrossARestart(.pipewire) }

    @Test("PipeWire: agent process: a client that claims to be an agent does not keep the agent from starting (issue 20 case 4)")
    func forgedAgentClient() async throws { try await AgentProcessScenarios.aForgedAgentClientDoesNotKeepTheAgentOut(.pipewire) }
    @Test("PipeWire: agent process: two agents started together, five rounds: exactly one runs (issue 20 case 4)")
    func twoAgentsTogether() async throws { try await AgentProcessScenarios.twoAgentsStartedTogetherExactlyOneRuns(.pipewire) }
    @Test("PipeWire: agent process: org.audiosession.Agent1 taken when its squatter leaves; status says apps cannot reach the agent meanwhile (issue 20 case 5)")
    func squattedAppsName() async throws { try await AgentProcessScenarios.theAppsNameIsTakenWhenTheSquatterLeaves(.pipewire) }

    @Test("PipeWire: agent process: a full disk under the journal is said, and the agent works on (issue 10 case 7)")
    func fullDisk() async throws { try await AgentProcessScenarios.anUnwritableJournalIsSaid(.pipewire, readOnly: false) }
    @Test("PipeWire: agent process: a read-only state directory is said, and the agent works on (issue 10 case 7)")
    func readOnlyState() async throws { try await AgentProcessScenarios.anUnwritableJournalIsSaid(.pipewire, readOnly: true) }

}

@Suite("audiosessiond process on PipeWire 1.4", .serialized, .timeLimit(.minutes(2)))
struct AgentProcessOnPipeWire14 {
    @Test("PipeWire 1.4: agent process: audiosessionctl route chooses the default and a category's output, and the next run brings them back (issue 23)")
    func routeChoiceOutlivesTheAgent() async throws { try await AgentProcessScenarios.routeChoiceOutlivesTheAgent(.pipewire14) }
    @Test("PipeWire 1.4: agent process: killed in the middle of a duck's ramp, the server restarted: a music stream started before the next agent is put back, and none after starts lower (issue 20 case 7a)")
    func killNineMidRamp() async throws { try await AgentProcessScenarios.killNineMidRampThenServerRestartLeavesNoTrace(.pipewire14) }
    @Test("PipeWire 1.4: agent process: started while a call runs, it pauses the playing mpv and plays it again after (issue 20 case 8a)")
    func startedDuringACall() async throws { try await AgentProcessScenarios.startedDuringACallPausesThePlayer(.pipewire14) }
    @Test("PipeWire 1.4: agent process: started while a call runs whose stream came before mpv's, it pauses mpv too, and plays it again after (issue 20 case 8a)")
    func startedDuringAnEarlierCall() async throws { try await AgentProcessScenarios.startedDuringACallPausesThePlayer(.pipewire14, callFirst: true) }
    @Test("PipeWire 1.4: agent process: says READY=1 to systemd once it manages the server, STOPPING=1 on SIGTERM")
    func readiness() async throws { try await AgentProcessScenarios.readinessIsSaid(.pipewire14) }
    @Test("PipeWire 1.4: agent process: SIGHUP with a bad policy file keeps running")
    func sighup() async throws { try await AgentProcessScenarios.sighupReloadKeepsRunning(.pipewire14) }
    @Test("PipeWire 1.4: agent process: SIGTERM undoes and exits")
    func sigterm() async throws { try await AgentProcessScenarios.sigtermUndoesAndExits(.pipewire14) }
    @Test("PipeWire 1.4: agent process: kill -9, streams gone, the next agent puts the server's memory back")
    func killNineLeavesNoRememberedMute() async throws { try await AgentProcessScenarios.killNineLeavesNoRememberedMute(.pipewire14) }
    @Test("PipeWire 1.4: agent process: kill -9 while a stream it moved plays, the stream gone, the next agent puts back where its role's streams go")
    func killNineWhileMoved() async throws { try await AgentProcessScenarios.killNineWhileMovedLeavesNoDeviceMemory(.pipewire14, goneFirst: true) }
    @Test("PipeWire 1.4: agent process: kill -9 while a stream it moved plays on, the next agent moves it back to the default and leaves nothing remembered")
    func killNineWhileMovedPlaysOn() async throws { try await AgentProcessScenarios.killNineWhileMovedLeavesNoDeviceMemory(.pipewire14, goneFirst: false) }
    @Test("PipeWire 1.4: agent process: kill -9 while an alarm plays on every output through the agent's sink, the next agent removes the sink and leaves nothing remembered (issue 23)")
    func killNineWhileAnAlarmPlaysEverywhere() async throws { try await AgentProcessScenarios.killNineWhileAnAlarmPlaysEverywhere(.pipewire14) }
    @Test("PipeWire 1.4: agent process: a call whose headset goes while the default is the TV goes to the speaker, never the TV, and says no private output is left (issue 23)")
    func callNeverMovesToTheTV() async throws { try await AgentProcessScenarios.callNeverMovesToTheTV(.pipewire14) }

    @Test("PipeWire 1.4: agent process: kill -9 then restart undoes leftovers")
    func killNine() async throws { try await AgentProcessScenarios.killNineThenRestartUndoesLeftovers(.pipewire14) }

    @Test("PipeWire 1.4: agent process: kill -9 with a headset switched to hands-free, the next agent switches it back")
    func killNineDuringHandsFree() async throws { try await AgentProcessScenarios.killNineDuringHandsFreeThenRestartSwitchesBack(.pipewire14) }
    @Test("PipeWire 1.4: agent process: SIGTERM with a headset switched to hands-free switches it back")
    func sigtermDuringHandsFree() async throws { try await AgentProcessScenarios.sigtermDuringHandsFreeSwitchesBack(.pipewire14) }
    @Test("PipeWire 1.4: agent process: kill -9 during a duck, three rounds: the music goes back to its volume, never lower (issue 10 case 1)")
    func killNineDuringADuck() async throws { try await AgentProcessScenarios.killNineDuringADuckLeavesTheMusicAtItsVolume(.pipewire14) }
    @Test("PipeWire 1.4: agent process: the server restarted during a duck leaves no trace in its memory (issue 10 case 3)")
    func serverRestartDuringADuck() async throws { try await AgentProcessScenarios.serverRestartDuringADuckLeavesNoTrace(.pipewire14) }
    @Test("PipeWire 1.4: agent process: kill -9 after a history of holds: a fresh stream starts at the user's volume (issue 10 case 4)")
    func killNineAfterAHistoryOfHolds() async throws { try await AgentProcessScenarios.killNineAfterAHistoryOfHolds(.pipewire14) }
    @Test("PipeWire 1.4: agent process: a second agent on the same server refuses to run (issue 10 case 6)")
    func secondAgent() async throws { try await AgentProcessScenarios.aSecondAgentRefusesToRun(.pipewire14) }
    @Test("PipeWire 1.4: agent process: the microphone muted for every app stays muted across kill -9 and the next start (issue 24)")
    func microphoneStaysMuted() async throws { try await AgentProcessScenarios.theMicrophoneStaysMutedAcrossARestart(.pipewire14) }

    @Test("PipeWire 1.4: agent process: a client that claims to be an agent does not keep the agent from starting (issue 20 case 4)")
    func forgedAgentClient() async throws { try await AgentProcessScenarios.aForgedAgentClientDoesNotKeepTheAgentOut(.pipewire14) }
    @Test("PipeWire 1.4: agent process: two agents started together, five rounds: exactly one runs (issue 20 case 4)")
    func twoAgentsTogether() async throws { try await AgentProcessScenarios.twoAgentsStartedTogetherExactlyOneRuns(.pipewire14) }
    @Test("PipeWire 1.4: agent process: org.audiosession.Agent1 taken when its squatter leaves; status says apps cannot reach the agent meanwhile (issue 20 case 5)")
    func squattedAppsName() async throws { try await AgentProcessScenarios.theAppsNameIsTakenWhenTheSquatterLeaves(.pipewire14) }

    @Test("PipeWire 1.4: agent process: a full disk under the journal is said, and the agent works on (issue 10 case 7)")
    func fullDisk() async throws { try await AgentProcessScenarios.anUnwritableJournalIsSaid(.pipewire14, readOnly: false) }
    @Test("PipeWire 1.4: agent process: a read-only state directory is said, and the agent works on (issue 10 case 7)")
    func readOnlyState() async throws { try await AgentProcessScenarios.anUnwritableJournalIsSaid(.pipewire14, readOnly: true) }

}

extension AgentProcessScenarios {
    static let headsetCard = "bluez_card.70_BF_92_12_34_56"

    /// A Bluetooth headset (a real card of the server, from the imitation BlueZ, the server's own
    /// autoswitch off), an agent, and a call that it has switched the headset to hands-free for.
    static func headsetSwitchedForACall(_ server: PrivateServer, _ observer: PulseClient, state: String) async throws
        -> (agent: ChildProcess, call: ClientStream, a2dp: String) {
        try await server.plug(.bluezHeadset)
        let a2dp = try await observer.wait(for: "the headset in A2DP", timeout: .seconds(30)) { s in  // (slow under a whole suite: see waitForBluetoothCard)
            s.card(named: headsetCard)?.activeProfile.flatMap { $0.hasPrefix("a2dp") ? $0 : nil }
        }
        let agent = try start(server, state: state)
        try await connected(agent, observer)
        let call = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
        try await observer.wait(for: "the headset in hands-free") { s in
            s.card(named: headsetCard)?.activeProfile.flatMap { $0.hasPrefix("a2dp") ? nil : true }
        }
        return (agent, call, a2dp)
    }

    /// kill -9 during a call on a headset the agent switched to hands-free; the call ends while no agent
    /// runs. The next agent finds the switch in the journal and switches the card back to A2DP.
    static func killNineDuringHandsFreeThenRestartSwitchesBack(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic], bluez: true, serverAutoswitch: false) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            let (first, call, a2dp) = try await headsetSwitchedForACall(server, observer, state: state)
            guard try await journal(in: state, comesToContain: "\"card\"") else { return }
            first.signal(SIGKILL)
            _ = await first.wait()
            call.stop()
            try await observer.wait(for: "the call gone") { s in call.find(in: s) == nil ? true : nil }
            #expect(observer.snapshot.card(named: headsetCard)?.activeProfile?.hasPrefix("a2dp") == false,
                    "the dead agent left the headset in hands-free")
            let second = try start(server, state: state)
            try await observer.wait(for: "the next agent to switch the headset back to \(a2dp)") { s in
                s.card(named: headsetCard)?.activeProfile == a2dp ? true : nil
            }
            second.signal(SIGTERM)
            #expect(await second.wait() == 0)
        }
    }

    /// SIGTERM during a call on a headset the agent switched to hands-free: the card goes back to A2DP
    /// before the agent exits (every change undone), though the call still plays.
    static func sigtermDuringHandsFreeSwitchesBack(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic], bluez: true, serverAutoswitch: false) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let (agent, call, a2dp) = try await headsetSwitchedForACall(server, observer, state: server.directory + "/agent-state")
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
            try await observer.wait(for: "the headset back in \(a2dp)") { s in
                s.card(named: headsetCard)?.activeProfile == a2dp ? true : nil
            }
            #expect(call.find(in: observer.snapshot) != nil, "the call still plays")
        }
    }
}

/// The cases issue 10 found on main before the shell was rebuilt, each a test that failed then.
extension AgentProcessScenarios {
    static let music = ["media.role": "music"]
    static let reader = ["media.role": "a11y"]

    /// A fresh music stream, played with no agent running (or with one): what the server gives it,
    /// once it is linked (WirePlumber gives a new stream its memory before it links it).
    static func freshStream(_ server: PrivateServer, _ observer: PulseClient, _ properties: [String: String] = music,
                            name: String = "Fresh", expect fraction: Double, _ what: String, log: String? = nil) async throws {
        let fresh = try ClientStream.start(on: server, applicationName: name, properties: properties)
        defer { fresh.stop() }
        do {
            try await observer.wait(for: "\(what): a fresh stream unmuted at \(Int(fraction * 100)) %") { s in
                fresh.find(in: s).flatMap { st in
                    st.device != nil && !st.isCorked && !st.isMuted && st.volume.values.allSatisfy { abs($0.fraction - fraction) < 0.01 } ? true : nil
                }
            }
        } catch {
            let said = log.map { "; the agent said:\n" + tail(of: $0) } ?? ""
            Issue.record("\(error); the server says \(fresh.find(in: observer.snapshot).map { "muted=\($0.isMuted) volume=\($0.volume)" } ?? "nothing")\(said)")
        }
    }

    static func waitVolume(_ observer: PulseClient, _ stream: ClientStream, _ fraction: Double, _ what: String,
                           log: String? = nil) async throws {
        do {
            try await observer.wait(for: "\(what): at \(Int(fraction * 100)) %") { s in
                stream.find(in: s).flatMap { st in st.volume.values.allSatisfy { abs($0.fraction - fraction) < 0.01 } ? true : nil }
            }
        } catch {
            let said = log.map { "; the agent said:\n" + tail(of: $0) } ?? ""
            Issue.record("\(error); the server says \(stream.find(in: observer.snapshot).map { "muted=\($0.isMuted) volume=\($0.volume)" } ?? "nothing")\(said)")
            throw error
        }
    }

    /// The last lines of an agent's log, for a failure's message.
    static func tail(of log: String, lines: Int = 40) -> String {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// Issue 10, case 1: a crash during a duck lowered the music for good, compounding round after round
    /// (the restarted agent undid the leftover duck, then ducked again from the stale volume).
    static func killNineDuringADuckLeavesTheMusicAtItsVolume(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            let log = server.directory + "/agent.log"
            for round in 1...3 {
                var agent = try start(server, state: state)
                try await connected(agent, observer)
                let song = try ClientStream.start(on: server, applicationName: "Music", properties: music)
                try await observer.wait(for: song)
                let voice = try ClientStream.start(on: server, applicationName: "Reader", properties: reader)
                try await waitVolume(observer, song, 0.585, "round \(round): the reader ducks the music", log: log)
                guard try await journal(in: state, comesToContain: "baseVolume") else { return }
                agent.signal(SIGKILL)
                _ = await agent.wait()
                agent = try start(server, state: state)
                try await connected(agent, observer)
                // The new agent has seen the reader (and held the music ducked) before the reader stops.
                try await server.settleAgent(routeLog: "\(state)/routes.jsonl")
                voice.stop()
                try await waitVolume(observer, song, 1.0, "round \(round): the music back up once the reader stops", log: log)
                agent.signal(SIGTERM)
                #expect(await agent.wait() == 0)
                #expect(song.find(in: observer.snapshot).map { abs($0.volume.overall.fraction - 1) < 0.01 } == true,
                        "round \(round): after SIGTERM")
                song.stop()
                try await freshStream(server, observer, name: "Music", expect: 1.0, "round \(round), no agent running", log: log)
            }
        }
    }

    /// Issue 10, case 3: the sound server restarted during a duck left the duck in its memory (PipeWire:
    /// a fresh stream started at 67 %, then 45 % the next round).
    static func serverRestartDuringADuckLeavesNoTrace(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            let log = server.directory + "/agent.log"
            for round in 1...2 {
                let agent = try start(server, state: state)
                try await connected(agent, observer)
                let song = try ClientStream.start(on: server, applicationName: "Music", properties: music)
                try await observer.wait(for: song)
                let voice = try ClientStream.start(on: server, applicationName: "Reader", properties: reader)
                try await waitVolume(observer, song, 0.585, "round \(round): the reader ducks the music", log: log)
                try await server.restart()
                _ = try await observer.wait(for: "round \(round): the observer back") { _ in observer.isConnected ? true : nil }
                try await connected(agent, observer)
                song.stop()
                voice.stop()
                try await freshStream(server, observer, name: "Music", expect: 1.0, "round \(round), the agent running", log: log)
                agent.signal(SIGTERM)
                #expect(await agent.wait() == 0)
                try await freshStream(server, observer, name: "Music", expect: 1.0, "round \(round), no agent running", log: log)
            }
        }
    }

    /// Issue 10, case 4: after a history of holds on one app (a call, a duck, the user's own volume),
    /// kill -9 during a duck left WirePlumber remembering the ducked volume for good.
    static func killNineAfterAHistoryOfHolds(_ kind: ServerKind) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            let log = server.directory + "/agent.log"
            var agent = try start(server, state: state)
            try await connected(agent, observer)
            let song = try ClientStream.start(on: server, applicationName: "Music", properties: music)
            let index = try await observer.wait(for: song).id
            let call = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
            try await observer.wait(for: "the call mutes the music") { s in song.find(in: s).flatMap { $0.isMuted ? true : nil } }
            call.stop()
            try await observer.wait(for: "the music back after the call") { s in song.find(in: s).flatMap { $0.isMuted ? nil : true } }
            var voice = try ClientStream.start(on: server, applicationName: "Reader", properties: reader)
            try await waitVolume(observer, song, 0.585, "the reader ducks the music", log: log)
            voice.stop()
            try await waitVolume(observer, song, 1.0, "the music back up", log: log)
            // The user's own volume.
            try await server.pactl("set-sink-input-volume", "\(index)", "80%")
            try await waitVolume(observer, song, 0.8, "the user's volume", log: log)
            voice = try ClientStream.start(on: server, applicationName: "Reader", properties: reader)
            try await waitVolume(observer, song, 0.8 * 0.585, "the reader ducks the music from the user's volume", log: log)
            guard try await journal(in: state, comesToContain: "baseVolume") else { return }
            agent.signal(SIGKILL)
            _ = await agent.wait()
            voice.stop()
            song.stop()
            try await observer.wait(for: "both gone") { s in s.sinkInputs.isEmpty ? true : nil }
            agent = try start(server, state: state)
            try await connected(agent, observer)
            try await freshStream(server, observer, name: "Music", expect: 0.8, "the next agent running", log: log)
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
            try await freshStream(server, observer, name: "Music", expect: 0.8, "no agent running", log: log)
        }
    }

    /// Issue 10, case 6: two agents on one server both ran and fought (a SIGTERM to one unmuted the music
    /// during the call). The second refuses to start: with the same state directory (its lock), or with
    /// another one (the server's lock on the session bus: issue 20, case 4).
    static func aSecondAgentRefusesToRun(_ kind: ServerKind) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            let (first, song, call) = try await musicMutedByCall(server, observer, state: state, bus: bus.address)
            for (what, directory) in [("the same state directory", state), ("another state directory", server.directory + "/other")] {
                let log = server.directory + "/second.log"
                let logFD = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
                let second = try ChildProcess.spawn([binary, "--session-bus", bus.address, "--system-bus", "none", "--server", server.address, "--state-dir", directory], stderr: logFD)
                // One that runs (which it must not) is stopped after a while.
                let watchdog = Task { try await Task.sleep(for: .seconds(5)); second.signal(SIGKILL) }
                let status = await second.wait()
                watchdog.cancel()
                close(logFD)
                let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                #expect(status != 0, "\(what): the second agent ran")
                #expect(said.contains("another audiosessiond"), "\(what): \(said)")
            }
            #expect(song.find(in: observer.snapshot)?.isMuted == true, "the first agent still holds the music during the call")
            #expect(FileManager.default.fileExists(atPath: "\(state)/held.log"))
            first.signal(SIGTERM)
            #expect(await first.wait() == 0)
            withExtendedLifetime(call) {}
        }
    }
}

extension AgentProcessScenarios {
    /// Issue 24: the microphone muted for every app (`audiosessionctl mic mute`) stays muted across a
    /// `kill -9` and the next start: a capture stream that was there is muted again by the next agent
    /// (its predecessor's hold taken over, and the mute still wanted), one started after is muted too,
    /// and `mic` says so; unmuted, both are given back, and a SIGTERM leaves nothing muted.
    static func theMicrophoneStaysMutedAcrossARestart(_ kind: ServerKind) async throws {
        let bus = try await PrivateSessionBus.start()
        defer { bus.stop() }
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/agent-state"
            func mic(_ action: String...) async throws -> String {
                try await runCommand([builtExecutable("audiosessionctl"), "mic"] + action + ["--bus", bus.address]).stdout
            }
            func agentOnTheBus() async throws { try await bus.waitForOwner(of: "org.audiosession.Agent1") }
            var agent = try start(server, state: state, bus: bus.address)
            try await connected(agent, observer)
            try await agentOnTheBus()
            let dictation = try ClientStream.start(on: server, direction: .input, applicationName: "Dictation")
            defer { dictation.stop() }
            _ = try await observer.wait(for: "the capture running") { s in dictation.find(in: s).flatMap { $0.isMuted ? nil : true } }
            #expect(try await mic("mute") == "microphone: muted for every app\n")
            _ = try await observer.wait(for: "the capture muted") { s in dictation.find(in: s)?.isMuted == true ? true : nil }
            agent.signal(SIGKILL)
            _ = await agent.wait()
            agent = try start(server, state: state, bus: bus.address)
            try await connected(agent, observer)
            try await agentOnTheBus()
            #expect(try await mic() == "microphone: muted for every app\n", "the next agent keeps the mute")
            let later = try ClientStream.start(on: server, direction: .input, applicationName: "Recorder")
            defer { later.stop() }
            _ = try await observer.wait(for: "a capture started after the restart muted, the first still muted") { s in
                later.find(in: s)?.isMuted == true && dictation.find(in: s)?.isMuted == true ? true : nil
            }
            #expect(try await mic("unmute") == "microphone: not muted by the agent\n")
            _ = try await observer.wait(for: "both captures given back") { s in
                later.find(in: s)?.isMuted == false && dictation.find(in: s)?.isMuted == false ? true : nil
            }
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
            #expect(!observer.snapshot.sourceOutputs.values.contains { $0.isMuted }, "nothing left muted")
        }
    }

    /// Issue 10, case 7: on a full disk (a tmpfs of a few kilobytes) or a read-only state directory the
    /// journal cannot be written, and that was silent. Now the agent says so in its log and to
    /// `audiosessionctl status` (exit status 2), and works on: the call mutes the music, which plays
    /// again after it.
    static func anUnwritableJournalIsSaid(_ kind: ServerKind, readOnly: Bool) async throws {
        try await withPrivateServer(kind, devices: [.speaker, .internalMic]) { server in
            let observer = try await server.connect()
            defer { observer.close() }
            let state = server.directory + "/tiny-state"
            let disk = try TinyDisk(at: state)
            defer { disk.unmount() }
            if readOnly { try disk.readOnly() } else { disk.fill() }
            let log = server.directory + "/agent.log"
            let logFD = open(log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            let agent = try ChildProcess.spawn([binary, "--session-bus", "none", "--system-bus", "none", "--server", server.address, "--state-dir", state], stderr: logFD)
            close(logFD)
            try await connected(agent, observer)
            let song = try ClientStream.start(on: server, properties: ["media.role": "music"])
            try await observer.wait(for: song)
            let call = try ClientStream.start(on: server, applicationName: "Call", properties: ["media.role": "phone"])
            try await observer.wait(for: "the call mutes the music") { s in song.find(in: s).flatMap { $0.isMuted ? true : nil } }
            try await observer.wait(for: "the agent to say its journal fails") { s in
                s.clients.values.contains {
                    $0.properties["application.process.id"] == "\(agent.pid)" && $0.properties[ControlTower.journalProperty]?.hasPrefix("failing") == true
                } ? true : nil
            }
            let status = try await runCommand([builtExecutable("audiosessionctl"), "status", "--server", server.address], check: false)
            #expect(status.status == 2, "exit status \(status.status): \(status.stdout)\(status.stderr)")
            #expect(status.stdout.contains("journal: failing: "), "\(status.stdout)")
            #expect(status.stdout.contains(readOnly ? "Read-only file system" : "No space left on device"), "\(status.stdout)")
            call.stop()
            try await observer.wait(for: "the music back after the call") { s in song.find(in: s).flatMap { $0.isMuted ? nil : true } }
            agent.signal(SIGTERM)
            #expect(await agent.wait() == 0)
            let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(said.contains("the journal cannot be written"), "the agent's log:\n\(said)")
        }
    }
}

public import Foundation
import Synchronization
import PulseClient

/// Real programs from Debian, run against a private server as a user's desktop would run them, for the
/// tests of what real apps do (issue 19): their streams are what the programs themselves open, not
/// imitations. The recipes are the ones `scripts/record-real-apps` found (see
/// Tests/Fixtures/RealApps/README.md). Each one is stopped with `stop()`, and with its object.

/// speech-dispatcher 0.11 with espeak-ng, as a screen reader's voice: the daemon of a private socket
/// (its `sd_dummy` fallback opens a stream at once, uncorked and silent for as long as it runs; the
/// espeak-ng voice opens its stream at the first utterance and keeps it open, silent, afterwards).
public final class SpeechDispatcher: Sendable {
    public let daemon: ChildProcess
    let directory: String
    let environment: [String: String]

    public init(on server: PrivateServer) throws {
        directory = "\(server.directory)/speechd"
        for sub in ["home", "run", "log"] {
            try FileManager.default.createDirectory(atPath: "\(directory)/\(sub)", withIntermediateDirectories: true)
        }
        environment = ["HOME": "\(directory)/home", "XDG_RUNTIME_DIR": "\(directory)/run", "PULSE_SERVER": server.address,
                       "SPEECHD_ADDRESS": "unix_socket:\(directory)/run/speechd.sock"]
        let log = open("\(directory)/log/daemon.out", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(log) }
        // -s: in the foreground; -t 0: never exits for lack of clients.
        daemon = try ChildProcess.spawn(["speech-dispatcher", "-s", "-t", "0", "-S", "\(directory)/run/speechd.sock",
                                         "-P", "\(directory)/run/speechd.pid", "-L", "\(directory)/log", "-l", "3"],
                                        environment: environment, stdout: log, stderr: log)
    }

    /// Says `text` and returns once it has been said (`spd-say -w`).
    public func say(_ text: String) async throws {
        let child = try ChildProcess.spawn(["spd-say", "-w", text], environment: environment)
        let status = await child.wait()
        if status != 0 { throw CommandError(command: ["spd-say", "-w", text], output: CommandOutput(status: status, stdout: "", stderr: "")) }
    }

    public func stop() {
        daemon.signal(SIGTERM)
        _ = daemon.blockingWait()
        // (Its modules are its children; they end with it, or here.)
        _ = try? ChildProcess.spawn(["pkill", "-KILL", "-f", "\(directory)/"]).blockingWait()
    }

    deinit { stop() }
}

/// Two `linphonec` (Debian's linphone-cli 5.1) in one private network namespace (loopback only): a
/// callee that answers by itself on 127.0.0.1:5072, and a caller on 5071. `call()` places a real SIP
/// call between them (media: RTP on loopback, each side playing the other's sound and recording its
/// microphone); `hangUp()` ends it. Commands go to each linphonec's standard input, a FIFO kept open.
public final class LinphoneCall: Sendable {
    let shell: ChildProcess
    let directory: String

    public init(on server: PrivateServer) throws {
        directory = "\(server.directory)/linphone"
        for (side, port, rtp) in [("caller", 5071, 7078), ("callee", 5072, 7088)] {
            // linphonec's database lives under XDG_DATA_HOME: without that folder its core never
            // finishes starting, and it listens on no port.
            try FileManager.default.createDirectory(atPath: "\(directory)/\(side)/home/.local/share/linphone", withIntermediateDirectories: true)
            try "[sip]\nsip_port=\(port)\n[rtp]\naudio_rtp_port=\(rtp)\n".write(toFile: "\(directory)/\(side)/linphonerc", atomically: true, encoding: .utf8)
            if mkfifo("\(directory)/\(side)/in", 0o600) != 0 { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        }
        // The callee first, the caller once the callee listens; both end with the shell (SIGTERM). Their
        // standard input is a FIFO opened read-write: open for as long as they run (at its end
        // linphonec quits), written to by `send`.
        let script = """
            ip link set lo up
            trap 'kill $(jobs -p) 2>/dev/null' TERM EXIT
            d=\(directory)
            HOME=$d/callee/home XDG_DATA_HOME=$d/callee/home/.local/share linphonec -c $d/callee/linphonerc -a -d 0 0<>$d/callee/in >$d/callee/out.log 2>&1 &
            until ss -Hlun | grep -q ':5072 '; do sleep 0.05; done
            HOME=$d/caller/home XDG_DATA_HOME=$d/caller/home/.local/share linphonec -c $d/caller/linphonerc -d 0 0<>$d/caller/in >$d/caller/out.log 2>&1 &
            until ss -Hlun | grep -q ':5071 '; do sleep 0.05; done
            echo ready
            wait
            """
        let ready = "\(directory)/ready"
        let out = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer { close(out) }
        shell = try ChildProcess.spawn(["unshare", "-n", "bash", "-c", script], environment: ["PULSE_SERVER": server.address], stdout: out)
    }

    /// Waits until both listen.
    public func waitUntilListening(timeout: Duration = .seconds(20)) async throws {
        try await waitForFile("\(directory)/ready", containing: "ready", timeout: timeout, what: "both linphonec to listen")
    }

    /// The caller calls the callee; returns once the caller says the media streams are up.
    public func call(timeout: Duration = .seconds(20)) async throws {
        try send("call sip:callee@127.0.0.1:5072", to: "caller")
        try await waitForFile("\(directory)/caller/out.log", containing: "Media streams established", timeout: timeout, what: "the SIP call's media")
    }

    public func hangUp() throws { try send("terminate", to: "caller") }

    func send(_ command: String, to side: String) throws {
        let fd = open("\(directory)/\(side)/in", O_WRONLY | O_NONBLOCK)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let line = command + "\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
    }

    /// What each side printed (for a failure's message).
    public var logs: String {
        ["caller", "callee"].map { side in
            "\(side): " + ((try? String(contentsOfFile: "\(directory)/\(side)/out.log", encoding: .utf8)) ?? "").suffix(800)
        }.joined(separator: "\n")
    }

    public func stop() {
        try? send("quit", to: "caller")
        try? send("quit", to: "callee")
        shell.signal(SIGTERM)
        _ = shell.blockingWait()
    }

    deinit { stop() }
}

/// A headless browser from Debian (Chromium or Firefox ESR) on a page, in a private network namespace
/// (it reaches the sound server's socket by its path; nothing else). Chromium's sound goes through
/// PulseAudio from its audio utility process, Firefox's from its parent process; the streams name it.
public final class HeadlessBrowser: Sendable {
    public enum Kind: String, Sendable {
        case chromium
        case firefox = "firefox-esr"
        /// What its streams say in `application.process.binary`.
        public var binary: String { rawValue }
    }

    public let kind: Kind
    public let process: ChildProcess
    let directory: String
    /// Stopped already (by a call of `stop`, or handed on to a browser started `after` it): stopping
    /// again would signal a pid that may be another process's by now, and kill by the shared profile.
    private let stopped = Mutex(false)

    /// Opens `page` (an HTML file's text) with `files` beside it; `microphone`: the page may capture
    /// (getUserMedia is granted without asking, from the real default source). `after`: a browser of
    /// the same kind (stopped here if it is not), whose profile and folder this one takes on (a browser starts quicker
    /// with a profile made already: Firefox's first start takes seconds more).
    public init(_ kind: Kind, on server: PrivateServer, page: String, files: [String: Data] = [:], microphone: Bool = false,
                after earlier: HeadlessBrowser? = nil) throws {
        self.kind = kind
        if let earlier {
            earlier.stop()
            precondition(earlier.kind == kind, "a \(kind) browser cannot take on a \(earlier.kind) profile")
        }
        directory = earlier.map(\.directory) ?? "\(server.directory)/\(kind.rawValue)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: "\(directory)/profile", withIntermediateDirectories: true)
        try page.write(toFile: "\(directory)/page.html", atomically: true, encoding: .utf8)
        for (name, data) in files { try data.write(to: URL(fileURLWithPath: "\(directory)/\(name)")) }
        let log = open("\(directory)/browser.log", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(log) }
        let browser: [String]
        switch kind {
        case .chromium:
            // --no-sandbox: the tests run as root, where Chromium's sandbox cannot start.
            browser = ["chromium", "--headless=new", "--no-sandbox", "--autoplay-policy=no-user-gesture-required", "--no-first-run",
                       "--disable-gpu", "--user-data-dir=\(directory)/profile"]
                + (microphone ? ["--use-fake-ui-for-media-stream"] : [])
        case .firefox:
            // Autoplay allowed, and getUserMedia granted without a prompt from the real device (not
            // Firefox's own fake one), in the profile's user.js.
            let prefs = ["media.autoplay.default": "0", "media.autoplay.blocking_policy": "0"]
                .merging(microphone ? ["media.navigator.permission.disabled": "true", "media.navigator.streams.fake": "false"] : [:]) { a, _ in a }
            try prefs.sorted { $0.key < $1.key }.map { "user_pref(\"\($0.key)\", \($0.value));\n" }.joined()
                .write(toFile: "\(directory)/profile/user.js", atomically: true, encoding: .utf8)
            browser = ["firefox-esr", "--headless", "--no-remote", "--profile", "\(directory)/profile"]
        }
        process = try ChildProcess.spawn(
            ["unshare", "-n", "sh", "-c", "ip link set lo up && exec \"$@\"", "sh"] + browser + ["file://\(directory)/page.html"],
            environment: ["PULSE_SERVER": server.address, "HOME": directory], stdout: log, stderr: log)
    }

    /// Puts a file beside the page, whole at once (a page may be waiting for it).
    public func add(_ name: String, _ data: Data) throws {
        try data.write(to: URL(fileURLWithPath: "\(directory)/\(name)"), options: .atomic)
    }

    public func stop() {
        guard stopped.withLock({ was in defer { was = true }; return !was }) else { return }
        process.signal(SIGTERM)
        _ = process.blockingWait()
        // (Its other processes: Chromium's name the profile in --user-data-dir, Firefox's in --profile
        // or as their parent's.)
        _ = try? ChildProcess.spawn(["pkill", "-KILL", "-f", "\(directory)/profile"]).blockingWait()
    }

    deinit { stop() }
}

/// A tone as a 16-bit PCM WAV: `seconds` of 440 Hz at `amplitude` of full scale, 48 kHz stereo.
public func toneWAV(seconds: Double, amplitude: Double = 0.3) -> Data {
    let rate = 48_000, frames = Int(Double(rate) * seconds)
    var data = Data()
    func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
    data.append(contentsOf: Array("RIFF".utf8)); append(UInt32(36 + frames * 4))
    data.append(contentsOf: Array("WAVEfmt ".utf8)); append(UInt32(16)); append(UInt16(1)); append(UInt16(2))
    append(UInt32(rate)); append(UInt32(rate * 4)); append(UInt16(4)); append(UInt16(16))
    data.append(contentsOf: Array("data".utf8)); append(UInt32(frames * 4))
    for i in 0..<frames {
        let sample = Int16(amplitude * 32767 * sin(2 * Double.pi * 440 * Double(i) / Double(rate)))
        append(sample); append(sample)
    }
    return data
}

/// Waits until a file contains `text` (the programs above say what they did in their logs).
func waitForFile(_ path: String, containing text: String, timeout: Duration, what: String) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if let contents = try? String(contentsOfFile: path, encoding: .utf8), contents.contains(text) { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw TimeoutError(what: what)
}

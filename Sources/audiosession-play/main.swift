// audiosession-play: plays a WAV file (16-bit PCM) through libpulse inside an audio session, as an app
// that uses the AudioSession library would. It pauses when an interruption begins and plays again when
// one ends with shouldResume; it prints route changes. Without a file it plays a 440 Hz tone.
//
//     audiosession-play [--category playback] [--mode default] [FILE.wav]
//
// What happens is said on standard output, one line each (the tests read them): session, active,
// error CODE MESSAGE, interruption began REASON, interruption ended [shouldResume], playing, paused,
// route-change REASON. "quit" on standard input ends it.
import AudioPolicy
import AudioSession
import CLibPulseSimple
import Foundation
import Synchronization

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// The sound: a WAV file's PCM data and format, or a tone.
struct Sound {
    var rate: UInt32 = 44_100
    var channels: UInt8 = 2
    var data: Data

    static func tone() -> Sound {
        var samples = Data()
        for i in 0..<4410 {
            let v = Int16(8000 * sin(2 * Double.pi * 440 * Double(i) / 44_100))
            for _ in 0..<2 { withUnsafeBytes(of: v.littleEndian) { samples.append(contentsOf: $0) } }
        }
        return Sound(data: samples)
    }

    /// A RIFF/WAVE file with 16-bit PCM; nil if it is not one.
    static func wav(_ file: Data) -> Sound? {
        func u32(_ at: Int) -> UInt32 { file[at..<at + 4].enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) } }
        func u16(_ at: Int) -> UInt16 { UInt16(file[at]) | UInt16(file[at + 1]) << 8 }
        guard file.count > 12, file.prefix(4) == Data("RIFF".utf8), file[8..<12] == Data("WAVE".utf8) else { return nil }
        var at = 12
        var sound = Sound(data: Data())
        var format = false
        while at + 8 <= file.count {
            let id = String(decoding: file[at..<at + 4], as: UTF8.self)
            let size = Int(u32(at + 4))
            let body = at + 8
            guard body + size <= file.count else { return nil }
            if id == "fmt " {
                guard u16(body) == 1, u16(body + 14) == 16 else { return nil }  // PCM, 16 bits
                sound.channels = UInt8(u16(body + 2))
                sound.rate = u32(body + 4)
                format = true
            } else if id == "data" {
                sound.data = file[body..<body + size]
            }
            at = body + size + (size & 1)
        }
        return format && !sound.data.isEmpty ? sound : nil
    }
}

var category = AudioPolicy.Category.playback
var mode = Mode.default
var path: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--category": category = AudioPolicy.Category(rawValue: arguments.popFirst() ?? "")
    case "--mode": mode = Mode(rawValue: arguments.popFirst() ?? "")
    default: path = argument
    }
}
let sound: Sound
if let path {
    guard let file = FileManager.default.contents(atPath: path), let wav = Sound.wav(file) else {
        FileHandle.standardError.write(Data("audiosession-play: \(path) is not a 16-bit PCM WAV file\n".utf8))
        exit(2)
    }
    sound = wav
} else {
    sound = .tone()
}

let session = AudioSession.shared
do {
    try await session.setCategory(category, mode: mode)
    say("session")
    try await session.setActive(true)
    say("active")
} catch {
    say("error \(error.code) \(error.message)")
    // No agent: nothing arbitrates, play as without a session. Any other refusal (a call is on):
    // do not play.
    guard error.code == .mediaServicesFailed else { exit(1) }
}

/// Whether to play: the writer thread plays while it is set.
let playing = Atomic<Bool>(true)
say("playing")
// (Detached: the main thread below waits on standard input.)
let interruptions = session.interruptions()
Task.detached {
    for await interruption in interruptions {
        switch interruption.type {
        case .began:
            say("interruption began \(interruption.reason)")
            if playing.exchange(false, ordering: .relaxed) { say("paused") }
        case .ended:
            say("interruption ended\(interruption.options.contains(.shouldResume) ? " shouldResume" : "")")
            if interruption.options.contains(.shouldResume), !playing.exchange(true, ordering: .relaxed) { say("playing") }
        }
    }
}
let routeChanges = session.routeChanges()
Task.detached {
    for await change in routeChanges { say("route-change \(change.reason.name)") }
}

// The sound, written on a thread of its own (pa_simple_write blocks until the server takes it).
Thread.detachNewThread {
    var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: sound.rate, channels: sound.channels)
    var error: Int32 = 0
    guard let stream = pa_simple_new(nil, "audiosession-play", PA_STREAM_PLAYBACK, nil, "audiosession-play", &spec, nil, nil, &error) else {
        say("error pulse \(String(cString: pa_strerror(error)))")
        exit(1)
    }
    let silence = Data(count: Int(sound.rate) / 50 * Int(sound.channels) * 2)  // 20 ms
    while true {
        if playing.load(ordering: .relaxed) {
            _ = sound.data.withUnsafeBytes { pa_simple_write(stream, $0.baseAddress, $0.count, &error) }
        } else {
            // Paused: silence, so that the stream stays and nothing of the sound is heard.
            _ = silence.withUnsafeBytes { pa_simple_write(stream, $0.baseAddress, $0.count, &error) }
        }
    }
}

while let line = readLine() {
    if line == "quit" { break }
}
try? await session.setActive(false, options: .notifyOthersOnDeactivation)
exit(0)

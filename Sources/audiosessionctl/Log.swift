import ArgumentParser
import Foundation
import Glibc
import PolicyAgent

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the route-change log: why sound went where it went.",
        discussion: "Exit status 1 if the log cannot be read or holds a line that is not a route-change entry (each is named on stderr as file:line).")

    @Argument(help: "The log file (audiosessiond --route-log). Default: $XDG_STATE_HOME/audiosession/routes.jsonl.")
    var file: String?

    @Flag(name: .shortAndLong, help: "Keep printing new entries as they are written.")
    var follow = false

    @Flag(name: .long, help: "Print the JSON lines as they are.")
    var json = false

    func run() async throws {
        var path = file ?? ""
        if file == nil {
            do { path = "\(try StateDirectory.defaultPath(environment: ProcessInfo.processInfo.environment))/routes.jsonl" } catch {
                printError("audiosessionctl: \(error): give the log's file")
                throw ExitCode.failure
            }
        }
        let reader: LineReader
        do {
            reader = try LineReader(path: path)
        } catch {
            printError("audiosessionctl: cannot read the route-change log \(path): \(error.description)")
            throw ExitCode.failure
        }
        let decoder = JSONDecoder()
        var bad = 0
        while true {
            var output = ""
            let read: Int
            do {
                read = try reader.read { number, line in
                    switch line {
                    case .complete(let bytes):
                        guard !bytes.isEmpty else { return }
                        if json {
                            output += Escape.inJSON(String(decoding: bytes, as: UTF8.self)) + "\n"
                        } else if let entry = try? decoder.decode(RouteLogEntry.self, from: Data(bytes)) {
                            output += Escape.forDisplay(entry.line) + "\n"
                        } else {
                            bad += 1
                            printError("\(path):\(number): not a route-change entry")
                        }
                    case .tooLong:
                        bad += 1
                        printError("\(path):\(number): not a route-change entry (longer than \(LineReader.maximumLineLength) bytes; skipped)")
                    }
                }
            } catch {
                printError("audiosessionctl: cannot read the route-change log \(path): \(error.description)")
                throw ExitCode.failure
            }
            // Written once per chunk read, unbuffered: a pipe sees each entry as it is written.
            if !output.isEmpty { FileHandle.standardOutput.write(Data(output.utf8)) }
            if read > 0 { continue }
            guard follow else { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        if reader.unfinishedLineLength > 0 {
            bad += 1
            printError("\(path):\(reader.lineNumber + 1): a torn line: the file ends in the middle of an entry (no line feed after its \(reader.unfinishedLineLength) bytes)")
        }
        if bad > 0 { throw ExitCode.failure }
    }
}

/// Reads a file's lines as they are written: in chunks, each byte looked at once and each line handed
/// out as it completes, so that reading is linear in the file however long it is, and `--follow` picks
/// up where it stopped. A line longer than `maximumLineLength` is reported and skipped rather than held.
final class LineReader {
    enum Line {
        case complete(ArraySlice<UInt8>)
        case tooLong
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static let maximumLineLength = 1 << 20
    static let chunkSize = 64 * 1024

    private let descriptor: Int32
    /// The bytes of the line not finished yet.
    private var pending: [UInt8] = []
    /// Whether the line under way is too long and is being skipped.
    private var skipping = false
    private var chunk = [UInt8](repeating: 0, count: LineReader.chunkSize)
    /// The number of the last line handed out (1-based).
    private(set) var lineNumber = 0

    /// The bytes read since the last line feed (a torn line, if the file has ended).
    var unfinishedLineLength: Int { skipping ? 1 : pending.count }

    /// Opens a regular file for reading; a directory, a device, a file that is missing or that may
    /// not be read is an error that says which.
    init(path: String) throws(Failure) {
        descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else { throw Failure(description: String(cString: strerror(errno))) }
        var info = stat()
        let kind = fstat(descriptor, &info) == 0 ? info.st_mode & S_IFMT : 0
        guard kind == S_IFREG else {
            close(descriptor)
            throw Failure(description: kind == S_IFDIR ? "it is a directory, not a log file" : "it is not a regular file")
        }
    }

    deinit { close(descriptor) }

    /// The first line feed in part of the chunk (memchr: a byte-by-byte loop is slow in debug builds).
    private func newline(in range: Range<Int>) -> Int? {
        guard !range.isEmpty else { return nil }
        return chunk.withUnsafeBytes { raw -> Int? in
            guard let found = memchr(raw.baseAddress! + range.lowerBound, 0x0A, range.count) else { return nil }
            return raw.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }

    /// Reads what the file holds now, handing each line that completes to `body` with its number.
    /// Returns how many bytes were read (0 at the end of the file).
    func read(_ body: (Int, Line) throws -> Void) throws(Failure) -> Int {
        var total = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw Failure(description: String(cString: strerror(errno)))
            }
            if n == 0 { return total }
            total += n
            var start = 0
            while let newline = newline(in: start..<n) {
                lineNumber += 1
                do {
                    if skipping {
                        skipping = false
                        try body(lineNumber, .tooLong)
                    } else if pending.isEmpty {
                        try body(lineNumber, .complete(chunk[start..<newline]))
                    } else {
                        pending += chunk[start..<newline]
                        try body(lineNumber, .complete(pending[...]))
                        pending.removeAll(keepingCapacity: true)
                    }
                } catch {
                    throw Failure(description: "\(error)")
                }
                start = newline + 1
            }
            if !skipping {
                pending += chunk[start..<n]
                if pending.count > Self.maximumLineLength {
                    skipping = true
                    pending = []
                }
            }
            if total >= Self.chunkSize * 16 { return total }  // let the caller write out what it has
        }
    }
}

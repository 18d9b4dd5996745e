// The libFuzzer target behind scripts/fuzz-policies: policy files as a hostile local user could
// write them, through the parser and the layered loader. Compiled with PolicyYAML.swift and
// PolicyFiles.swift into a module named PolicyAgent (so it sees their internals), beside AudioPolicy.
// A crash, a sanitizer report or a broken invariant (a precondition here) is a finding.

import AudioPolicy
import Glibc

/// Where the loader's layers are written, one directory per fuzzing process.
let scratch: String = {
    var template = Array("/tmp/fuzz-policies-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicies(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    checkParser(bytes)
    checkLoader(bytes)
    return 0
}

/// The parser on the bytes as they are: an error is inside the text (line 1 up to one past the last
/// line, column at least 1), the same text read as a String gives the same answer, the answer does
/// not change from one run to the next, and a policy it gives is a valid one.
func checkParser(_ bytes: [UInt8]) {
    let lines = bytes.reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }
    let first = outcome(bytes)
    switch first {
    case .failure(let error):
        precondition(error.line >= 1 && error.line <= lines + 1, "error line \(error.line) outside 1...\(lines + 1)")
        precondition(error.column >= 1, "error column \(error.column)")
        precondition(!error.message.isEmpty)
    case .success(let policy):
        precondition(!policy.match.isEmpty, "a policy that matches nothing")
        precondition((try? policy.configuration.validate()) != nil, "an invalid configuration was accepted")
    }
    precondition(outcome(bytes) == first, "two parses of the same bytes differ")
    if let text = String(validating: bytes, as: UTF8.self) {
        let viaString: Result<AppPolicy, PolicyFileError>
        do { viaString = .success(try PolicyFiles.parse(text, name: "fuzz", path: "fuzz.yaml")) } catch { viaString = .failure(error) }
        precondition(viaString == first, "bytes and String parse differently")
    }
    // The YAML parser alone, with the size and key limits lifted (the depth limit stays: it is what
    // keeps the stack bounded).
    _ = try? PolicyYAML.parse(utf8: bytes, limits: .init(bytes: .max, depth: 32, entries: .max))
}

func outcome(_ bytes: [UInt8]) -> Result<AppPolicy, PolicyFileError> {
    do { return .success(try PolicyFiles.parse(utf8: bytes, name: "fuzz", path: "fuzz.yaml")) } catch { return .failure(error) }
}

/// The layered loader: the input split in two files of the same dotted name in two layers, and a
/// third file only in the lower one. Every name ends up either loaded or in an error, never both;
/// the higher layer masks the lower; the last-good rule keeps exactly one policy per name.
func checkLoader(_ bytes: [UInt8]) {
    let high = "\(scratch)/high", low = "\(scratch)/low"
    mkdir(high, 0o755)
    mkdir(low, 0o755)
    let half = bytes.count / 2
    write("\(high)/org.example.app.yaml", bytes[..<half])
    write("\(low)/org.example.app.yaml", bytes[half...])
    write("\(low)/other.app.yml", bytes[half...])
    let (policies, errors) = PolicyFiles.load(layers: [high, low, "\(scratch)/absent"])
    let names = policies.map(\.name) + errors.compactMap { PolicyFiles.policyName(ofFile: $0.file) }
    precondition(names.sorted() == ["org.example.app", "other.app"], "names \(names)")
    precondition(!policies.contains { $0.source.hasPrefix(low) && $0.name == "org.example.app" }, "a masked file loaded")
    precondition(errors.allSatisfy { !$0.isAboutDirectory && $0.line >= 1 && $0.column >= 1 })
    let previous = ["org.example.app", "other.app"].map {
        AppPolicy(name: $0, source: "\(high)/\($0).yaml", match: .init(binary: [$0]), configuration: SessionConfiguration(.playback))
    }
    let kept = PolicyFiles.keepingLastGood(previous: previous, loaded: policies, errors: errors)
    precondition(kept.map(\.name).sorted() == ["org.example.app", "other.app"], "after keepingLastGood: \(kept.map(\.name))")
}

func write(_ path: String, _ bytes: ArraySlice<UInt8>) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    precondition(fd >= 0, "cannot write \(path)")
    defer { close(fd) }
    bytes.withUnsafeBytes { raw in
        var done = 0
        while done < raw.count {
            let n = Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
            precondition(n > 0, "cannot write \(path)")
            done += n
        }
    }
}

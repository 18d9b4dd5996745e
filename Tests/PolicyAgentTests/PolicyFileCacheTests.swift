import AudioPolicy
import Foundation
import Glibc
@testable import AgentTower
@testable import PolicyAgent
import Testing

/// Issue 20, case 9: a reload (SIGHUP) reads again only the policy files that changed; a layer of
/// 1,000 files cost a full parse on every SIGHUP.
@Suite("policy files: what a reload reads again")
struct PolicyFileCacheTests {
    @Test("unchanged files are taken from the last load; a file changed in place (same size) or replaced is read again")
    func onlyChangedFilesAreRead() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let layer = scratch.directory("layer")
        scratch.write("layer/a.yaml", "match: {binary: [a]}\ncategory: playback\n")
        scratch.write("layer/b.yaml", "match: {binary: [b]}\ncategory: playback\n")
        var cache = PolicyFileCache(settledAfter: 0)
        _ = PolicyFiles.load(layers: [layer], cache: &cache)
        #expect(cache.reused == 0)
        _ = PolicyFiles.load(layers: [layer], cache: &cache)
        #expect(cache.reused == 2, "nothing changed: nothing read again")
        // The same size, in place: the times change, the file is read again.
        let fd = open("\(layer)/a.yaml", O_WRONLY)
        _ = writeAll("match: {binary: [a]}\ncategory: ambient\n\n\n\n", to: fd)
        close(fd)
        scratch.write("layer/b.new", "match: {binary: [b]}\ncategory: record\n")
        #expect(rename("\(layer)/b.new", "\(layer)/b.yaml") == 0)
        let (policies, errors) = PolicyFiles.load(layers: [layer], cache: &cache)
        #expect(errors.isEmpty)
        #expect(cache.reused == 0, "both were read again")
        #expect(policies.first { $0.name == "a" }?.configuration.category == .ambient)
        #expect(policies.first { $0.name == "b" }?.configuration.category == .record)
    }

    @Test("a file written moments before it was read is read again next time, whatever its times say (a write in the same clock tick)")
    func racilyCleanFilesAreReadAgain() {
        let scratch = Scratch()
        defer { scratch.remove() }
        let layer = scratch.directory("layer")
        scratch.write("layer/a.yaml", "match: {binary: [a]}\ncategory: playback\n")
        var cache = PolicyFileCache()
        _ = PolicyFiles.load(layers: [layer], cache: &cache)
        _ = PolicyFiles.load(layers: [layer], cache: &cache)
        #expect(cache.reused == 0)
    }
}

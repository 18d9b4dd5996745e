import Foundation
import SoundServerTesting
import Testing

/// scripts/install into a temporary prefix (no systemd asked): the programs, the shipped policies
/// where the installed agent finds them, the user unit pointing at the installed agent; --uninstall
/// takes it all away again.
@Suite("install")
struct InstallTests {
    @Test("scripts/install --prefix puts programs, policies and the unit in place; --uninstall removes them")
    func installAndUninstall() async throws {
        let prefix = NSTemporaryDirectory() + "audiosession-install-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        let script = repositoryRoot.appendingPathComponent("scripts/install").path
        let binaries = URL(fileURLWithPath: Built.audiosessionctl).deletingLastPathComponent().path
        let installed = try await runCommand([script, "--prefix", prefix, "--binaries", binaries, "--no-start"])
        #expect(installed.stdout.contains("in \(prefix)/bin"), "\(installed.stdout)")
        for program in ["audiosessiond", "audiosessionctl"] {
            #expect(FileManager.default.isExecutableFile(atPath: "\(prefix)/bin/\(program)"), "\(program)")
        }
        let shipped = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("policies").path)
        let copied = try FileManager.default.contentsOfDirectory(atPath: "\(prefix)/share/audiosession/policies")
        #expect(Set(copied) == Set(shipped))
        let unit = try String(contentsOfFile: "\(prefix)/lib/systemd/user/audiosessiond.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=\(prefix)/bin/audiosessiond\n"), "\(unit)")
        #expect(unit.contains("Type=notify"))
        #expect(!unit.contains("@BINDIR@"))

        // The installed agent reads the policies installed beside it: a file broken there is named.
        try "category: [\n".write(toFile: "\(prefix)/share/audiosession/policies/mpv.yaml", atomically: true, encoding: .utf8)
        let checked = try await runCommand(["\(prefix)/bin/audiosessionctl", "policies", "check"],
                                           environment: ["XDG_CONFIG_HOME": prefix + "/config", "XDG_CONFIG_DIRS": prefix + "/xdg"],
                                           check: false)
        #expect(checked.status == 1)
        #expect((checked.stdout + checked.stderr).contains("\(prefix)/share/audiosession/policies/mpv.yaml"), "\(checked.stdout)\(checked.stderr)")

        let removed = try await runCommand([script, "--prefix", prefix, "--uninstall", "--no-start"])
        #expect(removed.status == 0)
        for path in ["bin/audiosessiond", "bin/audiosessionctl", "share/audiosession", "lib/systemd/user/audiosessiond.service"] {
            #expect(!FileManager.default.fileExists(atPath: "\(prefix)/\(path)"), "\(path) left behind")
        }
    }

    @Test("scripts/install refuses an unknown argument and names it")
    func unknownArgument() async throws {
        let script = repositoryRoot.appendingPathComponent("scripts/install").path
        let result = try await runCommand([script, "--prefx", "/tmp/x"], check: false)
        #expect(result.status == 2)
        #expect(result.stderr.contains("'--prefx'"), "\(result.stderr)")
    }
}

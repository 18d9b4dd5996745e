import Foundation
import SoundServerTesting
import Testing

@Suite("the harness's child processes")
struct ChildProcessTests {
    /// A timed-out wait for a pacat says whether it had ended; asking must not reap it, or the exit
    /// status would be lost to the later `wait()`.
    @Test("a child's end is seen without reaping it")
    func endSeenWithoutReaping() async throws {
        let child = try ChildProcess.spawn(["sleep", "100"])
        #expect(!child.hasEnded, "running")
        child.signal(SIGTERM)
        // The end awaited without reaping (WNOWAIT), as `hasEnded` looks.
        var info = siginfo_t()
        #expect(waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOWAIT) == 0)
        #expect(child.hasEnded, "ended after SIGTERM")
        #expect(await child.wait() == 128 + SIGTERM, "still there to be reaped, with its status")
    }
}

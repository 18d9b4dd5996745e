import Foundation
import SoundServerTesting
import Testing

@Suite("the harness's child processes")
struct ChildProcessTests {
    /// A timed-out wait for a pacat says how it ended; asking must not reap it, or the exit status
    /// would be lost to the later wait.
    @Test("a child's end is seen without reaping it")
    func endSeenWithoutReaping() throws {
        let child = try ChildProcess.spawn(["sleep", "100"])
        #expect(child.howItEnded == nil, "running")
        child.signal(SIGKILL)
        // The end awaited without reaping (WNOWAIT), as `howItEnded` looks.
        var info = siginfo_t()
        #expect(waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOWAIT) == 0)
        #expect(child.howItEnded == "killed by signal 9")
        #expect(child.exitStatusIfEnded() == 128 + SIGKILL, "still there to be reaped, with its status")
        #expect(child.howItEnded == "ended", "once reaped")
    }
}

import AudioPolicy
import Logging
import ServerModel

/// Stopping: everything held given back, then the loop may end (the tower's life: `LifeCycle`).
extension ControlTower {
    /// Undo everything: cards back, holds released at once, the server's memory and modules put back;
    /// the loop ends once the server has answered (or `stopTimeout` has passed; for the put-backs of its
    /// memory, `stopTimeoutForMemory`).
    /// Stopping, and connected: only answers are waited for (and after it finished, nothing).
    var isStopping: Bool {
        switch life {
        case .stopping, .finished: true
        case .starting, .running: false
        }
    }

    /// Connected at least once (a later connection is the server coming back).
    public var connectedBefore: Bool { if case .starting = life { false } else { true } }

    public var isFinished: Bool { life == .finished }

    mutating func beginStop() {
        switch life {
        case .starting(let stopBy):
            // The first connection comes with what to undo: it is waited for until then.
            life = .starting(stopBy: stopBy ?? now + settings.stopTimeout)
            finishIfDone()
            return
        case .running:
            life = .stopping(until: now + settings.stopTimeout, memoryUntil: now + max(settings.stopTimeout, settings.stopTimeoutForMemory), failures: 0)
        case .stopping: break  // (connected again while stopping: given back again)
        case .finished: return
        }
        // Every card in a profile of ours: the journal holds each until the server confirmed its switch
        // back (the core's, a predecessor's not adopted yet, one the server refused).
        for (name, original) in journaledSwitches.sorted(by: { $0.key < $1.key }) where !setProfile(original, ofCard: name) { switchedBack(name) }
        pausesOnTheirWay = [:]
        // (A move awaiting judgement is judged now: the user's stays where the user put it.)
        judgeAwaitedMoves(now: true)
        // (Streams moved off the default go back to it: the server then forgets where they were moved.)
        coreEvent(.stopping)
        holds.releaseEverything(at: now, &outbox)
        modules.giveBack(&outbox)
        finishIfDone()
    }

    mutating func finishIfDone() {
        switch life {
        case .starting(let stopBy?) where now >= stopBy:
            // What a predecessor left was never taken over: it stays for the next run.
            outbox.log(.warning) { ("stopped before the sound server answered: the journal keeps what it holds for the next run", [:]) }
        case .stopping(let until, let memoryUntil, let failures):
            // Every command answered: a client that leaves right after sending may lose what it sent.
            // (A put-back of the server's memory is waited for longer: see `stopTimeoutForMemory`.)
            let memoryWaiting = outbox.pending.values.contains { $0.isMemoryPutBack }
            let othersWaiting = outbox.pending.values.contains { !$0.isMemoryPutBack }
            guard !(othersWaiting && now < until), !(memoryWaiting && now < memoryUntil) else { return }
            if failures == 0 && outbox.pending.isEmpty && !holds.memoryLeftChanged {
                outbox.journal(.clear)
                outbox.log(.notice) { ("stopped; nothing left held", [:]) }
            } else {
                outbox.log(.warning) { ("stopped; the server did not confirm everything undone: the journal keeps it for the next run", [:]) }
            }
        case .starting, .running, .finished:
            return
        }
        life = .finished
        outbox.effects.append(.finished)
    }
}

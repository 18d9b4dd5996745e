import AudioPolicy
import Logging
import ServerModel

/// A new app's first stream, the mutes it brings carried out before the rest of its batch (issue 22):
/// the core's `reflex`, on the stream's first event.
extension ControlTower {
    /// The mutes a batch's new stream brings at once, decided by the core ahead of its run
    /// (`PolicyMachine.reflex`): their journal lines and commands, for the agent to put on the server's
    /// socket before it hands the tower the batch (`handle`), whose run then finds them held. Empty
    /// unless the batch begins with a playing stream of a session not known yet (after client events
    /// only): the one event whose decision a call waits on, and the one whose run is the longest.
    /// (Not yet for a stream created corked and started later, as pipewire-pulse's clients often do:
    /// its start waits for the run.)
    public mutating func reflex(_ inputs: [TowerInput], at now: Duration) -> [TowerEffect] {
        guard life == .running, let (index, stream) = Self.firstNewStream(inputs) else { return [] }
        self.now = max(self.now, now)
        guard stream.direction == .output, !stream.isCorked, !isOurProbe(stream),
              !Self.createdAndGone(inputs).contains(index) else { return [] }
        // (Its client, told of in the same batch, for who the app is.)
        var peek = snapshot
        for input in inputs[..<index] { if case .server(let event) = input { peek.apply(event) } }
        guard !peek.isMonitorCapture(stream), !peek.isServerPlumbing(stream) else { return [] }
        let app = peek.identity(of: stream)
        if !apps.byBusName.isEmpty, apps.session(ofProcess: app.processID, appID: app.appID, parent: parentProcess) != nil { return [] }
        let placed = directory.session(for: stream, in: peek, parent: parentProcess)
        guard !directory.knows(placed.id) else { return [] }
        let actions = core.reflex(newSessionOf: placed.classification.configuration)
        for action in actions {
            guard let key = holds.want(action) else { continue }
            reconcile(key)
            let session = directory.session(of: key)?.rawValue ?? "?"
            let by = placed.id
            outbox.log(.info) { (action.verb, ["stream": "\(key)", "session": "\(session)", "by": "\(by)", "ahead": "the new stream's first event"]) }
        }
        return outbox.take()
    }

    /// The batch's first stream, new, with its index: where nothing but client events come before it.
    static func firstNewStream(_ inputs: [TowerInput]) -> (Int, AudioStream)? {
        for (i, input) in inputs.enumerated() {
            guard case .server(let event) = input else { return nil }
            switch event {
            case .added(.sinkInput(let s)): return (i, s)
            case .added(.client), .changed(.client, .client): continue
            default: return nil
            }
        }
        return nil
    }
}

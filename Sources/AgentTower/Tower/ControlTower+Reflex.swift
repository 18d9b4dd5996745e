import AudioPolicy
import Logging
import ServerModel

/// A call's first event (a new app's first stream, a stream starting, an app's `SetActive(true)`): the
/// mutes it brings carried out before the rest of its batch (issue 22), by the core's `reflex`.
extension ControlTower {
    /// The mutes a batch's new stream brings at once, decided by the core ahead of its run
    /// (`PolicyMachine.reflex`): their journal lines and commands, for the agent to put on the server's
    /// socket before it hands the tower the batch (`handle`), whose run then finds them held. Empty
    /// unless the batch begins with a playing stream of a session not known yet (after client events
    /// only), with the start of a stream of a session the core knows (`reflex(starting:_:at:)`), or with
    /// an app's `SetActive(true)` (`reflex(activating:by:options:at:)`): the events whose decision a
    /// call waits on, and whose run is the longest.
    public mutating func reflex(_ inputs: [TowerInput], at now: Duration) -> [TowerEffect] {
        guard life == .running else { return [] }
        if let (old, new) = Self.firstStart(inputs) { return reflex(starting: old, new, at: now) }
        if case .app(.call(_, let client, .setActive(let path, true, let options)))? = inputs.first {
            return reflex(activating: path, by: client, options: options, at: now)
        }
        guard let (index, stream) = Self.firstNewStream(inputs) else { return [] }
        self.now = max(self.now, now)
        guard !stream.isCorked, !isOurProbe(stream), !Self.goesLater(inputs, after: index, stream) else { return [] }
        // (Only client events come before it: devices and modules are as the snapshot has them.)
        guard !snapshot.isMonitorCapture(stream), !snapshot.isServerPlumbing(stream) else { return [] }
        // (Its client, told of in the same batch, for who the app is.)
        let client = Self.client(of: stream, toldIn: inputs[..<index]) ?? snapshot.client(of: stream)
        let app = AppIdentity(stream, client: client)
        if !apps.byBusName.isEmpty, apps.session(ofProcess: app.processID, appID: app.appID, parent: parentProcess) != nil { return [] }
        let placed = directory.session(for: stream, client: client, app: app, parent: parentProcess)
        guard !directory.knows(placed.id) else { return [] }
        return carryOut(core.reflex(newSessionOf: placed.classification.configuration), by: placed.id, ahead: "the new stream's first event")
    }

    /// The same for a stream of a session the core knows that starts running (pipewire-pulse starts a
    /// new stream once WirePlumber has linked it): the batch begins with that start.
    private mutating func reflex(starting old: AudioStream, _ new: AudioStream, at now: Duration) -> [TowerEffect] {
        self.now = max(self.now, now)
        let key = StreamKey(new)
        // (As `streamChanged` takes it: the same app's stream. A playback stream is no capture of a monitor.)
        guard let session = directory.session(of: key), snapshot.identity(of: old) == snapshot.identity(of: new), !isOurProbe(new) else { return [] }
        return carryOut(core.reflex(streamStarts: key), by: session, ahead: "its stream's start")
    }

    /// The same for an app's `SetActive(true)` of its own session (a declared call: the mutes its
    /// activation brings); the run answers the app. Nothing for a call the run refuses (another app's
    /// session, options it does not know: the checks `answer` makes before the core's, kept the same).
    private mutating func reflex(activating path: String, by client: AppClient, options: [String], at now: Duration) -> [TowerEffect] {
        self.now = max(self.now, now)
        guard case .success = Apps.setActiveOptions(options), let declared = apps.own(path, by: client).0 else { return [] }
        return carryOut(core.reflex(activating: declared.session), by: declared.session, ahead: "its SetActive(true)")
    }

    private mutating func carryOut(_ actions: [PolicyAction], by: SessionID, ahead: String) -> [TowerEffect] {
        for action in actions {
            guard let key = holds.want(action) else { continue }
            reconcile(key)
            let session = directory.session(of: key)?.rawValue ?? "?"
            outbox.log(.info) { (action.verb, ["stream": "\(key)", "session": "\(session)", "by": "\(by)", "ahead": "\(ahead)"]) }
        }
        return outbox.take()
    }

    /// Whether the stream at `index` is removed later in the batch (created and gone: `createdAndGone`).
    static func goesLater(_ inputs: [TowerInput], after index: Int, _ stream: AudioStream) -> Bool {
        inputs[(index + 1)...].contains { input in
            guard case .server(let event) = input, case .removed = event, let removed = event.stream else { return false }
            return StreamKey(removed) == StreamKey(stream)
        }
    }

    /// The stream's client as the last of `inputs` that told of it says, if any did.
    static func client(of stream: AudioStream, toldIn inputs: ArraySlice<TowerInput>) -> Client? {
        guard let index = stream.client else { return nil }
        for input in inputs.reversed() {
            switch input {
            case .server(.added(.client(let client))) where client.id == index: return client
            case .server(.changed(_, .client(let client))) where client.id == index: return client
            default: continue
            }
        }
        return nil
    }

    /// The batch's first input, if it is a playback stream starting to run (after client events only:
    /// a client's news held for the stream's info comes just before it).
    static func firstStart(_ inputs: [TowerInput]) -> (AudioStream, AudioStream)? {
        guard case .server(.changed(.sinkInput(let old), .sinkInput(let new)))? = inputs.first(where: { !$0.isClientNews }),
              old.isCorked, !new.isCorked else { return nil }
        return (old, new)
    }

    /// The batch's first stream, new, with its index: where nothing but client news comes before it.
    static func firstNewStream(_ inputs: [TowerInput]) -> (Int, AudioStream)? {
        guard let i = inputs.firstIndex(where: { !$0.isClientNews }),
              case .server(.added(.sinkInput(let s))) = inputs[i] else { return nil }
        return (i, s)
    }
}

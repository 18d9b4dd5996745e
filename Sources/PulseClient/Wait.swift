/// What a wait that did not come true says.
public struct TimeoutError: Error, CustomStringConvertible {
    public var what: String
    public init(what: String) { self.what = what }
    public var description: String { "timed out waiting for \(what)" }
}

extension PulseClient {
    /// How often a wait on pipewire-pulse asks the server info again.
    static let pipeWireServerLook: Duration = .seconds(1)

    /// Waits, event by event, until the snapshot satisfies the predicate; returns its value. On
    /// pipewire-pulse the server info is also asked again every `pipeWireServerLook` while waiting:
    /// it may not announce the default device WirePlumber makes effective well after the announced
    /// change (seen in CI under a full machine, later than the connection's own second looks), and
    /// from the third look on through a fresh connection too. A wait that times out says the
    /// defaults it last saw.
    @discardableResult
    public func wait<T: Sendable>(
        for what: String, timeout: Duration = .seconds(10), _ predicate: @escaping @Sendable (Snapshot) -> T?
    ) async throws -> T {
        let events = self.events()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                // The first event of a fresh subscription is the current snapshot, so a condition that
                // already holds is seen at once.
                for await _ in events {
                    if let value = predicate(self.snapshot) { return value }
                }
                return nil
            }
            if snapshot.server?.isPipeWire == true {
                group.addTask {
                    var looks = 0
                    while true {
                        try await Task.sleep(for: Self.pipeWireServerLook)
                        // (From the third on, also through a connection of its own: this one may have
                        // missed a change of the default. See `Connection.defaultAsked`.)
                        looks += 1
                        self.connection.refreshServerInfo(afresh: looks >= 3)
                    }
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                let seen = self.snapshot
                throw TimeoutError(what: what + " (default sink \(seen.defaultSink?.name ?? "none"), "
                    + "default source \(seen.defaultSource?.name ?? "none"))")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw TimeoutError(what: what) }
            return value
        }
    }
}

/// What a wait that did not come true says.
public struct TimeoutError: Error, CustomStringConvertible {
    public var what: String
    public init(what: String) { self.what = what }
    public var description: String { "timed out waiting for \(what)" }
}

extension PulseClient {
    /// Waits, event by event (no polling), until the snapshot satisfies the predicate; returns its value.
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
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TimeoutError(what: what)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw TimeoutError(what: what) }
            return value
        }
    }
}

import PulseClient

/// Returns the first element of `elements` that satisfies `predicate`, or throws `TimeoutError(what)`
/// after `timeout` (or when the sequence ends without one).
public func first<T: Sendable>(_ elements: AsyncStream<T>, within timeout: Duration, _ what: @escaping @autoclosure @Sendable () -> String,
                               where predicate: @escaping @Sendable (T) -> Bool) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            for await element in elements where predicate(element) { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimeoutError(what: what())
        }
        defer { group.cancelAll() }
        guard let found = try await group.next(), let found else { throw TimeoutError(what: what()) }
        return found
    }
}

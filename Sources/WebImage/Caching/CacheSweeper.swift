/// Runs a store's sweep on a timer, for as long as the sweeper lives.
///
/// Servers have no app lifecycle to hang expiry on (the top complaint against
/// every peer library), so stores sweep on a timer of their own as well as under
/// write pressure. The timer holds its store weakly: dropping the store stops it.
public final class CacheSweeper: Sendable {
    private let task: Task<Void, Never>

    /// Calls `sweep` every `interval` until the sweeper is deinitialised.
    /// `sweep` returns false to stop the timer (its store is gone).
    public init(interval: Duration, sweep: @escaping @Sendable () async -> Bool) {
        task = Task.detached(priority: .background) {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                if Task.isCancelled { return }
                if await !sweep() { return }
            }
        }
    }

    deinit { task.cancel() }

    /// Stops the timer and returns once a sweep in progress has finished (a sweep
    /// still waiting for a thread does not start).
    public func stop() async {
        task.cancel()
        await task.value
    }

    /// A sweeper that calls `store.removeExpired()` every `interval` while the
    /// store lives, or nil when `interval` is nil. Errors are ignored: the next
    /// sweep tries again.
    public static func removingExpired(from store: some CacheStore & AnyObject, every interval: Duration?) -> CacheSweeper? {
        guard let interval else { return nil }
        return CacheSweeper(interval: interval) { [weak store] in
            guard let store else { return false }
            try? await store.removeExpired()
            return true
        }
    }
}

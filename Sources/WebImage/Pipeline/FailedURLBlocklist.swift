public import Foundation
import Synchronization

/// URLs that failed permanently, refused without a new attempt for a while.
///
/// Unlike SDWebImage's list, entries expire (``ttl``), only permanent failures
/// are recorded (a timeout, a refused connection or a 5xx never blocks a URL), and
/// the list is bounded (the oldest entry goes first). `.retryFailed` bypasses it.
public final class FailedURLBlocklist: Sendable {
    /// How long a failed URL stays blocked. Default 5 minutes.
    public let ttl: Duration
    /// The most URLs remembered. Default 10 000.
    public let capacity: Int
    private let clock: @Sendable () -> Date

    private struct Entry {
        var until: Date
        var error: WebImageError
    }

    private let entries = Mutex<[String: Entry]>([:])

    public init(ttl: Duration = .seconds(300), capacity: Int = 10_000, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.ttl = ttl
        self.capacity = max(0, capacity)
        self.clock = clock
    }

    /// The error a URL failed with, if it is blocked now.
    public func blockingError(for url: String) -> WebImageError? {
        entries.withLock { entries in
            guard let entry = entries[url] else { return nil }
            if entry.until <= clock() {
                entries[url] = nil
                return nil
            }
            return entry.error
        }
    }

    /// Records a failure; transient failures and cancellations are ignored.
    /// - Returns: whether the URL is now blocked.
    @discardableResult
    public func record(_ error: WebImageError, for url: String) -> Bool {
        guard !error.isTransient, error.code != .cancelled, capacity > 0 else { return false }
        let now = clock()
        let until = now.addingTimeInterval(ttl.timeInterval)
        entries.withLock { entries in
            if entries.count >= capacity, entries[url] == nil {
                // Drop expired entries, then the one closest to expiry.
                entries = entries.filter { $0.value.until > now }
                if entries.count >= capacity, let oldest = entries.min(by: { $0.value.until < $1.value.until }) {
                    entries[oldest.key] = nil
                }
            }
            entries[url] = Entry(until: until, error: error)
        }
        return true
    }

    /// Unblocks one URL.
    public func remove(_ url: String) { _ = entries.withLock { $0.removeValue(forKey: url) } }
    /// Unblocks every URL.
    public func removeAll() { entries.withLock { $0.removeAll() } }
    /// The number of URLs remembered (expired ones included until next looked up).
    public var count: Int { entries.withLock { $0.count } }
}

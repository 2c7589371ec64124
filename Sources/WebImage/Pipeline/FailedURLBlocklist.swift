public import Foundation
public import Logging
import Metrics
import Synchronization

/// URLs that failed permanently, refused without a new attempt for a while.
///
/// Unlike SDWebImage's list, entries expire (``ttl``), only permanent failures
/// are recorded (a timeout, a refused connection or a 5xx never blocks a URL), and
/// the list is bounded (the oldest entry goes first). `.retryFailed` bypasses it.
///
/// With a ``shared`` store (Redis, for a fleet) a failure recorded here is also
/// written there in the background, and a URL this host does not block is looked
/// up there before it goes to the loader (``sharedBlockingError(for:)``), so a
/// broken URL costs the fleet one download per TTL rather than one per host.
/// Failures of the shared store are logged and counted and never fail a load.
/// Shared writes land in the order they were made for each URL (a ``remove(_:)``
/// is never overtaken by an earlier ``record(_:for:)`` still in flight), and a
/// ``removeAll()`` lands after every write made before it and before every write
/// made after it; writes for different URLs run concurrently.
/// Only permanent failures are shared, as only they are recorded: a dead origin
/// (refused, timed out, 5xx) is not blocked on any host. `file:` URLs are never
/// shared: each host has its own files.
///
/// Metrics: `webimage_blocklist_shared_hits_total`,
/// `webimage_blocklist_shared_errors_total`, `webimage_blocklist_shared_writes_dropped_total`.
public final class FailedURLBlocklist: Sendable {
    /// How long a failed URL stays blocked. Default 5 minutes.
    public let ttl: Duration
    /// The most URLs remembered. Default 10 000.
    public let capacity: Int
    /// Where failures are shared with other hosts, if anywhere.
    public let shared: (any SharedFailureStore)?
    private let clock: @Sendable () -> Date
    private let logger: Logger
    private let work: BackgroundWork
    private let sharedHits = Counter(label: "webimage_blocklist_shared_hits_total")
    private let sharedErrors = Counter(label: "webimage_blocklist_shared_errors_total")
    private let dropped = Counter(label: "webimage_blocklist_shared_writes_dropped_total")

    private struct Entry {
        var until: Date
        var error: WebImageError
    }

    private let entries = Lock<[String: Entry]>([:])
    /// `entries.count`, set under the lock by every change: a lookup while the list
    /// is empty (nearly always) takes neither the lock nor the URL's hash. A lookup
    /// racing a first `record` sees the list as it was just before it, as it could
    /// have with the lock.
    private let held = Atomic<Int>(0)

    /// The last shared write made for each URL, and the last `removeAll`: each new
    /// write waits for the one before it (see ``inBackground(_:url:_:)``).
    private struct Lanes {
        var tails: [String: (id: Int, task: Task<Void, Never>)] = [:]
        var barrier: (id: Int, task: Task<Void, Never>)?
        var nextID = 0
    }

    private let lanes = Lock(Lanes())

    /// - Parameters:
    ///   - ttl: how long a failed URL stays blocked.
    ///   - capacity: the most URLs remembered on this host.
    ///   - shared: where failures are shared with other hosts (``SharedFailureStore``).
    ///   - maxPendingSharedWrites: shared writes in flight at once; past it one is
    ///     dropped and counted.
    ///   - logger: where the shared store's failures are logged.
    ///   - clock: the time, for tests.
    public init(ttl: Duration = .seconds(300), capacity: Int = 10_000, shared: (any SharedFailureStore)? = nil,
                maxPendingSharedWrites: Int = 256, logger: Logger = Logger(label: "webimage.blocklist"),
                clock: @escaping @Sendable () -> Date = { Date() }) {
        self.ttl = ttl
        self.capacity = max(0, capacity)
        self.shared = shared
        self.logger = logger
        self.work = BackgroundWork(maxPending: maxPendingSharedWrites, maxPendingBytes: .max)
        self.clock = clock
    }

    /// Whether no URL is blocked: one atomic load, asked before a load works out
    /// the URL's text to look it up.
    var holdsNone: Bool { held.load(ordering: .acquiring) == 0 }

    /// The error a URL failed with, if it is blocked now.
    public func blockingError(for url: String) -> WebImageError? {
        guard held.load(ordering: .acquiring) > 0 else { return nil }
        return entries.withLock { entries in
            guard let entry = entries[url] else { return nil }
            if entry.until <= clock() {
                entries[url] = nil
                held.store(entries.count, ordering: .releasing)
                return nil
            }
            return entry.error
        }
    }

    /// Records a failure; transient failures, cancellations and ``WebImageError/Code/blockedURL``
    /// (a failure already recorded) are ignored. With a ``shared`` store the
    /// failure is also written there, in the background.
    /// - Returns: whether the URL is now blocked.
    @discardableResult
    public func record(_ error: WebImageError, for url: String) -> Bool {
        guard !error.isTransient, error.code != .cancelled, error.code != .blockedURL, capacity > 0 else { return false }
        insert(url, until: clock().addingTimeInterval(ttl.timeInterval), error: error)
        if let shared, Self.isShareable(url) {
            let record = FailureRecord(error), ttl = ttl
            inBackground("record", url: url) { try await shared.recordFailure(record, forURL: url, ttl: ttl) }
        }
        return true
    }

    /// Asks the ``shared`` store whether another host blocked `url`. A failure it
    /// holds is copied here for as long as it still stands there, and returned. A
    /// shared store that fails or answers nonsense counts as "not blocked".
    ///
    /// The manager calls this only when a load is about to reach its loader
    /// (every cache tier missed), so a cache hit never waits on the shared store.
    public func sharedBlockingError(for url: String) async -> WebImageError? {
        guard let shared, capacity > 0, Self.isShareable(url) else { return nil }
        let found: (record: FailureRecord, remaining: Duration)?
        do { found = try await shared.failure(forURL: url) } catch {
            noteSharedFailure(error, url: url, operation: "read")
            return nil
        }
        guard let found, found.remaining > .zero else { return nil }
        sharedHits.increment()
        let error = found.record.error
        insert(url, until: clock().addingTimeInterval(min(found.remaining, ttl).timeInterval), error: error)
        return error
    }

    /// Whether a URL's failures mean the same on another host: not for `file:`
    /// URLs, whose files are each host's own.
    static func isShareable(_ url: String) -> Bool {
        !(url.utf8.count >= 5 && url.prefix(5).lowercased() == "file:")
    }

    private func insert(_ url: String, until: Date, error: WebImageError) {
        let now = clock()
        entries.withLock { entries in
            if entries.count >= capacity, entries[url] == nil {
                // Drop expired entries, then the one closest to expiry.
                entries = entries.filter { $0.value.until > now }
                if entries.count >= capacity, let oldest = entries.min(by: { $0.value.until < $1.value.until }) {
                    entries[oldest.key] = nil
                }
            }
            entries[url] = Entry(until: until, error: error)
            held.store(entries.count, ordering: .releasing)
        }
    }

    /// Unblocks one URL, here and (in the background) in the ``shared`` store.
    public func remove(_ url: String) {
        entries.withLock { entries in
            entries[url] = nil
            held.store(entries.count, ordering: .releasing)
        }
        if let shared, Self.isShareable(url) { inBackground("remove", url: url) { try await shared.removeFailure(forURL: url) } }
    }

    /// Unblocks every URL, here and (in the background) in the ``shared`` store.
    public func removeAll() {
        entries.withLock { entries in
            entries.removeAll()
            held.store(0, ordering: .releasing)
        }
        if let shared { inBackground("removeAll", url: nil) { try await shared.removeAllFailures() } }
    }

    /// The number of URLs remembered (expired ones included until next looked up).
    public var count: Int { entries.withLock { $0.count } }

    /// Shared writes running in the background now.
    public var pendingSharedWrites: Int { work.pending.count }

    /// Refuses new shared writes and waits for those running. The manager's
    /// ``ImageManager/shutdown(gracePeriod:)`` calls it before it closes the store;
    /// the shared store itself is its maker's to close.
    public func finishSharedWrites() async {
        work.stop()
        await work.idle()
    }

    /// Runs a shared write in the background, after the writes it must follow:
    /// the last one for the same URL (or the last `removeAll`), and for a
    /// `removeAll` (`url` nil) every write made before it. Bounded and drained by
    /// ``finishSharedWrites()`` through `work`; a dropped write never runs.
    private func inBackground(_ operation: String, url: String?, _ job: @escaping @Sendable () async throws -> Void) {
        guard work.enter() else {
            dropped.increment()
            logger.debug("shared blocklist write dropped: too many pending, or shutting down",
                         metadata: ["url": "\(url ?? "*")", "operation": "\(operation)"])
            return
        }
        lanes.withLock { lanes in
            lanes.nextID += 1
            let id = lanes.nextID
            let before: [Task<Void, Never>]
            if let url {
                before = [(lanes.tails[url] ?? lanes.barrier)?.task].compactMap { $0 }
            } else {
                before = lanes.tails.values.map(\.task) + [lanes.barrier?.task].compactMap { $0 }
            }
            let task = Task.detached(priority: .utility) {
                for earlier in before { await earlier.value }
                do { try await job() } catch { self.noteSharedFailure(error, url: url ?? "*", operation: operation) }
                self.finished(id, url: url)
                self.work.leave()
            }
            if let url {
                lanes.tails[url] = (id, task)
            } else {
                lanes.barrier = (id, task)
                lanes.tails.removeAll()
            }
        }
    }

    /// Forgets a finished write unless a later one already follows it.
    private func finished(_ id: Int, url: String?) {
        lanes.withLock { lanes in
            if let url {
                if lanes.tails[url]?.id == id { lanes.tails[url] = nil }
            } else if lanes.barrier?.id == id {
                lanes.barrier = nil
            }
        }
    }

    private func noteSharedFailure(_ error: any Error, url: String, operation: String) {
        sharedErrors.increment()
        logger.warning("shared blocklist failed; going on without it",
                       metadata: ["operation": "\(operation)", "url": "\(url)", "error": "\(error)"])
    }
}

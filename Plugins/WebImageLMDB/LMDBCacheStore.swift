internal import CLMDB
public import Foundation
@_spi(WebImageInternal) public import WebImage
import Synchronization

/// A `CacheStore` in an LMDB environment: a memory-mapped B-tree that several
/// processes on one host share safely, and that a crash cannot corrupt.
///
/// ```swift
/// let store = try LMDBCacheStore(directory: URL(fileURLWithPath: "/var/cache/webimage"))
/// configuration.store = store
/// ```
///
/// - A hit is one read transaction: a B-tree lookup and one copy of the bytes.
///   Reads never wait for writers (LMDB's MVCC), and no read transaction outlives
///   the call that opened it.
/// - Writes are serialized on one thread of the store's own; across processes,
///   LMDB's lock file serializes them. Writes that arrive while a transaction
///   commits share the next one (group commit), so concurrent writers pay one
///   `fsync` between them instead of one each.
/// - Last-access dates are kept in memory and written in batches (on the next
///   write, on every sweep, and at least every ``Options/accessFlushInterval``),
///   so reads never become write transactions.
/// - Expiry (by last access) and trimming (to half the size limit, least recently
///   accessed first) walk an index ordered by access time: no full scan.
///   They run on a timer and when a write takes the store over its limit.
/// - The map starts at ``Options/mapSize`` and doubles on `MDB_MAP_FULL` up to
///   ``Options/maxMapSize``; at the maximum the store trims and retries. A map
///   grown by another process is adopted (`MDB_MAP_RESIZED`).
/// - Readers left by crashed processes are cleared at open (`mdb_reader_check`).
public final class LMDBCacheStore: CacheStore, ImmediateCacheReading {
    /// Settings beyond the common `CacheLimits`.
    public struct Options: Sendable {
        /// The initial map size. Default 256 MiB (address space, not disk).
        public var mapSize: Int = 256 << 20
        /// The largest the map may grow to. Default: 4 × the size limit, at least 1 GiB
        /// (B-tree pages and free pages need room beyond the data itself).
        public var maxMapSize: Int?
        /// How long access dates may wait in memory before they are written.
        public var accessFlushInterval: Duration = .seconds(5)
        /// Read on the calling task instead of a thread of the I/O pool. On by default.
        ///
        /// A warm LMDB read is a lookup in memory-mapped pages and one copy, a few
        /// microseconds; the hop to another thread and back costs several times more
        /// than the read (docs/performance.md). A page that is not in memory is read
        /// by a page fault, which blocks the calling thread for one disk read; that
        /// is the price of the default, and it is small while the data file mostly
        /// fits in the page cache.
        ///
        /// Turn it off when the data file is much larger than the RAM left for the
        /// page cache (most hits then fault, and blocked cooperative threads stall
        /// unrelated tasks), or when the file is on a network or slow disk.
        public var readsOnCallingThread = true
        public init(mapSize: Int = 256 << 20, maxMapSize: Int? = nil, accessFlushInterval: Duration = .seconds(5), readsOnCallingThread: Bool = true) {
            self.mapSize = mapSize
            self.maxMapSize = maxMapSize
            self.accessFlushInterval = accessFlushInterval
            self.readsOnCallingThread = readsOnCallingThread
        }
    }

    /// The directory holding `data.mdb` and `lock.mdb`.
    public let directory: URL
    let environment: LMDBEnvironment
    let limits: CacheLimits
    let clock: @Sendable () -> Date
    /// One thread for every write transaction.
    let writer = BlockingThreadPool(threadCount: 1, name: "webimage.lmdb.writer")
    let readers: BlockingThreadPool
    package let readsOnCallingThread: Bool
    /// Access dates not yet written, by database key.
    let pendingAccess = Lock<[String: UInt64]>([:])
    /// Writes waiting for the next transaction, and whether a commit is queued.
    let pendingWrites = Lock<(items: [PendingWrite], queued: Bool)>(([], false))
    private let sweeper = Lock<CacheSweeper?>(nil)
    /// Entries that failed their checksum, counted and logged as they are removed.
    private let damaged = DamagedEntryReport(store: "lmdb")
    private let flusher = Lock<CacheSweeper?>(nil)

    /// Opens (creating if needed) the store in `directory`.
    /// - Throws: `WebImageError/Code/storeFailed` with LMDB's message: a path that
    ///   is a file, an unwritable directory, a corrupt or foreign data file.
    public init(
        directory: URL,
        limits: CacheLimits = CacheLimits(),
        options: Options = Options(),
        readers: BlockingThreadPool = .io,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.limits = limits
        self.clock = clock
        self.readers = readers
        self.readsOnCallingThread = options.readsOnCallingThread
        let maxMap = options.maxMapSize ?? max(1 << 30, (limits.maxSize ?? (4 << 30)) * 4)
        // The directories made here, removed again if the environment cannot open
        // (a path too long for its files, a map the system refuses): a failed open
        // leaves nothing behind.
        var made: [String] = []
        // LMDB's two files, if this open makes them: removed too when it fails
        // (a map size the system refuses, say), as the directory is.
        var newFiles: [String] = []
        do {
            // The directory as the kernel resolved it when making it: `..` after a
            // symbolic link is not simplified as text (a standardized URL would be).
            let resolved = try CacheDirectory.prepare(directory, made: &made)
            self.directory = resolved
            let files = ["data.mdb", "lock.mdb"].map { resolved.appendingPathComponent($0).path }
            // LMDB opens them blocking: a FIFO in their place would hang the open.
            for file in files {
                var info = stat()
                if lstat(file, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
                    throw WebImageError(.storeFailed, "\(file) is not a regular file: an LMDB store's data and lock files must be")
                }
            }
            newFiles = files.filter { !FileManager.default.fileExists(atPath: $0) }
            environment = try LMDBEnvironment(directory: self.directory, mapSize: min(options.mapSize, maxMap), maxMapSize: maxMap)
        } catch {
            for file in newFiles { unlink(file) }
            CacheDirectory.removeMade(made)
            writer.shutdown()
            throw error
        }
        sweeper.withLock { $0 = .removingExpired(from: self, every: limits.sweepInterval) }
        flusher.withLock {
            $0 = CacheSweeper(interval: options.accessFlushInterval) { [weak self] in
                guard let self else { return false }
                try? await self.flushAccessDates()
                return true
            }
        }
    }

    deinit { writer.shutdown() }

    /// Runs a read where ``Options/readsOnCallingThread`` says.
    func read<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        if readsOnCallingThread { return try body() }
        return try await readers.run(body)
    }

    /// The current map size in bytes.
    public var mapSize: Int { environment.mapSize }

    // MARK: CacheStore

    public func entry(forKey key: String) async throws -> CacheEntry? {
        guard let found = try await readEntry(forKey: key, withData: true) else { return nil }
        return accessed(found, key)
    }

    /// A hit read on the calling thread (``Options/readsOnCallingThread``, the
    /// default); nil for a miss, a damaged entry or a failure, which
    /// ``entry(forKey:)`` reports and removes.
    package func immediateEntry(forKey key: String) -> CacheEntry? {
        guard readsOnCallingThread else { return nil }
        guard case .hit(let found)? = try? lookUp(key, withData: true) else { return nil }
        return accessed(found, key)
    }

    /// A hit's access date, now, batched for the next write (`flushAccessDates`),
    /// by the store's key (the write works out the database key).
    private func accessed(_ found: CacheEntry, _ key: String) -> CacheEntry {
        var found = found
        let now = clock()
        found.metadata.accessedAt = now
        pendingAccess.withLock { $0[key] = LMDBRecord.milliseconds(now) }
        return found
    }

    public func metadata(forKey key: String) async throws -> CacheMetadata? {
        try await readEntry(forKey: key, withData: false)?.metadata
    }

    /// One read transaction: the entry (its bytes only if asked, checked against
    /// their checksum) and its access date. A damaged entry is removed, reported
    /// and read as a miss: never served as wrong bytes.
    private func readEntry(forKey key: String, withData: Bool) async throws -> CacheEntry? {
        // On the calling thread, a direct call: no closure context to allocate, no
        // async frame (a warm hit is a lookup in mapped memory).
        let outcome = readsOnCallingThread
            ? try lookUp(key, withData: withData)
            : try await readers.run { [self] in try lookUp(key, withData: withData) }
        switch outcome {
        case .hit(let entry): return entry
        case .miss: return nil
        case .damaged(let reason):
            damaged.report(key: key, reason: reason)
            try? await removeData(forKey: key)
            return nil
        }
    }

    /// The closures take the environment, not the store: the store is held
    /// weakly by its timers, so each retain of it is counted the slow way.
    @inline(__always)
    private func lookUp(_ key: String, withData: Bool) throws -> ReadOutcome {
        let environment = environment
        return try LMDBRecord.withDatabaseKey(key) { databaseKey in try Self.lookUp(environment, key, databaseKey, withData: withData) }
    }

    private static func lookUp(_ environment: LMDBEnvironment, _ key: String, _ databaseKey: UnsafeRawBufferPointer,
                               withData: Bool) throws -> ReadOutcome {
        try environment.read { txn in
            guard let value = try txn.get(environment.entries, databaseKey) else { return .miss }
            guard let decoded = LMDBRecord.decode(value) else { return .damaged("not a record of format version \(LMDBRecord.version)") }
            if LMDBRecord.isHashed(databaseKey), decoded.fullKey != key { return .miss }
            var metadata = decoded.metadata
            // A hit with data sets accessedAt to now itself: skip the second lookup.
            if !withData, let stamp = try txn.get(environment.access, databaseKey) {
                metadata.accessedAt = LMDBRecord.date(LMDBRecord.uint64(stamp))
            }
            var data = Data()
            if withData {
                // The payload is copied out as it is checked: one read of the mapped pages.
                let (copy, reason) = LMDBRecord.verifiedPayload(value, decoded)
                if let reason { return .damaged(reason) }
                data = copy
            }
            // An entry of format 2 carries an XXH64: the ETag is hashed from the bytes instead.
            return .hit(CacheEntry(data: data, metadata: metadata, checksum: withData && !decoded.isLegacy ? decoded.checksum : nil))
        }
    }

    private enum ReadOutcome: Sendable {
        case hit(CacheEntry)
        case miss
        case damaged(String)
    }

    /// Joins the next write transaction (group commit: writes that arrive while one
    /// commits share the next), and returns once it is committed.
    public func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        // Larger than a quarter of the limit: not kept, or it would flush the store.
        guard limits.admits(data.count) else { return try await removeData(forKey: key) }
        let databaseKey = LMDBRecord.databaseKey(key)
        let now = LMDBRecord.milliseconds(clock())
        let header = LMDBRecord.header(key: key, hashed: LMDBRecord.isHashed(databaseKey), metadata: metadata, storedAt: now,
                                       checksum: XXH3.hash(data))
        let overLimit = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            let write = PendingWrite(databaseKey: databaseKey, header: header, data: data, stamp: now, continuation: continuation)
            let lead = pendingWrites.withLock { state -> Bool in
                state.items.append(write)
                defer { state.queued = true }
                return !state.queued
            }
            if lead { Task { await self.commitPendingWrites() } }
        }
        if overLimit { try await removeExpired() }
    }

    public func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {
        let databaseKey = LMDBRecord.databaseKey(key)
        try await writeGrowing { [self] txn in
            guard let value = try txn.get(environment.entries, databaseKey), let decoded = LMDBRecord.decode(value) else { return }
            if LMDBRecord.isHashed(databaseKey), decoded.fullKey != key { return }
            let data = [UInt8](UnsafeRawBufferPointer(rebasing: value[decoded.dataOffset...]))
            let storedAt = LMDBRecord.milliseconds(decoded.metadata.storedAt)
            let header = LMDBRecord.header(key: key, hashed: LMDBRecord.isHashed(databaseKey), metadata: metadata, storedAt: storedAt,
                                           checksum: decoded.checksum)
            try txn.put(environment.entries, databaseKey, header + data)
            try setAccess(txn, databaseKey, stamp: LMDBRecord.milliseconds(clock()), size: UInt64(data.count))
        }
    }

    public func removeData(forKey key: String) async throws {
        let databaseKey = LMDBRecord.databaseKey(key)
        pendingAccess.withLock { _ = $0.removeValue(forKey: key) }
        try await writeGrowing { [self] txn in
            // Another key under the same hash is left alone; a value that no longer parses goes.
            if LMDBRecord.isHashed(databaseKey), let value = try txn.get(environment.entries, databaseKey),
               let decoded = LMDBRecord.decode(value), decoded.fullKey != key { return }
            try removeRecord(txn, databaseKey)
        }
    }

    public func removeAll() async throws {
        pendingAccess.withLock { $0.removeAll() }
        try await writer.run { [environment, self] in
            try environment.write { txn in
                for dbi in [environment.entries, environment.access, environment.lru, environment.totals] { try txn.dropAll(dbi) }
            }
            try settle()  // so the next writer can reuse what was freed (see settle)
        }
    }

    public func removeExpired() async throws {
        try await flushAccessDates()
        try await sweep()
    }

    /// Stops the sweep and access-date timers (waiting for a sweep in progress),
    /// writes the access dates still in memory, and waits for queued writes to
    /// commit. The environment itself is closed when the store is released:
    /// `mdb_env_close` under a reader still running on another thread would be
    /// undefined behaviour, and a store may be shared beyond one manager.
    public func close() async {
        let sweeper = sweeper.withLock { $0.take() }
        let flusher = flusher.withLock { $0.take() }
        await sweeper?.stop()
        await flusher?.stop()
        do { try await flushAccessDates() } catch {
            // A full disk: the dates are lost, the entries are not.
        }
        _ = try? await writer.run {}
    }

    public var totalSize: Int {
        get async throws { try await totals().size }
    }

    public var count: Int {
        get async throws { try await totals().count }
    }
}

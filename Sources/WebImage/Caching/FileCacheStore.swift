public import Foundation
import Synchronization
import CWebImageSystem
#if canImport(Glibc)
import Glibc
#endif

/// A ``CacheStore`` with one file per entry in a directory of its own.
///
/// ## Layout
/// An entry for key `k` is one file named `h.<ext>`, where `h` is SHA-256(k) in
/// hex and `<ext>` the key's extension (`jpg`, `png`...) when it has a short one.
/// The file holds the bytes, then a binary record (the full key, so a collision
/// can never return another key's bytes, and the metadata), then a 16-byte footer
/// (the record's length and the magic `WEBIMGF1`). The bytes come first, so an
/// image viewer opens the file (decoders stop at the image's own end); a hit is one
/// `open`, `fstat`, `read` and `close` (`CacheEntryCodec` has the format).
///
/// ## Where reads run
/// A hit of at most 1 MiB whose bytes are all in the page cache is read on the
/// calling task: the read is `preadv2` with `RWF_NOWAIT`, which takes bytes from the page cache or
/// refuses, so it never waits for the disk, and it saves the hop to a pool
/// thread and back, which costs several times the read (docs/performance.md).
/// Everything that could wait runs on the I/O pool instead: a read the page
/// cache cannot satisfy, a larger entry (copying it would hold the task's
/// thread longer than the hop costs), moving the access date, removing a damaged entry, and
/// every write and sweep. See ``init(directory:limits:pool:readsOnCallingThread:clock:)``.
///
/// No key, however hostile (`../../etc/passwd`, NUL bytes, 10 kB), can name a
/// path outside the directory: names are hex digests. The directory is created
/// with mode 0700 and files with 0600.
///
/// ## Atomicity
/// A write goes to `tmp/`, then is renamed into place: the rename is the commit
/// point. A crash before it leaves a file in `tmp/` that nothing points to, which
/// sweeps delete; a reader sees the old entry or the new one, never part of one.
///
/// ## Access dates and limits
/// The last access is the file's modification time, which a hit moves forward
/// (`futimens` on the open file, no rewrite) when it is more than 30 seconds old;
/// filesystem `atime` is not used, as `noatime` mounts make it meaningless. Sweeps
/// list the directory once, remove entries older than ``CacheLimits/maxAge`` and,
/// over ``CacheLimits/maxSize``, remove least recently accessed entries down to
/// half the limit. They run on a timer and when a write takes the store over its
/// limit. Files that are not entries (the JSON `.meta` layout of earlier versions,
/// leftovers of interrupted writes) are deleted by sweeps.
///
/// Several processes may share a directory: every step above is a rename or an
/// unlink, which the filesystem makes atomic.
public final class FileCacheStore: CacheStore {
    /// The directory the store owns.
    public let directory: URL
    /// `directory.path` with a trailing slash, computed once (hits build paths from it).
    private let directoryPrefix: String
    private let limits: CacheLimits
    private let pool: BlockingThreadPool
    /// Whether hits try the calling task first (the option, on a local filesystem).
    private let readsInline: Bool
    private let clock: @Sendable () -> Date
    /// Bytes written since the last sweep measured the directory; a write that
    /// takes the estimate over the limit starts a sweep.
    private let estimatedSize = Lock<Int?>(nil)
    private let sweeper = Lock<CacheSweeper?>(nil)
    /// Entries that failed their checksum, counted and logged as they are removed.
    private let damaged = DamagedEntryReport(store: "filesystem")
    /// A hit moves the file's access date only when it is older than this.
    static let accessGranularity: TimeInterval = 30
    /// The largest entry file read on the calling task: copying more than this
    /// from the page cache (and zeroing the buffer first) holds a cooperative
    /// thread for longer than a hop to the pool costs.
    static let inlineReadLimit = 1 << 20

    /// Opens (creating if needed) a store in `directory`.
    /// - Parameters:
    ///   - directory: the folder the store owns; nothing else should write into it.
    ///   - limits: the size, age and sweep limits the store enforces.
    ///   - pool: where its file I/O runs; the I/O pool by default, so that
    ///     a hit never queues behind decodes.
    ///   - readsOnCallingThread: read a hit of at most 1 MiB on the calling task
    ///     when its bytes are all in the page cache (on by default; see "Where
    ///     reads run"). It applies
    ///     only on local filesystems (ext4, XFS, Btrfs, tmpfs, F2FS, ZFS, bcachefs,
    ///     overlayfs): on NFS, SMB or FUSE even `open` waits on a server, so there
    ///     every read runs on the pool. The one wait left on the calling task is
    ///     the path lookup of `open`, which reads the disk only when the
    ///     directory's own blocks have left memory; turn this off if the cache
    ///     directory is much larger than the memory left for the page cache.
    ///   - clock: the time used for access dates and expiry; tests pass a fake one.
    /// - Throws: ``WebImageError/Code/storeFailed`` if the directory cannot be
    ///   created or is not a writable directory.
    public init(
        directory: URL,
        limits: CacheLimits = CacheLimits(),
        pool: BlockingThreadPool = .io,
        readsOnCallingThread: Bool = true,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.directory = directory.standardizedFileURL
        self.directoryPrefix = self.directory.path.hasSuffix("/") ? self.directory.path : self.directory.path + "/"
        self.limits = limits
        self.pool = pool
        self.clock = clock
        try FileCacheStore.prepare(self.directory)
        self.readsInline = readsOnCallingThread && Self.isLocalFilesystem(self.directory.path)
        sweeper.withLock { $0 = .removingExpired(from: self, every: limits.sweepInterval) }
    }

    // MARK: CacheStore

    public func entry(forKey key: String) async throws -> CacheEntry? {
        let path = path(forKey: key)
        if readsInline, case .read(let entry) = readEntry(atPath: path, key: key, withData: true, mayWait: false) {
            return entry
        }
        return try await pool.run { [self] in readEntry(atPath: path, key: key, withData: true) }
    }

    /// Whether hits may be read on the calling task (the option and the filesystem).
    package var readsOnCallingThread: Bool { readsInline }

    public func metadata(forKey key: String) async throws -> CacheMetadata? {
        try await pool.run { [self] in readEntry(forKey: key, withData: false)?.metadata }
    }

    public func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        // Larger than a quarter of the limit: not kept, or it would flush the store.
        guard limits.admits(data.count) else { return try await removeData(forKey: key) }
        let overLimit = try await pool.run { [self] in
            var metadata = metadata
            metadata.storedAt = clock()
            try write(data, forKey: key, metadata: metadata)
            return noteWritten(data.count)
        }
        if overLimit { try await removeExpired() }
    }

    public func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {
        try await pool.run { [self] in
            guard let old = readEntry(forKey: key, withData: true) else { return }
            var updated = metadata
            updated.storedAt = old.metadata.storedAt
            try write(old.data, forKey: key, metadata: updated)
        }
    }

    public func removeData(forKey key: String) async throws {
        try await pool.run { [self] in
            let path = path(forKey: key)
            guard readEntry(atPath: path, key: key, withData: false) != nil else { return }
            unlink(path)
        }
    }

    public func removeAll() async throws {
        try await pool.run { [self] in
            for name in try listNames() where name != "tmp" {
                unlink(directoryPrefix + name)
            }
            estimatedSize.withLock { $0 = 0 }
        }
    }

    public func removeExpired() async throws {
        try await pool.run { [self] in try sweep() }
    }

    public var totalSize: Int {
        get async throws { try await pool.run { [self] in try scan().reduce(0) { $0 + $1.dataSize } } }
    }

    public var count: Int {
        get async throws { try await pool.run { [self] in try scan().count } }
    }

    /// Stops the sweep timer, waiting for a sweep in progress. Every write has
    /// already committed when its call returned.
    public func close() async {
        await sweeper.withLock { $0.take() }?.stop()
    }

    /// The path of the file holding a key's entry, if the key is stored. The file
    /// starts with the bytes; the store's record follows them (see the type's
    /// discussion), which image decoders ignore.
    public func fileURL(forKey key: String) async throws -> URL? {
        try await pool.run { [self] in
            let path = path(forKey: key)
            guard readEntry(atPath: path, key: key, withData: false) != nil else { return nil }
            return URL(fileURLWithPath: path)
        }
    }
}

// MARK: - Files

extension FileCacheStore {
    private var tmpDirectory: String { directoryPrefix + "tmp" }

    private static func prepare(_ directory: URL) throws {
        try CacheDirectory.prepare(directory)
        try CacheDirectory.prepare(directory.appendingPathComponent("tmp"))
        guard access(directory.path, W_OK | X_OK) == 0 else {
            throw WebImageError(.storeFailed, "cache directory \(directory.path) is not writable: \(String(cString: strerror(errno)))")
        }
    }

    /// A file extension safe in a name: the key's, if short and alphanumeric.
    static func fileExtension(forKey key: String) -> String? {
        let path = URL(string: key)?.path ?? key
        guard let dot = path.lastIndex(of: ".") else { return nil }
        let ext = path[path.index(after: dot)...].lowercased()
        guard (1...5).contains(ext.count), ext.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return nil }
        return ext
    }

    /// Whether a name in the directory is an entry's: 64 hex digits, then an
    /// optional extension of one to five lowercase letters or digits.
    static func isEntryName(_ name: some StringProtocol) -> Bool {
        let utf8 = Array(name.utf8)
        guard utf8.count >= 64, utf8[..<64].allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return false }
        if utf8.count == 64 { return true }
        let ext = utf8[65...]
        return utf8[64] == UInt8(ascii: ".") && (1...5).contains(ext.count)
            && ext.allSatisfy { (48...57).contains($0) || (97...122).contains($0) }
    }

    private func path(forKey key: String) -> String {
        let name = SHA256Digest.hex(key)
        guard let ext = Self.fileExtension(forKey: key) else { return directoryPrefix + name }
        return directoryPrefix + name + "." + ext
    }

    private func readEntry(forKey key: String, withData: Bool) -> CacheEntry? {
        readEntry(atPath: path(forKey: key), key: key, withData: withData)
    }

    private func readEntry(atPath path: String, key: String, withData: Bool) -> CacheEntry? {
        guard case .read(let entry) = readEntry(atPath: path, key: key, withData: withData, mayWait: true) else {
            preconditionFailure("a read that may wait always finishes")
        }
        return entry
    }

    private enum ReadOutcome {
        /// The entry, or nil: missing, malformed, or another key's.
        case read(CacheEntry?)
        /// Finishing would wait for the disk (bytes not in the page cache, the
        /// access date to move, a damaged file to remove): do it on the pool.
        case wouldWait
    }

    /// Reads an entry file: with its bytes, one `read` into a buffer of the file's
    /// size; without, the footer and record by `pread`. Nil when the file is
    /// missing, malformed, or holds another key. A hit moves the access date
    /// (see ``accessGranularity``). With `mayWait` false, the bytes come only from
    /// the page cache, and anything that would write gives up instead.
    private func readEntry(atPath path: String, key: String, withData: Bool, mayWait: Bool) -> ReadOutcome {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return .read(nil) }
        defer { Glibc.close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return .read(nil) }
        let fileSize = Int(info.st_size)
        guard fileSize >= CacheEntryCodec.footerSize else { return .read(nil) }
        if !mayWait, fileSize > Self.inlineReadLimit { return .wouldWait }

        var data = Data()
        var checksum: UInt64?
        let parsed: (key: String, metadata: CacheMetadata, recordLength: Int)?
        if withData {
            data = Data(count: fileSize)
            if mayWait {
                let filled = data.withUnsafeMutableBytes { FileIO.readFully(descriptor, into: $0, at: nil) }
                guard filled == fileSize else { return .read(nil) }
            } else {
                guard data.withUnsafeMutableBytes({ FileIO.readFullyIfCached(descriptor, into: $0, at: 0) }) else { return .wouldWait }
            }
            switch CacheEntryCodec.decode(data, key: key) {
            case .entry(let entry):
                data = entry.data
                checksum = entry.checksum
                parsed = (key, entry.metadata, fileSize - CacheEntryCodec.footerSize - entry.data.count)
            case .otherKey:
                return .read(nil)
            case .damaged(let reason):
                guard mayWait else { return .wouldWait }
                // Never served as wrong bytes: removed, so that the load fetches it again.
                unlink(path)
                damaged.report(key: key, reason: reason)
                return .read(nil)
            }
        } else {
            parsed = Self.readRecord(descriptor, fileSize: fileSize).flatMap { $0.key == key ? $0 : nil }
        }
        guard let parsed else { return .read(nil) }
        let dataSize = fileSize - CacheEntryCodec.footerSize - parsed.recordLength
        var metadata = parsed.metadata
        metadata.size = dataSize
        metadata.accessedAt = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
        if withData {
            let now = clock()
            if now.timeIntervalSince(metadata.accessedAt) > Self.accessGranularity {
                // An inode update can wait on the filesystem's journal.
                guard mayWait else { return .wouldWait }
                var times = Self.timespecs(now)
                _ = futimens(descriptor, &times)
            }
            metadata.accessedAt = now
        }
        return .read(CacheEntry(data: data, metadata: metadata, checksum: checksum))
    }

    /// Whether `path` is on a filesystem whose page-cache reads never wait on a
    /// server: the local ones, by `statfs` magic number. Unknown ones count as remote.
    static func isLocalFilesystem(_ path: String) -> Bool {
        let type = CWI_filesystem_type(path)
        guard type >= 0 else { return false }
        let local: Set<UInt64> = [
            0xEF53,      // ext2/3/4
            0x5846_5342, // XFS
            0x9123_683E, // Btrfs
            0x0102_1994, // tmpfs
            0xF2F5_2010, // F2FS
            0x2FC1_2FC1, // ZFS
            0xCA45_1A4E, // bcachefs
            0x794C_7630, // overlayfs (containers)
        ]
        return local.contains(UInt64(UInt32(truncatingIfNeeded: type)))
    }

    /// The footer and record of an open entry file, by `pread`.
    static func readRecord(_ descriptor: Int32, fileSize: Int) -> (key: String, metadata: CacheMetadata, recordLength: Int)? {
        var footer = [UInt8](repeating: 0, count: CacheEntryCodec.footerSize)
        let footerRead = footer.withUnsafeMutableBytes { FileIO.readFully(descriptor, into: $0, at: fileSize - CacheEntryCodec.footerSize) }
        guard footerRead == CacheEntryCodec.footerSize,
              let length = footer.withUnsafeBytes({ CacheEntryCodec.recordLength(footer: $0, fileSize: fileSize) })
        else { return nil }
        var record = [UInt8](repeating: 0, count: length)
        let recordRead = record.withUnsafeMutableBytes { FileIO.readFully(descriptor, into: $0, at: fileSize - CacheEntryCodec.footerSize - length) }
        guard recordRead == length, let parsed = record.withUnsafeBytes({ CacheEntryCodec.parse($0) }) else { return nil }
        return (parsed.key, parsed.metadata, length)
    }

    /// Writes `bytes ‖ record ‖ footer` to `tmp/`, then renames it into place.
    private func write(_ data: Data, forKey key: String, metadata: CacheMetadata) throws {
        let record = CacheEntryCodec.record(key: key, metadata: metadata, checksum: XXH64.hash(data))
        let footer = CacheEntryCodec.footer(recordLength: record.count)
        let temporary = tmpDirectory + "/" + UUID().uuidString
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw WebImageError(.storeFailed, "cannot write \(temporary): \(String(cString: strerror(errno)))")
        }
        // One chunk after another, each only if the one before it was written.
        var failure = data.withUnsafeBytes { FileIO.writeAll(descriptor, $0) }
        if failure == 0 { failure = record.withUnsafeBytes { FileIO.writeAll(descriptor, $0) } }
        if failure == 0 { failure = footer.withUnsafeBytes { FileIO.writeAll(descriptor, $0) } }
        var times = Self.timespecs(clock())  // the access date: the store's clock, not the file system's
        if failure == 0, futimens(descriptor, &times) != 0 { failure = errno }
        if Glibc.close(descriptor) != 0, failure == 0 { failure = errno }
        let destination = path(forKey: key)
        if failure == 0, rename(temporary, destination) != 0 { failure = errno }
        guard failure == 0 else {
            unlink(temporary)
            throw WebImageError(.storeFailed, "cannot write a cache entry to \(destination): \(String(cString: strerror(failure)))")
        }
    }

    static func timespecs(_ date: Date) -> [timespec] {
        let seconds = date.timeIntervalSince1970
        var time = timespec()
        time.tv_sec = Int(seconds.rounded(.down))
        time.tv_nsec = Int((seconds - seconds.rounded(.down)) * 1e9)
        return [time, time]
    }

    private func listNames() throws -> [String] {
        do { return try FileManager.default.contentsOfDirectory(atPath: directory.path) } catch {
            throw WebImageError(.storeFailed, "cannot list \(directory.path): \(error.localizedDescription)", underlying: error)
        }
    }
}

// MARK: - Sweeping

extension FileCacheStore {
    /// What one listing of the directory tells about an entry.
    struct Listed {
        var name: String
        var dataSize: Int
        var accessedAt: Date
    }

    /// The directory's entries, from one listing, a `stat` each and a read of each
    /// footer (so that sizes are the bytes' sizes, as ``CacheStore/totalSize`` says).
    /// With `removingOthers`, deletes what is not an entry: files of another
    /// name, files whose footer does not parse.
    func scan(removingOthers: Bool = false) throws -> [Listed] {
        var listed: [Listed] = []
        for name in try listNames() where name != "tmp" {
            let path = directoryPrefix + name
            guard Self.isEntryName(name) else {
                if removingOthers { unlink(path) }
                continue
            }
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { continue }
            defer { Glibc.close(descriptor) }
            var info = stat()
            guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            guard let record = Self.readRecord(descriptor, fileSize: Int(info.st_size)) else {
                if removingOthers { unlink(path) }
                continue
            }
            let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
            listed.append(Listed(name: name, dataSize: Int(info.st_size) - CacheEntryCodec.footerSize - record.recordLength, accessedAt: modified))
        }
        return listed
    }

    /// Removes leftovers of interrupted writes and files that are not entries,
    /// then expired entries, then trims to half the size limit.
    func sweep() throws {
        let now = clock()
        let grace: TimeInterval = 60  // a write in progress elsewhere may not have committed yet
        for name in (try? FileManager.default.contentsOfDirectory(atPath: tmpDirectory)) ?? [] {
            let path = tmpDirectory + "/" + name
            var info = stat()
            if stat(path, &info) == 0, now.timeIntervalSince1970 - Double(info.st_mtim.tv_sec) > grace { unlink(path) }
        }

        var listed = try scan(removingOthers: true)
        if let cutoff = limits.expiryCutoff(now: now) {
            for entry in listed where entry.accessedAt < cutoff { unlink(directoryPrefix + entry.name) }
            listed.removeAll { $0.accessedAt < cutoff }
        }

        var total = listed.reduce(0) { $0 + $1.dataSize }
        if let maxSize = limits.maxSize, total > maxSize {
            for entry in listed.sorted(by: { $0.accessedAt < $1.accessedAt }) where total > maxSize / 2 {
                unlink(directoryPrefix + entry.name)
                total -= entry.dataSize
            }
        }
        estimatedSize.withLock { $0 = total }
    }

    /// Adds a write to the size estimate; true when it crosses the limit.
    private func noteWritten(_ bytes: Int) -> Bool {
        guard let maxSize = limits.maxSize else { return false }
        let estimate = estimatedSize.withLock { estimate -> Int? in
            guard let current = estimate else { return nil }
            estimate = current + bytes
            return current + bytes
        }
        guard let estimate else {
            // First write since opening: measure once.
            let measured = ((try? scan()) ?? []).reduce(0) { $0 + $1.dataSize }
            estimatedSize.withLock { $0 = measured }
            return measured > maxSize
        }
        return estimate > maxSize
    }
}

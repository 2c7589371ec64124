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
/// limit. Sweeps also delete files named as entries that do not read as one (the
/// JSON `.meta` layout of earlier versions, damaged files) and leftovers of
/// interrupted writes in `tmp`. Files of any other name, and directories, are not
/// the store's: no sweep, ``removeAll()`` or trim touches them, so a directory
/// given by mistake (a home, another store's) loses nothing but entries.
///
/// Several processes may share a directory: every step above is a rename or an
/// unlink, which the filesystem makes atomic.
public final class FileCacheStore: CacheStore {
    /// The directory the store owns.
    public let directory: URL
    /// `directory.path` with a trailing slash, computed once (hits build paths from it).
    let directoryPrefix: String
    let limits: CacheLimits
    let pool: BlockingThreadPool
    /// Whether hits try the calling task first (the option, on a local filesystem).
    let readsInline: Bool
    let clock: @Sendable () -> Date
    /// Bytes written since the last sweep measured the directory; a write that
    /// takes the estimate over the limit starts a sweep.
    let estimatedSize = Lock<Int?>(nil)
    let sweeper = Lock<CacheSweeper?>(nil)
    /// Entries that failed their checksum, counted and logged as they are removed.
    let damaged = DamagedEntryReport(store: "filesystem")
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
        // The directory as the kernel resolved it when making it: `..` after a
        // symbolic link is not simplified as text (a standardized URL would be).
        self.directory = try FileCacheStore.prepare(directory)
        self.directoryPrefix = self.directory.path.hasSuffix("/") ? self.directory.path : self.directory.path + "/"
        self.limits = limits
        self.pool = pool
        self.clock = clock
        self.readsInline = readsOnCallingThread && Self.isLocalFilesystem(self.directory.path)
        sweeper.withLock { $0 = .removingExpired(from: self, every: limits.sweepInterval) }
    }

    // MARK: CacheStore

    public func entry(forKey key: String) async throws -> CacheEntry? {
        let path = path(forKey: key)
        if readsInline, case .read(let entry) = try readEntry(atPath: path, key: key, withData: true, mayWait: false) {
            return entry
        }
        return try await pool.run { [self] in try readEntry(atPath: path, key: key, withData: true) }
    }

    /// Whether hits may be read on the calling task (the option and the filesystem).
    package var readsOnCallingThread: Bool { readsInline }

    public func metadata(forKey key: String) async throws -> CacheMetadata? {
        try await pool.run { [self] in try readEntry(forKey: key, withData: false)?.metadata }
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
            guard let old = try readEntry(forKey: key, withData: true) else { return }
            var updated = metadata
            updated.storedAt = old.metadata.storedAt
            try write(old.data, forKey: key, metadata: updated)
        }
    }

    public func removeData(forKey key: String) async throws {
        try await pool.run { [self] in
            let path = path(forKey: key)
            guard try readEntry(atPath: path, key: key, withData: false) != nil else { return }
            unlink(path)
        }
    }

    public func removeAll() async throws {
        try await pool.run { [self] in
            // The entries only: a file of another name is not the store's.
            for name in try listNames() where Self.isStoreName(name) {
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
            guard try readEntry(atPath: path, key: key, withData: false) != nil else { return nil }
            return URL(fileURLWithPath: path)
        }
    }
}

// MARK: - Files

extension FileCacheStore {
    var tmpDirectory: String { directoryPrefix + "tmp" }

    /// The directory, made if needed and resolved, with its `tmp` inside. When
    /// `tmp` cannot be had, or an entry's path would be longer than the system
    /// takes, the directories made here are removed again.
    private static func prepare(_ directory: URL) throws -> URL {
        var made: [String] = []
        let resolved = try CacheDirectory.prepare(directory, made: &made)
        do {
            // An entry is "/" and 64 hex digits and an extension of up to 5 ("." included, 71
            // bytes); Linux takes paths of up to 4095 bytes (PATH_MAX with its NUL).
            let longest = resolved.path.utf8.count + 71
            guard longest <= 4095 else {
                throw WebImageError(.storeFailed, "cache directory \(directory.path) is too long: its entries' paths would be up to \(longest) bytes, and the system takes 4095")
            }
            try CacheDirectory.prepare(resolved.appendingPathComponent("tmp"), made: &made)
        } catch {
            CacheDirectory.removeMade(made)
            throw error
        }
        return resolved
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
        guard isStoreName(name) else { return false }
        let utf8 = Array(name.utf8)
        if utf8.count == 64 { return true }
        let ext = utf8[65...]
        return utf8[64] == UInt8(ascii: ".") && (1...5).contains(ext.count)
            && ext.allSatisfy { (48...57).contains($0) || (97...122).contains($0) }
    }

    /// Whether a name is one this store or its earlier layouts made: 64 hex
    /// digits (a key's SHA-256), then nothing, an extension or a `-` (the `.meta`
    /// layout's data files, `HASH-ETAG.ext`). Only these are ever deleted.
    static func isStoreName(_ name: some StringProtocol) -> Bool {
        let utf8 = Array(name.utf8.prefix(65))
        guard utf8.count >= 64, utf8[..<64].allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return false }
        return utf8.count == 64 || utf8[64] == UInt8(ascii: ".") || utf8[64] == UInt8(ascii: "-")
    }

    func path(forKey key: String) -> String {
        let name = SHA256Digest.hex(key)
        guard let ext = Self.fileExtension(forKey: key) else { return directoryPrefix + name }
        return directoryPrefix + name + "." + ext
    }

    /// Writes `bytes ‖ record ‖ footer` to `tmp/`, then renames it into place.
    private func write(_ data: Data, forKey key: String, metadata: CacheMetadata) throws {
        let record = CacheEntryCodec.record(key: key, metadata: metadata, checksum: XXH3.hash(data))
        let footer = CacheEntryCodec.footer(recordLength: record.count)
        let temporary = tmpDirectory + "/" + UUID().uuidString
        let destination = path(forKey: key)
        let descriptor: Int32
        do { descriptor = try FileIO.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o600) } catch {
            throw WebImageError(.storeFailed, "cannot write a cache entry: \(error)", underlying: error)
        }
        do throws(SystemCallError) {
            var failure: SystemCallError?
            do {
                try FileIO.writeAll(descriptor, data)
                try FileIO.writeAll(descriptor, record)
                try FileIO.writeAll(descriptor, footer)
                var times = Self.timespecs(clock())  // the access date: the store's clock, not the file system's
                try FileIO.syscall("futimens \(temporary)") { futimens(descriptor, &times) }
            } catch {
                failure = error
            }
            do { try FileIO.close(descriptor, temporary) } catch { failure = failure ?? error }
            if let failure { throw failure }
            try FileIO.syscall("rename to \(destination)") { rename(temporary, destination) }
        } catch {
            unlink(temporary)
            throw WebImageError(.storeFailed, "cannot write a cache entry: \(error)", underlying: error)
        }
    }

    static func timespecs(_ date: Date) -> [timespec] {
        let seconds = date.timeIntervalSince1970
        var time = timespec()
        time.tv_sec = Int(seconds.rounded(.down))
        time.tv_nsec = Int((seconds - seconds.rounded(.down)) * 1e9)
        return [time, time]
    }

    func listNames() throws -> [String] {
        do { return try FileManager.default.contentsOfDirectory(atPath: directory.path) } catch {
            throw WebImageError(.storeFailed, "cannot list \(directory.path): \(error.localizedDescription)", underlying: error)
        }
    }
}

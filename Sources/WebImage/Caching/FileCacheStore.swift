public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A ``CacheStore`` with one file per entry in a directory of its own.
///
/// ## Layout
/// An entry for key `k` is two files named by `h = SHA-256(k)` in hex:
/// - `h.meta`: JSON with the full key (so a collision can never return another
///   key's bytes), the metadata, and the name of the data file;
/// - `h-<token>.<ext>`: the bytes, with the key's extension (`jpg`, `png`...) so
///   a person browsing the directory can open them.
///
/// No key, however hostile (`../../etc/passwd`, NUL bytes, 10 kB), can name a
/// path outside the directory: names are hex digests. The directory is created
/// with mode 0700 and files with 0600.
///
/// ## Atomicity
/// A write goes to `tmp/`, then is renamed into place: first the data under a
/// fresh token, then the `.meta` file, whose rename is the commit point. A crash
/// before it leaves only files that nothing points to, which sweeps delete; a
/// reader sees the old entry or the new one, never part of one.
///
/// ## Access dates and limits
/// The last access is the `.meta` file's modification time, which the store sets
/// itself on every read (one `utimensat`, no rewrite; filesystem `atime` is not
/// used, as `noatime` mounts make it meaningless). Sweeps list the directory once,
/// remove entries older than ``CacheLimits/maxAge`` and, over ``CacheLimits/maxSize``,
/// remove least recently accessed entries down to half the limit. They run on a
/// timer and when a write takes the store over its limit.
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
    private let clock: @Sendable () -> Date
    /// Bytes written since the last sweep measured the directory; a write that
    /// takes the estimate over the limit starts a sweep.
    private let estimatedSize = Mutex<Int?>(nil)
    private let sweeper = Mutex<CacheSweeper?>(nil)

    /// Opens (creating if needed) a store in `directory`.
    /// - Throws: ``WebImageError/Code/storeFailed`` if the directory cannot be
    ///   created or is not a writable directory.
    public init(
        directory: URL,
        limits: CacheLimits = CacheLimits(),
        pool: BlockingThreadPool = .shared,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.directory = directory.standardizedFileURL
        self.directoryPrefix = self.directory.path.hasSuffix("/") ? self.directory.path : self.directory.path + "/"
        self.limits = limits
        self.pool = pool
        self.clock = clock
        try FileCacheStore.prepare(self.directory)
        sweeper.withLock { $0 = .removingExpired(from: self, every: limits.sweepInterval) }
    }

    // MARK: CacheStore

    public func entry(forKey key: String) async throws -> CacheEntry? {
        try await pool.run { [self] in try readEntry(forKey: key, withData: true) }
    }

    public func metadata(forKey key: String) async throws -> CacheMetadata? {
        try await pool.run { [self] in try readEntry(forKey: key, withData: false)?.metadata }
    }

    public func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        let overLimit = try await pool.run { [self] in
            try write(data, forKey: key, metadata: metadata)
            return noteWritten(data.count)
        }
        if overLimit { try await removeExpired() }
    }

    public func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {
        try await pool.run { [self] in
            let hash = SHA256Digest.hex(key)
            guard let record = try readRecord(hash: hash), record.key == key else { return }
            var updated = metadata
            updated.storedAt = record.metadata.storedAt
            updated.size = record.metadata.size
            try commitRecord(Record(key: key, dataFile: record.dataFile, metadata: updated), hash: hash)
        }
    }

    public func removeData(forKey key: String) async throws {
        try await pool.run { [self] in
            let hash = SHA256Digest.hex(key)
            guard let record = try readRecord(hash: hash), record.key == key else { return }
            try removeEntry(hash: hash, dataFiles: [record.dataFile])
        }
    }

    public func removeAll() async throws {
        try await pool.run { [self] in
            for name in try listNames() where name != "tmp" {
                unlink(directory.appendingPathComponent(name).path)
            }
            estimatedSize.withLock { $0 = 0 }
        }
    }

    public func removeExpired() async throws {
        try await pool.run { [self] in try sweep() }
    }

    public var totalSize: Int {
        get async throws { try await pool.run { [self] in try scan().values.reduce(0) { $0 + $1.size } } }
    }

    public var count: Int {
        get async throws { try await pool.run { [self] in try scan().values.count { $0.hasMeta } } }
    }

    /// The path of the file holding a key's bytes, if the key is stored.
    public func fileURL(forKey key: String) async throws -> URL? {
        try await pool.run { [self] in
            let hash = SHA256Digest.hex(key)
            guard let record = try readRecord(hash: hash), record.key == key else { return nil }
            return directory.appendingPathComponent(record.dataFile)
        }
    }
}

// MARK: - Files

extension FileCacheStore {
    /// The `.meta` file's content.
    struct Record: Codable {
        var key: String
        var dataFile: String
        var metadata: CacheMetadata
    }

    private var tmpDirectory: URL { directory.appendingPathComponent("tmp") }

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

    private func readRecord(hash: String) throws -> Record? {
        guard let data = Self.readFile(directoryPrefix + hash + ".meta") else { return nil }
        // A meta file that does not parse is treated as absent (and swept later).
        return try? JSONDecoder().decode(Record.self, from: data)
    }

    private func readEntry(forKey key: String, withData: Bool) throws -> CacheEntry? {
        let hash = SHA256Digest.hex(key)
        guard var record = try readRecord(hash: hash), record.key == key else { return nil }
        var data = Data()
        if withData {
            guard let bytes = Self.readFile(directoryPrefix + record.dataFile, expectedSize: record.metadata.size),
                  bytes.count == record.metadata.size
            else { return nil }  // replaced or removed under us: a miss
            data = bytes
            let now = clock()
            touch(directoryPrefix + hash + ".meta", at: now)
            record.metadata.accessedAt = now
        }
        return CacheEntry(data: data, metadata: record.metadata)
    }

    private func write(_ data: Data, forKey key: String, metadata: CacheMetadata) throws {
        let hash = SHA256Digest.hex(key)
        let previous = try readRecord(hash: hash)
        var dataFile = hash + "-" + UUID().uuidString.lowercased().prefix(8)
        if let ext = Self.fileExtension(forKey: key) { dataFile += "." + ext }

        try writeAtomically(data, to: directory.appendingPathComponent(dataFile))
        var metadata = metadata
        let now = clock()
        metadata.storedAt = now
        metadata.accessedAt = now
        metadata.size = data.count
        do {
            try commitRecord(Record(key: key, dataFile: dataFile, metadata: metadata), hash: hash)
        } catch {
            unlink(directory.appendingPathComponent(dataFile).path)
            throw error
        }
        if let previous, previous.dataFile != dataFile {
            unlink(directory.appendingPathComponent(previous.dataFile).path)
        }
    }

    private func commitRecord(_ record: Record, hash: String) throws {
        let json: Data
        do { json = try JSONEncoder().encode(record) } catch {
            throw WebImageError(.storeFailed, "cannot encode metadata: \(error)", underlying: error)
        }
        let url = directory.appendingPathComponent(hash + ".meta")
        try writeAtomically(json, to: url)
        touch(url.path, at: record.metadata.accessedAt)
    }

    /// Writes to `tmp/`, then renames over `destination`.
    private func writeAtomically(_ data: Data, to destination: URL) throws {
        let temporary = tmpDirectory.appendingPathComponent(UUID().uuidString)
        guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            let reason = String(cString: strerror(errno))
            throw WebImageError(.storeFailed, "cannot write \(temporary.path): \(reason)")
        }
        if rename(temporary.path, destination.path) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporary.path)
            throw WebImageError(.storeFailed, "cannot move a cache entry into \(destination.path): \(reason)")
        }
    }

    /// A whole file by open/read/close (Foundation's reader adds a path `stat` and
    /// its own bookkeeping to every hit). With `expectedSize`, reads one byte more
    /// than expected so that a longer file is noticed; nil when the file is missing.
    static func readFile(_ path: String, expectedSize: Int? = nil) -> Data? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var capacity = (expectedSize ?? 4096) + 1
        var data = Data(count: capacity)
        var filled = 0
        while true {
            let count = data.withUnsafeMutableBytes { buffer in
                read(descriptor, buffer.baseAddress! + filled, capacity - filled)
            }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            filled += count
            if filled == capacity {
                capacity *= 2
                data.count = capacity
            }
        }
        data.count = filled
        return data
    }

    private func touch(_ path: String, at date: Date) {
        let seconds = date.timeIntervalSince1970
        var times = [timespec](repeating: timespec(), count: 2)
        times[0].tv_sec = Int(seconds)
        times[0].tv_nsec = Int((seconds - seconds.rounded(.down)) * 1e9)
        times[1] = times[0]
        _ = utimensat(AT_FDCWD, path, times, 0)
    }

    private func removeEntry(hash: String, dataFiles: [String]) throws {
        // The meta file first: once it is gone the entry is gone, whatever follows.
        unlink(directory.appendingPathComponent(hash + ".meta").path)
        for file in dataFiles { unlink(directory.appendingPathComponent(file).path) }
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
        var hasMeta = false
        var accessedAt = Date.distantPast
        var dataFiles: [(name: String, size: Int, modified: Date)] = []
        var size: Int { dataFiles.reduce(0) { $0 + $1.size } }
    }

    /// Groups the directory's files by key hash, from one listing and `stat`s.
    func scan() throws -> [String: Listed] {
        var listed: [String: Listed] = [:]
        for name in try listNames() where name != "tmp" {
            var info = stat()
            guard stat(directory.appendingPathComponent(name).path, &info) == 0 else { continue }
            let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
            let hash = String(name.prefix(64))
            if name.hasSuffix(".meta") {
                listed[hash, default: Listed()].hasMeta = true
                listed[hash, default: Listed()].accessedAt = modified
            } else {
                listed[hash, default: Listed()].dataFiles.append((name, Int(info.st_size), modified))
            }
        }
        return listed
    }

    /// Removes orphans, expired entries, then trims to half the size limit.
    func sweep() throws {
        let now = clock()
        let grace: TimeInterval = 60  // a write in progress elsewhere may not have committed yet
        var listed = try scan()

        for name in (try? FileManager.default.contentsOfDirectory(atPath: tmpDirectory.path)) ?? [] {
            let path = tmpDirectory.appendingPathComponent(name).path
            var info = stat()
            if stat(path, &info) == 0, now.timeIntervalSince1970 - Double(info.st_mtim.tv_sec) > grace { unlink(path) }
        }

        for (hash, entry) in listed {
            if !entry.hasMeta {
                for file in entry.dataFiles where now.timeIntervalSince(file.modified) > grace {
                    unlink(directory.appendingPathComponent(file.name).path)
                }
                listed[hash] = nil
            } else if entry.dataFiles.count > 1, let record = try readRecord(hash: hash) {
                // Data files the meta no longer names were left by interrupted writes.
                for file in entry.dataFiles where file.name != record.dataFile && now.timeIntervalSince(file.modified) > grace {
                    unlink(directory.appendingPathComponent(file.name).path)
                }
            }
        }

        if let cutoff = limits.expiryCutoff(now: now) {
            for (hash, entry) in listed where entry.accessedAt < cutoff {
                try removeEntry(hash: hash, dataFiles: entry.dataFiles.map(\.name))
                listed[hash] = nil
            }
        }

        var total = listed.values.reduce(0) { $0 + $1.size }
        if let maxSize = limits.maxSize, total > maxSize {
            for (hash, entry) in listed.sorted(by: { $0.value.accessedAt < $1.value.accessedAt }) where total > maxSize / 2 {
                try removeEntry(hash: hash, dataFiles: entry.dataFiles.map(\.name))
                total -= entry.size
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
            let measured = ((try? scan()) ?? [:]).values.reduce(0) { $0 + $1.size }
            estimatedSize.withLock { $0 = measured }
            return measured > maxSize
        }
        return estimate > maxSize
    }
}

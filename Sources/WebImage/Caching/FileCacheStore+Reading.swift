import Foundation
import CWebImageSystem
#if canImport(Glibc)
import Glibc
#endif

// MARK: - Reading

extension FileCacheStore {
    enum ReadOutcome {
        /// The entry, or nil: missing, malformed, or another key's.
        case read(CacheEntry?)
        /// Finishing would wait for the disk (bytes not in the page cache, the
        /// access date to move, a damaged file to remove): do it on the pool.
        case wouldWait
    }

    func readEntry(forKey key: String, withData: Bool) throws -> CacheEntry? {
        try readEntry(atPath: path(forKey: key), key: key, withData: withData)
    }

    func readEntry(atPath path: String, key: String, withData: Bool) throws -> CacheEntry? {
        guard case .read(let entry) = try readEntry(atPath: path, key: key, withData: withData, mayWait: true) else {
            preconditionFailure("a read that may wait always finishes")
        }
        return entry
    }

    /// Reads an entry file: with its bytes, one `read` into a buffer of the file's
    /// size; without, the footer and record by `pread`. Nil when the file is
    /// missing, malformed, or holds another key. A hit moves the access date
    /// (see ``accessGranularity``). With `mayWait` false, the bytes come only from
    /// the page cache, and anything that would write gives up instead.
    /// - Throws: `storeFailed` for a file that is there and cannot be read
    ///   (`EACCES`, `EMFILE`, `EIO`…): the manager counts it as a store error.
    func readEntry(atPath path: String, key: String, withData: Bool, mayWait: Bool) throws -> ReadOutcome {
        do throws(SystemCallError) {
            let descriptor: Int32
            // Not blocking (a FIFO in an entry's place would hold the open until a writer
            // came) and not through a link (an entry is a file the store made; a hit
            // must not move another file's date).
            do { descriptor = try FileIO.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW) } catch where error.isNotFound { return .read(nil) }
            defer { Glibc.close(descriptor) }
            let info = try FileIO.stat(descriptor, path)
            guard (info.st_mode & S_IFMT) == S_IFREG else {
                // There and unreadable as an entry (a directory put in its place): the store's fault, counted.
                throw SystemCallError(call: "read \(path) as a cache entry", code: (info.st_mode & S_IFMT) == S_IFDIR ? EISDIR : EINVAL)
            }
            let fileSize = Int(info.st_size)
            guard fileSize >= CacheEntryCodec.footerSize else { return .read(nil) }
            if !mayWait, fileSize > Self.inlineReadLimit { return .wouldWait }
            let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
            guard withData else {
                guard let parsed = try Self.readRecord(descriptor, fileSize: fileSize), parsed.key == key else { return .read(nil) }
                var metadata = parsed.metadata
                metadata.size = fileSize - CacheEntryCodec.footerSize - parsed.recordLength
                metadata.accessedAt = modified
                return .read(CacheEntry(data: Data(), metadata: metadata, checksum: nil))
            }
            return try readWhole(descriptor, path: path, key: key, fileSize: fileSize, modified: modified, mayWait: mayWait)
        } catch {
            throw WebImageError(.storeFailed, "cannot read the cache entry \(error)", underlying: error)
        }
    }

    /// The entry with its bytes, from an open file; a damaged one removed.
    private func readWhole(_ descriptor: Int32, path: String, key: String, fileSize: Int, modified: Date,
                           mayWait: Bool) throws(SystemCallError) -> ReadOutcome {
        var data = Data(count: fileSize)
        if mayWait {
            let filled = try data.withUnsafeMutableBytes { buffer -> Result<Int, SystemCallError> in
                do throws(SystemCallError) { return .success(try FileIO.readFully(descriptor, into: buffer, at: nil)) } catch { return .failure(error) }
            }.get()
            guard filled == fileSize else { return .read(nil) }
        } else {
            guard data.withUnsafeMutableBytes({ FileIO.readFullyIfCached(descriptor, into: $0, at: 0) }) else { return .wouldWait }
        }
        let entry: CacheEntry
        switch CacheEntryCodec.decode(data, key: key) {
        case .entry(let decoded):
            entry = decoded
        case .otherKey:
            return .read(nil)
        case .damaged(let reason):
            guard mayWait else { return .wouldWait }
            // Never served as wrong bytes: removed, so that the load fetches it again.
            unlink(path)
            damaged.report(key: key, reason: reason)
            return .read(nil)
        }
        var metadata = entry.metadata
        metadata.size = entry.data.count
        metadata.accessedAt = modified
        let now = clock()
        if now.timeIntervalSince(modified) > Self.accessGranularity {
            // An inode update can wait on the filesystem's journal.
            guard mayWait else { return .wouldWait }
            var times = Self.timespecs(now)
            _ = futimens(descriptor, &times)
        }
        metadata.accessedAt = now
        return .read(CacheEntry(data: entry.data, metadata: metadata, checksum: entry.checksum))
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

    /// The footer and record of an open entry file, by `pread`; nil when they do not parse.
    static func readRecord(_ descriptor: Int32, fileSize: Int) throws(SystemCallError) -> (key: String, metadata: CacheMetadata, recordLength: Int)? {
        var footer = [UInt8](repeating: 0, count: CacheEntryCodec.footerSize)
        let footerRead = try FileIO.readFully(descriptor, into: &footer, at: fileSize - CacheEntryCodec.footerSize)
        guard footerRead == CacheEntryCodec.footerSize,
              let length = footer.withUnsafeBytes({ CacheEntryCodec.recordLength(footer: $0, fileSize: fileSize) })
        else { return nil }
        var record = [UInt8](repeating: 0, count: length)
        let recordRead = try FileIO.readFully(descriptor, into: &record, at: fileSize - CacheEntryCodec.footerSize - length)
        guard recordRead == length, let parsed = record.withUnsafeBytes({ CacheEntryCodec.parse($0) }) else { return nil }
        return (parsed.key, parsed.metadata, length)
    }
}

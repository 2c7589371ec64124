import Foundation
#if canImport(Glibc)
import Glibc
#endif

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
    /// With `removingOthers`, deletes the store's files that are not entries:
    /// names of its earlier layouts (``isStoreName(_:)``), entry-named files whose
    /// footer does not parse. Files of other names are not the store's and are
    /// left alone.
    func scan(removingOthers: Bool = false) throws -> [Listed] {
        var listed: [Listed] = []
        for name in try listNames() where Self.isStoreName(name) {
            let path = directoryPrefix + name
            guard Self.isEntryName(name) else {
                if removingOthers { unlink(path) }
                continue
            }
            // A file that cannot be opened or read (gone since the listing, or
            // unreadable) is skipped: a sweep is a best-effort pass, and reads
            // of that entry report the failure as a store error.
            guard let descriptor = try? FileIO.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW) else { continue }
            defer { Glibc.close(descriptor) }
            guard let info = try? FileIO.stat(descriptor, path), (info.st_mode & S_IFMT) == S_IFREG else { continue }
            guard let record = try? Self.readRecord(descriptor, fileSize: Int(info.st_size)) else {
                if removingOthers { unlink(path) }
                continue
            }
            let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
            listed.append(Listed(name: name, dataSize: Int(info.st_size) - CacheEntryCodec.footerSize - record.recordLength, accessedAt: modified))
        }
        return listed
    }

    /// Removes leftovers of interrupted writes and entry-named files that are not
    /// entries, then expired entries, then trims to half the size limit.
    func sweep() throws {
        let now = clock()
        let grace: TimeInterval = 60  // a write in progress elsewhere may not have committed yet
        // Only the store's own `tmp` (a directory, not a link to one elsewhere), and
        // only the names its writes give (UUIDs): nothing else there is its to delete.
        var tmpInfo = stat()
        let tmpIsOurs = lstat(tmpDirectory, &tmpInfo) == 0 && (tmpInfo.st_mode & S_IFMT) == S_IFDIR
        for name in tmpIsOurs ? (try? FileManager.default.contentsOfDirectory(atPath: tmpDirectory)) ?? [] : [] where UUID(uuidString: name) != nil {
            let path = tmpDirectory + "/" + name
            var info = stat()
            if lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, now.timeIntervalSince1970 - Double(info.st_mtim.tv_sec) > grace { unlink(path) }
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
    func noteWritten(_ bytes: Int) -> Bool {
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

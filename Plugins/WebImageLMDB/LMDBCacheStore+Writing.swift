internal import CLMDB
import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage

/// A write waiting for the next group commit.
struct PendingWrite: Sendable {
    let databaseKey: [UInt8]
    let header: [UInt8]
    let data: Data
    let stamp: UInt64
    let continuation: CheckedContinuation<Bool, any Error>
}

/// The batch one commit took, kept for its retries.
final class TakenBatch: Sendable {
    let batch = Lock<[PendingWrite]?>(nil)
}

extension LMDBCacheStore {
    /// Runs a write transaction on the writer thread, growing the map (or, at its
    /// maximum, trimming) when LMDB says it is full, then trying once more.
    @discardableResult
    func writeGrowing<T: Sendable>(_ body: @escaping @Sendable (borrowing Transaction) throws -> T) async throws -> T {
        try await writer.run { [environment, self] in
            var evictions = 0
            for attempt in 0..<64 {
                do {
                    return try environment.write(body)
                } catch where LMDBEnvironment.isDiskFull(error) && evictions < 3 {
                    // The file system is full (LMDB says EIO for a short write): the map
                    // has room but the file cannot grow. Evict the oldest half, let the
                    // freed pages become reusable (settle), and try again; a cache makes
                    // room rather than fail. If nothing can be freed, the write fails.
                    evictions += 1
                    let size = try currentSize()
                    let freed = size == 0 ? 0 : try trim(toSize: size / 2)
                    if freed == 0 {
                        throw WebImageError(.storeFailed, "the file system holding the LMDB store is full, and the store has nothing left to evict",
                                            underlying: (error as? WebImageError)?.underlying)
                    }
                } catch where LMDBEnvironment.code(of: error) == MDB_MAP_FULL && attempt < 63 {
                    if try environment.grow() { continue }
                    // At the hard maximum: make room the way a cache should, by evicting
                    // half of what is left each time. LMDB reuses freed pages only a
                    // transaction later, and large values need contiguous pages, so one
                    // eviction may not be enough.
                    let size = try currentSize()
                    let freed = size == 0 ? 0 : try trim(toSize: size / 2)
                    if freed == 0 {
                        throw WebImageError(.storeFailed, "the value does not fit in an LMDB map of at most \(environment.maxMapSize) bytes (lmdb.maxMapSize), even with the store emptied", underlying: (error as? WebImageError)?.underlying)
                    }
                }
            }
            throw WebImageError(.storeFailed, "LMDB stayed full after growing to \(environment.maxMapSize) bytes")
        }
    }

    /// Commits every pending write in one transaction. The batch is taken when the
    /// transaction starts on the writer thread, so writes that arrive while an
    /// earlier one commits wait for this one. If the batch fails as a whole, each
    /// write is tried alone, so that one value that cannot fit fails by itself.
    func commitPendingWrites() async {
        let taken = TakenBatch()
        let takeBatch: @Sendable () -> [PendingWrite] = { [self] in
            taken.batch.withLock { batch in
                if let batch { return batch }
                let drained = pendingWrites.withLock { state in
                    defer { state = ([], false) }
                    return state.items
                }
                batch = drained
                return drained
            }
        }
        do {
            let overLimit = try await writeGrowing { [self] txn in try write(takeBatch(), txn) }
            for item in takeBatch() { item.continuation.resume(returning: overLimit) }
        } catch {
            let batch = takeBatch()
            if batch.count == 1 {
                batch[0].continuation.resume(throwing: error)
                return
            }
            for item in batch {
                do {
                    let overLimit = try await writeGrowing { [self] txn in try write([item], txn) }
                    item.continuation.resume(returning: overLimit)
                } catch {
                    item.continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Puts a batch of entries in one transaction; returns whether the store is now over its size limit.
    private func write(_ batch: [PendingWrite], _ txn: borrowing Transaction) throws -> Bool {
        try applyPendingAccess(txn)
        var size: Int64 = 0
        for item in batch {
            try removeRecord(txn, item.databaseKey)
            try txn.putReserved(environment.entries, item.databaseKey, count: item.header.count + item.data.count) { buffer in
                buffer.copyBytes(from: item.header)
                item.data.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[item.header.count...]).copyMemory(from: $0) }
            }
            try setAccess(txn, item.databaseKey, stamp: item.stamp, size: UInt64(item.data.count))
            size = try adjustTotals(txn, size: Int64(item.data.count), count: 1).size
        }
        guard let maxSize = limits.maxSize else { return false }
        return try footprint(txn, data: Int(size)) > maxSize
    }

    /// What the size limit judges: the bytes the store's pages occupy (its data
    /// with each entry's header and the rest of its last page, and the index
    /// databases), or the data alone when that is more (a store of a few small
    /// entries, all on each database's first page). The pages are what the file
    /// needs: a 20 KB thumbnail takes five or six 4 KiB pages, so the data alone
    /// undercounts the disk by a tenth or more.
    func footprint(_ txn: borrowing Transaction, data: Int) throws -> Int {
        max(data, try txn.occupiedBytes([environment.entries, environment.access, environment.lru, environment.totals]))
    }

    /// Deletes an entry and its index records; returns the bytes freed (0 if absent).
    @discardableResult
    func removeRecord(_ txn: borrowing Transaction, _ databaseKey: [UInt8]) throws -> Int {
        guard let value = try txn.get(environment.entries, databaseKey) else { return 0 }
        let size = LMDBRecord.decode(value).map { value.count - $0.dataOffset } ?? value.count
        if let stamp = try txn.get(environment.access, databaseKey) {
            try txn.delete(environment.lru, LMDBRecord.lruKey(access: LMDBRecord.uint64(stamp), databaseKey: databaseKey))
        }
        try txn.delete(environment.access, databaseKey)
        try txn.delete(environment.entries, databaseKey)
        _ = try adjustTotals(txn, size: -Int64(size), count: -1)
        return size
    }

    /// Records an access date in both index databases.
    func setAccess(_ txn: borrowing Transaction, _ databaseKey: [UInt8], stamp: UInt64, size: UInt64) throws {
        if let old = try txn.get(environment.access, databaseKey) {
            try txn.delete(environment.lru, LMDBRecord.lruKey(access: LMDBRecord.uint64(old), databaseKey: databaseKey))
        }
        try txn.put(environment.access, databaseKey, LMDBRecord.bigEndian(stamp))
        try txn.put(environment.lru, LMDBRecord.lruKey(access: stamp, databaseKey: databaseKey), LMDBRecord.bigEndian(size))
    }

    func adjustTotals(_ txn: borrowing Transaction, size: Int64, count: Int64) throws -> (size: Int64, count: Int64) {
        let sizeKey = Array("size".utf8), countKey = Array("count".utf8)
        let oldSize = try txn.get(environment.totals, sizeKey).map { Int64(bitPattern: LMDBRecord.uint64($0)) } ?? 0
        let oldCount = try txn.get(environment.totals, countKey).map { Int64(bitPattern: LMDBRecord.uint64($0)) } ?? 0
        let newSize = max(0, oldSize + size), newCount = max(0, oldCount + count)
        try txn.put(environment.totals, sizeKey, LMDBRecord.bigEndian(UInt64(newSize)))
        try txn.put(environment.totals, countKey, LMDBRecord.bigEndian(UInt64(newCount)))
        return (newSize, newCount)
    }

    func totals() async throws -> (size: Int, count: Int) {
        try await read { [environment] in
            try environment.read { txn in
                let size = try txn.get(environment.totals, Array("size".utf8)).map { Int(LMDBRecord.uint64($0)) } ?? 0
                let count = try txn.get(environment.totals, Array("count".utf8)).map { Int(LMDBRecord.uint64($0)) } ?? 0
                return (size, count)
            }
        }
    }

    /// Writes the batched access dates of entries that still exist.
    func applyPendingAccess(_ txn: borrowing Transaction) throws {
        let pending = pendingAccess.withLock { pending in
            defer { pending.removeAll() }
            return pending
        }
        for (key, stamp) in pending {
            let databaseKey = LMDBRecord.databaseKey(key)
            guard let value = try txn.get(environment.entries, databaseKey) else { continue }
            let size = LMDBRecord.decode(value).map { value.count - $0.dataOffset } ?? value.count
            try setAccess(txn, databaseKey, stamp: stamp, size: UInt64(size))
        }
    }

    func flushAccessDates() async throws {
        guard pendingAccess.withLock({ !$0.isEmpty }) else { return }
        try await writeGrowing { [self] txn in try applyPendingAccess(txn) }
    }

    /// Expires by access date, then trims to half the size limit; oldest first,
    /// in short transactions.
    func sweep() async throws {
        let cutoff = limits.expiryCutoff(now: clock()).map(LMDBRecord.milliseconds)
        let maxSize = limits.maxSize
        try await writer.run { [self] in
            if let cutoff {
                let before = try currentSize()
                try removeOldest(while: { stamp, _ in stamp < cutoff })
                if try currentSize() < before { try settle() }
            }
            if let maxSize {
                // Over the limit in pages, trim the data to half of it in the same
                // proportion: the pages of the entries that go go with them.
                let (footprint, data) = try environment.read { txn in
                    let data = try txn.get(environment.totals, Array("size".utf8)).map { Int(LMDBRecord.uint64($0)) } ?? 0
                    return (try self.footprint(txn, data: data), data)
                }
                if footprint > maxSize {
                    _ = try trim(toSize: Int(Double(data) * Double(maxSize / 2) / Double(footprint)))
                }
            }
        }
    }

    func currentSize() throws -> Int {
        try environment.read { txn in try txn.get(environment.totals, Array("size".utf8)).map { Int(LMDBRecord.uint64($0)) } ?? 0 }
    }

    /// Removes least recently accessed entries until the data is at most `size` bytes.
    /// Runs on the writer thread. Returns the bytes freed.
    func trim(toSize size: Int) throws -> Int {
        var total = try currentSize()
        var freed = 0
        try removeOldest { _, entrySize in
            guard total > size else { return false }
            total -= entrySize
            freed += entrySize
            return true
        }
        if freed > 0 { try settle() }
        return freed
    }

    /// Commits one small transaction so that the pages the last one freed can be
    /// reused. LMDB reuses a page freed by transaction T only from T+2 on (the
    /// snapshot before T must stay whole), and a failed commit does not advance
    /// the transaction id: on a full disk, without this, every writer after a clear
    /// or a trim is "T+1", needs new pages at the end of the file, and fails, however
    /// much was freed. Runs on the writer thread.
    func settle() throws {
        try environment.write { txn in _ = try adjustTotals(txn, size: 0, count: 0) }
    }

    /// Walks the access index from the oldest, removing entries while `shouldRemove`
    /// says so, 512 per transaction so that no transaction grows long.
    private func removeOldest(while shouldRemove: (_ stamp: UInt64, _ size: Int) -> Bool) throws {
        var more = true
        while more {
            more = try environment.write { txn -> Bool in
                var victims: [[UInt8]] = []
                var stopped = false
                try txn.forEach(environment.lru) { key, value in
                    let stamp = LMDBRecord.uint64(key)
                    guard victims.count < 512, shouldRemove(stamp, Int(LMDBRecord.uint64(value))) else {
                        stopped = victims.count < 512
                        return false
                    }
                    victims.append(Array(UnsafeRawBufferPointer(rebasing: key[8...])))
                    return true
                }
                for databaseKey in victims {
                    if try removeRecord(txn, databaseKey) == 0 {
                        // An index record without its entry: drop it.
                        if let stamp = try txn.get(environment.access, databaseKey) {
                            try txn.delete(environment.lru, LMDBRecord.lruKey(access: LMDBRecord.uint64(stamp), databaseKey: databaseKey))
                        }
                    }
                }
                return !stopped && victims.count == 512
            }
        }
    }
}

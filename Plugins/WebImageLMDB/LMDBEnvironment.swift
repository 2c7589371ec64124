internal import CLMDB
import Foundation
import Logging
import Metrics
import Synchronization
@_spi(WebImageInternal) import WebImage
#if canImport(Glibc)
import Glibc
#endif

/// An LMDB error: the return code and `mdb_strerror`'s text.
public struct LMDBError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let operation: String
    public let message: String
    public var description: String { "\(operation): \(message) (\(code))" }
}

/// The one place that calls LMDB: owns the environment, checks every return
/// code, and turns failures into errors carrying LMDB's message.
///
/// `@unchecked Sendable`: the handle is an `MDB_env*`, which LMDB allows from any
/// thread with `MDB_NOTLS`; the map-size lock below is what makes resizing safe
/// while other threads use it.
final class LMDBEnvironment: @unchecked Sendable {
    let env: OpaquePointer
    private(set) var entries: MDB_dbi = 0
    private(set) var access: MDB_dbi = 0
    private(set) var lru: MDB_dbi = 0
    private(set) var totals: MDB_dbi = 0
    let maxMapSize: Int
    /// The directory, once `mdb_env_open` succeeded (for the open-environments registry).
    private var opened: URL?
    /// Transactions hold it shared; changing the map size holds it exclusively,
    /// because `mdb_env_set_mapsize` needs no transaction open in this process.
    private let mapLock: ReadWriteLock
    /// Read transactions reset after use, renewed by the next read: a fresh
    /// `mdb_txn_begin` allocates and takes the lock-file mutex to claim a reader
    /// slot, which costs about as much as a warm read itself; `mdb_txn_renew`
    /// reuses both. At most ``maxIdleReaders`` are kept.
    private let idleReaders = Lock<[IdleReader]>([])
    /// `@unchecked`: a reset `MDB_txn*`, used by one thread at a time (it is taken
    /// out of the list under the lock before use); `MDB_NOTLS` lets it move threads.
    private struct IdleReader: @unchecked Sendable { let txn: OpaquePointer }
    private static let maxIdleReaders = 64

    /// - Parameter directory: made and resolved already (`CacheDirectory.prepare`,
    ///   which ``LMDBCacheStore`` calls first).
    init(directory: URL, mapSize: Int, maxMapSize: Int) throws {
        Self.setAsideIfDamaged(directory)
        try Self.reserveLockFile(in: directory)
        let mapLock = try ReadWriteLock()
        var env: OpaquePointer?
        try Self.check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw WebImageError(.storeFailed, "mdb_env_create returned no environment") }
        self.maxMapSize = max(maxMapSize, mapSize)
        self.mapLock = mapLock
        self.env = env
        // Every stored property is set from here on, so a throw below runs
        // `deinit`, the one place that closes the environment (closing a
        // half-opened environment is what LMDB asks for).
        try Self.check(mdb_env_set_maxdbs(env, 4), "mdb_env_set_maxdbs")
        try Self.check(mdb_env_set_maxreaders(env, 512), "mdb_env_set_maxreaders")
        try Self.check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize")
        // NOTLS: Swift tasks hop threads, so read transactions must not be tied to one.
        try Self.check(mdb_env_open(env, directory.path, UInt32(MDB_NOTLS), 0o600), "mdb_env_open \(directory.path)")
        LMDBFileCheck.note(directory, open: true)
        opened = directory
        var dead: Int32 = 0
        try Self.check(mdb_reader_check(env, &dead), "mdb_reader_check")
        // Another process may have grown the map beyond what we asked for: adopt it.
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        if info.me_mapsize > mapSize { try Self.check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize") }
        try write { txn in
            for (name, slot) in [("entries", 0), ("access", 1), ("lru", 2), ("totals", 3)] {
                var dbi: MDB_dbi = 0
                try Self.check(mdb_dbi_open(txn.pointer, name, UInt32(MDB_CREATE), &dbi), "mdb_dbi_open \(name)")
                switch slot {
                case 0: entries = dbi
                case 1: access = dbi
                case 2: lru = dbi
                default: totals = dbi
                }
            }
        }
    }

    /// The size LMDB gives `lock.mdb` for the 512 readers set below on a 64-bit
    /// machine: its header (three cache lines) and a cache line per further reader.
    static let lockFileSize = 3 * 64 + 511 * 64

    /// Allocates `lock.mdb`'s blocks before LMDB opens it. LMDB sizes a new lock
    /// file with `ftruncate`, which allocates nothing, and then writes it through
    /// a map: on a full file system that first write is a SIGBUS, which killed
    /// every command that made a store there (and every later one, which found the
    /// sparse file it left). Here the same size is allocated with
    /// `posix_fallocate`, so a full file system is a `storeFailed` error saying
    /// so, and a lock file made only for this attempt is removed. A lock file in
    /// use elsewhere keeps its size: only holes in it are filled, which reads the same.
    static func reserveLockFile(in directory: URL) throws {
        let path = directory.appendingPathComponent("lock.mdb").path
        let existed = Glibc.access(path, F_OK) == 0
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }  // mdb_env_open meets the same and says why
        defer { close(fd) }
        let size = lseek(fd, 0, SEEK_END)
        guard size >= 0 else { return }
        let length = max(Int(size), lockFileSize)
        let code = posix_fallocate(fd, 0, off_t(length))
        guard code == ENOSPC || code == EDQUOT else { return }  // 0, or a file system that cannot (LMDB goes on as before)
        if !existed { unlink(path) }
        throw WebImageError(.storeFailed, "the file system holding the LMDB store at \(directory.path) is full: no room for its lock file (lock.mdb, \(length) bytes)",
                            underlying: POSIXError(POSIXErrorCode(rawValue: code) ?? .ENOSPC))
    }

    /// Checks `data.mdb` before it is mapped for use (`LMDBFileCheck`): a file
    /// cut short would be mapped past its end, and the first read there is a
    /// SIGBUS. A damaged file and its lock file are renamed
    /// `data.mdb.damaged-<time>` and `lock.mdb.damaged-<time>`, logged and counted
    /// (`webimage_store_damaged_files_total{store="lmdb"}`); the store starts
    /// empty. Only a process that opens the environment alone checks it; others
    /// that already have it open keep the old file until they reopen
    /// (docs/operations.md).
    /// - Returns: why the file was set aside, or nil when it was sound, absent or in use.
    @discardableResult
    static func setAsideIfDamaged(_ directory: URL) -> String? {
        guard case .damaged(let reason) = LMDBFileCheck.setAsideIfDamaged(directory: directory) else { return nil }
        Counter(label: "webimage_store_damaged_files_total", dimensions: [("store", "lmdb")]).increment()
        Logger(label: "webimage.store").error("damaged LMDB file set aside; the cache starts empty",
                                              metadata: ["directory": "\(directory.path)", "reason": "\(reason)"])
        return reason
    }

    deinit {
        idleReaders.withLock { readers in
            for reader in readers { mdb_txn_abort(reader.txn) }
            readers.removeAll()
        }
        mdb_env_close(env)
        if let opened { LMDBFileCheck.note(opened, open: false) }
    }

    static func check(_ code: Int32, _ operation: @autoclosure () -> String) throws {
        guard code != 0 else { return }
        let message = String(cString: mdb_strerror(code))
        let error = LMDBError(code: code, operation: operation(), message: message)
        throw WebImageError(.storeFailed, error.description, underlying: error)
    }

    static func code(of error: any Error) -> Int32? {
        ((error as? WebImageError)?.underlying as? LMDBError)?.code
    }

    /// Whether a failure means the file system is full: ENOSPC or EDQUOT, or EIO,
    /// which LMDB reports when a page write comes up short.
    static func isDiskFull(_ error: any Error) -> Bool {
        guard let code = code(of: error) else { return false }
        return code == ENOSPC || code == EDQUOT || code == EIO
    }

    var mapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    /// Runs `body` in a read-only transaction, adopting a map another process grew.
    func read<T>(_ body: (borrowing Transaction) throws -> T) throws -> T {
        while true {
            mapLock.lockShared()
            var txn = idleReaders.withLock { $0.popLast() }?.txn
            var rc: Int32 = 0
            if let reused = txn {
                rc = mdb_txn_renew(reused)
                if rc != 0 {
                    mdb_txn_abort(reused)
                    txn = nil
                }
            }
            if txn == nil { rc = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) }
            if rc == MDB_MAP_RESIZED {
                if let txn { mdb_txn_abort(txn) }
                mapLock.unlock()
                try adoptMapSize()
                continue
            }
            defer { mapLock.unlock() }
            try Self.check(rc, "mdb_txn_begin (read)")
            let reader = txn!
            defer {
                mdb_txn_reset(reader)
                let kept = idleReaders.withLock { readers -> Bool in
                    guard readers.count < Self.maxIdleReaders else { return false }
                    readers.append(IdleReader(txn: reader))
                    return true
                }
                if !kept { mdb_txn_abort(reader) }
            }
            return try body(Transaction(pointer: reader))
        }
    }

    /// Frees the idle read transactions; called with the map lock held exclusively,
    /// before the map size changes.
    private func dropIdleReaders() {
        idleReaders.withLock { readers in
            for reader in readers { mdb_txn_abort(reader.txn) }
            readers.removeAll()
        }
    }

    /// Runs `body` in a write transaction and commits it. Call only from the
    /// store's writer thread: LMDB allows one writer at a time.
    func write<T>(_ body: (borrowing Transaction) throws -> T) throws -> T {
        while true {
            mapLock.lockShared()
            var txn: OpaquePointer?
            let rc = mdb_txn_begin(env, nil, 0, &txn)
            if rc == MDB_MAP_RESIZED {
                mapLock.unlock()
                try adoptMapSize()
                continue
            }
            defer { mapLock.unlock() }
            try Self.check(rc, "mdb_txn_begin (write)")
            let result: T
            do {
                result = try body(Transaction(pointer: txn!))
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
            // A failed commit (MDB_MAP_FULL while saving the free list, a full disk)
            // has already freed the transaction: it must not be aborted again.
            try Self.check(mdb_txn_commit(txn), "mdb_txn_commit")
            return result
        }
    }

    /// Doubles the map, up to the hard maximum. Returns false at the maximum.
    func grow() throws -> Bool {
        mapLock.lockExclusive()
        defer { mapLock.unlock() }
        let current = mapSize
        guard current < maxMapSize else { return false }
        let next = min(maxMapSize, current * 2)
        dropIdleReaders()
        try Self.check(mdb_env_set_mapsize(env, next), "mdb_env_set_mapsize \(next)")
        return true
    }

    private func adoptMapSize() throws {
        mapLock.lockExclusive()
        defer { mapLock.unlock() }
        dropIdleReaders()
        try Self.check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize (adopt)")
    }
}

/// A pthread read-write lock whose every call is checked. Initialisation can fail
/// (out of memory): a typed error. A failure to lock or unlock is a broken
/// invariant (a deadlock, a lock not held, too many readers): it stops the
/// process at once with its reason rather than let two threads resize the map
/// under each other.
final class ReadWriteLock: @unchecked Sendable {
    // @unchecked: the pthread lock is the synchronisation itself.
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    init() throws {
        let rc = pthread_rwlock_init(lock, nil)
        guard rc == 0 else {
            lock.deallocate()
            throw WebImageError(.storeFailed, "pthread_rwlock_init: \(String(cString: strerror(rc)))")
        }
    }

    deinit {
        Self.check(pthread_rwlock_destroy(lock), "destroy")
        lock.deallocate()
    }

    func lockShared() { Self.check(pthread_rwlock_rdlock(lock), "rdlock") }
    func lockExclusive() { Self.check(pthread_rwlock_wrlock(lock), "wrlock") }
    func unlock() { Self.check(pthread_rwlock_unlock(lock), "unlock") }

    private static func check(_ rc: Int32, _ operation: String) {
        precondition(rc == 0, "pthread_rwlock_\(operation): \(String(cString: strerror(rc)))")
    }
}

/// An open LMDB transaction, lent to the closure of `LMDBEnvironment.read` or
/// `write` and valid only inside it. Noncopyable and passed `borrowing`, so it
/// cannot be stored or outlive its closure (LMDB frees it at commit or abort);
/// the functions below are the only ones that reach its pointer.
struct Transaction: ~Copyable {
    fileprivate let pointer: OpaquePointer
}

// MARK: - Values

extension MDB_val {
    /// Calls `body` with an `MDB_val` pointing at `bytes` (valid only inside).
    /// LMDB only reads through it (its `mv_data` is not `const` in C): the bytes
    /// are not copied, where a mutable view of a shared array would copy them.
    static func with<T>(_ bytes: [UInt8], _ body: (inout MDB_val) throws -> T) rethrows -> T {
        try bytes.withUnsafeBytes { raw in
            var value = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            return try body(&value)
        }
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: mv_data, count: mv_size) }
}

/// The calls a transaction makes: reads and writes of one database, a walk, a
/// drop, and the pages the databases occupy.
extension Transaction {
    borrowing func get(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> UnsafeRawBufferPointer? {
        try key.withUnsafeBytes { try get(dbi, $0) }
    }

    borrowing func get(_ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        // LMDB only reads the key (its `mv_data` is not `const` in C).
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var value = MDB_val()
        let rc = mdb_get(pointer, dbi, &k, &value)
        if rc == MDB_NOTFOUND { return nil }
        try LMDBEnvironment.check(rc, "mdb_get")
        return value.bytes
    }

    borrowing func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws {
        try MDB_val.with(key) { k in
            try MDB_val.with(value) { v in
                try LMDBEnvironment.check(mdb_put(pointer, dbi, &k, &v, 0), "mdb_put")
            }
        }
    }

    /// Writes a value of `count` bytes that `fill` copies in place (no extra copy of large data).
    borrowing func putReserved(_ dbi: MDB_dbi, _ key: [UInt8], count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws {
        try MDB_val.with(key) { k in
            var v = MDB_val(mv_size: count, mv_data: nil)
            try LMDBEnvironment.check(mdb_put(pointer, dbi, &k, &v, UInt32(MDB_RESERVE)), "mdb_put")
            fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
        }
    }

    @discardableResult
    borrowing func delete(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> Bool {
        try MDB_val.with(key) { k in
            let rc = mdb_del(pointer, dbi, &k, nil)
            if rc == MDB_NOTFOUND { return false }
            try LMDBEnvironment.check(rc, "mdb_del")
            return true
        }
    }

    /// Visits keys in order from the first (or from `start`), until `body` returns false.
    borrowing func forEach(_ dbi: MDB_dbi, _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        var cursor: OpaquePointer?
        try LMDBEnvironment.check(mdb_cursor_open(pointer, dbi, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), value = MDB_val()
        var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        while rc == 0 {
            guard try body(key.bytes, value.bytes) else { return }
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        if rc != MDB_NOTFOUND { try LMDBEnvironment.check(rc, "mdb_cursor_get") }
    }

    borrowing func dropAll(_ dbi: MDB_dbi) throws {
        try LMDBEnvironment.check(mdb_drop(pointer, dbi, 0), "mdb_drop")
    }

    /// The bytes the databases' pages occupy in the file (branch, leaf and overflow
    /// pages, each a whole page) past each database's first page, as this
    /// transaction sees them: what the store's entries take on disk, free pages
    /// aside. `mdb_stat` reads each database's root record, so this costs a few
    /// lookups, not a walk.
    borrowing func occupiedBytes(_ dbis: [MDB_dbi]) throws -> Int {
        var total = 0
        for dbi in dbis {
            var stat = MDB_stat()
            try LMDBEnvironment.check(mdb_stat(pointer, dbi, &stat), "mdb_stat")
            let pages = stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages
            total += max(0, pages - 1) * Int(stat.ms_psize)
        }
        return total
    }
}

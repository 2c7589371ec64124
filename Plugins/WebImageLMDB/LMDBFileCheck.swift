import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage
#if canImport(Glibc)
import Glibc
#endif

/// Checks an LMDB data file before it is mapped: every page reachable from its
/// newest meta page (the B-trees of every database, the overflow pages that hold
/// large values) must lie inside the file and carry its own page number. A file
/// cut short would otherwise be mapped past its end, and the first read of a page
/// there is a SIGBUS that kills the process.
///
/// The file's last page number is not the check: LMDB counts pages it allocated
/// and freed within one transaction, which it never writes, so a sound file is
/// often shorter than `(last page + 1) × page size`. Only reachable pages count.
///
/// The walk reads the file with `pread`, never mapping it, and runs only while no
/// other process has the environment open (it holds the lock LMDB's own processes
/// share on `lock.mdb` exclusively), so no writer moves pages under it. A file
/// already in use was checked by the process that opened it first.
///
/// The layout read here is LMDB 0.9's on-disk format (64-bit): a 16-byte page
/// header (page number, flags, then lower/upper bounds or an overflow count),
/// two meta pages, branch and leaf nodes of 8 bytes before their key.
enum LMDBFileCheck {
    enum Verdict: Equatable {
        case sound
        /// Another process has the environment open: not checked.
        case inUse
        case damaged(String)
    }

    private static let metaMagic: UInt32 = 0xBEEF_C0DE
    /// `F_OFD_SETLK` (Linux 3.15+), which Glibc's module does not export.
    private static let setOFDLock: Int32 = 37
    private static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04, leaf2: UInt16 = 0x20
    private static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02, dupData: UInt16 = 0x04
    private static let invalidPage = UInt64.max
    /// The most pages one check reads before it stops and calls the file sound:
    /// a bound on start-up time (about 1 GiB of branch and leaf pages at 4 KiB).
    private static let maxPages = 250_000

    /// Checks the file and, when it is damaged, renames it and its lock file
    /// `….damaged-<unix time>`, all while holding the lock, so that no other
    /// process opens the damaged file in between.
    static func setAsideIfDamaged(directory: URL) -> Verdict {
        check(directory: directory) { reason in
            let stamp = Int(Date().timeIntervalSince1970)
            for name in ["data.mdb", "lock.mdb"] {
                let path = directory.appendingPathComponent(name).path
                rename(path, path + ".damaged-\(stamp)")
            }
        }
    }

    /// Environments this process has open, by resolved path, with how many times.
    /// The check must not so much as open their lock file: closing any descriptor
    /// of a file drops every POSIX lock the process holds on it, LMDB's included.
    private static let openHere = Lock<[String: Int]>([:])

    private static func key(_ directory: URL) -> String { directory.resolvingSymlinksInPath().standardizedFileURL.path }

    /// Records that this process opened (true) or closed (false) an environment.
    static func note(_ directory: URL, open: Bool) {
        openHere.withLock { environments in
            let key = key(directory)
            environments[key, default: 0] += open ? 1 : -1
            if environments[key] == 0 { environments[key] = nil }
        }
    }

    static func check(directory: URL, whenDamaged: (String) -> Void = { _ in }) -> Verdict {
        guard openHere.withLock({ $0[key(directory)] == nil }) else { return .inUse }
        let dataPath = directory.appendingPathComponent("data.mdb").path
        let lockPath = directory.appendingPathComponent("lock.mdb").path
        // LMDB's processes each hold a shared lock on byte 0 of lock.mdb while the
        // environment is open; holding it exclusively means nobody else has it open.
        let lock = open(lockPath, O_RDWR | O_CLOEXEC)
        defer { if lock >= 0 { close(lock) } }
        if lock >= 0 {
            // An open-file-description lock, not a POSIX one, so that it is ours
            // alone and goes with this descriptor (no environment of this process
            // is open here: see `openHere`).
            var request = flock()
            request.l_type = Int16(F_WRLCK)
            request.l_whence = Int16(SEEK_SET)
            request.l_start = 0
            request.l_len = 1
            request.l_pid = 0
            if fcntl(lock, Self.setOFDLock, &request) != 0 { return .inUse }
        }
        let descriptor = open(dataPath, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return .sound }  // no file yet
        defer { close(descriptor) }
        let end = lseek(descriptor, 0, SEEK_END)
        guard end > 0 else { return .sound }  // being created, or unreadable: LMDB reports that itself
        let fileSize = UInt64(end)
        let verdict = walk(descriptor, fileSize: fileSize)
        if case .damaged(let reason) = verdict { whenDamaged(reason) }
        return verdict
    }

    private static func walk(_ descriptor: Int32, fileSize: UInt64) -> Verdict {
        func read(_ count: Int, at offset: UInt64) -> [UInt8]? {
            guard offset + UInt64(count) <= fileSize else { return nil }
            var bytes = [UInt8](repeating: 0, count: count)
            let n = try? FileIO.readFully(descriptor, into: &bytes, at: Int(offset))
            return n == count ? bytes : nil
        }
        func u16(_ b: [UInt8], _ i: Int) -> UInt16 { UInt16(b[i]) | UInt16(b[i + 1]) << 8 }
        func u32(_ b: [UInt8], _ i: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(b[i + $1]) << (8 * UInt32($1)) } }
        func u64(_ b: [UInt8], _ i: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(b[i + $1]) << (8 * UInt64($1)) } }

        // Meta page 0 holds the page size (in its free database's md_pad).
        guard let first = read(160, at: 0), u32(first, 16) == metaMagic else {
            return .damaged("it is not an LMDB file of this version (no meta page)")
        }
        let pageSize = UInt64(u32(first, 40))
        guard pageSize >= 512, pageSize <= 65_536, pageSize & (pageSize - 1) == 0 else {
            return .damaged("its meta page names a page size of \(pageSize)")
        }
        guard let second = read(160, at: pageSize), u32(second, 16) == metaMagic else {
            return .damaged("its second meta page is missing or not LMDB's")
        }
        // The newer meta (higher transaction id) is the one LMDB uses.
        let meta = u64(second, 144) > u64(first, 144) ? second : first
        var roots = [u64(meta, 40 + 40), u64(meta, 88 + 40)]   // the free and main databases' roots
        var visited = Set<UInt64>()
        while let page = roots.popLast() {
            guard page != invalidPage, visited.insert(page).inserted else { continue }
            guard visited.count <= maxPages else { return .sound }
            guard let bytes = read(Int(pageSize), at: page &* pageSize), page < fileSize / pageSize else {
                return .damaged("page \(page), reachable from its newest meta page, lies past the file's end at \(fileSize) bytes")
            }
            guard u64(bytes, 0) == page else {
                return .damaged("page \(page) holds page \(u64(bytes, 0))'s header")
            }
            let flags = u16(bytes, 10)
            guard flags & (branch | leaf) != 0, flags & leaf2 == 0 else {
                return .damaged("page \(page) is neither a branch nor a leaf (flags \(flags))")
            }
            let lower = Int(u16(bytes, 12))
            guard lower >= 16, lower <= Int(pageSize) else { return .damaged("page \(page) has a broken header") }
            for slot in 0..<((lower - 16) / 2) {
                let node = Int(u16(bytes, 16 + 2 * slot))
                guard node + 8 <= Int(pageSize) else { return .damaged("page \(page) points past itself") }
                let low = UInt64(u16(bytes, node)), high = UInt64(u16(bytes, node + 2)), nodeFlags = u16(bytes, node + 4)
                let keySize = Int(u16(bytes, node + 6))
                if flags & branch != 0 {
                    roots.append(low | high << 16 | UInt64(nodeFlags) << 32)
                    continue
                }
                let data = node + 8 + keySize
                if nodeFlags & bigData != 0 {
                    guard data + 8 <= Int(pageSize) else { return .damaged("page \(page) points past itself") }
                    let start = u64(bytes, data)
                    guard let header = read(16, at: start &* pageSize), u64(header, 0) == start else {
                        return .damaged("overflow page \(start), reachable from page \(page), is missing or not itself")
                    }
                    let count = UInt64(u32(header, 12))
                    guard (start + count) &* pageSize <= fileSize else {
                        return .damaged("overflow pages \(start)..<\(start + count) run past the file's end at \(fileSize) bytes")
                    }
                } else if nodeFlags & subData != 0 {
                    guard data + 48 <= Int(pageSize) else { return .damaged("page \(page) points past itself") }
                    roots.append(u64(bytes, data + 40))   // a named database's root
                } else if nodeFlags & dupData != 0 {
                    return .sound   // sorted duplicates: a layout this store never writes; leave it to LMDB
                }
            }
        }
        return .sound
    }
}

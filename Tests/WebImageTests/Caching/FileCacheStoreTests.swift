import Foundation
import Testing
import WebImageTestSupport
import WebImage
import WebImageTesting

@Suite("FileCacheStore")
struct FileCacheStoreTests {
    @Test("passes CacheStoreConformance")
    func conformance() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try await CacheStoreConformance(
            makeStore: { try FileCacheStore(directory: root.appendingPathComponent(UUID().uuidString), limits: .unlimited) },
            makeLimitedStore: { limits, clock in try FileCacheStore(directory: root.appendingPathComponent(UUID().uuidString), limits: limits, clock: clock) }
        ).run()
    }

    @Test("MemoryCacheStore passes CacheStoreConformance")
    func memoryConformance() async throws {
        try await CacheStoreConformance(
            makeStore: { MemoryCacheStore(limits: .unlimited) },
            makeLimitedStore: { limits, clock in MemoryCacheStore(limits: limits, clock: clock) }
        ).run()
    }

    @Test("directory is 0700; one file per entry, named by hash, starting with the bytes; keys cannot escape")
    func layout() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("cache")
        let store = try FileCacheStore(directory: directory, limits: .unlimited)
        try await store.setData(Data([1]), forKey: "../../escape.png")
        try await store.setData(Data([2, 3]), forKey: "https://x.com/photo.JPG?size=2", metadata: CacheMetadata(etag: "\"e\""))
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0 != "tmp" }
        #expect(names.count == 2)
        #expect(names.allSatisfy { $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "." } })
        #expect(names.contains { $0.hasSuffix(".png") } && names.contains { $0.hasSuffix(".jpg") })
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("escape.png").path))
        let url = try #require(try await store.fileURL(forKey: "https://x.com/photo.JPG?size=2"))
        #expect(url.deletingLastPathComponent().standardizedFileURL.path == directory.standardizedFileURL.path)
        let file = try Data(contentsOf: url)
        #expect(file.prefix(2) == Data([2, 3]), "the bytes come first, so a viewer opens the file")
        #expect(file.suffix(8) == Data("WEBIMGF1".utf8))
        let entry = try #require(try await store.entry(forKey: "https://x.com/photo.JPG?size=2"))
        #expect(entry.data == Data([2, 3]) && entry.metadata.etag == "\"e\"" && entry.metadata.size == 2)
    }

    @Test("a directory that cannot be made is storeFailed in the system's words, naming the part of the path that failed; missing parents are made 0700")
    func directoryErrors() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("file")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data([1]).write(to: file)
        for (directory, expected) in [(file, "\(file.path) exists and is not a directory"),
                                      (file.appendingPathComponent("sub/cache"), "\(file.path) is not a directory")] {
            let error = #expect(throws: WebImageError.self) { try FileCacheStore(directory: directory, limits: .unlimited) }
            #expect(error?.code == .storeFailed && error?.message.contains(expected) == true, "\(String(describing: error))")
            #expect(error?.message.contains("NSCocoaErrorDomain") == false)
        }
        // A path that fails part way (a name longer than any file system takes) leaves none of the directories it made.
        let tooLong = root.appendingPathComponent("made/also-made/" + String(repeating: "n", count: 300) + "/cache")
        let long = #expect(throws: WebImageError.self) { try FileCacheStore(directory: tooLong, limits: .unlimited) }
        #expect(long?.message.contains("File name too long") == true, "\(String(describing: long))")
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("made").path), "the directories made before the failure are removed")
        // A directory that can be made, but whose entries' paths would pass PATH_MAX: refused at
        // once (it used to start, then fail every read and write), and none of it is left.
        for length in [4096 - 3, 4030] {
            let noRoom = pathOfLength(length, under: root)
            let tooLong = #expect(throws: WebImageError.self) { try FileCacheStore(directory: noRoom, limits: .unlimited) }
            #expect(tooLong?.code == .storeFailed && tooLong?.message.contains("is too long") == true, "\(String(describing: tooLong))")
            #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("made").path), "the directories made for the store are removed")
        }
        // One byte shorter than the longest entry path the system takes: it works.
        let longest = pathOfLength(4095 - 71, under: root)
        let fits = try FileCacheStore(directory: longest, limits: .unlimited)
        try await fits.setData(Data([9]), forKey: "https://x.com/a.jpeg")
        #expect(try await fits.data(forKey: "https://x.com/a.jpeg") == Data([9]))
        try FileManager.default.removeItem(at: root.appendingPathComponent("made"))
        // `..` after a symbolic link is the link's target's parent, as the kernel resolves it, for the store's every file.
        let inner = root.appendingPathComponent("real/inner")
        try FileManager.default.createDirectory(at: inner, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("link"), withDestinationURL: inner)
        let linked = try FileCacheStore(directory: root.appendingPathComponent("link/../cache"), limits: .unlimited)
        try await linked.setData(Data([7]), forKey: "k")
        #expect(linked.directory.path == root.appendingPathComponent("real/cache").resolvingSymlinksInPath().path, "\(linked.directory.path)")
        #expect(try await linked.data(forKey: "k") == Data([7]))
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("cache").path), "not the path simplified as text")
        let nested = root.appendingPathComponent("a/b/cache")
        _ = try FileCacheStore(directory: nested, limits: .unlimited)
        for path in ["a", "a/b", "a/b/cache"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: root.appendingPathComponent(path).path)
            #expect((attributes[.posixPermissions] as? Int) == 0o700, "\(path)")
        }
    }

    @Test("the timer sweeps without any call")
    func timer() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let store = try FileCacheStore(directory: directory, limits: CacheLimits(maxAge: .seconds(60), maxSize: nil, sweepInterval: .milliseconds(50)), clock: clock.source)
        try await store.setData(Data([1]), forKey: "old")
        clock.advance(by: 120)
        #expect(try await eventually { try await store.count == 0 })
    }

    @Test("a crash before the commit leaves nothing readable; sweeps remove leftovers and the old .meta layout")
    func crashBeforeCommit() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let store = try FileCacheStore(directory: directory, limits: .unlimited, clock: clock.source)
        try await store.setData(Data("old".utf8), forKey: "k")

        // What a writer leaves if killed before its rename (the commit point), and
        // what the JSON layout of earlier versions left.
        let other = SHA256Digest.hex("other")
        try Data("partial".utf8).write(to: directory.appendingPathComponent("tmp/\(UUID().uuidString)"))
        try Data("{}".utf8).write(to: directory.appendingPathComponent("\(other).meta"))
        try Data("old layout bytes".utf8).write(to: directory.appendingPathComponent("\(other)-cafebabe.jpg"))

        let reopened = try FileCacheStore(directory: directory, limits: .unlimited, clock: clock.source)
        #expect(try await reopened.data(forKey: "k") == Data("old".utf8))
        #expect(try await reopened.data(forKey: "other") == nil)
        #expect(try await reopened.data(forKey: "other.meta") == nil, "an old .meta file is not an entry")

        clock.advance(by: 120)  // past the grace period for writes in flight
        try await reopened.removeExpired()
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0 != "tmp" }
        #expect(names == [SHA256Digest.hex("k")], "only the committed entry remains: \(names)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("tmp").path).isEmpty)
        #expect(try await reopened.data(forKey: "k") == Data("old".utf8))
    }

    @Test("a directory given by mistake (a home, another store's) loses only entries: sweeps, trims and removeAll leave other files and directories alone")
    func othersFilesKept() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("Documents"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("tmp"), withIntermediateDirectories: true)
        let others = ["thesis.txt", ".bashrc", "data.mdb", "lock.mdb", "README", "Documents/notes.txt", "tmp/draft.docx"]
        for name in others { try Data("mine".utf8).write(to: directory.appendingPathComponent(name)) }
        let clock = TestClock()
        let store = try FileCacheStore(directory: directory, limits: CacheLimits(maxAge: .seconds(60), maxSize: 1 << 20, sweepInterval: nil), clock: clock.source)
        try await store.setData(Data("an entry".utf8), forKey: "k")
        try await store.setData(Data("another entry".utf8), forKey: "k2")
        clock.advance(by: 3600)
        try await store.removeExpired()
        #expect(try await store.count == 0)
        try await store.setData(Data("a third".utf8), forKey: "k3")
        try await store.removeAll()
        #expect(try await store.count == 0)
        for name in others {
            #expect(try Data(contentsOf: directory.appendingPathComponent(name)) == Data("mine".utf8), "\(name) is not the store's")
        }
    }

    @Test("a FIFO, a link or a linked tmp in the store's directory: reads are misses that never block, sweeps neither hang nor reach outside, a hit changes no other file")
    func oddFilesInPlace() async throws {
        let directory = temporaryDirectory()
        let outside = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory); try? FileManager.default.removeItem(at: outside) }
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let clock = TestClock()
        let store = try FileCacheStore(directory: directory, limits: CacheLimits(maxAge: .seconds(3600), maxSize: 1 << 20, sweepInterval: nil), clock: clock.source)
        try await store.setData(Data("real".utf8), forKey: "real")
        let entry = try #require(try await store.fileURL(forKey: "real"))
        // A FIFO where an entry goes: opening it blocking would wait for a writer forever.
        let fifoKey = "fifo.jpg"
        try await store.setData(Data("x".utf8), forKey: fifoKey)
        let fifoPath = try #require(try await store.fileURL(forKey: fifoKey)).path
        unlink(fifoPath)
        #expect(mkfifo(fifoPath, 0o600) == 0)
        _ = try? await store.data(forKey: fifoKey)  // a store error or a miss, not a hang
        // An entry that is a link to a file elsewhere: read through it, never; its date stays.
        let linked = outside.appendingPathComponent("copy.jpg")
        try FileManager.default.copyItem(at: entry, to: linked)
        var old = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, linked.path, &old, 0) == 0)
        try FileManager.default.removeItem(at: entry)
        try FileManager.default.createSymbolicLink(at: entry, withDestinationURL: linked)
        clock.advance(by: 120)
        _ = try? await store.data(forKey: "real")
        #expect(try FileManager.default.attributesOfItem(atPath: linked.path)[.modificationDate] as? Date == Date(timeIntervalSince1970: 1_000_000))
        // tmp as a link to another directory: the sweep does not follow it.
        let victim = outside.appendingPathComponent("victim")
        try FileManager.default.createDirectory(at: victim, withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: victim.appendingPathComponent(UUID().uuidString))
        try FileManager.default.removeItem(at: directory.appendingPathComponent("tmp"))
        try FileManager.default.createSymbolicLink(at: directory.appendingPathComponent("tmp"), withDestinationURL: victim)
        clock.advance(by: 7200)
        try await store.removeExpired()
        #expect(try FileManager.default.contentsOfDirectory(atPath: victim.path).count == 1, "nothing outside the store is deleted")
    }

    @Test("a truncated or corrupt entry file, or another key's file, is a miss, not a crash")
    func corruptEntry() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileCacheStore(directory: directory, limits: .unlimited)
        try await store.setData(Data([1, 2, 3]), forKey: "k")
        let file = directory.appendingPathComponent(SHA256Digest.hex("k"))
        let whole = try Data(contentsOf: file)
        for broken in [whole.prefix(whole.count - 1), whole.prefix(5), Data(), Data(count: 64), whole.prefix(3) + Data(repeating: 0xFF, count: 30)] {
            try broken.write(to: file)
            #expect(try await store.entry(forKey: "k") == nil)
            #expect(try await store.metadata(forKey: "k") == nil)
        }
        #expect(!FileManager.default.fileExists(atPath: file.path), "a damaged entry is removed when read")
        // Another key's entry under this key's name (as a hash collision would put it).
        try await store.setData(Data([9]), forKey: "j")
        try FileManager.default.copyItem(at: directory.appendingPathComponent(SHA256Digest.hex("j")), to: file)
        #expect(try await store.entry(forKey: "k") == nil)
        try await store.setData(Data([4]), forKey: "k")
        #expect(try await store.data(forKey: "k") == Data([4]))
    }

    @Test("a hit moves the access date only when it is stale, and 304 metadata keeps the bytes")
    func accessDates() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = TestClock()
        let store = try FileCacheStore(directory: directory, limits: .unlimited, clock: clock.source)
        try await store.setData(Data([7]), forKey: "k", metadata: CacheMetadata(etag: "a"))
        let written = try #require(try await store.metadata(forKey: "k")).accessedAt
        clock.advance(by: 5)
        _ = try await store.entry(forKey: "k")
        #expect(try #require(try await store.metadata(forKey: "k")).accessedAt == written, "a hit within 30 s of the last touch writes nothing")
        clock.advance(by: 100)
        _ = try await store.entry(forKey: "k")
        #expect(try #require(try await store.metadata(forKey: "k")).accessedAt > written)
        try await store.updateMetadata(CacheMetadata(etag: "b"), forKey: "k")
        let updated = try #require(try await store.entry(forKey: "k"))
        #expect(updated.data == Data([7]) && updated.metadata.etag == "b")
    }

    @Test("a hit whose bytes are in the page cache is read on the calling task; bytes not in memory, a large entry and a stale access date are read on the pool")
    func readsOnCallingThread() async throws {
        // Beside the package, on the disk the checkout is on: pages of a file there
        // can be dropped from memory (a tmpfs /tmp keeps every page).
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../.build/test-file-store-\(UUID().uuidString.prefix(8))").standardizedFileURL
        defer { try? FileManager.default.removeItem(at: directory) }
        let pool = BlockingThreadPool(threadCount: 1, name: "test.file-io")
        defer { pool.shutdown() }
        let clock = TestClock()
        let store = try FileCacheStore(directory: directory, limits: .unlimited, pool: pool, clock: clock.source)
        try #require(store.readsOnCallingThread, "\(directory.path) is on a local filesystem")
        #expect(try FileCacheStore(directory: directory, pool: pool, readsOnCallingThread: false).readsOnCallingThread == false)
        let configured = try CacheStoreRegistry.standard.makeStore(
            named: "filesystem", settings: CacheStoreSettings(directory: directory, values: ConfigValues(["store.filesystem.readsOnCallingThread": "false"])))
        #expect((configured as? FileCacheStore)?.readsOnCallingThread == false, "store.filesystem.readsOnCallingThread reaches the store")
        let bytes = Data((0..<100_000).map { UInt8($0 % 251) })
        try await store.setData(bytes, forKey: "k")

        // The pool's only thread is held: what completes meanwhile did not use it.
        let gate = DispatchSemaphore(value: 0)
        // Released before the pool's shutdown (defers run last first), which waits for
        // its thread: a failed #require below would otherwise leave it held, and the
        // whole test run hung there (seen under a loaded CI run).
        defer { for _ in 0..<3 { gate.signal() } }
        let running = Tally()
        let blocker = Task { try await pool.run { running.increment(); gate.wait() } }
        try #require(await eventually { running.value == 1 })
        #expect(try await store.data(forKey: "k") == bytes, "a cached hit is read without the pool")
        #expect(try await store.data(forKey: "missing") == nil, "so is a miss")

        // The file's pages dropped from memory: the read would wait for the disk,
        // so it queues on the pool and finishes when the pool runs it. A read with
        // RWF_NOWAIT starts the file's readahead, and on a fast disk that can land
        // before the read looks again, so a read that came back inline (with the
        // right bytes) is tried again with the pages dropped again: at least one of
        // 20 must queue.
        let file = directory.appendingPathComponent(SHA256Digest.hex("k"))
        let finished = Tally()
        var cold: Task<Data?, any Error>?
        for attempt in 1...20 {
            let descriptor = open(file.path, O_RDONLY)
            try #require(descriptor >= 0)
            fsync(descriptor)
            posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED)
            close(descriptor)
            let read = Task { () async throws -> Data? in
                defer { finished.increment() }
                return try await store.data(forKey: "k")
            }
            try #require(await eventually { pool.queuedJobs == 1 || finished.value == attempt })
            if pool.queuedJobs == 1 { cold = read; break }
            #expect(try await read.value == bytes, "a read the readahead answered inline is still right")
        }
        let queued = try #require(cold, "the uncached read waits for the pool")
        gate.signal()
        try await blocker.value
        #expect(try await queued.value == bytes)

        // An entry over 1 MiB is read on the pool even when it is cached.
        let large = Data(repeating: 3, count: 2 << 20)
        try await store.setData(large, forKey: "large")
        let blocker3 = Task { try await pool.run { running.increment(); gate.wait() } }
        try #require(await eventually { running.value == 2 })
        let big = Task { try await store.data(forKey: "large") }
        try #require(await eventually { pool.queuedJobs == 1 }, "a large read waits for the pool")
        gate.signal()
        try await blocker3.value
        #expect(try await big.value == large)

        // A stale access date is moved on the pool too (an inode write can wait).
        let touched = try #require(try await store.metadata(forKey: "k")).accessedAt
        let blocker2 = Task { try await pool.run { running.increment(); gate.wait() } }
        try #require(await eventually { running.value == 3 })
        clock.advance(by: 100)
        let stale = Task { try await store.entry(forKey: "k") }
        try #require(await eventually { pool.queuedJobs == 1 }, "the access date waits for the pool")
        gate.signal()
        try await blocker2.value
        #expect(try await stale.value?.data == bytes)
        #expect(try #require(try await store.metadata(forKey: "k")).accessedAt > touched, "the file's date moved")
    }

    @Test("a path that is a file, or an unwritable directory, is a typed error")
    func badDirectories() throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("file")
        try Data([0]).write(to: file)
        let error = #expect(throws: WebImageError.self) { try FileCacheStore(directory: file) }
        #expect(error?.code == .storeFailed && error?.message.contains("not a directory") == true)

        #expect(throws: WebImageError.self) { try FileCacheStore(directory: file.appendingPathComponent("below-a-file")) }

        let readOnly = root.appendingPathComponent("ro")
        try FileManager.default.createDirectory(at: readOnly, withIntermediateDirectories: true)
        try makeUnwritable(readOnly)
        defer { makeWritable(readOnly) }
        let readOnlyError = #expect(throws: WebImageError.self) { try FileCacheStore(directory: readOnly) }
        #expect(readOnlyError?.code == .storeFailed)
    }
}

extension Sequence {
    func asyncFilter(_ isIncluded: (Element) async throws -> Bool) async rethrows -> [Element] {
        var result: [Element] = []
        for element in self where try await isIncluded(element) { result.append(element) }
        return result
    }
}

import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage
import WebImageTestSupport

/// A loader over a dictionary, for the manager's own logic: counts requests,
/// can hold them until released, answers 304 to matching validators, and
/// observes cancellation. The real transports are tested against real servers.
final class TestLoader: Loader {
    struct Resource: Sendable {
        var data: Data
        var status: Int = 200
        var etag: String?
        var error: WebImageError?
        /// More response fields, names in lower case.
        var headers: [String: String] = [:]
    }

    private struct State {
        var resources: [String: Resource] = [:]
        var requests: [LoadRequest] = []
        var cancellations = 0
    }

    private let state = Lock(State())
    private let gate = Gate(open: true)

    func serve(_ url: String, _ resource: Resource) { state.withLock { $0.resources[url] = resource } }
    func serve(_ url: String, data: Data, etag: String? = nil) { serve(url, Resource(data: data, etag: etag)) }

    var requestCount: Int { state.withLock { $0.requests.count } }
    var requests: [LoadRequest] { state.withLock { $0.requests } }
    var cancellations: Int { state.withLock { $0.cancellations } }

    /// Holds every load until `open()`.
    func close() { gate.close() }
    func open() { gate.open() }

    func canLoad(_ url: URL) -> Bool { url.scheme == "test" }

    func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        state.withLock { $0.requests.append(request) }
        await gate.wait()
        if Task.isCancelled {
            state.withLock { $0.cancellations += 1 }
            throw WebImageError(.cancelled, "cancelled")
        }
        guard let resource = state.withLock({ $0.resources[request.url.absoluteString] }) else {
            throw WebImageError(.notFound, "no resource at \(request.url)", statusCode: 404)
        }
        if let error = resource.error { throw error }
        if let etag = resource.etag, request.ifNoneMatch == etag {
            return LoadResponse(data: Data(), statusCode: 304, headers: ["etag": etag], url: request.url)
        }
        progress(LoadProgress(received: Int64(resource.data.count / 2), expected: Int64(resource.data.count)))
        progress(LoadProgress(received: Int64(resource.data.count), expected: Int64(resource.data.count)))
        var headers = resource.headers
        if let etag = resource.etag { headers["etag"] = etag }
        return LoadResponse(data: resource.data, statusCode: resource.status, headers: headers, url: request.url)
    }
}

/// A fresh temporary directory, removed by the caller's `defer`.
func temporaryDirectory(_ name: String = #function) -> URL {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("webimage-tests-\(UUID().uuidString.prefix(8))")
    try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A clock tests can move.
final class TestClock: Sendable {
    private let now = Lock(Date())
    var date: Date { now.withLock { $0 } }
    func advance(by seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var source: @Sendable () -> Date { { self.date } }
}

/// Makes a directory unwritable even for root (CI runs as root, which ignores
/// mode bits): mode 0500, plus the immutable attribute when running as root.
func makeUnwritable(_ directory: URL) throws {
    try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: directory.path)
    if getuid() == 0 { try run("/usr/bin/chattr", ["+i", directory.path]) }
}

func makeWritable(_ directory: URL) {
    if getuid() == 0 { try? run("/usr/bin/chattr", ["-i", directory.path]) }
    try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
}

/// Runs a command to the end with posix_spawn (Foundation's Process reaps
/// children it did not start, and races when started from parallel tests).
func run(_ executable: String, _ arguments: [String]) throws {
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    guard posix_spawn(&pid, executable, nil, nil, argv, environ) == 0 else {
        throw WebImageError(.invalidArgument, "cannot start \(executable)")
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    guard status == 0 else {
        throw WebImageError(.invalidArgument, "\(executable) \(arguments.joined(separator: " ")) exited with status \(status)")
    }
}

/// A counter shared across tasks.
final class Tally: Sendable {
    private let count = Lock(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// A store whose writes fail as a full disk's do (and, with `failsReads`, its
/// reads as an unreadable one's): a pure unit of the manager's logic (the real
/// full disk is tested with LMDB on a tmpfs, an unreadable file store's entry
/// with a symbolic-link loop).
struct FullDiskStore: CacheStore {
    let reads = MemoryCacheStore(limits: .unlimited)
    var failsReads = false
    func entry(forKey key: String) async throws -> CacheEntry? {
        if failsReads { throw WebImageError(.storeFailed, "open: Permission denied") }
        return try await reads.entry(forKey: key)
    }
    func metadata(forKey key: String) async throws -> CacheMetadata? { try await reads.metadata(forKey: key) }
    func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        throw WebImageError(.storeFailed, "mdb_txn_commit: No space left on device (28)")
    }
    func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {}
    func removeData(forKey key: String) async throws {}
    func removeAll() async throws {}
    func removeExpired() async throws {}
    var totalSize: Int { get async throws { 0 } }
    var count: Int { get async throws { 0 } }
}

/// A store whose writes wait until `open()`: background writes stay pending for
/// as long as a test needs (a real store, MemoryCacheStore, keeps what is written).
final class GatedStore: CacheStore {
    let inner = MemoryCacheStore(limits: .unlimited)
    private let gate = Gate()

    func open() { gate.open() }

    func entry(forKey key: String) async throws -> CacheEntry? { try await inner.entry(forKey: key) }
    func metadata(forKey key: String) async throws -> CacheMetadata? { try await inner.metadata(forKey: key) }
    func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        await gate.wait()
        try await inner.setData(data, forKey: key, metadata: metadata)
    }
    func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws { try await inner.updateMetadata(metadata, forKey: key) }
    func removeData(forKey key: String) async throws { try await inner.removeData(forKey: key) }
    func removeAll() async throws { try await inner.removeAll() }
    func removeExpired() async throws {}
    /// The number of entries when `close()` was called, if it was.
    private let closedWith = Lock<Int?>(nil)
    var countAtClose: Int? { closedWith.withLock { $0 } }
    func close() async {
        let count = (try? await inner.count) ?? -1
        closedWith.withLock { $0 = count }
    }
    var totalSize: Int { get async throws { try await inner.totalSize } }
    var count: Int { get async throws { try await inner.count } }
}

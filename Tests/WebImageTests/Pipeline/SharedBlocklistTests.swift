import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage

/// An in-memory `SharedFailureStore` standing for a fleet's Redis (the real one
/// is tested in WebImageRedisTests), which can be made to fail.
final class FakeFailureStore: SharedFailureStore {
    struct State {
        var records: [String: (record: FailureRecord, ttl: Duration)] = [:]
        var reads = 0
        var failing = false
        var removedAll = 0
        /// Writes for these URLs wait until ``release(_:)``.
        var held: [String: Signal] = [:]
        /// Signalled when a record for the URL lands.
        var landed: [String: Signal] = [:]
    }
    let state = Lock(State())

    /// Holds every later `recordFailure` for `url` until ``release(_:)``; the
    /// returned signal fires when the first of them has arrived and waits.
    func hold(_ url: String) -> Signal {
        let arrived = Signal()
        state.withLock { $0.held[url] = Signal(); $0.landed[url + "#arrived"] = arrived }
        return arrived
    }
    func release(_ url: String) { state.withLock { $0.held.removeValue(forKey: url) }?.fire() }
    /// Fires when a record for `url` lands.
    func landing(of url: String) -> Signal {
        let signal = Signal()
        state.withLock { $0.landed[url] = signal }
        return signal
    }

    func failure(forURL url: String) async throws -> (record: FailureRecord, remaining: Duration)? {
        try state.withLock { state in
            state.reads += 1
            if state.failing { throw WebImageError(.storeFailed, "redis: connection refused") }
            return state.records[url].map { ($0.record, $0.ttl) }
        }
    }
    func recordFailure(_ record: FailureRecord, forURL url: String, ttl: Duration) async throws {
        let (gate, arrived) = state.withLock { ($0.held[url], $0.landed[url + "#arrived"]) }
        if let gate {
            arrived?.fire()
            await gate.wait()
        }
        let landed = try state.withLock { state in
            if state.failing { throw WebImageError(.storeFailed, "redis: connection refused") }
            state.records[url] = (record, ttl)
            return state.landed[url]
        }
        landed?.fire()
    }
    func removeFailure(forURL url: String) async throws { _ = state.withLock { $0.records.removeValue(forKey: url) } }
    func removeAllFailures() async throws { state.withLock { $0.records.removeAll(); $0.removedAll += 1 } }
}

/// A one-shot event: ``wait()`` returns once ``fire()`` was called, before or after.
final class Signal: Sendable {
    private let state = Lock<(fired: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func fire() {
        let waiters = state.withLock { state in
            state.fired = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.fired { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

@Suite("Shared failed-URL blocklist", .timeLimit(.minutes(2)))
struct SharedBlocklistTests {
    @Test("FailureRecord: its text form round-trips; long messages are cut at a character; other values are nil")
    func recordCodec() throws {
        let record = FailureRecord(code: .notFound, message: "https://x/a.jpg answered 404\twith a tab", statusCode: 404)
        #expect(FailureRecord(encoded: record.encoded()) == record)
        let noStatus = FailureRecord(code: .unsupportedFormat, message: "", statusCode: nil)
        #expect(FailureRecord(encoded: noStatus.encoded()) == noStatus)

        let long = FailureRecord(code: .decodeFailed, message: String(repeating: "é", count: 2000))
        let cut = try #require(FailureRecord(encoded: long.encoded()))
        #expect(cut.message.utf8.count == FailureRecord.maxMessageBytes && cut.message.allSatisfy { $0 == "é" })

        let error = record.error
        #expect(error.code == .notFound && error.statusCode == 404 && !error.isTransient)

        for bad in ["", "wif1", "wif1\t404\tnotFound", "wif2\t404\tnotFound\tm", "wif1\t42\tnotFound\tm", "wif1\tabc\tnotFound\tm",
                    "wif1\t-\tnot found\tm", "wif1\t-\t\tm", "wif1\t-\t\(String(repeating: "a", count: 65))\tm",
                    "wif1\t-\tx\t" + String(repeating: "m", count: 5000)] {
            #expect(FailureRecord(encoded: Data(bad.utf8)) == nil, "\(bad.prefix(40))")
        }
        #expect(FailureRecord(encoded: Data([0x77, 0x69, 0x66, 0x31, 0x09, 0x2D, 0x09, 0x78, 0x09, 0xFF, 0xFE])) == nil, "not UTF-8")
    }

    @Test("a failure recorded here reaches the shared store; transient, blocked and file: URLs do not")
    func recordShares() async {
        let shared = FakeFailureStore()
        let list = FailedURLBlocklist(ttl: .seconds(120), shared: shared)
        #expect(list.record(WebImageError(.notFound, "404", statusCode: 404), for: "https://x/gone.jpg"))
        #expect(!list.record(WebImageError(.timedOut, "slow"), for: "https://x/slow.jpg"))
        #expect(!list.record(WebImageError(.blockedURL, "already"), for: "https://x/again.jpg"))
        #expect(list.record(WebImageError(.notFound, "no such file"), for: "file:///srv/a.jpg"), "blocked here…")
        await list.finishSharedWrites()
        let records = shared.state.withLock { $0.records }
        #expect(records.keys.sorted() == ["https://x/gone.jpg"], "…but a file: URL is this host's own")
        #expect(records["https://x/gone.jpg"]?.ttl == .seconds(120))
        #expect(records["https://x/gone.jpg"]?.record == FailureRecord(code: .notFound, message: "404", statusCode: 404))
        #expect(list.record(WebImageError(.notFound, "late"), for: "https://x/late.jpg"), "still blocked here after finishSharedWrites")
        await list.finishSharedWrites()
        #expect(shared.state.withLock { $0.records["https://x/late.jpg"] } == nil, "no shared write starts after finishSharedWrites")
    }

    @Test("another host's failure is copied here for its remaining time; a failing shared store blocks nothing")
    func readsShared() async {
        let clock = TestClock()
        let shared = FakeFailureStore()
        shared.state.withLock { $0.records["https://x/404.jpg"] = (FailureRecord(code: .notFound, message: "gone", statusCode: 404), .seconds(30)) }
        let list = FailedURLBlocklist(ttl: .seconds(300), shared: shared, clock: clock.source)
        #expect(list.blockingError(for: "https://x/404.jpg") == nil, "not known here yet")
        let error = await list.sharedBlockingError(for: "https://x/404.jpg")
        #expect(error?.code == .notFound && error?.statusCode == 404)
        #expect(list.blockingError(for: "https://x/404.jpg")?.code == .notFound, "copied here")
        clock.advance(by: 31)
        #expect(list.blockingError(for: "https://x/404.jpg") == nil, "for the 30 s it had left there, not this host's 300")

        #expect(await list.sharedBlockingError(for: "https://x/fine.jpg") == nil)
        #expect(await list.sharedBlockingError(for: "file:///srv/a.jpg") == nil)
        #expect(shared.state.withLock { $0.reads } == 2, "two look-ups: file: URLs are never looked up")
        shared.state.withLock { $0.failing = true }
        #expect(await list.sharedBlockingError(for: "https://x/404.jpg") == nil, "a shared store that fails is no block")
        list.record(WebImageError(.notFound, "x"), for: "https://x/b.jpg")
        await list.finishSharedWrites()
        #expect(list.blockingError(for: "https://x/b.jpg") != nil, "a failed shared write leaves the local block")
    }

    @Test("remove and removeAll reach the shared store")
    func removes() async {
        let shared = FakeFailureStore()
        let list = FailedURLBlocklist(shared: shared)
        list.record(WebImageError(.notFound, "x"), for: "https://x/a")
        list.record(WebImageError(.notFound, "x"), for: "https://x/b")
        let settled = FailedURLBlocklist(shared: shared)
        await list.finishSharedWrites()
        settled.remove("https://x/a")
        await settled.finishSharedWrites()
        #expect(shared.state.withLock { Array($0.records.keys) } == ["https://x/b"])
        let clearing = FailedURLBlocklist(shared: shared)
        clearing.removeAll()
        await clearing.finishSharedWrites()
        #expect(shared.state.withLock { $0.records.isEmpty && $0.removedAll == 1 })
    }

    @Test("the manager asks the shared store only on a miss of every tier, and never for .retryFailed")
    func manager() async throws {
        let shared = FakeFailureStore()
        let otherHost = Harness(blocklist: FailedURLBlocklist(shared: shared))
        _ = try? await otherHost.manager.loadImage(with: otherHost.url("missing.timg"))
        #expect(await otherHost.manager.shutdown(), "the shared write finished within shutdown")
        #expect(shared.state.withLock { $0.records["test://host/missing.timg"]?.record.code } == .notFound)

        let h = Harness(blocklist: FailedURLBlocklist(shared: shared))
        h.loader.serve("test://host/missing.timg", data: TestCoder.encode(width: 1, height: 1))
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 2, height: 2))
        let readsBefore = shared.state.withLock { $0.reads }
        _ = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache)
        let readsAfterMiss = shared.state.withLock { $0.reads }
        #expect(readsAfterMiss == readsBefore + 1, "one look-up before the loader")
        _ = try await h.manager.loadImage(with: h.url("a.timg"))
        h.manager.memoryCache?.removeAll()
        _ = try await h.manager.loadImage(with: h.url("a.timg"))
        #expect(shared.state.withLock { $0.reads } == readsAfterMiss, "memory and disk hits never wait on the shared store")

        let blocked = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("missing.timg")) }
        #expect(blocked?.code == .blockedURL && blocked?.message.contains("another host") == true)
        #expect(h.loader.requestCount == 1, "the origin was not asked for the URL another host found missing")
        let again = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("missing.timg")) }
        #expect(again?.code == .blockedURL)
        #expect(shared.state.withLock { $0.reads } == readsAfterMiss + 1, "the second refusal came from this host's copy")

        let retried = try await h.manager.loadImage(with: h.url("missing.timg"), options: .retryFailed)
        #expect(retried.image?.pixelSize == PixelSize(1) && h.loader.requestCount == 2)
        await h.manager.shutdown()
    }

    /// A blocklist whose shared store holds the record of `url` it was just given.
    static func recordingHeld(_ url: String) async -> (FakeFailureStore, FailedURLBlocklist) {
        let shared = FakeFailureStore()
        let list = FailedURLBlocklist(shared: shared)
        let arrived = shared.hold(url)
        list.record(WebImageError(.notFound, "x"), for: url)
        await arrived.wait()
        return (shared, list)
    }

    @Test("shared writes land in order per URL: a remove is not overtaken by a record still in flight")
    func orderedPerURL() async throws {
        let (shared, list) = await Self.recordingHeld("https://x/a")
        list.remove("https://x/a")
        // A window for a remove that does not wait for the record to land first, and
        // overtakes it (a busy machine can only narrow it and let a bug pass, never fail a sound run).
        try await Task.sleep(for: .milliseconds(50))
        shared.release("https://x/a")
        await list.finishSharedWrites()
        #expect(shared.state.withLock { $0.records.isEmpty }, "the remove came last, so nothing stands")
        #expect(list.pendingSharedWrites == 0)
    }

    @Test("removeAll lands after the writes made before it and before those made after; other URLs do not wait")
    func removeAllIsABarrier() async throws {
        let (shared, list) = await Self.recordingHeld("https://x/slow")
        let other = shared.landing(of: "https://x/other")
        list.record(WebImageError(.notFound, "x"), for: "https://x/other")
        await other.wait() // would never return if writes for different URLs ran one at a time
        list.removeAll()
        list.record(WebImageError(.notFound, "x"), for: "https://x/after")
        // A window for the later record or removeAll to overtake the held one (it can only hide a bug, never fail a sound run).
        try await Task.sleep(for: .milliseconds(50))
        shared.release("https://x/slow")
        await list.finishSharedWrites()
        let records = shared.state.withLock { ($0.records.keys.sorted(), $0.removedAll) }
        #expect(records.0 == ["https://x/after"] && records.1 == 1,
                "the held record and the other landed before removeAll, the later record after it")
    }
}

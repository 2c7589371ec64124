import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage
@testable import WebImageRedis
import WebImageTestSupport
import WebImageTesting

@Suite("RedisCacheStore: standalone")
struct RedisStandaloneTests {
    @Test("passes CacheStoreConformance (expiry and size are Redis' own, tested below)")
    func conformance() async throws {
        let server = try await RedisServer()
        try await CacheStoreConformance {
            try RedisCacheStore(configuration: .init(urls: [server.url], prefix: "t\(UUID().uuidString.prefix(8)):"), limits: .unlimited)
        }.run()
    }

    @Test("URLs: password, ACL user, database; bad ones are typed errors naming what is wrong")
    func urls() throws {
        let parsed = try RedisCacheStore.parse("redis://alice:s%40cret@cache.internal:6380/3")
        #expect(parsed.address == RedisAddress(host: "cache.internal", port: 6380))
        #expect(parsed.credentials == RedisCredentials(user: "alice", password: "s@cret", database: 3))
        #expect(try RedisCacheStore.parse("redis://:pw@[::1]").credentials.password == "pw")
        #expect(try RedisCacheStore.parse("redis://[::1]").address == RedisAddress(host: "::1", port: 6379))
        for (bad, words) in [("http://x:6379", "'http'"), ("rediss://x", "TLS"), ("redis://", "no host"), ("redis://x:0", "port"),
                             ("redis://x/abc", "database number"), ("redis://bob@x", "without a password"), ("not a url at all", "scheme")] {
            let error = #expect(throws: WebImageError.self, "\(bad)") { try RedisCacheStore.parse(bad) }
            #expect(error?.code == .invalidArgument && error?.message.contains(words) == true, "\(bad): \(error?.message ?? "")")
        }
        #expect(throws: WebImageError.self) { try RedisCacheStore(configuration: .init(urls: [])) }
        #expect(throws: WebImageError.self) { try RedisCacheStore(configuration: .init(urls: ["redis://a/1", "redis://b/1"])) }
    }

    @Test("hash slots: CRC16 test vectors and hash tags")
    func slots() {
        #expect(RedisClient.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(RedisClient.hashSlot(Data("foo".utf8)) == 12182)
        #expect(RedisClient.hashSlot(Data("bar".utf8)) == 5061)
        #expect(RedisClient.hashSlot(Data("{user1000}.following".utf8)) == RedisClient.hashSlot(Data("user1000".utf8)))
        #expect(RedisClient.hashSlot(Data("foo{}{bar}".utf8)) == RedisClient.hashSlot(Data("foo{}{bar}".utf8)))
        #expect(RedisClient.redirection("MOVED 3999 127.0.0.1:6381")! == (3999, RedisAddress(host: "127.0.0.1", port: 6381)))
        #expect(RedisClient.redirection("MOVED x y") == nil)
    }

    @Test("one key per entry under the prefix, with a TTL that a hit slides back to the maximum age")
    func ttlSlides() async throws {
        let server = try await RedisServer()
        let store = try RedisCacheStore(configuration: .init(urls: [server.url], prefix: "app:"), limits: CacheLimits(maxAge: .seconds(100)))
        try await store.setData(Data([1, 2, 3]), forKey: "https://x/a.jpg", metadata: CacheMetadata(contentType: "image/jpeg"))
        let keys = try await server.cli(["--scan", "--pattern", "app:*"]).split(separator: "\n")
        #expect(keys == ["app:" + SHA256Digest.hex("https://x/a.jpg")][...].map { Substring($0) })
        try await Task.sleep(for: .milliseconds(2100))
        let before = try #require(Int(try await server.cli(["pttl", String(keys[0])]).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(before <= 98_000, "the TTL runs down: \(before) ms")
        let hit = ContinuousClock.now
        let entry = try #require(try await store.entry(forKey: "https://x/a.jpg"))
        #expect(entry.data == Data([1, 2, 3]) && entry.metadata.contentType == "image/jpeg")
        let after = try #require(Int(try await server.cli(["pttl", String(keys[0])]).trimmingCharacters(in: .whitespacesAndNewlines)))
        // Slid back to the maximum age at the hit, whatever the time since (redis-cli
        // takes seconds beside CPU burners); without the slide it would be at least
        // the 2.1 s slept lower.
        let sinceHit = Int((ContinuousClock.now - hit) / .milliseconds(1))
        #expect(after >= 100_000 - sinceHit - 100, "GETEX slid the TTL back: \(before) → \(after) ms, \(sinceHit) ms after the hit")
        let (count, size) = (try await store.count, try await store.totalSize)
        #expect(count == 1 && size == 3)
    }

    @Test("a flipped payload byte (SETRANGE) is a miss, never wrong bytes, and the key is deleted")
    func flippedByte() async throws {
        let server = try await RedisServer()
        let store = try RedisCacheStore(configuration: .init(urls: [server.url], prefix: "app:"), limits: CacheLimits(maxAge: .seconds(100)))
        try await store.setData(Data("payload-bytes".utf8), forKey: "https://x/a.jpg")
        let key = "app:" + SHA256Digest.hex("https://x/a.jpg")
        _ = try await server.cli(["setrange", key, "3", "X"])
        #expect(try await store.entry(forKey: "https://x/a.jpg") == nil)
        var gone = false
        for _ in 0..<600 where !gone {  // the delete runs in the background: poll, bounded (60 s)
            gone = try await server.cli(["exists", key]).trimmingCharacters(in: .whitespacesAndNewlines) == "0"
            if !gone { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(gone)
        try await store.setData(Data("payload-bytes".utf8), forKey: "https://x/a.jpg")
        #expect(try await store.entry(forKey: "https://x/a.jpg")?.data == Data("payload-bytes".utf8))
    }

    @Test("a batch is pipelined: 200 writes and reads in one call each")
    func batches() async throws {
        let server = try await RedisServer()
        let store = try RedisCacheStore(configuration: .init(urls: [server.url]))
        let entries = (0..<200).map { ("k\($0)", Data(repeating: UInt8($0 % 256), count: $0), CacheMetadata()) }
        try await store.setData(entries)
        let found = try await store.entries(forKeys: entries.map(\.0) + ["missing"])
        #expect(found.count == 200 && found["k7"]?.data == Data(repeating: 7, count: 7) && found["missing"] == nil)
    }

    @Test("AUTH: a password, an ACL user; a wrong password is a typed error")
    func auth() async throws {
        let server = try await RedisServer(arguments: ["--requirepass", "sesame"])
        let good = try RedisCacheStore(configuration: .init(urls: ["redis://:sesame@127.0.0.1:\(server.port)/2"]))
        try await good.setData(Data([9]), forKey: "k")
        #expect(try await good.data(forKey: "k") == Data([9]))
        #expect(try await server.cli(["-a", "sesame", "--no-auth-warning", "-n", "2", "dbsize"]).contains("1"), "SELECT 2 from the URL")

        _ = try await server.cli(["-a", "sesame", "--no-auth-warning", "ACL", "SETUSER", "alice", "on", ">wonderland", "~*", "+@all"])
        let user = try RedisCacheStore(configuration: .init(urls: ["redis://alice:wonderland@127.0.0.1:\(server.port)"]))
        try await user.setData(Data([1]), forKey: "k")
        #expect(try await user.data(forKey: "k") == Data([1]))

        let wrong = try RedisCacheStore(configuration: .init(urls: ["redis://:nope@127.0.0.1:\(server.port)"]))
        let error = await #expect(throws: WebImageError.self) { try await wrong.data(forKey: "k") }
        #expect(error?.message.contains("AUTH") == true, "\(error?.message ?? "")")
    }
}

@Suite("RedisCacheStore: shared blocklist")
struct RedisFailureStoreTests {
    @Test("failed URLs: one key each under prefix + failed:, with the TTL asked for; count, removeAll and removeAllFailures")
    func failures() async throws {
        let server = try await RedisServer()
        let store = try RedisCacheStore(configuration: .init(urls: [server.url], prefix: "fleet:"))
        let record = FailureRecord(code: .notFound, message: "https://x/a.jpg answered 404", statusCode: 404)
        try await store.recordFailure(record, forURL: "https://x/a.jpg", ttl: .seconds(3600))
        let key = store.failureKey(forURL: "https://x/a.jpg")
        #expect(key == "fleet:failed:" + SHA256Digest.hex("https://x/a.jpg"))
        #expect(try await server.cli(["--scan", "--pattern", "fleet:failed:*"]).trimmingCharacters(in: .whitespacesAndNewlines) == key)
        let pttl = try #require(Int(try await server.cli(["pttl", key]).trimmingCharacters(in: .whitespacesAndNewlines)))
        // At most the hour asked for, and far above Redis' own default of none
        // (-1); generous below for a busy machine (a 90 s TTL once lost over 30 s
        // between the write and the read beside two burners and the whole suite).
        #expect((3_000_000...3_600_000).contains(pttl), "PX 3600 s: \(pttl) ms")
        let found = try #require(try await store.failure(forURL: "https://x/a.jpg"))
        #expect(found.record == record && found.remaining <= .seconds(3600) && found.remaining > .seconds(3000))
        #expect(try await store.failure(forURL: "https://x/other.jpg") == nil)

        // Values the blocklist did not write are no failure: garbage, or a key without expiry.
        _ = try await server.cli(["set", store.failureKey(forURL: "https://x/garbage"), "hello", "ex", "60"])
        _ = try await server.cli(["set", store.failureKey(forURL: "https://x/forever"), String(decoding: record.encoded(), as: UTF8.self)])
        #expect(try await store.failure(forURL: "https://x/garbage") == nil)
        #expect(try await store.failure(forURL: "https://x/forever") == nil)

        try await store.setData(Data([1, 2, 3]), forKey: "entry")
        #expect(try await store.count == 1, "failed URLs are not counted as entries")
        #expect(try await store.totalSize == 3)
        try await store.removeFailure(forURL: "https://x/a.jpg")
        #expect(try await store.failure(forURL: "https://x/a.jpg") == nil)
        try await store.recordFailure(record, forURL: "https://x/b.jpg", ttl: .seconds(90))
        try await store.removeAllFailures()
        #expect(try await store.failure(forURL: "https://x/b.jpg") == nil)
        #expect(try await store.entry(forKey: "entry") != nil, "removeAllFailures leaves the entries")
        try await store.recordFailure(record, forURL: "https://x/c.jpg", ttl: .seconds(90))
        try await store.removeAll()
        #expect(try await store.failure(forURL: "https://x/c.jpg") == nil, "clearing the cache clears its failures too")

        server.kill()
        let down = await #expect(throws: WebImageError.self) { try await store.failure(forURL: "https://x/a.jpg") }
        #expect(down?.code == .storeFailed)
    }
}

@Suite("RedisCacheStore: faults", .serialized)
struct RedisFaultTests {
    @Test("down at start: typed errors at once, then it works when the server comes up")
    func downAtStart() async throws {
        let port = try RedisServer.freePort()
        let store = try RedisCacheStore(configuration: .init(urls: ["redis://127.0.0.1:\(port)"], retryDelay: .milliseconds(200)))
        let error = await #expect(throws: WebImageError.self) { try await store.data(forKey: "k") }
        #expect(error?.code == .storeFailed && error?.isTransient == true)
        let server = try await RedisServer(port: port)
        var working = false
        for _ in 0..<300 where !working {  // the retry delay passes; no time bound on how soon
            working = (try? await store.setData(Data([1]), forKey: "k")) != nil
            if !working { try await Task.sleep(for: .milliseconds(100)) }
        }
        let value = try await store.data(forKey: "k")
        #expect(working && value == Data([1]))
        _ = server
    }

    @Test("the test server on a port something else holds: it reports redis-server's exit with its log, not a minute of PINGs")
    func portTaken() async throws {
        let origin = try await TestHTTPServer.start()
        let error = await #expect(throws: RedisServerError.self) { _ = try await RedisServer(port: origin.port) }
        #expect(error?.exited == true && error?.message.contains("exited at start") == true, "\(error?.message ?? "")")
        await origin.shutdown()
    }

    @Test("killed mid-run and restarted: calls fail typed, then reconnect by themselves")
    func killAndRestart() async throws {
        let server = try await RedisServer()
        let store = try RedisCacheStore(configuration: .init(urls: [server.url], retryDelay: .milliseconds(200)))
        try await store.setData(Data([1]), forKey: "a")
        server.kill()
        let error = await #expect(throws: WebImageError.self) { try await store.data(forKey: "a") }
        #expect(error?.code == .storeFailed)
        try await server.start()  // same port, empty (no persistence)
        var answered = false
        for _ in 0..<300 where !answered {
            do {
                #expect(try await store.data(forKey: "a") == nil, "the restarted, empty server answers: a miss")
                answered = true
            } catch {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(answered)
        try await store.setData(Data([2]), forKey: "a")
        #expect(try await store.data(forKey: "a") == Data([2]))
    }

    @Test("a paused server (SIGSTOP) costs one command timeout, then calls fail at once until it is back")
    func paused() async throws {
        let server = try await RedisServer()
        let timeout = TestTiming.scaled(.milliseconds(300))
        let store = try RedisCacheStore(configuration: .init(urls: [server.url], commandTimeout: timeout, retryDelay: .seconds(300)))
        try await store.setData(Data([1]), forKey: "a")
        server.pause()
        defer { server.resume() }
        await #expect(throws: WebImageError.self) { try await store.data(forKey: "a") }
        // Marked down: 50 more calls fail without touching the server, so without
        // waiting for a timeout each. Only the marked-down path says "unavailable"
        // (a timeout says what timed out); asserting that, not a wall-clock bound,
        // keeps the test true on a busy machine where every hop can be slow.
        for call in 0..<50 {
            let error = await #expect(throws: WebImageError.self) { try await store.data(forKey: "a") }
            #expect(error?.message.contains("is unavailable") == true, "call \(call) waited on the server: \(String(describing: error))")
        }
    }
}

@Suite("RedisCacheStore: Redis Cluster", .serialized)
struct RedisClusterTests {
    @Test("three primaries: conformance, keys spread over every node")
    func cluster() async throws {
        let cluster = try await RedisCluster()
        let prefix = "c\(UUID().uuidString.prefix(6)):"
        try await CacheStoreConformance {
            try RedisCacheStore(configuration: .init(urls: cluster.urls, prefix: prefix + "\(UUID().uuidString.prefix(4)):"), limits: .unlimited)
        }.run()
        let store = try RedisCacheStore(configuration: .init(urls: [cluster.urls[1]], prefix: "spread:"))  // one seed is enough
        for index in 0..<60 { try await store.setData(Data([UInt8(index)]), forKey: "spread-\(index)") }
        for node in cluster.nodes {
            let keys = Int(try await node.cli(["dbsize"]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            #expect(keys > 0, "node \(node.port) holds no key")
        }
        // Failed URLs spread over the nodes too, and each one's GET + PTTL pipeline reaches its key's node.
        for index in 0..<20 {
            try await store.recordFailure(FailureRecord(code: .notFound, message: "m\(index)", statusCode: 404), forURL: "https://x/\(index)", ttl: .seconds(60))
        }
        for index in 0..<20 {
            let found = try await store.failure(forURL: "https://x/\(index)")
            #expect(found?.record.message == "m\(index)" && (found?.remaining ?? .zero) > .seconds(50))
        }
        #expect(try await store.count == 60, "failed URLs are not entries")
        try await store.removeAllFailures()
        #expect(try await store.failure(forURL: "https://x/3") == nil)
        try await store.removeAll()
        #expect(try await store.count == 0)
    }

    @Test("resharding while loads run: every read finds its value (MOVED and ASK followed)")
    func reshard() async throws {
        let cluster = try await RedisCluster()
        let store = try RedisCacheStore(configuration: .init(urls: cluster.urls))
        let keys = (0..<300).map { "key-\($0)" }
        for key in keys { try await store.setData(Data(key.utf8), forKey: key) }
        let stop = Flag()
        let loads = Task {
            var failures: [String] = []
            var rounds = 0
            while !stop.isSet || rounds == 0 {
                for key in keys {
                    do {
                        if try await store.data(forKey: key) != Data(key.utf8) { failures.append("\(key): wrong or missing") }
                    } catch { failures.append("\(key): \(error)") }
                }
                rounds += 1
            }
            return (failures, rounds)
        }
        try await cluster.reshard(from: 0, to: 2, slots: 3000)
        try await cluster.reshard(from: 1, to: 0, slots: 2000)
        stop.set()
        let (failures, rounds) = await loads.value
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(rounds >= 1)
        for key in keys { #expect(try await store.data(forKey: key) == Data(key.utf8)) }
    }
}

final class Flag: Sendable {
    private let value = Lock(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

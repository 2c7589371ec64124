import Configuration
import Foundation
import Testing
import WebImage
import WebImageConfiguration
import WebImageKit
@testable import WebImageRedis
import WebImageTestSupport
import WebImageSamples

@Suite("Shared tier from configuration")
struct RedisConfigurationTests {
    func manager(_ flags: [String: String]) async throws -> ImageManager {
        let config = try await ConfigLayers.reader(flags: flags.merging(["store.kind": "memory"]) { a, _ in a }, file: nil, environment: [:])
        return try ConfigLayers.manager(config: config)
    }

    @Test("store.shared.* make a TieredCacheStore with a RedisCacheStore behind the local store")
    func tiered() async throws {
        let manager = try await manager(["store.shared.kind": "redis", "store.shared.url": "redis://127.0.0.1:6390/0, redis://127.0.0.1:6391",
                                         "store.shared.prefix": "fleet:", "store.shared.timeout": "250ms"])
        let tiered = try #require(manager.store as? TieredCacheStore)
        #expect(tiered.local is MemoryCacheStore)
        let redis = try #require(tiered.shared as? RedisCacheStore)
        #expect(redis.configuration.urls.count == 2 && redis.configuration.prefix == "fleet:")
        #expect(redis.configuration.commandTimeout == .milliseconds(250) && redis.configuration.connectTimeout == .milliseconds(250))
        #expect(manager.blocklist.shared == nil, "the blocklist is shared only when asked")
        let sharing = try await self.manager(["store.shared.kind": "redis", "store.shared.url": "redis://127.0.0.1:6390",
                                              "blocklist.shared": "true", "blocklist.ttl": "2m"])
        let sharingTiers = try #require(sharing.store as? TieredCacheStore)
        #expect(sharing.blocklist.shared as? RedisCacheStore === sharingTiers.shared as? RedisCacheStore, "one Redis store for both")
        #expect(sharing.blocklist.ttl == .seconds(120))
        // No shared tier by default.
        #expect(!(try await self.manager([:]).store is TieredCacheStore))
    }

    @Test("bad values are typed errors naming their key")
    func badValues() async throws {
        for (flags, key) in [(["store.shared.kind": "memcached"], "store.shared.kind"),
                             (["store.shared.kind": "redis"], "store.shared.url"),
                             (["store.shared.kind": "redis", "store.shared.url": "redis://x:99999"], "store.shared.url"),
                             (["store.shared.kind": "redis", "store.shared.url": "redis://x", "store.shared.timeout": "0s"], "store.shared.timeout"),
                             (["store.shared.url": "redis://x"], "store.shared.kind"),
                             (["blocklist.shared": "true"], "blocklist.shared"),
                             (["store.shared.kind": "redis", "store.shared.url": "redis://x", "blocklist.shared": "sometimes"], "blocklist.shared")] {
            let error = await #expect(throws: WebImageError.self, "\(flags)") { try await self.manager(flags) }
            #expect(error?.code == .invalidArgument && error?.message.contains(key) == true, "\(flags): \(error?.message ?? "")")
        }
    }

    @Test("a manager over a real Redis: a second host's load is a shared hit; Redis down: loads go on from the origin")
    func endToEnd() async throws {
        let server = try await RedisServer()
        let origin = try await TestHTTPServer.start()
        let samples = FileManager.default.temporaryDirectory.appendingPathComponent("redis-e2e-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: samples) }
        let names = try await onThread { try SampleImages.write(to: samples) }
        let name = try #require(names.first { $0.hasSuffix(".jpg") })
        let image = try Data(contentsOf: samples.appendingPathComponent(name))
        origin.serve("/a.jpg", image, contentType: "image/jpeg")
        let url = origin.url("/a.jpg")
        func host() async throws -> ImageManager {
            try await manager(["store.shared.kind": "redis", "store.shared.url": server.url, "loader.blockPrivateAddresses": "false"])
        }
        let first = try await host()
        #expect(try await first.loadImage(with: url, options: [.avoidDecode]).cacheType == .none)
        #expect(await first.shutdown(), "the shared write finished")
        let second = try await host()
        let hit = try await second.loadImage(with: url, options: [.avoidDecode])
        #expect(hit.cacheType == .shared && hit.data == image)
        #expect(origin.requestCount(path: "/a.jpg") == 1)

        server.kill()
        let third = try await host()
        let degraded = try await third.loadImage(with: url, options: [.avoidDecode])
        #expect(degraded.cacheType == .none && degraded.data == image, "Redis down: the load went to the origin")
        await origin.shutdown()
    }

    @Test("blocklist.shared over a real Redis: a URL that 404s on one host is refused by the next without a request; Redis down: loads go on")
    func sharedBlocklist() async throws {
        let server = try await RedisServer()
        let origin = try await TestHTTPServer.start()
        let url = origin.url("/status/404")
        func host() async throws -> ImageManager {
            try await manager(["store.shared.kind": "redis", "store.shared.url": server.url, "blocklist.shared": "true",
                               "blocklist.ttl": "10m", "loader.blockPrivateAddresses": "false"])
        }
        let first = try await host()
        let missing = await #expect(throws: WebImageError.self) { try await first.loadImage(with: url) }
        #expect(missing?.code == .notFound)
        #expect(await first.shutdown(), "the shared blocklist write finished within shutdown")
        #expect(origin.requestCount(path: "/status/404") == 1)

        let second = try await host()
        let blocked = await #expect(throws: WebImageError.self) { try await second.loadImage(with: url) }
        #expect(blocked?.code == .blockedURL && blocked?.statusCode == 404, "\(blocked?.message ?? "")")
        #expect(origin.requestCount(path: "/status/404") == 1, "the second host did not ask the origin")
        let retried = await #expect(throws: WebImageError.self) { try await second.loadImage(with: url, options: .retryFailed) }
        #expect(retried?.code == .notFound && origin.requestCount(path: "/status/404") == 2, ".retryFailed goes to the origin")
        // The retry's failure was written again in the background; let it land before removing it.
        #expect(await eventually { second.blocklist.pendingSharedWrites == 0 })
        second.blocklist.removeAll()
        await second.shutdown()
        let redis = try #require(second.blocklist.shared as? RedisCacheStore)
        let key = redis.failureKey(forURL: url.absoluteString)
        #expect(try await server.cli(["exists", key]).trimmingCharacters(in: .whitespacesAndNewlines) == "0", "removeAll reached Redis")

        let third = try await host()
        _ = try? await third.loadImage(with: url)
        #expect(await third.shutdown())
        server.kill()
        let fourth = try await host()
        let degraded = await #expect(throws: WebImageError.self) { try await fourth.loadImage(with: url) }
        #expect(degraded?.code == .notFound, "Redis down: the load went to the origin, not failed by the blocklist")
        #expect(origin.requestCount(path: "/status/404") == 4)
        await fourth.shutdown()
        await origin.shutdown()
    }
}

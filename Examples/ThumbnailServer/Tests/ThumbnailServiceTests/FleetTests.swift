import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import ThumbnailService
import WebImage
import WebImageRedis

/// A `redis-server` of the test's own on a free loopback port. posix_spawn and
/// waitpid, not Foundation.Process, whose waitUntilExit spins off the main thread.
final class LocalRedis: Sendable {
    let port: Int
    private let pid: pid_t

    init() async throws {
        port = Int.random(in: 30000..<50000)
        let arguments = ["redis-server", "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        var child: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        guard posix_spawn(&child, "/usr/bin/redis-server", &actions, nil, argv, environ) == 0 else {
            throw WebImageError(.storeFailed, "cannot start /usr/bin/redis-server (make test installs redis-server)")
        }
        pid = child
        let probe = try RedisCacheStore(configuration: .init(urls: ["redis://127.0.0.1:\(port)"], retryDelay: .milliseconds(50)))
        for _ in 0..<600 {  // until it answers (bounded at a minute on a busy machine)
            if (try? await probe.count) != nil { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        stop()
        throw WebImageError(.storeFailed, "redis-server on \(port) did not start")
    }

    var url: String { "redis://127.0.0.1:\(port)" }

    func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

@Suite("A fleet on one machine")
struct FleetTests {
    @Test("two servers with local stores of their own share one Redis: the second serves what the first made, without the origin")
    func fleet() async throws {
        let redis = try await LocalRedis()
        defer { redis.stop() }
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let upstream = try Upstream()
        try await withApplication({ upstream.application(onServerRunning: $0) }) { upstreamPort in
            let sources = ["photo.jpg", "logo.png"].map { "http://127.0.0.1:\(upstreamPort)/img/\($0)" }
            let shared = ["store.kind": "filesystem", "store.shared.kind": "redis", "store.shared.url": redis.url]
            let first = try await makeService(directory: directory.appendingPathComponent("host-a"), overrides: shared)
            let made = try await withApplication({ first.application(logger: quietLogger, onServerRunning: $0) }) { port in
                var made: [Data] = []
                for source in sources {
                    let response = try await Client(port: port).thumbnail(source, "&w=100&h=100&format=png")
                    #expect(response.statusCode == 200 && response.headers["x-image-source"] == "network")
                    made.append(response.data)
                }
                return made
            }
            #expect(await first.manager.shutdown(gracePeriod: .seconds(120)), "the shared writes finished")

            let second = try await makeService(directory: directory.appendingPathComponent("host-b"), overrides: shared)
            try await withApplication({ second.application(logger: quietLogger, onServerRunning: $0) }) { port in
                for (source, expected) in zip(sources, made) {
                    let response = try await Client(port: port).thumbnail(source, "&w=100&h=100&format=png")
                    #expect(response.statusCode == 200 && response.headers["x-image-source"] == "shared", "\(response.headers)")
                    #expect(response.data == expected, "the same bytes and so the same ETag")
                }
                let again = try await Client(port: port).thumbnail(sources[0], "&w=100&h=100&format=png")
                #expect(again.headers["x-image-source"] == "memory")
            }
            #expect(upstream.count("/img/photo.jpg") == 1 && upstream.count("/img/logo.png") == 1, "the origin was asked once per image")
        }
    }
}

import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage
import WebImageCurl
import WebImageHTTP
@testable import WebImageS3
import WebImageTestSupport
import WebImageVips

@Suite("S3Loader against moto, which checks every signature", .serialized)
struct S3LoaderTests {
    func loader(_ moto: MotoServer, key: MotoServer.Key? = nil, secret: String? = nil, curl: CurlLoader = CurlLoader()) throws -> S3Loader {
        try S3Loader(configuration: S3Fixtures.configuration(moto, key: key, secret: secret), curl: curl)
    }

    func manager(_ loader: S3Loader) -> ImageManager {
        var configuration = ImageManager.Configuration()
        configuration.store = nil
        configuration.coders.registerVips()
        configuration.loaders.registerS3(loader)
        return ImageManager(configuration: configuration)
    }

    @Test("an s3:// URL loads signed: the bytes, content type and ETag come back, and the manager decodes them")
    func loads() async throws {
        let moto = try await MotoServer.shared()
        let photo = try #require(try await S3Fixtures.photos().first)
        let key = S3Fixtures.unique("photos/cat") + ".jpg"
        try await S3Fixtures.put(moto, key, photo)
        let url = URL(string: "s3://\(moto.bucket)/\(key)")!
        let response = try await loader(moto).load(LoadRequest(url: url)) { _ in }
        #expect(response.statusCode == 200 && response.data == photo && response.url == url)
        #expect(response.headers["content-type"] == "image/jpeg" && response.headers["etag"] != nil)
        let result = try await manager(try loader(moto)).loadImage(with: url)
        #expect(result.cacheType == .none && (result.image?.pixelSize.width ?? 0) > 0)
    }

    @Test("dot-segments never cross out of the allowed bucket: '..', '%2E%2E', './..' and a key named a/../b are invalidURL before any request; '//' stays in the bucket")
    func dotSegments() async throws {
        let moto = try await MotoServer.shared()
        let allowed = try #require(HostAllowList(["s3://\(moto.bucket)"]))
        let loader = try loader(moto)
        func load(_ text: String) async throws -> LoadResponse {
            var request = LoadRequest(url: try #require(URL(string: text)))
            request.urlPolicy = { allowed.allows($0) ? nil : "is not allowed" }
            return try await loader.load(request) { _ in }
        }
        // The secret bucket exists and holds the object (moto_peer.py): reachable by its own URL.
        #expect(try await S3Fixtures.get(moto, bucket: "webimage-secret", "private.jpg").status == 200)
        for hostile in ["s3://\(moto.bucket)/../webimage-secret/private.jpg",
                        "s3://\(moto.bucket)/%2E%2E/webimage-secret/private.jpg",
                        "s3://\(moto.bucket)/%2e%2e/webimage-secret/private.jpg",
                        "s3://\(moto.bucket)/./../webimage-secret/private.jpg",
                        "s3://\(moto.bucket)/a/../b.jpg",
                        "s3://\(moto.bucket)/a/%2E/b.jpg"] {
            let error = await #expect(throws: WebImageError.self, "\(hostile)") { try await load(hostile) }
            #expect(error?.code == .invalidURL && error?.message.contains("'..' segment") == true, "\(hostile): \(error?.description ?? "")")
        }
        // An empty segment is part of the key: the request stays in the bucket and finds no such object.
        let empty = await #expect(throws: WebImageError.self) { try await load("s3://\(moto.bucket)//webimage-secret/private.jpg") }
        #expect(empty?.code == .notFound, "\(empty?.description ?? "")")
        let name = S3Fixtures.unique("a//b") + ".jpg"
        try await S3Fixtures.put(moto, name, Data("double slash".utf8))
        #expect(try await load("s3://\(moto.bucket)/\(name)").data == Data("double slash".utf8))
    }

    @Test("a wrong secret is refused by the endpoint: forbidden, transient (never blocklisted), naming the S3 code, never the secret")
    func wrongSecret() async throws {
        let moto = try await MotoServer.shared()
        let key = S3Fixtures.unique("wrong-secret") + ".jpg"
        try await S3Fixtures.put(moto, key, try #require(try await S3Fixtures.photos().first))
        let url = URL(string: "s3://\(moto.bucket)/\(key)")!
        let wrong = "not-the-secret-\(UUID().uuidString)"
        let error = await #expect(throws: WebImageError.self) { try await self.loader(moto, secret: wrong).load(LoadRequest(url: url)) { _ in } }
        #expect(error?.code == .forbidden && error?.isTransient == true && error?.statusCode == 403)
        #expect(error?.message.contains("SignatureDoesNotMatch") == true && error?.message.contains(wrong) == false, "\(error?.message ?? "")")
        #expect(error?.message.contains(moto.full.secretAccessKey) == false)
        // Through the manager: the URL is not put on the blocklist, so fixing the key needs no wait.
        let manager = manager(try loader(moto, secret: wrong))
        for _ in 0..<2 {
            let again = await #expect(throws: WebImageError.self) { _ = try await manager.loadImage(with: url) }
            #expect(again?.code == .forbidden, "not blockedURL: \(again?.description ?? "")")
        }
        #expect(manager.blocklist.blockingError(for: url.absoluteString) == nil)
    }

    @Test("a read-only key loads; an unknown key ID and no credentials are forbidden before or at the endpoint")
    func keys() async throws {
        let moto = try await MotoServer.shared()
        let key = S3Fixtures.unique("read-only") + ".jpg"
        try await S3Fixtures.put(moto, key, Data("bytes".utf8), contentType: "application/octet-stream")
        let url = URL(string: "s3://\(moto.bucket)/\(key)")!
        #expect(try await loader(moto, key: moto.readOnly).load(LoadRequest(url: url)) { _ in }.data == Data("bytes".utf8))
        let unknown = await #expect(throws: WebImageError.self) {
            try await self.loader(moto, key: .init(accessKeyID: "AKIANOSUCHKEY0000000", secretAccessKey: "x")).load(LoadRequest(url: url)) { _ in }
        }
        #expect(unknown?.code == .forbidden && unknown?.message.contains("InvalidAccessKeyId") == true, "\(unknown?.message ?? "")")
        let none = try S3Loader(configuration: S3Configuration(endpoint: moto.endpoint))
        let missing = await #expect(throws: WebImageError.self) { try await none.load(LoadRequest(url: url)) { _ in } }
        #expect(missing?.code == .forbidden && missing?.message.contains("no S3 credentials") == true)
    }

    @Test("NoSuchKey is notFound; a bad s3:// URL is invalidURL and sends nothing")
    func missing() async throws {
        let moto = try await MotoServer.shared()
        let error = await #expect(throws: WebImageError.self) {
            try await self.loader(moto).load(LoadRequest(url: URL(string: "s3://\(moto.bucket)/\(S3Fixtures.unique("absent"))")!)) { _ in }
        }
        #expect(error?.code == .notFound && error?.isTransient == false && error?.message.contains("NoSuchKey") == true, "\(error?.message ?? "")")
        let bad = await #expect(throws: WebImageError.self) { try await self.loader(moto).load(LoadRequest(url: URL(string: "s3://\(moto.bucket)/")!)) { _ in } }
        #expect(bad?.code == .invalidURL)
    }

    @Test("revalidation: the ETag goes out as If-None-Match and S3 answers 304; a changed object answers 200 with its new bytes")
    func revalidation() async throws {
        let moto = try await MotoServer.shared()
        let key = S3Fixtures.unique("revalidate") + ".jpg"
        try await S3Fixtures.put(moto, key, Data("one".utf8))
        let url = URL(string: "s3://\(moto.bucket)/\(key)")!
        let loader = try loader(moto)
        let first = try await loader.load(LoadRequest(url: url)) { _ in }
        let etag = try #require(first.headers["etag"])
        let same = try await loader.load(LoadRequest(url: url, ifNoneMatch: etag)) { _ in }
        #expect(same.statusCode == 304 && same.data.isEmpty)
        try await S3Fixtures.put(moto, key, Data("two".utf8))
        let changed = try await loader.load(LoadRequest(url: url, ifNoneMatch: etag)) { _ in }
        #expect(changed.statusCode == 200 && changed.data == Data("two".utf8) && changed.headers["etag"] != etag)
    }

    @Test("the SSRF guard judges the endpoint: a loopback endpoint is refused, and loads once its range is exempted")
    func guardJudgesEndpoint() async throws {
        let moto = try await MotoServer.shared()
        let key = S3Fixtures.unique("guard")
        try await S3Fixtures.put(moto, key, Data("x".utf8))
        let url = URL(string: "s3://\(moto.bucket)/\(key)")!
        let guarded = CurlLoader(configuration: .init(blockPrivateAddresses: true))
        let error = await #expect(throws: WebImageError.self) { try await self.loader(moto, curl: guarded).load(LoadRequest(url: url)) { _ in } }
        #expect(error?.code == .forbidden && error?.message.contains("SSRF guard") == true, "\(error?.message ?? "")")
        var exempt = CurlLoader.Configuration(blockPrivateAddresses: true)
        exempt.exemptAddresses = [try #require(CurlLoader.AddressRange("127.0.0.0/8"))]
        #expect(try await loader(moto, curl: CurlLoader(configuration: exempt)).load(LoadRequest(url: url)) { _ in }.data == Data("x".utf8))
    }

    @Test("a service's allow-list is asked about the s3:// URL: a bucket not on it is refused before any request")
    func urlPolicy() async throws {
        let moto = try await MotoServer.shared()
        var request = LoadRequest(url: URL(string: "s3://other-bucket/k.jpg")!)
        request.urlPolicy = { $0.host == "other-bucket" ? "is not on the list" : nil }
        let error = await #expect(throws: WebImageError.self) { try await self.loader(moto).load(request) { _ in } }
        #expect(error?.code == .forbidden && error?.isTransient == false && error?.message.contains("is not on the list") == true)
    }
}

@Suite("S3Loader: endpoint faults")
struct S3FaultTests {
    func configuration(_ endpoint: URL) -> S3Configuration {
        S3Configuration(endpoint: endpoint, credentials: S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "secret"))
    }

    @Test("the endpoint down: a transient loadFailed, at once")
    func down() async throws {
        let port = try RedisServer.freePort()
        let loader = try S3Loader(configuration: configuration(URL(string: "http://127.0.0.1:\(port)")!))
        let error = await #expect(throws: WebImageError.self) { try await loader.load(LoadRequest(url: URL(string: "s3://photos/a.jpg")!)) { _ in } }
        #expect(error?.code == .loadFailed && error?.isTransient == true, "\(error?.description ?? "")")
    }

    @Test("the endpoint slow: the load's timeout ends it as timedOut")
    func slow() async throws {
        let server = try await TestHTTPServer.start()
        defer { Task { await server.shutdown() } }
        let loader = try S3Loader(configuration: configuration(server.url("/")))
        // Path-style: bucket "slow", key "5000" is the server's route that answers after 5 s.
        let error = await #expect(throws: WebImageError.self) {
            try await loader.load(LoadRequest(url: URL(string: "s3://slow/5000")!, timeout: .milliseconds(300))) { _ in }
        }
        #expect(error?.code == .timedOut && error?.isTransient == true)
    }

    @Test("503 SlowDown with Retry-After: a transient error carrying the pause, which opens the bucket's circuit without another request")
    func slowDown() async throws {
        let server = try await TestHTTPServer.start()
        defer { Task { await server.shutdown() } }
        let loader = try S3Loader(configuration: configuration(server.url("/")))
        // A pause of two minutes: far longer than any wait between the two loads below, however busy the machine.
        let error = await #expect(throws: WebImageError.self) { try await loader.load(LoadRequest(url: URL(string: "s3://s3-slowdown/120")!)) { _ in } }
        #expect(error?.statusCode == 503 && error?.isTransient == true && error?.retryAfter == .seconds(120) && error?.message.contains("SlowDown") == true)

        var configuration = ImageManager.Configuration()
        configuration.store = nil
        configuration.loaders.registerS3(loader)
        configuration.originBreaker = OriginCircuitBreaker(failureThreshold: 5, cooldown: .seconds(30))
        let manager = ImageManager(configuration: configuration)
        _ = await #expect(throws: WebImageError.self) { _ = try await manager.loadImage(with: URL(string: "s3://s3-slowdown/120")!) }
        let before = server.stats.withLock { $0.requests.count }
        let refused = await #expect(throws: WebImageError.self) { _ = try await manager.loadImage(with: URL(string: "s3://s3-slowdown/other")!) }
        // The pause the bucket asked for (not the breaker's 30 s cooldown: one failure of five would not open it).
        #expect(refused?.code == .originUnavailable && (refused?.retryAfter ?? .zero) > .seconds(60), "\(refused?.description ?? "")")
        #expect(server.stats.withLock { $0.requests.count } == before, "the open circuit sent nothing")
    }
}

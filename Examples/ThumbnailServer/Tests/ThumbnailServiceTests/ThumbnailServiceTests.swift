import Foundation
import ServiceLifecycle
import Testing
import ThumbnailService
import WebImageHTTP
import WebImage
import WebImageConfiguration
import WebImageVips

/// The service over real HTTP on loopback, fetching from a second real server.
@Suite("ThumbnailServer over HTTP", .serialized, .timeLimit(.minutes(2)))
struct ThumbnailServiceTests {
    /// Runs the upstream and the service, and hands `body` a client and the upstream.
    func withServers(_ overrides: [String: String] = [:],
                     _ body: @Sendable (Client, Upstream, _ upstreamPort: Int) async throws -> Void) async throws {
        try await withService(overrides) { client, upstream, upstreamPort, _ in try await body(client, upstream, upstreamPort) }
    }

    /// The same, with the service itself, for a test that waits on its manager.
    func withService(_ overrides: [String: String] = [:],
                     _ body: @Sendable (Client, Upstream, _ upstreamPort: Int, ThumbnailService) async throws -> Void) async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let upstream = try Upstream()
        try await withApplication({ upstream.application(onServerRunning: $0) }) { upstreamPort in
            let service = try await makeService(directory: directory, overrides: overrides)
            try await withApplication({ service.application(logger: quietLogger, onServerRunning: $0) }) { port in
                try await body(Client(port: port), upstream, upstreamPort, service)
            }
        }
    }

    @Test("sizes and formats: the box is fitted, the format is the one asked for")
    func sizesAndFormats() async throws {
        try await withServers { client, _, upstream in
            let photo = "http://127.0.0.1:\(upstream)/img/photo.jpg"
            let cases: [(String, String, PixelSize, ImageFormat)] = [
                (photo, "&w=256&h=256&format=webp", PixelSize(width: 256, height: 192), .webp),
                (photo, "&w=256&h=256&format=jpeg", PixelSize(width: 256, height: 192), .jpeg),
                (photo, "&w=300&format=webp", PixelSize(width: 300, height: 225), .webp),   // width only
                (photo, "&h=120&format=png", PixelSize(width: 160, height: 120), .png),
                ("http://127.0.0.1:\(upstream)/img/logo.png", "&w=100&h=100&format=png", PixelSize(100), .png),
            ]
            for (source, rest, size, format) in cases {
                let response = try await client.thumbnail(source, rest)
                #expect(response.statusCode == 200, "\(rest): \(String(decoding: response.data, as: UTF8.self))")
                #expect(response.contentType == format.mimeType, "\(rest)")
                #expect(ImageFormat.sniff(response.data) == format, "\(rest): the bytes are \(format)")
                let image = try decode(response.data)
                #expect(image.pixelSize == size, "\(rest): \(image.pixelSize)")
                #expect(response.headers["x-image-size"] == "\(size.width)x\(size.height)")
                #expect(response.headers["cache-control"] == "public, max-age=86400")
            }
            let logo = try decode(try await client.thumbnail("http://127.0.0.1:\(upstream)/img/logo.png", "&w=64&format=png").data)
            #expect(logo.hasAlpha, "alpha survives")
        }
    }

    @Test("the second request is served from the cache, with the same ETag, and If-None-Match gets 304")
    func caching() async throws {
        try await withService { client, upstream, port, service in
            let photo = "http://127.0.0.1:\(port)/img/photo.jpg"
            let first = try await client.thumbnail(photo, "&w=200&h=200")
            #expect(first.statusCode == 200 && first.headers["x-image-source"] == "network")
            #expect(first.headers["server-timing"]?.hasPrefix("network;dur=") == true)
            let second = try await client.thumbnail(photo, "&w=200&h=200")
            #expect(second.statusCode == 200 && second.headers["x-image-source"] == "memory")
            #expect(second.data == first.data && second.etag == first.etag && first.etag != nil)
            #expect(upstream.count("/img/photo.jpg") == 1, "one upstream request for both")
            // Another size of the same source: a new thumbnail, from the original on disk
            // once the first load's background write of it has landed (an event, not a delay).
            let originalKey = service.manager.cacheKey(for: URL(string: photo)!)
            var stored = false
            for _ in 0..<3000 where !stored {
                stored = try await service.manager.store?.entry(forKey: originalKey) != nil
                if !stored { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(stored, "the original reached the disk store")
            let other = try await client.thumbnail(photo, "&w=64&h=64")
            #expect(other.headers["x-image-source"] == "disk" && upstream.count("/img/photo.jpg") == 1)
            let revalidated = try await client.thumbnail(photo, "&w=200&h=200").etag
            let notModified = try await client.get(
                "/thumbnail?url=\(photo.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&w=200&h=200",
                headers: ["If-None-Match": try #require(revalidated)])
            #expect(notModified.statusCode == 304 && notModified.data.isEmpty)
        }
    }

    @Test("a restarted service serves stored thumbnails from disk: no origin request, no decode, same bytes and ETag")
    func diskAfterRestart() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let upstream = try Upstream()
        // A file store: LMDB forbids two open stores on one directory in a process,
        // and the first service may not be released yet when the second starts.
        let overrides = ["store.kind": "filesystem"]
        try await withApplication({ upstream.application(onServerRunning: $0) }) { upstreamPort in
            let photo = "http://127.0.0.1:\(upstreamPort)/img/photo.jpg"
            let first = try await makeService(directory: directory, overrides: overrides)
            let made = try await withApplication({ first.application(logger: quietLogger, onServerRunning: $0) }) { port in
                try await Client(port: port).thumbnail(photo, "&w=120&h=120&format=jpeg")
            }
            #expect(made.headers["x-image-source"] == "network")
            let second = try await makeService(directory: directory, overrides: overrides)
            let served = try await withApplication({ second.application(logger: quietLogger, onServerRunning: $0) }) { port in
                try await Client(port: port).thumbnail(photo, "&w=120&h=120&format=jpeg")
            }
            #expect(served.headers["x-image-source"] == "disk" && served.statusCode == 200)
            #expect(served.data == made.data && served.etag == made.etag)
            #expect(upstream.count("/img/photo.jpg") == 1, "the origin was asked once")
            // The size header comes from a decoded image; a disk hit serves stored bytes undecoded.
            #expect(made.headers["x-image-size"] == "120x90" && served.headers["x-image-size"] == nil,
                    "a disk hit serves the stored bytes without decoding them")
        }
    }

    @Test("a graceful shutdown drains: the request in flight is answered, its cache write lands, then the manager shuts down clean")
    func drain() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let upstream = try Upstream()
        try await withApplication({ upstream.application(onServerRunning: $0) }) { upstreamPort in
            let service = try await makeService(directory: directory, overrides: ["store.kind": "filesystem", "loader.timeout": "120s"])
            let (ports, portContinuation) = AsyncStream<Int>.makeStream()
            let group = ServiceGroup(configuration: .init(services: [service.application(logger: quietLogger) { portContinuation.yield($0) }],
                                                          logger: quietLogger))
            let running = Task { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let photo = "http://127.0.0.1:\(upstreamPort)/img/gated.jpg"
            let request = Task { try await Client(port: port).thumbnail(photo, "&w=100&h=100&format=jpeg") }
            try await waitFor { upstream.count("/img/gated.jpg") == 1 }   // event: the origin has the request
            #expect(upstream.count("/img/gated.jpg") == 1)
            await group.triggerGracefulShutdown()
            upstream.openGate()
            let response = try await request.value
            #expect(response.statusCode == 200 && response.headers["x-image-source"] == "network", "the request in flight was answered")
            try await running.value
            #expect(await service.manager.shutdown(gracePeriod: .seconds(120)), "every cache write finished")
            var context = ImageContext()
            context.thumbnailPixelSize = PixelSize(100)
            context.encodeFormat = .jpeg
            let key = service.manager.resultKey(for: URL(string: photo)!, context: context)
            #expect(try await service.manager.store?.data(forKey: key) == response.data, "the thumbnail is on disk for the next start")
        }
    }

    @Test("bad input gets the status that says what was wrong, and a JSON error")
    func errors() async throws {
        // slow.jpg answers after 6 s: a 2 s timeout fails it, however busy the machine,
        // and leaves the other cases (small local answers) time to spare.
        try await withServers(["loader.timeout": "2s"]) { client, upstream, port in
            let base = "http://127.0.0.1:\(port)"
            let cases: [(path: String?, source: String?, rest: String, status: Int, code: String)] = [
                ("/thumbnail?w=10", nil, "", 400, "invalidArgument"),                          // no url
                (nil, "ftp://127.0.0.1/x.jpg", "&w=10", 400, "invalidURL"),
                (nil, "not a url", "&w=10", 400, "invalidURL"),
                (nil, "\(base)/img/photo.jpg", "", 400, "invalidArgument"),                     // no size
                (nil, "\(base)/img/photo.jpg", "&w=0", 400, "invalidArgument"),
                (nil, "\(base)/img/photo.jpg", "&w=99999", 400, "invalidArgument"),
                (nil, "\(base)/img/photo.jpg", "&w=abc", 400, "invalidArgument"),
                (nil, "\(base)/img/photo.jpg", "&w=10&format=bmp", 400, "invalidArgument"),
                (nil, "http://example.com/photo.jpg", "&w=10", 403, "forbidden"),              // not on the allow-list
                (nil, "http://127.0.0.2:\(port)/img/photo.jpg", "&w=10", 403, "forbidden"),    // allowed host, private address
                (nil, "\(base)/img/missing.jpg", "&w=10", 404, "notFound"),
                (nil, "\(base)/img/huge.jpg", "&w=10", 413, "tooLarge"),
                (nil, "\(base)/img/text", "&w=10", 415, "unsupportedFormat"),
                (nil, "\(base)/img/broken.jpg", "&w=10", 415, "decodeFailed"),
                (nil, "http://127.0.0.1:1/img/photo.jpg", "&w=10", 502, "loadFailed"),         // upstream down
                (nil, "\(base)/img/error.jpg", "&w=10", 502, "badStatus"),
                (nil, "\(base)/img/slow.jpg", "&w=10", 504, "timedOut"),
            ]
            for item in cases {
                let response = if let path = item.path { try await client.get(path) } else { try await client.thumbnail(item.source!, item.rest) }
                let body = try JSONSerialization.jsonObject(with: response.data) as? [String: String]
                #expect(response.statusCode == item.status, "\(item.source ?? item.path ?? "")\(item.rest): \(body ?? [:])")
                #expect(body?["error"] == item.code, "\(item.source ?? item.path ?? "")\(item.rest): \(body ?? [:])")
                #expect(body?["message"]?.isEmpty == false && response.headers["cache-control"] == "no-store")
                #expect(response.headers["retry-after"] == nil, "only an open circuit knows when to come back")
            }
            #expect(upstream.count("/img/photo.jpg") == 0, "refused requests never reached the upstream")
            // A permanent failure is blocked for a while; asking again keeps its status.
            let again = try await client.thumbnail("\(base)/img/missing.jpg", "&w=10")
            #expect(again.statusCode == 404 && upstream.count("/img/missing.jpg") == 1)
            // error.jpg (502) and slow.jpg (timeout) failed transiently, in a row since
            // the broken image answered; three more make five: the origin's circuit
            // opens and its next request is answered 503 without reaching it.
            for _ in 0..<3 { #expect(try await client.thumbnail("\(base)/img/error.jpg", "&w=10").statusCode == 502) }
            let unavailable = try await client.thumbnail("\(base)/img/photo.jpg", "&w=10")
            let body = try JSONSerialization.jsonObject(with: unavailable.data) as? [String: String]
            #expect(unavailable.statusCode == 503 && body?["error"] == "originUnavailable", "\(body ?? [:])")
            let retryAfter = Int(unavailable.headers["retry-after"] ?? "")
            #expect(retryAfter.map { (1...30).contains($0) } == true, "Retry-After: the cooldown left of 30 s: \(String(describing: retryAfter))")
            #expect(upstream.count("/img/photo.jpg") == 0 && upstream.count("/img/error.jpg") == 4)
        }
    }

    @Test("thumbnail.maxInFlight: past it a request is shed with 503 and Retry-After before any work; slots come back")
    func shedding() async throws {
        // Every URL here is of one origin, which may hold half the places by default
        // (thumbnail.maxInFlightPerOrigin): this test is about the ceiling, so it may hold both.
        try await withServers(["thumbnail.maxInFlight": "2", "thumbnail.maxInFlightPerOrigin": "2"]) { client, upstream, port in
            let gated = (1...2).map { index in
                Task { try await client.thumbnail("http://127.0.0.1:\(port)/img/gated.jpg?\(index)", "&w=40&format=jpeg") }
            }
            try await waitFor { upstream.count("/img/gated.jpg") == 2 }   // event: both hold their slots at the origin
            #expect(upstream.count("/img/gated.jpg") == 2)
            let shed = try await client.thumbnail("http://127.0.0.1:\(port)/img/photo.jpg", "&w=40&format=jpeg")
            let body = try JSONSerialization.jsonObject(with: shed.data) as? [String: String]
            #expect(shed.statusCode == 503 && body?["error"] == "overloaded" && shed.headers["retry-after"] == "1", "\(shed.statusCode) \(body ?? [:])")
            #expect(try await client.get("/placeholder?url=x").statusCode == 503, "placeholders share the limit")
            #expect(upstream.count("/img/photo.jpg") == 0, "a shed request did no work")
            #expect(try await client.get("/health").statusCode == 200, "other routes are not limited")
            upstream.openGate()
            for task in gated { #expect(try await task.value.statusCode == 200) }
            let after = try await client.thumbnail("http://127.0.0.1:\(port)/img/photo.jpg", "&w=40&format=jpeg")
            #expect(after.statusCode == 200, "the slots came back")
            let metrics = String(decoding: try await client.get("/metrics").data, as: UTF8.self)
            #expect(metrics.contains("thumbnail_shed_total") && metrics.contains("thumbnail_in_flight"))
        }
    }

    @Test("an empty allow-list refuses everything; * allows any host the guard lets through")
    func allowList() async throws {
        try await withServers(["thumbnail.allowedHosts": ""]) { client, _, port in
            let response = try await client.thumbnail("http://127.0.0.1:\(port)/img/photo.jpg", "&w=10")
            #expect(response.statusCode == 403)
        }
        try await withServers(["thumbnail.allowedHosts": "*"]) { client, _, port in
            let allowed = try await client.thumbnail("http://127.0.0.1:\(port)/img/photo.jpg", "&w=10")
            #expect(allowed.statusCode == 200)
            let metadata = try await client.thumbnail("http://169.254.169.254/latest/meta-data", "&w=10")
            #expect(metadata.statusCode == 403, "the guard still refuses")
        }
    }

    @Test("the allow-list holds at every redirect hop: an allowed origin cannot send the service to a host that is not allowed")
    func redirectOffTheList() async throws {
        try await withServers { client, upstream, port in
            let response = try await client.thumbnail("http://127.0.0.1:\(port)/img/elsewhere.jpg", "&w=40&format=jpeg")
            #expect(response.statusCode == 403, "\(response.statusCode) \(String(decoding: response.data, as: UTF8.self))")
            #expect(upstream.count("/img/photo.jpg") == 0, "the refused hop was never requested")
        }
    }

    @Test("specs are bounded by the service: every size by thumbnail.maxDimension, the steps by thumbnail.maxSteps")
    func boundedSpecs() async throws {
        try await withServers(["thumbnail.maxSteps": "3"]) { client, upstream, port in
            let source = "http://127.0.0.1:\(port)/img/photo.jpg"
            for spec in ["pad:8192x8192", "pad:2049x10", "crop:0,0,4000,10", "round:3000", "resize:100x100;rotate:10;flip:h;blur:1"] {
                let response = try await client.thumbnail(source, "&w=40&format=jpeg&t=" + (spec.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? spec))
                #expect(response.statusCode == 400, "\(spec): \(response.statusCode)")
            }
            #expect(upstream.count("/img/photo.jpg") == 0, "refused before any work")
            let fine = try await client.thumbnail(source, "&w=40&format=jpeg&t=pad:2048x100")
            #expect(fine.statusCode == 200)
        }
    }

    @Test("thumbnail.signingKey: only URLs signed with it are answered; the gallery signs its own")
    func signedURLs() async throws {
        let key = "0123456789abcdef-test-key"
        let signer = try #require(URLSigner(key: key))
        // The signature openssl gives for the same key and text (an independent HMAC-SHA256):
        // printf %s "$TEXT" | openssl dgst -sha256 -hmac "$KEY" -binary | basenc --base64url | tr -d =
        #expect(signer.signature(of: "/thumbnail?url=https%3A%2F%2Fimg.example.com%2Fa.jpg&w=256&h=256") == "e8a1kAbVFmwW9Std_WWozUrCqct3idP693nm879NI70")
        #expect(URLSigner(key: "too short") == nil)

        try await withServers(["thumbnail.signingKey": key]) { client, _, port in
            let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
            let source = "http://127.0.0.1:\(port)/img/photo.jpg".addingPercentEncoding(withAllowedCharacters: unreserved)!
            let path = "/thumbnail?url=\(source)&w=64&h=64"
            let signed = try await client.get(signer.sign(path))
            #expect(signed.statusCode == 200 && signed.contentType?.hasPrefix("image/") == true)

            let unsigned = try await client.get(path)
            #expect(unsigned.statusCode == 403 && String(decoding: unsigned.data, as: UTF8.self).contains("signed URLs only"))
            let tampered = try await client.get(signer.sign(path).replacingOccurrences(of: "w=64", with: "w=2000"))
            #expect(tampered.statusCode == 403, "a signature covers every parameter")
            let twice = try await client.get(signer.sign(path) + "&s=" + signer.signature(of: path))
            #expect(twice.statusCode == 403, "exactly one s")
            let wrongKey = try await client.get(URLSigner(key: "another key of enough length")!.sign(path))
            #expect(wrongKey.statusCode == 403)

            let placeholderPath = "/placeholder?url=\(source)"
            #expect(try await client.get(placeholderPath).statusCode == 403)
            #expect(try await client.get(signer.sign(placeholderPath)).statusCode == 200)

            // The gallery page links signed thumbnails, and they load.
            let page = String(decoding: try await client.get("/").data, as: UTF8.self)
            let src = try #require(page.components(separatedBy: "src=\"").dropFirst().first?.components(separatedBy: "\"").first)
            #expect(src.contains("&amp;s=") || src.contains("&s="), "\(src)")
            #expect(try await client.get(src.replacingOccurrences(of: "&amp;", with: "&")).statusCode == 200)
        }
    }

    @Test("/metrics shows the pipeline's and the server's metrics; /health answers")
    func metrics() async throws {
        try await withServers { client, _, port in
            _ = try await client.thumbnail("http://127.0.0.1:\(port)/img/photo.jpg", "&w=32")
            _ = try await client.thumbnail("http://127.0.0.1:\(port)/img/photo.jpg", "&w=32")
            let page = try await client.get("/metrics")
            let text = String(decoding: page.data, as: UTF8.self)
            #expect(page.statusCode == 200 && page.contentType?.hasPrefix("text/plain") == true)
            for name in ["thumbnail_responses_total{source=\"network\"}", "thumbnail_responses_total{source=\"memory\"}",
                         "webimage_cache_misses_total", "webimage_loaded_bytes_total", "webimage_decode_duration_seconds_bucket", "hb_requests"] {
                #expect(text.contains(name), "\(name) in /metrics")
            }
            let health = try await client.get("/health")
            let noSample = try await client.get("/samples/nothing.jpg")
            #expect(health.statusCode == 200 && noSample.statusCode == 404)
        }
    }
    @Test("format=auto (the default) answers from Accept with Vary: Accept: AVIF for current browsers, WebP, else JPEG, PNG for alpha")
    func negotiation() async throws {
        try await withServers { client, _, upstream in
            let photo = "http://127.0.0.1:\(upstream)/img/photo.jpg", logo = "http://127.0.0.1:\(upstream)/img/logo.png"
            let chrome = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
            let oldSafari = "image/png,image/svg+xml,image/*;q=0.8,video/*;q=0.8,*/*;q=0.5"
            let cases: [(String, String?, ImageFormat)] = [
                (photo, chrome, .avif), (photo, "image/webp,*/*", .webp), (photo, oldSafari, .jpeg), (photo, nil, .jpeg),
                (logo, oldSafari, .png), (logo, chrome, .avif), (photo, "image/avif;q=0,image/webp", .webp),
            ]
            for (source, accept, format) in cases {
                let response = try await client.get("/thumbnail?url=\(source.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&w=120",
                                                     headers: accept.map { ["Accept": $0] } ?? ["Accept": "*/*"])
                #expect(response.statusCode == 200, "\(accept ?? "none"): \(String(decoding: response.data, as: UTF8.self))")
                #expect(ImageFormat.sniff(response.data) == format && response.contentType == format.mimeType, "\(source.suffix(8)) \(accept ?? "none")")
                #expect(response.headers["vary"] == "Accept")
                if source == logo { #expect(try decode(response.data).hasAlpha, "alpha kept in \(format)") }
            }
            let named = try await client.thumbnail(photo, "&w=120&format=jpeg")
            #expect(named.headers["vary"] == nil, "a named format does not vary")
        }
    }

    @Test("crop, dpr and t: smart-cropped fills, density multipliers, transformers and watermarks by name only")
    func operations() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let marks = directory.appendingPathComponent("marks")
        try FileManager.default.createDirectory(at: marks, withIntermediateDirectories: true)
        let mark = PixelBuffer(size: PixelSize(16), channels: 4, bytes: Array(repeating: [255, 0, 0, 255] as [UInt8], count: 256).flatMap { $0 })
        try VipsImageCoder().encode(Image(pixelSize: mark.size, hasAlpha: true, storage: mark), as: .png, options: EncodeOptions()).write(to: marks.appendingPathComponent("logo.png"))
        try await withServers(["thumbnail.watermarks": marks.path]) { client, _, upstream in
            let photo = "http://127.0.0.1:\(upstream)/img/photo.jpg"
            let cases: [(String, PixelSize)] = [
                ("&w=100&h=100&crop=attention&format=png", PixelSize(100)),
                ("&w=100&h=50&crop=centre&format=png", PixelSize(width: 100, height: 50)),
                ("&w=100&h=100&crop=fp:0.1:0.5&format=png", PixelSize(100)),
                ("&w=100&dpr=2&format=png", PixelSize(width: 200, height: 150)),
                ("&w=100&format=png&t=pad:120x120:000000", PixelSize(120)),
                ("&w=100&format=png&dpr=1.5&t=pad:120x120", PixelSize(180)),
                ("&w=100&format=png&t=sharpen;grey", PixelSize(width: 100, height: 75)),
            ]
            for (rest, size) in cases {
                let response = try await client.thumbnail(photo, rest)
                #expect(response.statusCode == 200, "\(rest): \(String(decoding: response.data, as: UTF8.self))")
                #expect(try decode(response.data).pixelSize == size, "\(rest)")
            }
            let marked = try decode(try await client.thumbnail(photo, "&w=100&format=png&t=watermark:logo:nw:1:0").data)
            let pixels = try #require(marked.storage(as: VipsStorage.self)).pixels(frameHeight: marked.pixelSize.height)
            #expect(Array(pixels.bytes[0..<3]) == [255, 0, 0], "the watermark sits in the top-left corner")
            for bad in ["&w=100&t=watermark:other", "&w=100&t=watermark:..%2F..%2Fetc%2Fpasswd", "&w=100&t=pad:10x10:zzz", "&w=100&t=resize:99999x5",
                        "&w=100&crop=attention", "&w=100&h=100&crop=faces", "&w=100&h=100&crop=fp:2:0", "&w=100&h=100&crop=fp:0.5", "&w=100&dpr=9", "&w=2000&dpr=2", "&w=100&format=bmp"] {
                let response = try await client.thumbnail(photo, bad)
                #expect(response.statusCode == 400, "\(bad): \(response.statusCode)")
                #expect(String(decoding: response.data, as: UTF8.self).contains("invalidArgument"), "\(bad)")
            }
        }
    }

    @Test("/placeholder answers a BlurHash and a ThumbHash; bad URLs and hosts get their statuses")
    func placeholder() async throws {
        try await withServers { client, _, upstream in
            let photo = "http://127.0.0.1:\(upstream)/img/photo.jpg"
            let response = try await client.get("/placeholder?url=\(photo.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")
            #expect(response.statusCode == 200 && response.contentType == "application/json")
            let json = try #require(try JSONSerialization.jsonObject(with: response.data) as? [String: String])
            let blurHash = try #require(json["blurHash"]), thumbHash = try #require(json["thumbHash"].flatMap { Data(base64Encoded: $0) })
            #expect(blurHash.count == 28)
            #expect(abs(try ThumbHash.approximateAspectRatio([UInt8](thumbHash)) - 4.0 / 3) < 0.3)
            let photoImage = try decode(try await client.thumbnail(photo, "&w=64&format=png").data)
            let pixels = try #require(photoImage.storage(as: VipsStorage.self)).pixels(frameHeight: photoImage.pixelSize.height)
            // BlurHash's first term is the mean in linear light, back in sRGB.
            func linear(_ v: UInt8) -> Double { let x = Double(v) / 255; return x <= 0.04045 ? x / 12.92 : pow((x + 0.055) / 1.055, 2.4) }
            func srgb(_ v: Double) -> Int { Int((v <= 0.0031308 ? v * 12.92 : 1.055 * pow(v, 1 / 2.4) - 0.055) * 255 + 0.5) }
            let count = Double(pixels.bytes.count / pixels.channels)
            let mean = (0..<3).map { c in srgb(stride(from: c, to: pixels.bytes.count, by: pixels.channels).reduce(0.0) { $0 + linear(pixels.bytes[$1]) } / count) }
            let average = try BlurHash.averageColor(blurHash)
            #expect(zip([average.red, average.green, average.blue].map(Int.init), mean).allSatisfy { abs($0 - $1) < 12 }, "\(average) vs \(mean)")
            #expect(try await client.get("/placeholder").statusCode == 400)
            #expect(try await client.get("/placeholder?url=http%3A%2F%2Fevil.test%2Fa.jpg").statusCode == 403)
            #expect(try await client.get("/placeholder?url=\("http://127.0.0.1:\(upstream)/img/text".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)").statusCode >= 400)
        }
    }
}

@Suite("Parsing the service's input")
struct ParsingTests {
    @Test("allow-list patterns")
    func allowList() throws {
        let list = try #require(HostAllowList(["images.example.com", "cdn.example.org:8443", "*.photos.test", "[::1]:9000"]))
        let allowed = ["https://images.example.com/a.jpg", "http://images.example.com:81/a", "https://cdn.example.org:8443/x",
                       "http://a.photos.test/x", "http://a.b.photos.test/x", "http://[::1]:9000/x", "http://IMAGES.example.com/a"]
        let refused = ["https://cdn.example.org/x", "http://photos.test/x", "http://evilphotos.test/x", "http://example.com/",
                       "http://[::1]:9001/x", "http://images.example.com.evil.test/"]
        for url in allowed { #expect(list.allows(URL(string: url)!), "\(url)") }
        for url in refused { #expect(!list.allows(URL(string: url)!), "\(url)") }
        #expect(HostAllowList(["*"])!.allows(URL(string: "http://anything.test/")!))
        #expect(!HostAllowList([])!.allows(URL(string: "http://anything.test/")!))
        for bad in ["", "a.com:0", "a.com:70000", "*.", "a*.com", "http://a.com", "[::1", "a.com:x"] {
            #expect(HostAllowList([bad]) == nil, "'\(bad)' is refused")
        }
    }

    @Test("settings: bad values name their key")
    func settings() async throws {
        for (key, value) in [("thumbnail.allowedHosts", "a.com:99999"), ("thumbnail.maxDimension", "0"), ("thumbnail.defaultFormat", "bmp"), ("thumbnail.watermarks", "/nonexistent/dir"),
                             ("thumbnail.cacheMaxAge", "forever"), ("gallery.sources", "ftp://x/y"), ("http.port", "70000"),
                             ("thumbnail.signingKey", "short"), ("thumbnail.maxInFlight", "0"), ("thumbnail.maxInFlight", "many")] {
            let config = try await ThumbnailSettings.reader(file: nil, environment: [:], flags: [key: value])
            let error = #expect(throws: WebImageError.self) { try ThumbnailSettings(config: config) }
            #expect(error?.code == .invalidArgument && error?.message.contains(key) == true, "\(key): \(String(describing: error))")
        }
        let config = try await ThumbnailSettings.reader(file: nil, environment: ["WEBIMAGE_THUMBNAIL_ALLOWED_HOSTS": "a.test,b.test"])
        let settings = try ThumbnailSettings(config: config)
        #expect(settings.allowedHosts.patterns == ["a.test", "b.test"] && settings.defaultFormat == nil, "auto by default")
        #expect(settings.maxInFlight == 256)
        #expect(try ConfigValues(config).bool("loader.blockPrivateAddresses") == true, "the service turns the SSRF guard on")

        // Watermarks are decoded at start: a file that is no image stops the
        // service there, naming it, instead of failing every request that uses it.
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let marks = directory.appendingPathComponent("marks")
        try FileManager.default.createDirectory(at: marks, withIntermediateDirectories: true)
        try Data("not a png".utf8).write(to: marks.appendingPathComponent("broken.png"))
        let broken = await #expect(throws: WebImageError.self) { try await makeService(directory: directory, overrides: ["thumbnail.watermarks": marks.path]) }
        #expect(broken?.code == .invalidArgument && broken?.message.contains("thumbnail.watermarks") == true
                && broken?.message.contains("broken.png") == true, "\(String(describing: broken))")
    }
}

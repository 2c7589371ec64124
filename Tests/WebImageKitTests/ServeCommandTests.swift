import Foundation
import Synchronization
import Testing
import WebImage
import WebImageCurl
import WebImageSamples
import WebImageTestSupport

@Suite("webimage serve", .serialized, .timeLimit(.minutes(5)))
struct ServeCommandTests {
    /// An origin on loopback serving the sample photo-1.jpg at /img/photo-1.jpg.
    static func photoOrigin(_ tool: Tool) async throws -> TestHTTPServer {
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await onThread { try SampleImages.write(to: samples) }
        let photo = try Data(contentsOf: samples.appendingPathComponent("photo-1.jpg"))
        let origin = try await TestHTTPServer.start()
        origin.serve("/img/photo-1.jpg", photo, contentType: "image/jpeg")
        return origin
    }

    @Test("a process on loopback: it starts, serves /health, a negotiated thumbnail by preset, /info of a rotated photo, /metrics, and exits 0 on SIGTERM")
    func serves() async throws {
        let tool = Tool()
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await onThread { try SampleImages.write(to: samples) }
        for name in ["photo-1.jpg", "oriented-6.jpg"] {
            origin.serve("/img/\(name)", try Data(contentsOf: samples.appendingPathComponent(name)), contentType: "image/jpeg")
        }
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0",
                                      "--set", "thumbnail.allowedHosts=127.0.0.1:\(origin.port)",
                                      "--set", "loader.blockPrivateAddresses=false",
                                      "--set", "thumbnail.presets.small=w=48&h=48"])
        defer { running.signal(SIGKILL) }
        // The port it bound, from its first line (bounded by the suite's time limit).
        let server = try await running.listeningAddress()
        let loader = CurlLoader()
        func get(_ path: String, accept: String? = nil) async throws -> LoadResponse {
            var request = LoadRequest(url: URL(string: server + path)!)
            if let accept { request.headers["Accept"] = accept }
            return try await loader.load(request) { _ in }
        }
        let encoded = { (name: String) in origin.url("/img/\(name)").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }

        #expect(String(decoding: try await get("/health").data, as: UTF8.self) == "ok\n")
        // Started without libvips: the formats format=auto may answer are found by
        // the first request that negotiates (below), so that a JPEG-only service
        // never loads libvips' modules (about 20 MiB).
        let startMaps = try #require(FileHandle(forReadingAtPath: "/proc/\(running.pid)/maps"))
        let startText = String(decoding: try startMaps.readToEnd() ?? Data(), as: UTF8.self)
        try startMaps.close()
        #expect(startText.contains("/webimage") && !startText.contains("/vips-modules-"), "libvips started with the service")
        let port = try #require(URL(string: server)?.port)
        let thumbnail = try await get("/thumbnail?url=\(encoded("photo-1.jpg"))&preset=small", accept: "image/webp,*/*")
        #expect(thumbnail.statusCode == 200 && ImageFormat.sniff(thumbnail.data) == .webp)
        #expect(thumbnail.headers["vary"] == "Accept" && thumbnail.etag?.hasPrefix("\"") == true)
        // Again: a memory hit, answered on the event loop (MemoryHitFastPath) with the same bytes and headers.
        let again = try await get("/thumbnail?url=\(encoded("photo-1.jpg"))&preset=small", accept: "image/webp,*/*")
        #expect(again.headers["x-image-source"] == "memory" && again.data == thumbnail.data && again.etag == thumbnail.etag)
        #expect(again.headers["server"] == "swift-web-image" && again.headers["date"] != nil && again.headers["vary"] == "Accept")
        let info = try JSONSerialization.jsonObject(with: try await get("/info?url=\(encoded("oriented-6.jpg"))").data) as? [String: Any]
        #expect(info?["orientation"] as? Int == 6)
        #expect((info?["pixelWidth"] as? Int ?? 0) > (info?["pixelHeight"] as? Int ?? 0), "upright: the sample is landscape, stored rotated")
        #expect(info?["storedPixelWidth"] as? Int == info?["pixelHeight"] as? Int && info?["storedPixelHeight"] as? Int == info?["pixelWidth"] as? Int,
                "the stored size beside it")
        let plainInfo = try JSONSerialization.jsonObject(with: try await get("/info?url=\(encoded("photo-1.jpg"))").data) as? [String: Any]
        #expect(plainInfo?["pixelWidth"] != nil && plainInfo?["storedPixelWidth"] == nil, "no stored size where it is the same")
        let metrics = String(decoding: try await get("/metrics").data, as: UTF8.self)
        #expect(metrics.contains("thumbnail_responses_total{source=\"network\"} 1"), "\(metrics.prefix(2000))")
        #expect(metrics.contains("thumbnail_responses_total{source=\"memory\"} 1"), "\(metrics.prefix(2000))")
        // Hummingbird's request metrics, by RequestMetricsMiddleware: per route, method and status.
        let lines = metrics.split(separator: "\n")
        func line(_ prefix: String, _ parts: [String]) -> Bool { lines.contains { $0.hasPrefix(prefix) && parts.allSatisfy($0.contains) } }
        let thumbnailRoute = ["http_route=\"/thumbnail\"", "http_request_method=\"GET\"", "http_response_status_code=\"200\""]
        #expect(line("hb_requests{", thumbnailRoute) && line("http_server_request_duration_count{", thumbnailRoute), "\(metrics.prefix(3000))")
        // Both thumbnails, the router's and the event loop's, under the one route.
        #expect(lines.contains { $0.hasPrefix("hb_requests{") && thumbnailRoute.allSatisfy($0.contains) && $0.hasSuffix(" 2") }, "\(metrics.prefix(3000))")
        #expect(line("http_server_active_requests{", ["http_request_method=\"GET\""]), "\(metrics.prefix(3000))")
        // The gauges: what the process and the service hold now.
        func value(_ name: String) -> Double? {
            metrics.split(separator: "\n").first(where: { $0.hasPrefix(name + " ") }).flatMap { Double($0.split(separator: " ")[1]) }
        }
        let rss = try #require(value("process_resident_memory_bytes"), "\(metrics)")
        #expect(rss > 1_000_000 && rss < 4e9, "\(rss)")
        #expect((value("webimage_process_anonymous_memory_bytes") ?? 0) > 0 && (value("webimage_process_anonymous_memory_bytes") ?? .infinity) < rss)
        #expect(metrics.contains("# TYPE process_cpu_seconds_total counter") && (value("process_cpu_seconds_total") ?? 0) > 0)
        #expect((value("process_open_fds") ?? 0) > 3 && value("process_start_time_seconds") ?? 0 > 1.7e9)
        #expect((value("webimage_memory_tier_bytes") ?? 0) > 0 && value("webimage_memory_tier_entries") ?? 0 >= 1,
                "the thumbnail is in memory")
        #expect((value("webimage_store_bytes") ?? 0) > 0 && value("webimage_store_entries") ?? 0 >= 1, "the store's size, sampled")
        // A plugin's own figures: the kept scaled decodes of turbojpeg.reuse (on in serve).
        let kept = try #require(value("webimage_turbojpeg_reuse_entries"), "\(metrics.prefix(3000))")
        #expect(kept <= 1 && (value("webimage_turbojpeg_reuse_bytes") ?? -1) >= kept, "one JPEG thumbnail: at most its one decode kept (10 s)")
        #expect(metrics.contains("# TYPE webimage_turbojpeg_reuse_hits_total counter"), "\(metrics.prefix(3000))")
        #expect(value("webimage_originals_bytes") == 0 && value("webimage_decoded_pixels_in_flight") == 0 && value("webimage_work_in_flight") == 0,
                "nothing in flight once the answers are in")
        // The executable's allocator: jemalloc, with the background thread that
        // returns freed pages while the service is idle.
        let mapsFile = try #require(FileHandle(forReadingAtPath: "/proc/\(running.pid)/maps"))
        let maps = String(decoding: try mapsFile.readToEnd() ?? Data(), as: UTF8.self)
        try mapsFile.close()
        #expect(maps.contains("libjemalloc"), "jemalloc is mapped")
        let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(running.pid)/task").compactMap {
            try? String(contentsOfFile: "/proc/\(running.pid)/task/\($0)/comm", encoding: .utf8)
        }
        #expect(threads.contains { $0.hasPrefix("jemalloc_bg_thd") }, "threads: \(Set(threads))")
        let limit = try #require(value("webimage_originals_limit_bytes"))
        #expect(Int(limit) == 512 << 20, "\(limit)")
        // (After the metrics above: rendering them samples the store's size.)
        // HEAD, as a load balancer's check may send it: the GET's status and headers, no body.
        for target in ["/health", "/metrics"] {
            let head = try await RawHTTP.send(port: port, method: "HEAD", target: target)
            #expect(head.status == 200 && head.body.isEmpty && head.headers["content-type"]?.hasPrefix("text/plain") == true, "HEAD \(target): \(head)")
            // The length a GET gets (the metrics' text changes between the two, a little).
            let length = try await RawHTTP.send(port: port, target: target).body.count
            let said = Int(head.headers["content-length"] ?? "") ?? -1
            #expect(target == "/health" ? said == length : abs(said - length) < length / 4, "HEAD \(target): Content-Length \(said), GET \(length) bytes")
            let post = try await RawHTTP.send(port: port, method: "POST", target: target)
            #expect(post.status == 405 && post.headers["allow"] == "GET, HEAD", "POST \(target): \(post.status)")
        }
        // A fresh thumbnail's Last-Modified is never later than the response's Date
        // (Hummingbird's Date lags by up to a second; each size is made now, the
        // requests spread over more than a second to meet the lag at any phase).
        var lastModified: [Int: String] = [:]
        for width in 40..<48 {
            try await Task.sleep(for: .milliseconds(150))
            let fresh = try await RawHTTP.send(port: port, target: "/thumbnail?url=\(encoded("photo-1.jpg"))&w=\(width)")
            let modified = try #require(fresh.headers["last-modified"].flatMap(HTTPDate.parse), "\(fresh.headers)")
            let date = try #require(fresh.headers["date"].flatMap(HTTPDate.parse), "\(fresh.headers)")
            #expect(fresh.status == 200 && modified <= date, "w=\(width): Last-Modified \(modified) after Date \(date)")
            lastModified[width] = fresh.headers["last-modified"]
        }
        // Asked again over a second later (from memory now): the same Last-Modified,
        // so If-Modified-Since with the first answer's value is 304.
        try await Task.sleep(for: .milliseconds(1100))
        for width in 40..<48 {
            let again = try await RawHTTP.send(port: port, target: "/thumbnail?url=\(encoded("photo-1.jpg"))&w=\(width)",
                                               headers: ["If-Modified-Since": lastModified[width] ?? ""])
            #expect(again.status == 304, "w=\(width): \(again.status), Last-Modified \(again.headers["last-modified"] ?? "-") against \(lastModified[width] ?? "-")")
        }

        running.signal(SIGTERM)
        let result = try await running.wait()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("stopped"))
        #expect(result.stderr.contains("allocator=jemalloc") && result.stderr.contains("MALLOC_CONF=background_thread:true"), "\(result.stderr.prefix(2000))")
    }

    @Test("serve runs on jemalloc unless WEBIMAGE_ALLOCATOR=system or --set allocator=system; the batch commands never do")
    func allocator() async throws {
        let tool = Tool()
        for (environment, extra) in [(["WEBIMAGE_ALLOCATOR": "system"], [String]()), ([:], ["--set", "allocator=system"])] {
            let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0"] + extra, environment: environment)
            defer { running.signal(SIGKILL) }
            _ = try await running.listeningAddress()
            let maps = try #require(FileHandle(forReadingAtPath: "/proc/\(running.pid)/maps"))
            let text = String(decoding: try maps.readToEnd() ?? Data(), as: UTF8.self)
            try maps.close()
            #expect(!text.contains("libjemalloc"), "\(environment) \(extra)")
            running.signal(SIGTERM)
            let result = try await running.wait()
            #expect(result.status == 0 && result.stderr.contains("allocator=system malloc") && result.stderr.contains("why=allocator=system"),
                    "\(result.stderr.prefix(1500))")
        }
        // operations.md's command for an app that embeds the endpoint, its variables
        // read from the page and run on a server process (this tool's serve, which
        // then sees jemalloc already loaded): jemalloc with its background thread.
        let page = try String(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let start = try #require(page.range(of: "```sh\n   LD_PRELOAD="))
        let block = try #require(page[start.upperBound...].range(of: "```").map { page[page.index(start.lowerBound, offsetBy: 6)..<$0.lowerBound] })
        var documented: [String: String] = [:]
        for word in block.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\\" }) where word.contains("=") {
            let parts = word.split(separator: "=", maxSplits: 1)
            documented[String(parts[0])] = String(parts[1])
        }
        #expect(documented.keys.sorted() == ["LD_PRELOAD", "MALLOC_CONF"], "\(documented)")
        #expect(FileManager.default.fileExists(atPath: documented["LD_PRELOAD"] ?? ""), "the documented library exists")
        let preloaded = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0"], environment: documented)
        defer { preloaded.signal(SIGKILL) }
        _ = try await preloaded.listeningAddress()
        let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(preloaded.pid)/task").compactMap {
            try? String(contentsOfFile: "/proc/\(preloaded.pid)/task/\($0)/comm", encoding: .utf8)
        }
        #expect(threads.contains { $0.hasPrefix("jemalloc_bg_thd") }, "threads: \(Set(threads))")
        preloaded.signal(SIGTERM)
        let preloadedResult = try await preloaded.wait()
        #expect(preloadedResult.status == 0 && preloadedResult.stderr.contains("allocator=jemalloc")
                && preloadedResult.stderr.contains("MALLOC_CONF=\(documented["MALLOC_CONF"] ?? "-")"), "\(preloadedResult.stderr.prefix(1500))")

        // A value that is neither is a configuration error, as any other key's.
        for (environment, extra) in [(["WEBIMAGE_ALLOCATOR": "SYSTEM"], [String]()), ([:], ["--set", "allocator=foo"])] {
            let refused = try await tool.run(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0"] + extra, environment: environment)
            #expect(refused.status == 2 && refused.stderr.contains("allocator") && refused.stderr.contains("jemalloc or system"), "\(refused.stderr)")
        }
        // A batch keeps glibc's malloc: jemalloc's structures would cost it peak RSS.
        let samples = tool.home.appendingPathComponent("samples")
        let made = try await tool.run(["samples", samples.path])
        #expect(made.status == 0)
        let running = try tool.start(["info", "--json", samples.appendingPathComponent("photo-1.jpg").path])
        let pid = running.pid
        let maps = FileHandle(forReadingAtPath: "/proc/\(pid)/maps")
        let text = String(decoding: (try? maps?.readToEnd()) ?? Data(), as: UTF8.self)
        try? maps?.close()
        #expect(!text.contains("libjemalloc"))
        #expect(try await running.wait().status == 0)
    }

    @Test("with serve's defaults, two origins that accept and never answer (four downloads each, their per-origin limit) leave download slots for a third origin's thumbnail")
    func silentOriginsLeaveSlots() async throws {
        let tool = Tool()
        let silent = [try await TestHTTPServer.start(), try await TestHTTPServer.start()]
        let healthy = try await Self.photoOrigin(tool)
        defer { Task { for origin in silent + [healthy] { origin.openGate(); await origin.shutdown() } } }
        let hosts = (silent + [healthy]).map { "127.0.0.1:\($0.port)" }.joined(separator: ",")
        // No timeout or deadline rescues a queued download here: it waits for a slot or the test's bound.
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0", "--set", "loader.timeout=600s", "--set", "thumbnail.deadline=600s",
                                      "--set", "thumbnail.allowedHosts=\(hosts)", "--set", "loader.blockPrivateAddresses=false"])
        defer { running.signal(SIGKILL) }
        let port = try #require(URL(string: try await running.listeningAddress())?.port)
        func target(_ url: URL, _ width: Int) -> String {
            "/thumbnail?url=" + url.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&w=\(width)"
        }
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for (index, origin) in silent.enumerated() {
            for n in 0..<6 {
                held.append(try await RawHTTP.open(port: port, sending: "GET \(target(origin.url("/gate/\(index)-\(n).jpg"), 64)) HTTP/1.1\r\nHost: a\r\n\r\n"))
            }
        }
        for origin in silent {
            #expect(await eventually { origin.arrivalCount == 4 }, "four downloads of each silent origin, the rest queued behind them")
        }
        let connection = try await RawHTTP.open(port: port, sending: "GET \(target(healthy.url("/img/photo-1.jpg"), 64)) HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        defer { close(connection) }
        let answer = await RawHTTP.readUntilClosed(connection).map { String(decoding: $0, as: UTF8.self) } ?? "no answer: every download slot held"
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
    }

    @Test("a client that pipelines on after a refused request gets the large, slow answer before it whole and the refusal, then a normal close, never a reset")
    func refusalWithoutReset() async throws {
        let tool = Tool()
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await onThread { try SampleImages.write(to: samples) }
        let photo = try Data(contentsOf: samples.appendingPathComponent("photo-2.jpg"))
        for index in 0..<3 { origin.serve("/slow/\(index).jpg", photo, contentType: "image/jpeg", delay: 500) }
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0", "--set", "http.idleTimeout=0",
                                      "--set", "thumbnail.allowedHosts=127.0.0.1:\(origin.port)", "--set", "loader.blockPrivateAddresses=false"])
        defer { running.signal(SIGKILL) }
        let port = try #require(URL(string: try await running.listeningAddress())?.port)
        for index in 0..<3 {
            // A PNG of a few hundred KB, more than the sockets' buffers hold, answered
            // after the origin's delay; then a request with no Host; then more requests
            // while the answer is on its way. A close with those unread was a reset that
            // cut the answer short.
            let target = "/thumbnail?url=" + origin.url("/slow/\(index).jpg").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                + "&w=\(901 + index)&format=png"  // not a DCT scale of the 1200 px photo: a resampled, noisy PNG
            let connection = try await RawHTTP.open(port: port, sending: "GET \(target) HTTP/1.1\r\nHost: a\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
            defer { close(connection) }
            try? await RawHTTP.send(connection, String(repeating: "GET /health HTTP/1.1\r\nHost: a\r\n\r\n", count: 200))
            let received = try #require(await RawHTTP.readUntilClosed(connection), "a reset, or still open")
            let end = try #require(received.firstRange(of: Data("\r\n\r\n".utf8)))
            let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
            let length = try #require(head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) })
            #expect(head.hasPrefix("HTTP/1.1 200") && length > 200_000, "\(length): \(head)")
            let rest = received[end.upperBound...]
            #expect(rest.count > length && ImageFormat.sniff(Data(rest.prefix(length))) == .png)
            #expect(String(decoding: rest.dropFirst(length), as: UTF8.self).hasPrefix("HTTP/1.1 400 Bad Request"))
        }
        running.signal(SIGTERM)
        #expect(try await running.wait().status == 0)
    }

    @Test("http.idleTimeout does not close a client that reads its pipelined answers slowly, even while its buffer stays full for longer than the limit")
    func slowReaderKept() async throws {
        let tool = Tool()
        let origin = try await Self.photoOrigin(tool)
        defer { Task { await origin.shutdown() } }
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0", "--set", "http.idleTimeout=1s",
                                      "--set", "thumbnail.allowedHosts=127.0.0.1:\(origin.port)", "--set", "loader.blockPrivateAddresses=false"])
        defer { running.signal(SIGKILL) }
        let port = try #require(URL(string: try await running.listeningAddress())?.port)
        let url = origin.url("/img/photo-1.jpg").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let target = "/thumbnail?url=\(url)&w=1000&format=png"
        let first = try await RawHTTP.send(port: port, target: target)
        #expect(first.status == 200 && first.body.count > 30_000, "\(first.status) \(first.body.count)")
        // A hundred answers, read through a 4 KB window with a pause after each read:
        // NIO's buffer stays over its high-water mark, and then holds the last answers,
        // for longer than the 1 s limit. The client was closed part way then.
        let answers = try await RawHTTP.pipelinedReadSlowly(port: port, targets: Array(repeating: target, count: 100),
                                                            chunk: 65_536, pause: .milliseconds(10))
        #expect(answers.count == 100)
        for answer in answers { #expect(answer.status == 200 && answer.body == first.body) }
        running.signal(SIGTERM)
        #expect(try await running.wait().status == 0)
    }

    @Test("SIGTERM with requests in flight: ImageManagerService and the HTTP server in one ServiceGroup; every request is answered, exit 0, and their thumbnails are on disk after a restart")
    func sigtermInFlight() async throws {
        let tool = Tool()
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await onThread { try SampleImages.write(to: samples) }
        let photo = try Data(contentsOf: samples.appendingPathComponent("photo-1.jpg"))
        // Slow enough that SIGTERM lands while all of them are in flight.
        for index in 0..<4 { origin.serve("/slow/\(index).jpg", photo, contentType: "image/jpeg", delay: 1500) }
        let arguments = ["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0",
                         "--set", "thumbnail.allowedHosts=127.0.0.1:\(origin.port)", "--set", "loader.blockPrivateAddresses=false"]
        let running = try tool.start(arguments)
        defer { running.signal(SIGKILL) }
        let server = try await running.listeningAddress()
        let paths = (0..<4).map { index in
            "/thumbnail?url=" + origin.url("/slow/\(index).jpg").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&w=40&format=png"
        }
        let answers = paths.map { path in
            let url = URL(string: server + path)!
            return Task { try await CurlLoader().load(LoadRequest(url: url)) { _ in } }
        }
        // Every request has reached the origin: all four are in flight in the service.
        #expect(await eventually { (0..<4).allSatisfy { origin.requestCount(path: "/slow/\($0).jpg") > 0 } })
        running.signal(SIGTERM)
        for answer in answers {
            let response = try await answer.value
            #expect(response.statusCode == 200 && ImageFormat.sniff(response.data) == .png)
        }
        let result = try await running.wait()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stderr.contains("finished unexpectedly") && !result.stderr.contains("Fatal error"), "\(result.stderr)")
        // Restarted on the same cache: each thumbnail is a disk hit, and the origin is not asked again.
        let again = try tool.start(arguments)
        defer { again.signal(SIGKILL) }
        let second = try await again.listeningAddress()
        for index in 0..<4 {
            let response = try await CurlLoader().load(LoadRequest(url: URL(string: second + paths[index])!)) { _ in }
            #expect(response.statusCode == 200 && response.headers["x-image-source"] == "disk", "\(index): \(response.headers)")
            #expect(origin.requestCount(path: "/slow/\(index).jpg") == 1)
        }
        again.signal(SIGTERM)
        #expect(try await again.wait().status == 0)
    }

    @Test("the fallback image with serve's defaults (SSRF guard on, file loads refused), as serving.md shows: read at start-up and answered for a failing origin; missing, not an image, a directory: exit 2 naming the key")
    func fallbackImage() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await onThread { try SampleImages.write(to: samples) }
        let fallback = samples.appendingPathComponent("logo.png").path
        // An allowed host that does not resolve: the origin fails, as a dead one would.
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0",
                                      "--set", "thumbnail.allowedHosts=images.invalid", "--set", "thumbnail.fallbackImage=\(fallback)"])
        defer { running.signal(SIGKILL) }
        let server = try await running.listeningAddress()
        let port = try #require(Int(server.split(separator: ":").last ?? ""))
        let response = try await RawHTTP.send(port: port, target: "/thumbnail?url=https%3A%2F%2Fimages.invalid%2Fa.jpg&w=50&format=png")
        #expect(response.headers["x-image-fallback"] == "1" && ImageFormat.sniff(response.body) == .png, "\(response.status) \(response.headers)")
        #expect(response.status >= 500, "the failure's status: \(response.status)")
        running.signal(SIGTERM)
        let result = try await running.wait()
        #expect(result.status == 0 && !result.stderr.contains("refused in this configuration"), "\(result.stderr)")

        let junk = tool.home.appendingPathComponent("junk.png")
        try Data((0..<4096).map { _ in UInt8.random(in: 0...255) }).write(to: junk)
        let truncated = tool.home.appendingPathComponent("truncated.png")
        try Data(try Data(contentsOf: URL(fileURLWithPath: fallback)).prefix(40)).write(to: truncated)
        // Its header reads, its pixels do not: cut inside the image data.
        let cut = tool.home.appendingPathComponent("cut.png")
        let logo = try Data(contentsOf: URL(fileURLWithPath: fallback))
        try Data(logo.prefix(logo.count * 2 / 3)).write(to: cut)
        for (path, words) in [("/srv/missing.png", "No such file"), (junk.path, "not an image"), (samples.path, "a directory"),
                              (truncated.path, "does not decode"), (cut.path, "does not decode")] {
            let refused = try await tool.run(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0",
                                              "--set", "thumbnail.allowedHosts=images.invalid", "--set", "thumbnail.fallbackImage=\(path)"])
            #expect(refused.status == 2 && refused.stderr.contains("thumbnail.fallbackImage") && refused.stderr.contains(words),
                    "\(path): \(refused.status) \(refused.stderr)")
        }
    }

    @Test("over HTTP: any other method on the endpoint's paths, /health and /metrics is 405 with Allow, one HTTP does not define is 501, a path no route has 404 (all JSON), OPTIONS * 200; a query that tries to forge a log line, or to hide in NUL and ESC, yields one escaped record")
    func methodsAndLogs() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0", "--set", "thumbnail.allowedHosts=images.invalid"])
        defer { running.signal(SIGKILL) }
        let port = try #require(Int(try await running.listeningAddress().split(separator: ":").last ?? ""))
        for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
            for path in ["/thumbnail?url=x", "/info?url=x", "/placeholder?url=x"] {
                let response = try await RawHTTP.send(port: port, method: method, target: path)
                #expect(response.status == 405 && response.headers["allow"] == "GET, HEAD", "\(method) \(path): \(response.status) \(response.headers)")
            }
        }
        // A method HTTP does not define: 501, on any path, saying which. (One NIO's
        // parser does not know at all, BREW, is a request that is not HTTP/1.1: 400.)
        #expect(try await RawHTTP.send(port: port, method: "BREW", target: "/health").status == 400)
        for method in ["PROPFIND", "QUERY", "PURGE"] {
            for path in ["/thumbnail?url=x", "/health", "/nowhere"] {
                let response = try await RawHTTP.send(port: port, method: method, target: path)
                #expect(response.status == 501 && String(decoding: response.body, as: UTF8.self).contains("the method \(method) is not"),
                        "\(method) \(path): \(response.status)")
            }
        }
        // /health and /metrics: other methods 405 with Allow, in the same JSON as the endpoint's.
        for path in ["/health", "/metrics"] {
            let response = try await RawHTTP.send(port: port, method: "POST", target: path)
            #expect(response.status == 405 && response.headers["allow"] == "GET, HEAD" && response.headers["content-type"] == "application/json"
                    && String(decoding: response.body, as: UTF8.self).contains("only GET and HEAD"), "\(path): \(response)")
        }
        // A path no route has: 404 with the JSON error (HEAD: its length, no body); OPTIONS * is a question about the server.
        let missing = try await RawHTTP.send(port: port, target: "/nowhere/at/all?x=1")
        #expect(missing.status == 404 && missing.headers["content-type"] == "application/json"
                && String(decoding: missing.body, as: UTF8.self).contains("no such path"), "\(missing)")
        let missingHead = try await RawHTTP.send(port: port, method: "HEAD", target: "/nowhere")
        #expect(missingHead.status == 404 && missingHead.body.isEmpty && missingHead.headers["content-length"] == String(missing.body.count),
                "\(missingHead)")
        // The endpoint at the root only; empty segments are no segments (serving.md says so).
        for (path, status) in [("/x/thumbnail?url=x", 404), ("/x/info?url=x", 404), ("//info?url=x", 400), ("/info/?url=x", 400)] {
            let response = try await RawHTTP.send(port: port, target: path)
            #expect(response.status == status, "\(path): \(response.status)")
        }
        let options = try await RawHTTP.send(port: port, method: "OPTIONS", target: "*")
        #expect(options.status == 200 && options.headers["allow"] == "GET, HEAD" && options.body.isEmpty, "\(options)")
        let forged = "/thumbnail?url=https%3A%2F%2Fimages.invalid%2Fa.jpg&w=100%0A2026-01-01T00:00:00%20FORGED%20admin%20logged%20in%00%1B%5B2J"
        let response = try await RawHTTP.send(port: port, target: forged)
        #expect(response.status == 400)
        running.signal(SIGTERM)
        let result = try await running.wait()
        #expect(result.status == 0)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.filter { $0.contains("FORGED") }.count == 1, "one record holds the forged text: \(result.stderr)")
        #expect(!lines.contains { $0.hasPrefix("2026-01-01") }, "no line starts where the forger wanted: \(result.stderr)")
        #expect(!result.stderr.unicodeScalars.contains { $0.value == 0 || $0.value == 0x1B }, "NUL and ESC are escaped")
        #expect(result.stderr.contains("\\u000A") || result.stderr.contains("\\u000a"), "\(result.stderr)")
    }

    @Test("eight heavy requests at once: over thumbnail.maxCost each is 413 before any download; under it they take turns in the work budget while /health answers, and the service's peak RSS stays under 512 MiB")
    func heavyWork() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await onThread { try SampleImages.write(to: samples) }
        origin.serve("/img/photo.jpg", try Data(contentsOf: samples.appendingPathComponent("photo-3.jpg")), contentType: "image/jpeg")
        // Eight heavy renders taking turns take about 30 s beside two busy processes: a
        // deadline far past that, so that what is checked is the turns, not the machine's speed.
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0", "--set", "thumbnail.deadline=600s",
                                      "--set", "thumbnail.allowedHosts=127.0.0.1:\(origin.port)", "--set", "loader.blockPrivateAddresses=false"])
        defer { running.signal(SIGKILL) }
        let port = try #require(Int(try await running.listeningAddress().split(separator: ":").last ?? ""))
        let source = origin.url("/img/photo.jpg").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        func steps(_ step: String) -> String { Array(repeating: step, count: 8).joined(separator: ";") }
        let heavy = (0..<8).map { "/thumbnail?url=\(source)&w=\(2040 + $0)&t=\(steps("blur:100"))" }
        let refused = try await withThrowingTaskGroup(of: Int.self) { group in
            for target in heavy { group.addTask { try await RawHTTP.send(port: port, target: target).status } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(refused == Array(repeating: 413, count: 8), "\(refused)")
        #expect(origin.requestCount(path: "/img/photo.jpg") == 0, "refused before any download")
        // 82 megapixel passes each: allowed, and more than the budget holds at once.
        let finished = Finished()
        let targets = (0..<8).map { "/thumbnail?url=\(source)&w=\(500 + $0)&h=500&t=\(steps("blur:40"))&format=png" }
        let work = targets.map { target in
            Task {
                defer { finished.count.add(1, ordering: .relaxed) }
                return try await RawHTTP.send(port: port, target: target).status
            }
        }
        var healthChecks = 0
        while finished.count.load(ordering: .relaxed) < work.count {
            let health = try await RawHTTP.send(port: port, target: "/health")
            #expect(health.status == 200)
            healthChecks += 1
        }
        for task in work { #expect(try await task.value == 200) }
        #expect(healthChecks >= 1)
        let status = try String(contentsOfFile: "/proc/\(running.pid)/status", encoding: .utf8)
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? .max
        #expect(peak < 512 * 1024, "peak RSS \(peak / 1024) MiB")
        running.signal(SIGTERM)
        #expect(try await running.wait().status == 0)
    }

    @Test("a client that goes away cancels its request: its place under thumbnail.maxInFlight is free at once, not at the deadline")
    func disconnectCancels() async throws {
        let tool = Tool()
        let origin = try await Self.photoOrigin(tool)
        defer { Task { await origin.shutdown() } }
        let photo = try Data(contentsOf: tool.home.appendingPathComponent("samples/photo-1.jpg"))
        origin.serve("/img/slow.jpg", photo, contentType: "image/jpeg", delay: 600_000)
        // One place, and a deadline far past this test's bound: before, the place stayed taken until it.
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0",
                                      "--set", "thumbnail.maxInFlight=1", "--set", "thumbnail.deadline=300s", "--set", "loader.timeout=300s",
                                      "--set", "thumbnail.allowedHosts=127.0.0.1:\(origin.port)", "--set", "loader.blockPrivateAddresses=false"])
        defer { running.signal(SIGKILL) }
        let port = try #require(URL(string: try await running.listeningAddress())?.port)
        @Sendable func target(_ path: String) -> String {
            "/thumbnail?url=" + origin.url(path).absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&w=64"
        }
        let slow = try await RawHTTP.open(port: port, sending: "GET \(target("/img/slow.jpg")) HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(await eventually { origin.requestCount(path: "/img/slow.jpg") == 1 }, "the slow request reached the origin")
        #expect(try await RawHTTP.send(port: port, target: target("/img/photo-1.jpg")).status == 503, "its place is taken")
        close(slow)
        // The place comes back when the server sees the close, long before the deadline.
        let freed = await eventually(timeout: .seconds(120)) {
            (try? await RawHTTP.send(port: port, target: target("/img/photo-1.jpg")).status) == 200
        }
        #expect(freed, "the place stayed taken")
        running.signal(SIGTERM)
        #expect(try await running.wait().status == 0)
    }

    @Test("SIGTERM ends the process a second past the grace period even while a client holds pipelined answers it never reads")
    func exitsPastUnreadAnswers() async throws {
        let tool = Tool()
        let origin = try await Self.photoOrigin(tool)
        defer { Task { await origin.shutdown() } }
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0",
                                      "--set", "thumbnail.allowedHosts=127.0.0.1:\(origin.port)",
                                      "--set", "loader.blockPrivateAddresses=false", "--set", "thumbnail.shutdownGrace=1s"])
        defer { running.signal(SIGKILL) }
        let port = try #require(URL(string: try await running.listeningAddress())?.port)
        // A PNG of the whole photo: forty of them are far more than the sockets' buffers hold.
        let url = origin.url("/img/photo-1.jpg").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let target = "/thumbnail?url=\(url)&w=2000&h=2000&format=png"
        let first = try await RawHTTP.send(port: port, target: target)
        #expect(first.status == 200 && first.body.count > 100_000, "\(first.status) \(first.body.count)")
        let fd = try await RawHTTP.pipelinedWithoutReading(port: port, targets: Array(repeating: target, count: 40))
        defer { close(fd) }
        // Time for the server to read the requests and fill the socket with answers
        // (a connection with no request read yet is closed at once on SIGTERM).
        try await Task.sleep(for: .seconds(1))
        running.signal(SIGTERM)
        // Before QuiesceDeadlineHandler the process waited for this client for as long as it held the connection.
        let result = try await running.wait()
        #expect(result.status == 0, "\(result.stderr.suffix(1500))")
    }

    @Test("http.maxConnectionsPerClient: one address's connection past the limit is closed unanswered and counted, while other addresses are served; a closed one frees its place")
    func perClientLimit() async throws {
        let tool = Tool()
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0",
                                      "--set", "http.maxConnectionsPerClient=2", "--set", "http.idleTimeout=0"])
        defer { running.signal(SIGKILL) }
        let port = try #require(URL(string: try await running.listeningAddress())?.port)
        let held = [try await RawHTTP.open(port: port, from: "127.0.0.2"), try await RawHTTP.open(port: port, from: "127.0.0.2")]
        defer { held.forEach { close($0) } }
        // The third from that address: closed by the server at once, nothing written. (It sends
        // nothing: a request the server never read would turn the close into a reset.)
        let third = try await RawHTTP.open(port: port, from: "127.0.0.2")
        defer { close(third) }
        #expect(await RawHTTP.readUntilClosed(third) == Data(), "closed unanswered")
        // Other addresses are served meanwhile, and the two held connections still are.
        #expect(try await RawHTTP.send(port: port, target: "/health").status == 200)
        let other = try await RawHTTP.open(port: port, sending: "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", from: "127.0.0.3")
        defer { close(other) }
        #expect(String(decoding: await RawHTTP.readUntilClosed(other) ?? Data(), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        try await RawHTTP.send(held[0], "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        #expect(String(decoding: await RawHTTP.readUntilClosed(held[0]) ?? Data(), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        // That answer closed held[0]: its place is free once the server has seen the close.
        var answered = false
        for _ in 0..<50 where !answered {
            let again = try await RawHTTP.open(port: port, sending: "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", from: "127.0.0.2")
            answered = String(decoding: await RawHTTP.readUntilClosed(again) ?? Data(), as: UTF8.self).hasPrefix("HTTP/1.1 200")
            close(again)
            if !answered { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(answered, "a place freed by a close is taken again")
        let metrics = try await RawHTTP.send(port: port, target: "/metrics")
        let refused = String(decoding: metrics.body, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("http_connections_refused_total{reason=\"per_client\"}") }
        #expect(refused.flatMap { $0.split(separator: " ").last.flatMap { Int($0) } }.map { $0 >= 1 } == true, "\(String(describing: refused))")
    }

    @Test("http.idleTimeout closes a connection that sends half a head or nothing; a request with no Host is 400 in its turn; CONNECT, a bad Transfer-Encoding and a broken chunk get one answer and a close; HTTP/1.0 closes after its answer; a first request in HTTP/0.9 is 505 and PRI outside the preface 400, a refused first HEAD without a body; http.maxConnections holds the next client until one closes")
    func connectionBounds() async throws {
        let tool = Tool()
        let timed = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0", "--set", "http.idleTimeout=1s"])
        defer { timed.signal(SIGKILL) }
        let port = try #require(URL(string: try await timed.listeningAddress())?.port)
        // A slow-header client: part of a head, then nothing.
        let slow = try await RawHTTP.open(port: port, sending: "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        defer { close(slow) }
        let silent = try await RawHTTP.open(port: port)
        defer { close(silent) }
        #expect(await RawHTTP.readUntilClosed(slow) == Data(), "closed by the server, with nothing written")
        #expect(await RawHTTP.readUntilClosed(silent) == Data(), "closed by the server, with nothing written")
        #expect(try await RawHTTP.send(port: port, target: "/health").status == 200, "the server goes on")
        // An HTTP/1.1 request with no Host, pipelined behind a sound one: that one's answer, a 400 saying why, the close.
        let hostless = try await RawHTTP.open(port: port, sending: "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        defer { close(hostless) }
        let refused = await RawHTTP.readUntilClosed(hostless).map { String(decoding: $0, as: UTF8.self) } ?? "still open"
        #expect(refused.hasPrefix("HTTP/1.1 200") && refused.contains("HTTP/1.1 400 Bad Request") && refused.hasSuffix("which HTTP/1.1 requires\"}"),
                "\(refused)")
        // Another HTTP version, and HTTP/2's connection preface: 505 saying so, and the close.
        for (request, says) in [("GET /health HTTP/2.0\r\nHost: a\r\n\r\n", "HTTP version"), ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/2")] {
            let connection = try await RawHTTP.open(port: port, sending: request)
            defer { close(connection) }
            let answer = await RawHTTP.readUntilClosed(connection).map { String(decoding: $0, as: UTF8.self) } ?? "still open or reset"
            #expect(answer.hasPrefix("HTTP/1.1 505 HTTP Version Not Supported") && answer.contains(says) && answer.contains("HTTP/1.1 and 1.0 only"), "\(answer)")
        }
        // More header fields than the decoder reads, though short: 400 naming that bound too.
        let many = try await RawHTTP.send(port: port, target: "/health", headers: Dictionary(uniqueKeysWithValues: (0..<1001).map { ("X-\($0)", "1") }))
        #expect(many.status == 400 && String(decoding: many.body, as: UTF8.self).contains("1000 fields"), "\(many.status) \(String(decoding: many.body, as: UTF8.self))")

        let capped = try tool.start(["serve", "--cache-dir", tool.cache.path + "-capped", "--set", "http.port=0",
                                     "--set", "http.maxConnections=1", "--set", "http.idleTimeout=0"])
        defer { capped.signal(SIGKILL) }
        let cappedPort = try #require(URL(string: try await capped.listeningAddress())?.port)
        // HTTP/1.0 without keep-alive: the answer, then the server closes (no idle timeout on this one).
        // The client keeps its end open: the server's close is a full one, so the slot is free all the same.
        let old = try await RawHTTP.open(port: cappedPort, sending: "GET /health HTTP/1.0\r\n\r\n")
        defer { close(old) }
        let oldAnswer = await RawHTTP.readUntilClosed(old).map { String(decoding: $0, as: UTF8.self) }
        #expect(oldAnswer?.hasPrefix("HTTP/1.1 200") == true && oldAnswer?.hasSuffix("ok\n") == true, "\(oldAnswer ?? "still open")")
        let health = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        // A first request the decoder would wait on (this server has no idle timeout):
        // HTTP/0.9, which has no version and no fields, and PRI outside HTTP/2's
        // preface. A HEAD the decoder cannot read is refused without a body.
        for (request, status, says) in [("GET /health\r\n", "505", "HTTP version"), ("\r\nGET /health\n", "505", "HTTP version"),
                                        ("PRI /x HTTP/1.0\r\n\r\n", "400", "invalid HTTP method"),
                                        ("PRI * HTTP/1.1\r\nHost: a\r\n\r\n", "400", "invalid HTTP method"),
                                        ("GET /health HTTP/1.1\nHost: a\n\n", "400", "end in CR LF")] {
            let connection = try await RawHTTP.open(port: cappedPort, sending: request)
            defer { close(connection) }
            let answer = await RawHTTP.readUntilClosed(connection).map { String(decoding: $0, as: UTF8.self) } ?? "still open"
            #expect(answer.hasPrefix("HTTP/1.1 \(status)") && answer.contains(says), "\(request.debugDescription): \(answer.debugDescription)")
        }
        for method in ["HEAD", "GET"] {
            let connection = try await RawHTTP.open(port: cappedPort, sending: "\(method) /health HTTP/1.1\r\nHost: a\r\nBad Field\r\n\r\n")
            defer { close(connection) }
            let answer = await RawHTTP.readUntilClosed(connection).map { String(decoding: $0, as: UTF8.self) } ?? "still open"
            #expect(answer.hasPrefix("HTTP/1.1 400") && answer.contains("Content-Length: "), "\(answer.debugDescription)")
            #expect(answer.hasSuffix("\r\n\r\n") == (method == "HEAD"), "a body after GET only: \(answer.debugDescription)")
        }
        // One answer each, then the close (this server has no idle timeout: a connection
        // left open would hold the test): CONNECT, a Transfer-Encoding the length cannot
        // be known from, and a body whose chunk is broken after its head was answered.
        for (request, status, says) in [("CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n" + health, "405", "Allow: GET, HEAD"),
                                        ("GET /health HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n" + health, "400", "chunked"),
                                        ("POST /health HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + health, "405", "Allow: GET, HEAD")] {
            let connection = try await RawHTTP.open(port: cappedPort, sending: request)
            defer { close(connection) }
            let answer = await RawHTTP.readUntilClosed(connection).map { String(decoding: $0, as: UTF8.self) } ?? "still open"
            #expect(answer.hasPrefix("HTTP/1.1 \(status)") && answer.contains(says), "\(answer.debugDescription)")
            #expect(answer.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer: \(answer)")
        }
        // A client that goes on sending after a refusal, before it reads: every answer
        // written before the refusal and the refusal itself arrive whole, then the
        // close, a normal one. (The server reads and drops what comes after: a close
        // with the client's bytes unread is a reset, which throws away answers still
        // on their way, as a stranger saw a 360 KB answer cut. These answers are too
        // small to be on their way still; this checks that the staged close keeps them.)
        let metrics = "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"
        let eager = try await RawHTTP.open(port: cappedPort, sending: metrics + metrics + "GET /health HTTP/1.1\r\n\r\n")
        defer { close(eager) }
        try await Task.sleep(for: .milliseconds(300))
        try? await RawHTTP.send(eager, String(repeating: health, count: 100))
        try await Task.sleep(for: .milliseconds(300))
        let eagerAnswers = await RawHTTP.readUntilClosed(eager).map { String(decoding: $0, as: UTF8.self) }
        #expect(eagerAnswers?.components(separatedBy: "HTTP/1.1 200 OK").count == 3, "\(eagerAnswers?.prefix(300) ?? "reset or still open")")
        #expect(eagerAnswers?.contains("HTTP/1.1 400 Bad Request") == true && eagerAnswers?.hasSuffix("which HTTP/1.1 requires\"}") == true)
        // Connection: Upgrade leaves NIO's decoder reading nothing more: the answer says close, and the connection closes.
        let upgrade = try await RawHTTP.open(port: cappedPort, sending: "GET /health HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n" + health)
        defer { close(upgrade) }
        let upgraded = await RawHTTP.readUntilClosed(upgrade).map { String(decoding: $0, as: UTF8.self) } ?? "still open"
        #expect(upgraded.hasPrefix("HTTP/1.1 200") && upgraded.lowercased().contains("connection: close") && upgraded.components(separatedBy: "HTTP/1.1 ").count == 2,
                "\(upgraded.debugDescription)")
        let first = try await RawHTTP.open(port: cappedPort, sending: health)
        let answered = await RawHTTP.readAvailable(first, within: .seconds(60))
        #expect(String(decoding: answered, as: UTF8.self).hasPrefix("HTTP/1.1 200"), "the first connection is answered and kept open")
        let second = try await RawHTTP.open(port: cappedPort, sending: health)
        defer { close(second) }
        #expect(await RawHTTP.readAvailable(second, within: .seconds(1)).isEmpty, "not accepted while the first is open")
        close(first)
        let later = await RawHTTP.readAvailable(second, within: .seconds(60))
        #expect(String(decoding: later, as: UTF8.self).hasPrefix("HTTP/1.1 200"), "accepted and answered once the first closed")
    }

    @Test("bad configuration stops start-up with exit status 2 and the key's name")
    func badConfiguration() async throws {
        let tool = Tool()
        for (setting, word) in [("thumbnail.onlyPresets=true", "thumbnail.onlyPresets"), ("thumbnail.presets.x=w=0", "thumbnail.presets.x"),
                                ("thumbnail.maxDimenson=10", "thumbnail.maxDimension"), ("thumbnail.maxDimension=70000", "1 to 65535"),
                                ("http.memoryHitsOnEventLoop=maybe", "http.memoryHitsOnEventLoop"), ("http.port=70000", "http.port"),
                                ("http.maxConnections=-1", "http.maxConnections"), ("http.maxConnectionsPerClient=-1", "http.maxConnectionsPerClient"),
                                ("http.idleTimeout=soon", "http.idleTimeout"),
                                ("http.idleTimeout=500ms", "at least 1s"), ("thumbnail.maxInFlightPerOrigin=0", "thumbnail.maxInFlightPerOrigin"),
                                ("thumbnail.maxInFlightPerOrigin=half", "thumbnail.maxInFlightPerOrigin"),
                                // The value as it was written, not as parsed ('0.0 seconds').
                                ("thumbnail.deadline=0", "thumbnail.deadline: '0' is not a duration longer than zero")] {
            let result = try await tool.run(["serve", "--cache-dir", tool.cache.path, "--set", setting])
            #expect(result.status == 2, "\(setting): \(result.stderr)")
            #expect(result.stderr.contains(word), "\(setting): \(result.stderr)")
        }
        // A port another server holds: exit 2 naming the keys and the reason, and no
        // warning about work cut short (nothing ran).
        let first = try tool.start(["serve", "--cache-dir", tool.cache.path + "-first", "--set", "http.port=0"])
        defer { first.signal(SIGKILL) }
        let port = try await first.listeningAddress().split(separator: ":").last.map(String.init) ?? ""
        let taken = try await tool.run(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=\(port)"])
        #expect(taken.status == 2, "\(taken.stderr)")
        #expect(taken.stderr.contains("http.host, http.port") && taken.stderr.contains("could not listen on 127.0.0.1:\(port)")
                && taken.stderr.contains("Address already in use"), "\(taken.stderr)")
        #expect(!taken.stderr.contains("grace period"), "\(taken.stderr)")
    }
}

private final class Finished: Sendable {
    let count = Atomic<Int>(0)
}

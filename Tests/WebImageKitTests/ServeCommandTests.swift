import Foundation
import Testing
import WebImage
import WebImageCurl
import WebImageSamples
import WebImageTestSupport

@Suite("webimage serve", .serialized, .timeLimit(.minutes(5)))
struct ServeCommandTests {
    @Test("a process on loopback: it starts, serves /health, a negotiated thumbnail by preset, /info of a rotated photo, /metrics, and exits 0 on SIGTERM")
    func serves() async throws {
        let tool = Tool()
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try SampleImages.write(to: samples)
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
        let thumbnail = try await get("/thumbnail?url=\(encoded("photo-1.jpg"))&preset=small", accept: "image/webp,*/*")
        #expect(thumbnail.statusCode == 200 && ImageFormat.sniff(thumbnail.data) == .webp)
        #expect(thumbnail.headers["vary"] == "Accept" && thumbnail.etag?.hasPrefix("\"") == true)
        let info = try JSONSerialization.jsonObject(with: try await get("/info?url=\(encoded("oriented-6.jpg"))").data) as? [String: Any]
        #expect(info?["orientation"] as? Int == 6)
        #expect((info?["pixelWidth"] as? Int ?? 0) > (info?["pixelHeight"] as? Int ?? 0), "upright: the sample is landscape, stored rotated")
        let metrics = String(decoding: try await get("/metrics").data, as: UTF8.self)
        #expect(metrics.contains("thumbnail_responses_total{source=\"network\"} 1"), "\(metrics.prefix(2000))")

        running.signal(SIGTERM)
        let result = try await running.wait()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("stopped"))
    }

    @Test("bad configuration stops start-up with exit status 2 and the key's name")
    func badConfiguration() async throws {
        let tool = Tool()
        for (setting, word) in [("thumbnail.onlyPresets=true", "thumbnail.onlyPresets"), ("thumbnail.presets.x=w=0", "thumbnail.presets.x"),
                                ("thumbnail.maxDimenson=10", "thumbnail.maxDimension"), ("http.port=70000", "http.port")] {
            let result = try await tool.run(["serve", "--cache-dir", tool.cache.path, "--set", setting])
            #expect(result.status == 2, "\(setting): \(result.stderr)")
            #expect(result.stderr.contains(word), "\(setting): \(result.stderr)")
        }
    }
}

import Foundation
import Hummingbird
import WebImageTestSupport
import Testing
import WebImage
import WebImageHTTP
import WebImageHummingbird

@Suite("WebImageHummingbird over real HTTP")
struct HummingbirdAdapterTests {
    @Test("the endpoint mounted under a prefix answers over a real socket: a WebP with its headers, 304 for its ETag, HEAD, JSON errors; other routes of the app still answer")
    func mounted() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let router = Router()
        router.get("/hello") { _, _ in "hello" }
        router.addImageRoutes(f.endpoint, at: "/img")
        let path = "/img/thumbnail?url=\(f.source("photo-1.jpg"))&w=100&h=100"
        try await LiveServer.run({ Application(router: router, configuration: LiveServer.configuration, onServerRunning: $0) }) { port in
            let first = try await RawHTTP.send(port: port, target: path, headers: ["Accept": "image/webp"])
            #expect(first.status == 200)
            #expect(first.headers["content-type"] == "image/webp" && first.headers["vary"] == "Accept")
            #expect(ImageFormat.sniff(first.body) == .webp)
            #expect(first.headers["content-length"] == String(first.body.count))
            let etag = first.headers["etag"] ?? ""
            #expect(!etag.isEmpty)
            let again = try await RawHTTP.send(port: port, target: path, headers: ["Accept": "image/webp", "If-None-Match": etag])
            #expect(again.status == 304 && again.body.isEmpty)
            let head = try await RawHTTP.send(port: port, method: "HEAD", target: path, headers: ["Accept": "image/webp"])
            #expect(head.status == 200 && head.headers["etag"] == etag && head.body.isEmpty)
            let noBox = try await RawHTTP.send(port: port, target: "/img/thumbnail?url=\(f.source("photo-1.jpg"))")
            #expect(noBox.status == 400 && noBox.headers["content-type"] == "application/json")
            let info = try await RawHTTP.send(port: port, target: "/img/info?url=\(f.source("oriented-6.jpg"))")
            #expect(info.status == 200 && String(decoding: info.body, as: UTF8.self).contains("\"orientation\":6"))
            // Every other method on the endpoint's paths: 405 with Allow, never 404.
            for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
                for name in ["thumbnail", "info", "placeholder"] {
                    let answer = try await RawHTTP.send(port: port, method: method, target: "/img/\(name)?url=x")
                    #expect(answer.status == 405 && answer.headers["allow"] == "GET, HEAD", "\(method) \(name): \(answer.status)")
                }
            }
            let hello = try await RawHTTP.send(port: port, target: "/hello")
            #expect(String(decoding: hello.body, as: UTF8.self) == "hello")
        }
    }
}

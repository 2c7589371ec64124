import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
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
        let app = Application(router: router)
        let path = "/img/thumbnail?url=\(f.source("photo-1.jpg"))&w=100&h=100"
        // Made before the client starts: its read timeout (15 s) is fixed, and a cold
        // thumbnail under a sanitizer can take longer. What is tested here is the adapter.
        _ = await f.get(path, [.accept: "image/webp"])
        _ = await f.get("/img/info?url=\(f.source("oriented-6.jpg"))")
        try await app.test(.live) { client in
            let etag = try await client.execute(uri: path, method: .get, headers: [.accept: "image/webp"]) { response -> String in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "image/webp" && response.headers[.vary] == "Accept")
                #expect(ImageFormat.sniff(Data(response.body.readableBytesView)) == .webp)
                #expect(response.headers[.contentLength] == String(response.body.readableBytes))
                return response.headers[.eTag] ?? ""
            }
            #expect(!etag.isEmpty)
            try await client.execute(uri: path, method: .get, headers: [.accept: "image/webp", .ifNoneMatch: etag]) { response in
                #expect(response.status == .notModified && response.body.readableBytes == 0)
            }
            try await client.execute(uri: path, method: .head, headers: [.accept: "image/webp"]) { response in
                #expect(response.status == .ok && response.headers[.eTag] == etag)
            }
            try await client.execute(uri: "/img/thumbnail?url=\(f.source("photo-1.jpg"))", method: .get) { response in
                #expect(response.status == .badRequest && response.headers[.contentType] == "application/json")
            }
            try await client.execute(uri: "/img/info?url=\(f.source("oriented-6.jpg"))", method: .get) { response in
                #expect(response.status == .ok && String(buffer: response.body).contains("\"orientation\":6"))
            }
            // Every other method on the endpoint's paths: 405 with Allow, never 404.
            for method in [HTTPRequest.Method.post, .put, .delete, .options, .patch] {
                for name in ["thumbnail", "info", "placeholder"] {
                    try await client.execute(uri: "/img/\(name)?url=x", method: method) { response in
                        #expect(response.status == .methodNotAllowed && response.headers[.allow] == "GET, HEAD", "\(method) \(name): \(response.status)")
                    }
                }
            }
            try await client.execute(uri: "/hello", method: .get) { response in
                #expect(String(buffer: response.body) == "hello")
            }
        }
    }
}

import Foundation
import Testing
import WebImage
import WebImageCurl
import WebImageTestSupport

@Suite("webimage with s3:// sources against moto", .serialized, .timeLimit(.minutes(5)))
struct S3ToolTests {
    func environment(_ moto: MotoServer, secret: String? = nil) -> [String: String] {
        ["WEBIMAGE_S3_ENDPOINT": moto.endpoint.absoluteString, "WEBIMAGE_S3_REGION": "us-east-1",
         "WEBIMAGE_S3_ACCESS_KEY_ID": moto.full.accessKeyID, "WEBIMAGE_S3_SECRET_ACCESS_KEY": secret ?? moto.full.secretAccessKey]
    }

    @Test("webimage load s3://…: a thumbnail written with the right key; a wrong secret exits non-zero, writes no image, and prints no secret")
    func load() async throws {
        let moto = try await MotoServer.shared()
        let key = S3Fixtures.unique("tool/photo") + ".jpg"
        try await S3Fixtures.put(moto, key, try #require(try await S3Fixtures.photos().first))
        let url = "s3://\(moto.bucket)/\(key)"
        let tool = Tool()
        defer { tool.cleanUp() }

        let wrongOut = tool.home.appendingPathComponent("wrong")
        let wrong = "wrong-secret-\(UUID().uuidString)"
        let refused = try await tool.run(["load", "--store", "none", "--thumbnail", "64x64", "--out", wrongOut.path, url],
                                         environment: environment(moto, secret: wrong))
        #expect(refused.status != 0, "\(refused.stdout)\n\(refused.stderr)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: wrongOut.path))?.isEmpty ?? true, "no image was written")
        #expect(refused.stderr.contains("SignatureDoesNotMatch") || refused.stdout.contains("SignatureDoesNotMatch"), "\(refused.stderr)")
        #expect(!(refused.stdout + refused.stderr).contains(wrong) && !(refused.stdout + refused.stderr).contains(moto.full.secretAccessKey))

        let out = tool.home.appendingPathComponent("out")
        let loaded = try await tool.run(["load", "--store", "none", "--thumbnail", "64x64", "--out", out.path, url], environment: environment(moto))
        #expect(loaded.status == 0, "\(loaded.stderr)")
        let written = try FileManager.default.contentsOfDirectory(atPath: out.path)
        #expect(written.count == 1, "\(written)")
    }

    @Test("webimage serve: s3:// sources of a bucket on thumbnail.allowedHosts are served; another bucket is refused with 403, a missing key is 404")
    func serve() async throws {
        let moto = try await MotoServer.shared()
        let key = S3Fixtures.unique("serve/photo") + ".jpg"
        try await S3Fixtures.put(moto, key, try #require(try await S3Fixtures.photos().first))
        let tool = Tool()
        defer { tool.cleanUp() }
        // The service turns the SSRF guard on; moto is on loopback, as a MinIO on a
        // private network would be, so its range is exempted deliberately.
        let running = try tool.start(["serve", "--cache-dir", tool.cache.path, "--set", "http.port=0",
                                      "--set", "thumbnail.allowedHosts=s3://\(moto.bucket)",
                                      "--set", "loader.exemptAddresses=127.0.0.0/8"], environment: environment(moto))
        defer { running.signal(SIGKILL) }
        let server = try await running.listeningAddress()
        let client = CurlLoader()
        func status(_ source: String) async throws -> (Int, Data) {
            let encoded = source.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            do {
                let response = try await client.load(LoadRequest(url: URL(string: "\(server)/thumbnail?url=\(encoded)&w=48")!)) { _ in }
                return (response.statusCode, response.data)
            } catch let error as WebImageError { return (error.statusCode ?? 0, Data()) }
        }
        let (ok, body) = try await status("s3://\(moto.bucket)/\(key)")
        #expect(ok == 200 && ImageFormat.sniff(body) != nil)
        #expect(try await status("s3://another-bucket/\(key)").0 == 403)
        #expect(try await status("s3://\(moto.bucket)/\(S3Fixtures.unique("absent"))").0 == 404)
        running.signal(SIGTERM)
        #expect(try await running.wait().status == 0)
    }
}

import Foundation
import Testing
import WebImageSamples
import WebImageTestSupport

#if arch(x86_64) && os(Linux)
/// libvips, libavif and libcurl are loaded on their first call, not at start
/// (Package.swift, `librariesLoadedLazily`; CWILazyLibrary.h): what a batch of
/// JPEG files costs to start, and what a process whose library cannot be loaded
/// does. The dynamic loader says what it loads (`LD_DEBUG=files`, on standard error).
@Suite("Libraries loaded on first use", .serialized, .timeLimit(.minutes(5)))
struct LazyLibrariesTests {
    /// The samples, and an origin on loopback serving photo-1.jpg.
    private static func inputs(_ tool: Tool) async throws -> (samples: URL, origin: TestHTTPServer) {
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await onThread { try SampleImages.write(to: samples) }
        let origin = try await TestHTTPServer.start()
        origin.serve("/photo-1.jpg", try Data(contentsOf: samples.appendingPathComponent("photo-1.jpg")), contentType: "image/jpeg")
        return (samples, origin)
    }

    private static let loopback = ["--set", "loader.blockPrivateAddresses=false"]

    /// photo-1.jpg as an AVIF (written by libvips' heifsave), which libavif decodes.
    private static func avif(_ tool: Tool, _ samples: URL) async throws -> String {
        let out = tool.home.appendingPathComponent("avif")
        let made = try await tool.run(["load", "--format", "avif", "--out", out.path, "--cache-dir", tool.cache.path,
                                       samples.appendingPathComponent("photo-1.jpg").path])
        #expect(made.status == 0, "\(made.stderr)")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: out.path).first { $0.hasSuffix(".avif") })
        return out.appendingPathComponent(name).path
    }

    @Test("a JPEG file's thumbnail loads neither libvips, libavif nor libcurl; a PNG loads libvips when it needs it, an AVIF libavif, a URL libcurl, and each gives the image")
    func loadedOnFirstUse() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let (samples, origin) = try await Self.inputs(tool)
        defer { Task { await origin.shutdown() } }
        let traced = ["LD_DEBUG": "files"]
        func path(_ name: String) -> String { samples.appendingPathComponent(name).path }

        let jpeg = try await tool.run(["load", "--json", "--thumbnail", "64", "--cache-dir", tool.cache.path, path("photo-1.jpg")], environment: traced)
        #expect(jpeg.status == 0 && jpeg.lines.first?["pixelWidth"] as? Int == 64, "\(jpeg.stdout) \(jpeg.stderr.suffix(2000))")
        #expect(jpeg.stderr.contains("file=liblmdb.so"), "LD_DEBUG lists the libraries loaded at start")
        #expect(!jpeg.stderr.contains("libvips.so") && !jpeg.stderr.contains("libavif.so") && !jpeg.stderr.contains("libcurl.so"), "\(jpeg.stderr.suffix(2000))")

        let png = try await tool.run(["load", "--json", "--thumbnail", "64", "--cache-dir", tool.cache.path, path("logo.png")], environment: traced)
        #expect(png.status == 0 && png.lines.first?["pixelWidth"] as? Int == 64, "\(png.stdout) \(png.stderr.suffix(2000))")
        // (libvips brings libcurl with it, through its own dependencies.)
        #expect(png.stderr.contains("file=libvips.so.42"), "\(png.stderr.suffix(2000))")

        let avif = try await Self.avif(tool, samples)
        let decoded = try await tool.run(["load", "--json", "--cache-dir", tool.cache.path, avif], environment: traced)
        #expect(decoded.status == 0 && decoded.lines.first?["pixelWidth"] as? Int == 1600, "\(decoded.stdout) \(decoded.stderr.suffix(2000))")
        #expect(decoded.stderr.contains("file=libavif.so"), "\(decoded.stderr.suffix(2000))")

        let url = "http://127.0.0.1:\(origin.port)/photo-1.jpg"
        let remote = try await tool.run(["load", "--json", "--cache-dir", tool.cache.path] + Self.loopback + [url], environment: traced)
        #expect(remote.status == 0 && remote.lines.first?["pixelWidth"] as? Int == 1600, "\(remote.stdout) \(remote.stderr.suffix(2000))")
        #expect(remote.stderr.contains("file=libcurl.so.4"), "\(remote.stderr.suffix(2000))")
    }

    @Test("a libvips, libavif or libcurl that cannot be loaded: the images that need it fail as libraryUnavailable saying so, stored entries stay, the process does not crash, and JPEG files still load")
    func unloadable() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let (samples, origin) = try await Self.inputs(tool)
        defer { Task { await origin.shutdown() } }
        // Files with the libraries' names that are not libraries, found first.
        let broken = tool.home.appendingPathComponent("broken")
        try FileManager.default.createDirectory(at: broken, withIntermediateDirectories: true)
        for name in ["libvips.so.42", "libcurl.so.4"] { try Data("not a library\n".utf8).write(to: broken.appendingPathComponent(name)) }
        // libvips alone.
        let brokenVips = tool.home.appendingPathComponent("broken-vips")
        try FileManager.default.createDirectory(at: brokenVips, withIntermediateDirectories: true)
        try Data("not a library\n".utf8).write(to: brokenVips.appendingPathComponent("libvips.so.42"))
        let environment = ["LD_LIBRARY_PATH": broken.path]
        func path(_ name: String) -> String { samples.appendingPathComponent(name).path }

        let files = try await tool.run(["load", "--json", "--thumbnail", "64", "--cache-dir", tool.cache.path, path("photo-1.jpg"), path("logo.png")],
                                       environment: environment)
        #expect(files.status == 1, "some inputs failed: \(files.stdout) \(files.stderr)")
        let jpeg = files.lines.first { ($0["input"] as? String)?.hasSuffix("photo-1.jpg") == true }
        #expect(jpeg?["pixelWidth"] as? Int == 64 && jpeg?["error"] is NSNull, "\(files.stdout)")
        let png = files.lines.first { ($0["input"] as? String)?.hasSuffix("logo.png") == true }
        let pngError = png?["error"] as? [String: Any]
        #expect(pngError?["code"] as? String == "libraryUnavailable" && (pngError?["message"] as? String)?.contains("libvips cannot be loaded") == true,
                "the deployment's failure, not the image's: \(files.stdout)")
        #expect(files.stderr.contains("libvips cannot be loaded") && files.stderr.contains("libvips.so.42"), "\(files.stderr)")

        // A stored PNG is kept: the entry is not taken for damaged bytes, and with
        // libvips back a new size of it is made from the stored original.
        let stored = tool.home.appendingPathComponent("stored-cache").path
        let first = try await tool.run(["load", "--json", "--thumbnail", "64", "--cache-dir", stored, path("logo.png")])
        #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
        func entries() async throws -> String {
            try await tool.run(["cache", "stats", "--cache-dir", stored]).stdout.split(separator: "\n").first { $0.hasPrefix("count:") }.map(String.init) ?? ""
        }
        let before = try await entries()
        let without = try await tool.run(["load", "--json", "--thumbnail", "32", "--cache-dir", stored, path("logo.png")], environment: environment)
        #expect((without.lines.first?["error"] as? [String: Any])?["code"] as? String == "libraryUnavailable", "\(without.stdout)")
        #expect(try await entries() == before && before == "count: 2", "the original and its thumbnail stay: \(before)")
        let again = try await tool.run(["load", "--json", "--thumbnail", "32", "--cache-dir", stored, path("logo.png")])
        #expect(again.status == 0 && again.lines.first?["cacheType"] as? String == "disk" && again.lines.first?["pixelWidth"] as? Int == 32,
                "\(again.stdout) \(again.stderr)")

        // libavif alone: an AVIF fails saying so.
        let avif = try await Self.avif(tool, samples)
        let avifOnly = tool.home.appendingPathComponent("broken-avif")
        try FileManager.default.createDirectory(at: avifOnly, withIntermediateDirectories: true)
        for name in ["libavif.so.14", "libavif.so.15", "libavif.so.16"] {
            try Data("not a library\n".utf8).write(to: avifOnly.appendingPathComponent(name))
        }
        let decoded = try await tool.run(["load", "--json", "--cache-dir", tool.cache.path, avif], environment: ["LD_LIBRARY_PATH": avifOnly.path])
        #expect(decoded.status == 1, "\(decoded.stdout) \(decoded.stderr)")
        #expect((decoded.lines.first?["error"] as? [String: Any])?["code"] as? String == "libraryUnavailable", "\(decoded.stdout)")
        let avifFailure = (decoded.lines.first?["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(avifFailure.contains("libavif cannot be loaded") && avifFailure.contains("libavif.so"), "\(decoded.stdout)")

        // A format only libvips writes, asked for without it: refused at start, saying why.
        let noPNG = try await tool.run(["load", "--format", "png", "--store", "none", path("photo-1.jpg")], environment: ["LD_LIBRARY_PATH": brokenVips.path])
        #expect(noPNG.status == 2 && noPNG.stderr.contains("libraryUnavailable") && noPNG.stderr.contains("libvips cannot be loaded"), "\(noPNG.stderr)")

        // serve without libvips: a format only libvips writes is 500 libraryUnavailable,
        // not another format kept under its key; back with libvips, it is made.
        let serveCache = tool.home.appendingPathComponent("serve-cache").path
        func serve(_ environment: [String: String]) async throws -> (Tool.Running, String) {
            let running = try tool.start(["serve", "--cache-dir", serveCache, "--set", "http.port=0",
                                          "--set", "thumbnail.allowedHosts=127.0.0.1:\(origin.port)", "--set", "loader.blockPrivateAddresses=false"],
                                         environment: environment)
            let address = try await running.listeningAddress()
            return (running, String(address.split(separator: ":").last ?? ""))
        }
        let photo = "/thumbnail?url=" + "http://127.0.0.1:\(origin.port)/photo-1.jpg".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let (serverWithout, withoutPort) = try await serve(["LD_LIBRARY_PATH": brokenVips.path])
        for (format, status) in [("png", 500), ("jpeg", 200)] {
            let answer = try await RawHTTP.send(port: Int(withoutPort) ?? 0, target: photo + "&w=40&format=\(format)")
            #expect(answer.status == status && (status == 200 || String(decoding: answer.body, as: UTF8.self).contains("libraryUnavailable")),
                    "\(format): \(answer.status) \(answer.headers) \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
        }
        serverWithout.signal(SIGTERM)
        _ = try await serverWithout.wait()
        let (serverWith, withPort) = try await serve([:])
        let madePNG = try await RawHTTP.send(port: Int(withPort) ?? 0, target: photo + "&w=40&format=png")
        #expect(madePNG.status == 200 && madePNG.headers["content-type"] == "image/png" && madePNG.body.starts(with: [0x89, 0x50, 0x4E, 0x47]),
                "\(madePNG.status) \(madePNG.headers)")
        serverWith.signal(SIGTERM)
        _ = try await serverWith.wait()

        // Another library under each name (zlib, which loads): refused whole, saying
        // which function it lacks, instead of a stub that aborts at the first call.
        let zlib = try #require(["/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1"].first { FileManager.default.fileExists(atPath: $0) })
        let wrong = tool.home.appendingPathComponent("wrong")
        try FileManager.default.createDirectory(at: wrong, withIntermediateDirectories: true)
        for name in ["libvips.so.42", "libcurl.so.4", "libavif.so.14", "libavif.so.15", "libavif.so.16"] {
            // The file itself (libz.so.1 is a link to it).
            try FileManager.default.copyItem(atPath: URL(fileURLWithPath: zlib).resolvingSymlinksInPath().path, toPath: wrong.appendingPathComponent(name).path)
        }
        let wrongURL = "http://127.0.0.1:\(origin.port)/photo-1.jpg"
        for input in [path("logo.png"), avif, wrongURL] {
            let refused = try await tool.run(["load", "--json", "--store", "none"] + Self.loopback + [input], environment: ["LD_LIBRARY_PATH": wrong.path])
            let error = refused.lines.first?["error"] as? [String: Any]
            #expect(refused.status == 1 && error?["code"] as? String == "libraryUnavailable"
                    && (error?["message"] as? String)?.contains("has no function") == true, "\(input): \(refused.status) \(refused.stdout) \(refused.stderr.suffix(500))")
        }

        let url = "http://127.0.0.1:\(origin.port)/photo-1.jpg"
        let remote = try await tool.run(["load", "--json", "--cache-dir", tool.cache.path] + Self.loopback + [url], environment: environment)
        #expect(remote.status == 1, "\(remote.stdout) \(remote.stderr)")
        let remoteError = remote.lines.first?["error"] as? [String: Any]
        let failure = remoteError?["message"] as? String ?? ""
        #expect(remoteError?["code"] as? String == "libraryUnavailable", "\(remote.stdout)")
        #expect(failure.contains("libcurl cannot be loaded") && failure.contains("libcurl.so.4"), "\(remote.stdout)")
    }
}
#endif

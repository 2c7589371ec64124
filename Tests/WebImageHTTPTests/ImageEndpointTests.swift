import Foundation
import HTTPTypes
import Testing
import WebImage
import WebImageConfiguration
import WebImageHTTP
import WebImageKit
import WebImageTestSupport

@Suite("ImageEndpoint: thumbnails, negotiation and validators")
struct EndpointThumbnailTests {
    @Test("a WebP for Accept: image/webp, with Vary, a strong ETag, Last-Modified, Cache-Control, Server-Timing and its source; the second answer is from memory with the same ETag")
    func webp() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let path = "/thumbnail?url=\(f.source("photo-1.jpg"))&w=200&h=200"
        let first = await f.get(path, [.accept: "image/avif;q=0,image/webp,*/*"])
        #expect(first.status == .ok, "\(String(decoding: first.body, as: UTF8.self))")
        #expect(ImageFormat.sniff(first.body) == .webp)
        #expect(first.headerFields[.contentType] == "image/webp")
        #expect(first.headerFields[.vary] == "Accept")
        #expect(first.headerFields[.contentLength] == String(first.body.count))
        #expect(first.headerFields[.cacheControl] == "public, max-age=86400")
        #expect(first.headerFields[.imageSource] == "network")
        #expect(first.headerFields[.serverTiming]?.hasPrefix("network;dur=") == true)
        #expect(first.headerFields[.lastModified] != nil)
        let etag = try #require(first.headerFields[.eTag])
        #expect(etag == "\"" + String(XXH3.hash(first.body), radix: 16) + "-" + String(first.body.count, radix: 16) + "\"", "strong: the bytes' hash and length")

        let second = await f.get(path, [.accept: "image/avif;q=0,image/webp,*/*"])
        #expect(second.headerFields[.imageSource] == "memory" && second.headerFields[.eTag] == etag && second.body == first.body)
        // Another size, made now from the original stored by the first: its source
        // is the tier that original came from, as serving.md says.
        let other = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=150&h=150", [.accept: "image/webp"])
        #expect(other.status == .ok && other.headerFields[.imageSource] == "disk", "\(other.headerFields[.imageSource] ?? "none")")
        #expect(f.origin.requestCount(path: "/img/photo-1.jpg") == 1)
    }

    @Test("304 for If-None-Match (exact, W/, in a list with spaces, *) and for If-Modified-Since; If-None-Match alone decides when both are sent")
    func notModified() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let path = "/thumbnail?url=\(f.source("photo-2.jpg"))&w=120&format=jpeg"
        let first = await f.get(path)
        try #require(first.status == .ok, "\(first.status): \(String(decoding: first.body, as: UTF8.self))")
        let etag = try #require(first.headerFields[.eTag])
        let modified = try #require(first.headerFields[.lastModified])
        for header in [etag, "W/\(etag)", "\"other\" ,  W/\(etag) , \"x\"", "*"] {
            let answer = await f.get(path, [.ifNoneMatch: header])
            #expect(answer.status == .notModified && answer.body.isEmpty, "If-None-Match: \(header)")
            #expect(answer.headerFields[.eTag] == etag)
        }
        #expect(await f.get(path, [.ifNoneMatch: "\"other\", W/\"nope\""]).status == .ok)
        #expect(await f.get(path, [.ifModifiedSince: modified]).status == .notModified)
        #expect(await f.get(path, [.ifModifiedSince: "Sat, 01 Jan 2000 00:00:00 GMT"]).status == .ok)
        #expect(await f.get(path, [.ifModifiedSince: "not a date"]).status == .ok)
        #expect(await f.get(path, [.ifNoneMatch: "\"other\"", .ifModifiedSince: modified]).status == .ok)
        // The same instant in asctime form ("Sun, 06 Nov 1994 08:49:37 GMT" as "Sun Nov  6 08:49:37 1994"),
        // and an RFC 850 date before it: HTTP's obsolete forms, which a recipient must read.
        let parts = Array(modified)
        let day = parts[5] == "0" ? " \(parts[6])" : String(parts[5...6])
        let asctime = "\(String(parts[0..<3])) \(String(parts[8..<11])) \(day) \(String(parts[17..<25])) \(String(parts[12..<16]))"
        #expect(await f.get(path, [.ifModifiedSince: asctime]).status == .notModified, "If-Modified-Since: \(asctime)")
        #expect(await f.get(path, [.ifModifiedSince: "Saturday, 01-Jan-00 00:00:00 GMT"]).status == .ok)
    }

    @Test("412 for If-Match that names another tag (or only the weak one) and for If-Unmodified-Since before Last-Modified: no body, not to be cached; a matching If-Match is answered")
    func preconditionFailed() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let path = "/thumbnail?url=\(f.source("photo-2.jpg"))&w=120&format=jpeg"
        let first = await f.get(path)
        try #require(first.status == .ok)
        let etag = try #require(first.headerFields[.eTag])
        for fields: HTTPFields in [[.ifMatch: "\"other\""], [.ifMatch: "W/\(etag)"], [.ifUnmodifiedSince: "Sat, 01 Jan 2000 00:00:00 GMT"],
                                   [.ifMatch: "\"other\"", .ifNoneMatch: etag]] {
            for method in [HTTPRequest.Method.get, .head] {
                let answer = await f.get(path, method: method, fields)
                #expect(answer.status == .preconditionFailed && answer.body.isEmpty, "\(method) \(fields)")
                #expect(answer.headerFields[.cacheControl] == "no-store" && answer.headerFields[.eTag] == etag)
                #expect(answer.headerFields[.contentLength] == "0" && answer.headerFields[.contentType] == nil)
            }
        }
        let matched = await f.get(path, [.ifMatch: "\"x\", \(etag)"])
        #expect(matched.status == .ok && matched.body == first.body)
        #expect(await f.get(path, [.ifMatch: "*"]).status == .ok)
        #expect(await f.get(path, [.ifUnmodifiedSince: try #require(first.headerFields[.lastModified])]).status == .ok)
    }

    @Test("HEAD: the GET's status and headers, Content-Length included, and no body")
    func head() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let path = "/thumbnail?url=\(f.source("photo-3.jpg"))&w=100&format=png"
        let get = await f.get(path)
        let head = await f.get(path, method: .head)
        #expect(head.status == .ok && head.body.isEmpty)
        #expect(head.headerFields[.contentLength] == String(get.body.count) && head.headerFields[.eTag] == get.headerFields[.eTag])
        #expect(head.headerFields[.contentType] == "image/png")
    }

    @Test("negotiation: no modern format for a client that did not name it, PNG for an image with alpha when PNG is allowed, one cache entry per answer")
    func negotiation() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let photo = "/thumbnail?url=\(f.source("photo-1.jpg"))&w=64"
        let logo = "/thumbnail?url=\(f.source("logo.png"))&w=64"
        #expect(ImageFormat.sniff(await f.get(photo, [.accept: "image/webp,*/*"]).body) == .webp)
        #expect(ImageFormat.sniff(await f.get(photo, [.accept: "*/*"]).body) == .jpeg, "*/* names no modern format: the cached WebP is not served")
        #expect(ImageFormat.sniff(await f.get(photo).body) == .jpeg)
        let alpha = await f.get(logo, [.accept: "*/*"])
        #expect(ImageFormat.sniff(alpha.body) == .png, "alpha keeps to PNG for a client that never named WebP")
        #expect(ImageFormat.sniff(await f.get(logo, [.accept: "image/webp"]).body) == .webp)
    }

    @Test("presets: preset=NAME stands for its parameters, the request's own win, an unknown one is 400; a preset that cannot parse stops start-up")
    func presets() async throws {
        let f = try await EndpointFixture.make(["thumbnail.presets.small": "w=64&h=64&format=jpeg", "thumbnail.presets.wide": "?w=300&format=png"],
                                               presets: ["small", "wide"])
        defer { Task { await f.close() } }
        let small = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&preset=small")
        #expect(small.status == .ok && small.headerFields[.contentType] == "image/jpeg" && small.headerFields[.vary] == nil)
        let smallInfo = try await pixelSize(small.body, f)
        #expect(max(smallInfo.width, smallInfo.height) == 64)
        let overridden = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&preset=small&format=png")
        #expect(overridden.headerFields[.contentType] == "image/png")
        #expect(try await pixelSize(await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&preset=wide").body, f).width == 300)
        let unknown = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&preset=huge")
        #expect(unknown.status == .badRequest && (EndpointFixture.json(unknown)["message"] as? String)?.contains("huge") == true)

        await #expect(throws: WebImageError.self) {
            _ = try await EndpointFixture.make(["thumbnail.presets.bad": "w=99999"], presets: ["bad"])
        }
        let misspelt = await #expect(throws: WebImageError.self, "a preset's unknown parameter is found at start-up") {
            _ = try await EndpointFixture.make(["thumbnail.presets.bad": "w=10&bogus=1"], presets: ["bad"])
        }
        #expect(misspelt?.message.contains("'bogus'") == true, "\(String(describing: misspelt))")
        let costly = await #expect(throws: WebImageError.self, "a preset over thumbnail.maxCost could never be answered") {
            _ = try await EndpointFixture.make(["thumbnail.presets.heavy": "w=2048&h=2048&t=blur:100"], presets: ["heavy"])
        }
        #expect(costly?.message.contains("thumbnail.presets.heavy") == true && costly?.message.contains("thumbnail.maxCost") == true,
                "\(String(describing: costly))")
        await #expect(throws: WebImageError.self) {
            _ = try await EndpointFixture.make(["thumbnail.presets.bad": "url=http://x/&w=10"], presets: ["bad"])
        }
    }

    @Test("only presets: any sizing, format or transform parameter is 400, as is a request without preset=; url, preset and s pass")
    func onlyPresets() async throws {
        let f = try await EndpointFixture.make(["thumbnail.presets.small": "w=64&h=64", "thumbnail.onlyPresets": "true"], presets: ["small"])
        defer { Task { await f.close() } }
        let base = "/thumbnail?url=\(f.source("photo-1.jpg"))"
        #expect(await f.get(base + "&preset=small").status == .ok)
        for extra in ["&preset=small&w=2000", "&preset=small&format=png", "&preset=small&t=sharpen", "&preset=small&crop=centre", "&w=64", ""] {
            let refused = await f.get(base + extra)
            #expect(refused.status == .badRequest, "\(extra)")
            #expect(EndpointFixture.json(refused)["error"] as? String == "invalidArgument")
        }
        await #expect(throws: WebImageError.self, "onlyPresets without presets would refuse everything") {
            _ = try await EndpointFixture.make(["thumbnail.onlyPresets": "true"])
        }
    }

    private func pixelSize(_ data: Data, _ f: EndpointFixture) async throws -> PixelSize {
        try f.manager.configuration.coders.info(data).pixelSize
    }
}

@Suite("ImageEndpoint: failures, fallbacks, signing, the ceiling")
struct EndpointFailureTests {
    @Test("the request's mistakes are 400 with JSON naming them; an unknown path 404; POST 405 with Allow")
    func badRequests() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        for (query, word) in [("", "url="), ("url=ftp%3A%2F%2Fx%2Fa.jpg&w=10", "ftp"),
                              ("url=http%3A%2F%2F127.0.0.1%3A99999%2Fa.jpg&w=10", "port 99999"), ("url=http%3A%2F%2F127.0.0.1%3A0%2Fa.jpg&w=10", "port 0"), ("url=\(f.source("photo-1.jpg"))", "w="),
                              ("url=\(f.source("photo-1.jpg"))&w=0", "w='0'"), ("url=\(f.source("photo-1.jpg"))&w=10&format=bmp", "bmp"),
                              // One spelling per number: a sign, a leading zero, an exponent or hex would be another URL for the same answer.
                              ("url=\(f.source("photo-1.jpg"))&w=%2B100", "w='+100'"), ("url=\(f.source("photo-1.jpg"))&h=0100", "h='0100'"),
                              ("url=\(f.source("photo-1.jpg"))&w=100&maxBytes=%2B5000", "maxBytes"), ("url=\(f.source("photo-1.jpg"))&w=100&dpr=0x1p1", "dpr"),
                              ("url=\(f.source("photo-1.jpg"))&w=100&dpr=2e0", "dpr"), ("url=\(f.source("photo-1.jpg"))&w=100&dpr=%2B2", "dpr"),
                              ("url=\(f.source("photo-1.jpg"))&w=100&dpr=1.0", "dpr='1.0'"), ("url=\(f.source("photo-1.jpg"))&w=100&dpr=01", "dpr='01'"),
                              ("url=\(f.source("photo-1.jpg"))&w=100&dpr=00001", "dpr"), ("url=\(f.source("photo-1.jpg"))&w=100&dpr=1.50", "dpr"),
                              // A parameter the endpoint does not read is refused, naming it: a misspelt width is not answered as if absent.
                              ("url=\(f.source("photo-1.jpg"))&w=100&width=50", "'width'"), ("url=\(f.source("photo-1.jpg"))&w=100&v=2", "'v'"),
                              ("url=\(f.source("photo-1.jpg"))&w=10&t=", "t= is empty"),
                              ("url=\(f.source("photo-1.jpg"))&w=10&crop=centre", "both"), ("url=\(f.source("photo-1.jpg"))&w=10&t=rotate:45;" + String(repeating: "blur:1;", count: 9), "steps")] {
            let answer = await f.get("/thumbnail?" + query)
            #expect(answer.status == .badRequest, "\(query)")
            #expect(answer.headerFields[.contentType] == "application/json" && answer.headerFields[.cacheControl] == "no-store")
            #expect((EndpointFixture.json(answer)["message"] as? String)?.contains(word) == true, "\(query): \(EndpointFixture.json(answer))")
        }
        #expect(await f.get("/nothing-here?url=x").status == .notFound)
        let post = await f.get("/thumbnail?url=x", method: .post)
        #expect(post.status == .methodNotAllowed && post.headerFields[.allow] == "GET, HEAD")
    }

    @Test("colour steps through t=: each changes the answer, idempotent pairs answer the same bytes, a bad value is 400 naming the step")
    func colourSteps() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        func png(_ steps: String) async -> ImageResponse {
            await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=64&h=64&format=png" + (steps.isEmpty ? "" : "&t=\(steps)"))
        }
        let plain = await png("")
        for steps in ["brightness:1.3", "contrast:0.5", "saturation:0", "gamma:2.2", "pixelate:8"] {
            let answer = await png(steps)
            #expect(answer.status == .ok && answer.body != plain.body && answer.headerFields[.eTag] != plain.headerFields[.eTag], "\(steps)")
        }
        // Black stays black under any other step; grey stays grey under any saturation: the same pixels, the same bytes.
        #expect(await png("brightness:0").body == (await png("brightness:0;pixelate:4;contrast:1.5")).body)
        #expect(await png("saturation:0").body == (await png("saturation:0;saturation:3")).body)
        for bad in ["brightness:-1", "contrast:11", "saturation:x", "gamma:0", "pixelate:0"] {
            let answer = await png(bad)
            #expect(answer.status == .badRequest && (EndpointFixture.json(answer)["message"] as? String)?.contains(bad) == true, "\(bad): \(EndpointFixture.json(answer))")
        }
    }

    @Test("client hints: off by default; on, Sec-CH-DPR and Sec-CH-Width fill in dpr and w, rounded to steps, named in Vary, asked for in Accept-CH")
    func clientHints() async throws {
        func hints(_ dpr: String?, _ width: String?, _ viewport: String? = nil) -> HTTPFields {
            var fields = HTTPFields()
            if let dpr { fields[HTTPField.Name("Sec-CH-DPR")!] = dpr }
            if let width { fields[HTTPField.Name("Sec-CH-Width")!] = width }
            if let viewport { fields[HTTPField.Name("Sec-CH-Viewport-Width")!] = viewport }
            return fields
        }
        let acceptCH = HTTPField.Name("Accept-CH")!
        // Off (the default): hints change nothing and are not asked for.
        let off = try await EndpointFixture.make()
        defer { Task { await off.close() } }
        let plain = await off.get("/thumbnail?url=\(off.source("photo-1.jpg"))&w=100&format=jpeg", hints("2", "900"))
        #expect(plain.status == .ok && plain.headerFields[.imageSize]?.hasPrefix("100x") == true && plain.headerFields[acceptCH] == nil && plain.headerFields[.vary] == nil)

        let f = try await EndpointFixture.make(["thumbnail.clientHints": "true"])
        defer { Task { await f.close() } }
        let url = f.source("photo-1.jpg")
        // From the bytes: a repeat is answered from the cache, without X-Image-Size.
        func width(_ answer: ImageResponse) -> Int? { answer.status == .ok ? (try? f.manager.configuration.coders.info(answer.body).pixelSize.width) : nil }
        // Sec-CH-DPR stands in for dpr=, rounded up to a half within 1...3.
        let doubled = await f.get("/thumbnail?url=\(url)&w=100&format=jpeg", hints("2", nil))
        #expect(width(doubled) == 200 && doubled.headerFields[.vary] == "Sec-CH-DPR")
        #expect(doubled.headerFields[acceptCH] == "Sec-CH-DPR, Sec-CH-Width, Sec-CH-Viewport-Width")
        #expect(width(await f.get("/thumbnail?url=\(url)&w=100&format=jpeg", hints("2.625", nil))) == 300)
        #expect(width(await f.get("/thumbnail?url=\(url)&w=100&format=jpeg", hints("9", nil))) == 300, "at most 3")
        #expect(width(await f.get("/thumbnail?url=\(url)&w=100&format=jpeg", hints("0.2", nil))) == 100, "at least 1")
        // A hinted DPR never turns a valid request into a 400: it is lowered until the sides fit (2048 / 800).
        let wide = await f.get("/thumbnail?url=\(url)&w=800&format=jpeg", hints("3", nil))
        #expect(wide.status == .ok && width(wide) == 1600, "2048 wide asked; the 1600-pixel photo is never upscaled: \(EndpointFixture.json(wide))")
        #expect(await f.get("/thumbnail?url=\(url)&w=2048&format=jpeg", hints("3", nil)).status == .ok)
        // The query's own dpr= wins, and then Vary does not name the hint.
        let explicit = await f.get("/thumbnail?url=\(url)&w=100&dpr=1&format=jpeg", hints("2", nil))
        #expect(width(explicit) == 100 && explicit.headerFields[.vary] == nil)
        // Sec-CH-Width fills in w=, rounded up to the step (100); the viewport's width times the DPR without it.
        let hinted = await f.get("/thumbnail?url=\(url)&h=2000&format=jpeg", hints(nil, "517"))
        #expect(width(hinted) == 600 && hinted.headerFields[.vary] == "Sec-CH-DPR, Sec-CH-Width, Sec-CH-Viewport-Width")
        #expect(width(await f.get("/thumbnail?url=\(url)&h=1000&format=jpeg", hints("2", nil, "250"))) == 500)
        // No w=, h= or width hint: the same refusal as before.
        #expect(await f.get("/thumbnail?url=\(url)&format=jpeg", hints("2", nil)).status == .badRequest)
        // Values that are no positive number are ignored, never an error; huge ones stop at the limits.
        for (dpr, hintedWidth) in [("abc", "-5"), ("nan", "0"), ("1e400", "1e400"), ("-2", "99999999999999999999"), ("", "")] {
            let answer = await f.get("/thumbnail?url=\(url)&h=2000&format=jpeg", hints(dpr, hintedWidth))
            #expect(answer.status == .ok || answer.status == .badRequest, "\(dpr) \(hintedWidth): \(answer.status)")
            if let seen = width(answer) { #expect(seen <= 2048) }
        }
        // Hints cannot multiply cache entries past the steps: 60 distinct widths make at most 21 answers.
        var tags = Set<String>()
        for hintedWidth in stride(from: 37, through: 2048, by: 34) {
            let answer = await f.get("/thumbnail?url=\(url)&h=2000&format=jpeg", hints(nil, String(hintedWidth)))
            if let tag = answer.headerFields[.eTag] { tags.insert(tag) }
        }
        #expect(tags.count <= 21 && tags.count >= 10, "\(tags.count) answers")
    }

    @Test("JPEG XL out is opt-in: refused by name and never negotiated by default; with thumbnail.formats and vips.allowUntrusted, first for clients that name it")
    func jpegXLOutput() async throws {
        let safari = "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
        let chrome = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
        let plain = try await EndpointFixture.make()
        defer { Task { await plain.close() } }
        let named = await plain.get("/thumbnail?url=\(plain.source("photo-1.jpg"))&w=64&format=jxl")
        #expect(named.status == .badRequest && (EndpointFixture.json(named)["message"] as? String)?.contains("avif, webp, jpeg, png, gif") == true)
        let negotiated = await plain.get("/thumbnail?url=\(plain.source("photo-1.jpg"))&w=64", [.accept: safari])
        #expect(negotiated.headerFields[.contentType] == "image/avif", "not JPEG XL unless the service opts in")

        let f = try await EndpointFixture.make(["vips.allowUntrusted": "true", "thumbnail.formats": "jxl,avif,webp,jpeg,png,gif"])
        defer { Task { await f.close() } }
        let url = f.source("photo-1.jpg")
        let jxl = await f.get("/thumbnail?url=\(url)&w=64", [.accept: safari])
        #expect(jxl.status == .ok && jxl.headerFields[.contentType] == "image/jxl" && ImageFormat.sniff(jxl.body) == .jxl)
        #expect(jxl.headerFields[.vary] == "Accept")
        let avif = await f.get("/thumbnail?url=\(url)&w=64", [.accept: chrome])
        #expect(avif.headerFields[.contentType] == "image/avif" && avif.headerFields[.eTag] != jxl.headerFields[.eTag], "one cache entry per answer")
        #expect(await f.get("/thumbnail?url=\(url)&w=64&format=jxl").headerFields[.contentType] == "image/jxl")
        // An animation asked for in JPEG XL: negotiation gives animated WebP instead.
        #expect(await f.get("/thumbnail?url=\(f.source("spinner.gif"))&w=32", [.accept: safari]).headerFields[.contentType] == "image/webp")

        // Named without a coder that writes it: start-up stops, naming the key that would.
        func configured(_ flags: [String: String]) async throws -> ImageEndpoint {
            var all = ["thumbnail.allowedHosts": "127.0.0.1", "store.kind": "none"]
            all.merge(flags) { _, new in new }
            let config = try await ConfigLayers.reader(flags: all, file: nil, environment: [:],
                                                       knownKeys: PluginCatalog.standard.knownKeys.union(ImageEndpoint.Settings.standardKeys),
                                                       keyFamilies: ImageEndpoint.Settings.keyFamilies)
            return try ImageEndpoint.configured(config: config)
        }
        await #expect { _ = try await configured(["thumbnail.formats": "webp,jxl"]) } throws: { error in
            (error as? WebImageError)?.code == .invalidArgument && (error as? WebImageError)?.message.contains("vips.allowUntrusted") == true
        }
        await #expect { _ = try await configured(["thumbnail.formats": "webp,bmp"]) } throws: { ($0 as? WebImageError)?.message.contains("thumbnail.formats") == true }
        await #expect { _ = try await configured(["thumbnail.defaultFormat": "jxl"]) } throws: { ($0 as? WebImageError)?.message.contains("thumbnail.defaultFormat") == true }
        _ = try await configured(["thumbnail.formats": "webp,jxl", "vips.allowUntrusted": "true"])
    }

    @Test("SVG and PDF through the service: 415 by default; with vips.svg and vips.pdf, thumbnails drawn at the box, the page count in /info, a DOCTYPE refused")
    func documents() async throws {
        let svg = Data("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"200\"><script>x()</script><rect width=\"400\" height=\"200\" fill=\"red\"/></svg>".utf8)
        let doctype = Data("<?xml version=\"1.0\"?><!DOCTYPE svg [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\">&x;</svg>".utf8)
        var pdf = "%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >> endobj\n"
        pdf += "3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] >> endobj\n4 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] >> endobj\n"
        pdf += "trailer << /Root 1 0 R >>\n%%EOF\n"  // no xref: poppler rebuilds it, as for many files in the wild
        let plain = try await EndpointFixture.make()
        defer { Task { await plain.close() } }
        plain.origin.serve("/img/a.svg", svg, contentType: "image/svg+xml")
        let refused = await plain.get("/thumbnail?url=\(plain.source("a.svg"))&w=64")
        #expect(refused.status == .unsupportedMediaType && EndpointFixture.json(refused)["error"] as? String == "unsupportedFormat")

        for limit in ["0s", "61s"] {
            await #expect { _ = try await EndpointFixture.make(["vips.pdf": "true", "vips.pdfTimeLimit": limit]) } throws: {
                ($0 as? WebImageError)?.message.contains("vips.pdfTimeLimit: '\(limit)'") == true
            }
        }
        let f = try await EndpointFixture.make(["vips.svg": "true", "vips.pdf": "true", "vips.pdfTimeLimit": "1s"])
        defer { Task { await f.close() } }
        f.origin.serve("/img/a.svg", svg, contentType: "image/svg+xml")
        f.origin.serve("/img/x.svg", doctype, contentType: "image/svg+xml")
        f.origin.serve("/img/b.pdf", Data(pdf.utf8), contentType: "application/pdf")
        // Nested form XObjects: minutes of poppler's drawing. Four requests at once:
        // one PDF draws at a time (vips.pdfConcurrency) and is stopped at
        // vips.pdfTimeLimit, the others are refused at once; all 503, none blocks
        // the URL, and a JPEG asked for meanwhile is answered.
        f.origin.serve("/img/bomb.pdf", PDFFixtures.nestedForms(), contentType: "application/pdf")
        let (bombs, photo) = await withTaskGroup(of: (Bool, ImageResponse).self) { group in
            for width in 61...64 { group.addTask { (true, await f.get("/thumbnail?url=\(f.source("bomb.pdf"))&w=\(width)&format=png")) } }
            group.addTask { (false, await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=90")) }
            return await group.reduce(into: ([ImageResponse](), [ImageResponse]())) { if $1.0 { $0.0.append($1.1) } else { $0.1.append($1.1) } }
        }
        let codes = bombs.map { EndpointFixture.json($0)["error"] as? String ?? "" }
        #expect(bombs.allSatisfy { $0.status == .serviceUnavailable } && codes.contains("workTimedOut") && codes.allSatisfy { ["workTimedOut", "overloaded"].contains($0) }, "\(codes)")
        #expect(photo.first?.status == .ok)
        let again = await f.get("/thumbnail?url=\(f.source("bomb.pdf"))&w=61&format=png")
        #expect(EndpointFixture.json(again)["error"] as? String != "blockedURL", "a PDF past its time limit is not blocklisted")
        let thumbnail = await f.get("/thumbnail?url=\(f.source("a.svg"))&w=64&format=png")
        #expect(thumbnail.status == .ok && ImageFormat.sniff(thumbnail.body) == .png)
        #expect(try f.manager.configuration.coders.info(thumbnail.body).pixelSize == PixelSize(width: 64, height: 32))
        let info = await f.get("/info?url=\(f.source("b.pdf"))")
        #expect(info.status == .ok && EndpointFixture.json(info)["pageCount"] as? Int == 2 && EndpointFixture.json(info)["pixelWidth"] as? Int == 300, "\(EndpointFixture.json(info))")
        #expect(await f.get("/thumbnail?url=\(f.source("b.pdf"))&w=60&format=png").status == .ok)
        let entity = await f.get("/thumbnail?url=\(f.source("x.svg"))&w=64")
        #expect(entity.status == .unsupportedMediaType && EndpointFixture.json(entity)["error"] as? String == "decodeFailed")
    }

    @Test("t=text: drawn through the service, markup as text, fonts only from thumbnail.fonts, bad values 400")
    func textWatermarks() async throws {
        let f = try await EndpointFixture.make(["thumbnail.fonts": "DejaVu Sans,DejaVu Serif"])
        defer { Task { await f.close() } }
        func get(_ spec: String) async -> ImageResponse {
            await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=200&format=png&t=" + spec.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        }
        let plain = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=200&format=png")
        let marked = await get("text:Hello")
        #expect(marked.status == .ok && marked.body != plain.body)
        #expect(await get("text:<span size=\"999999\">x</span>").status == .ok, "markup is drawn as text")
        #expect(await get("text:Hello:20:ff0000:1:nw:DejaVu Serif").status == .ok)
        for bad in ["text:x:24:fff:1:se:Sans", "text:x:900", "text:", "text:\u{202E}", "text:\u{FEFF}", "text:\u{E0001}", "text:\u{301}", "text:\u{3164}", "text:\u{2800}"] {
            let answer = await get(bad)
            #expect(answer.status == .badRequest && (EndpointFixture.json(answer)["message"] as? String)?.contains("transform") == true, "\(bad): \(EndpointFixture.json(answer))")
        }
    }

    @Test("a step that does not fit the image is 422 naming the step, its parameter and the image's size; trim on a 1-pixel image is the image as it is")
    func stepDoesNotFit() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        // The thumbnail is at most 100x100, so a 500-pixel crop cannot fit it.
        let answer = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=100&h=100&t=crop:20,10,500,50")
        #expect(answer.status == .unprocessableContent, "\(EndpointFixture.json(answer))")
        #expect(EndpointFixture.json(answer)["error"] as? String == "stepDoesNotFit")
        let message = try #require(EndpointFixture.json(answer)["message"] as? String)
        #expect(message.contains("crop:20,10,500,50") && message.contains("x + width (520)"), "\(message)")
        #expect(answer.headerFields[.cacheControl] == "no-store")
        let tiny = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=1&h=1&format=png&t=trim")
        #expect(tiny.status == .ok, "\(EndpointFixture.json(tiny))")
    }

    @Test("thumbnail.deadline bounds /info as it bounds /thumbnail: a stalled origin is 504 at the deadline, not at loader.timeout")
    func infoDeadline() async throws {
        let f = try await EndpointFixture.make(["thumbnail.deadline": "2s", "loader.timeout": "600s"])
        defer { Task { await f.close() } }
        let stalled = f.origin.url("/stall").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let started = ContinuousClock.now
        let answer = await f.get("/info?url=\(stalled)")
        let json = EndpointFixture.json(answer)
        // /info looks in the tiers and waits for room in the originals' budget before
        // its download. On a machine so busy that the deadline passed before the
        // download began, that is the service's own 503. The origin's count cannot
        // tell the two apart: on a busy machine a download can have begun (504)
        // before the origin's server has counted its request.
        let timedOut = answer.status == .gatewayTimeout && json["error"] as? String == "timedOut"
        let workTimedOut = answer.status == .serviceUnavailable && json["error"] as? String == "workTimedOut"
        #expect(timedOut || (workTimedOut && f.origin.requestCount(path: "/stall") == 0), "\(answer.status) \(json)")
        // Bounded by the deadline, not by the 600 s loader timeout (generously: a busy machine).
        #expect(ContinuousClock.now - started < .seconds(300))
    }

    @Test("the origin's failures get client-safe messages: no internal address, rule or advice reaches the client")
    func clientSafe() async throws {
        let f = try await EndpointFixture.make(["thumbnail.allowedHosts": "*", "loader.blockPrivateAddresses": "true"])
        defer { Task { await f.close() } }
        // The SSRF guard refuses the loopback origin: the client learns it is not allowed, not which rule or address.
        let refused = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=10")
        #expect(refused.status == .forbidden)
        let message = try #require(EndpointFixture.json(refused)["message"] as? String)
        #expect(message == "fetching this image is not allowed", "\(message)")
        // Twice: the second is the blocklist's refusal, which says nothing of .retryFailed.
        let again = try #require(EndpointFixture.json(await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=10"))["message"] as? String)
        #expect(!again.contains("retryFailed") && !again.contains("127.0.0.1") && !again.lowercased().contains("private"), "\(again)")
    }

    @Test("a host off the allow-list is 403 before any request; an origin's 404 is 404, its 503 is 502, both with JSON")
    func originFailures() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let other = await f.get("/thumbnail?url=http%3A%2F%2Fimages.example.com%2Fa.jpg&w=10")
        #expect(other.status == .forbidden)
        let missing = await f.get("/thumbnail?url=\(f.origin.url("/status/404").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&w=10")
        #expect(missing.status == .notFound && EndpointFixture.json(missing)["message"] as? String == "the origin has no image at this URL")
        let failing = await f.get("/thumbnail?url=\(f.origin.url("/status/503").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&w=10")
        #expect(failing.status == .badGateway, "\(EndpointFixture.json(failing))")
    }

    @Test("what a request costs: over thumbnail.maxCost 413 before any work, naming the cost; checked again on the decoded frames; heavy renders wait for thumbnail.maxCostInFlight, light ones never")
    func costs() async throws {
        let f = try await EndpointFixture.make(["thumbnail.maxCostInFlight": "2"])
        defer { Task { await f.close() } }
        let photo = f.source("photo-1.jpg")
        let heavy = Array(repeating: "blur:100", count: 8).joined(separator: ";")
        let refused = await f.get("/thumbnail?url=\(photo)&w=2048&t=\(heavy)")
        #expect(refused.status == .contentTooLarge, "\(EndpointFixture.json(refused))")
        let message = EndpointFixture.json(refused)["message"] as? String ?? ""
        // The cost and the limit, never the operator's configuration key.
        #expect(message.contains("megapixel passes") && message.contains("more than the 400") && !message.contains("thumbnail."), "\(message)")
        #expect(f.origin.requestCount(path: "/img/photo-1.jpg") == 0, "refused before any download")
        // The same steps on a small box are cheap enough.
        #expect(await f.get("/thumbnail?url=\(photo)&w=64&h=64&t=\(heavy)").status == .ok)
        // Renders of a pass or more wait for room: with 2 passes in flight, at most one of these (3.8 to 3.9 passes each with the PNG encode) runs at a time: the peak is one render's cost.
        let answers = await withTaskGroup(of: HTTPResponse.Status.self) { group in
            for index in 0..<6 { group.addTask { await f.get("/thumbnail?url=\(photo)&w=\(300 + index)&h=300&t=blur:39&format=png").status } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 6 && answers.allSatisfy { $0 == .ok }, "\(answers)")
        let usage = f.endpoint.work.usage
        #expect(usage.peak > 0 && usage.peak <= 3.9 && usage.inFlight == 0 && usage.waiting == 0, "\(usage)")

        // An animation costs per frame: the box's estimate passes, the decoded frames do not.
        let g = try await EndpointFixture.make(["thumbnail.maxCost": "1"])
        defer { Task { await g.close() } }
        let animated = await g.get("/thumbnail?url=\(g.source("spinner.gif"))&w=100&h=100&t=blur:60&format=png")
        #expect(animated.status == .contentTooLarge && (EndpointFixture.json(animated)["error"] as? String) == "costLimitExceeded",
                "\(animated.status) \(EndpointFixture.json(animated))")
    }

    @Test("an animation of one-pixel frames: a missing side does not make each frame cost the box's maximum once the header shows the frame, and every frame costs at least minimumFrameCost")
    func tinyAnimationCost() async throws {
        let f = try await EndpointFixture.make(["thumbnail.maxCost": "100"])
        defer { Task { await f.close() } }
        let frames = 1000
        let image = Image(pixelSize: PixelSize(1), scale: 1, frames: Array(repeating: Image.Frame(duration: .milliseconds(40)), count: frames),
                          loopCount: 0, format: .gif, hasAlpha: false,
                          storage: PixelBuffer(size: PixelSize(1), channels: 3, bytes: [UInt8](repeating: 200, count: 3 * frames)))
        let gif = try f.manager.configuration.coders.encode(image, as: .gif, options: EncodeOptions())
        f.origin.serve("/img/tiny.gif", gif, contentType: "image/gif")
        // By the box (64 x 2048, the missing side at its maximum) its 1000 frames cost 131
        // passes, over the 100 allowed; by its real 1x1 frames, 1000 x 0.05 = 50.
        let one = await f.get("/thumbnail?url=\(f.source("tiny.gif"))&w=64&format=gif")
        #expect(one.status == .ok, "\(one.status) \(EndpointFixture.json(one))")
        #expect(await f.get("/thumbnail?url=\(f.source("tiny.gif"))&w=64&h=64&format=gif").status == .ok)
        // 2500 such frames cost 125 passes however small: refused.
        let long = Image(pixelSize: PixelSize(1), scale: 1, frames: Array(repeating: Image.Frame(duration: .milliseconds(40)), count: 2500),
                         loopCount: 0, format: .gif, hasAlpha: false,
                         storage: PixelBuffer(size: PixelSize(1), channels: 3, bytes: [UInt8](repeating: 90, count: 3 * 2500)))
        f.origin.serve("/img/long.gif", try f.manager.configuration.coders.encode(long, as: .gif, options: EncodeOptions()), contentType: "image/gif")
        let refused = await f.get("/thumbnail?url=\(f.source("long.gif"))&w=64&h=64&format=gif")
        #expect(refused.status == .contentTooLarge && (EndpointFixture.json(refused)["error"] as? String) == "costLimitExceeded",
                "\(refused.status) \(EndpointFixture.json(refused))")
    }

    @Test("heavy renders take one of thumbnail.maxHeavyInFlight places, so a plain thumbnail asked behind four of them is answered before they all end; an animation heavy only by its frames takes a place once decoded")
    func heavyPlaces() async throws {
        // Four heavy renders one at a time take tens of seconds on a busy machine: a deadline
        // far past that, so that what is checked is the order, not the machine's speed.
        let f = try await EndpointFixture.make(["thumbnail.maxHeavyInFlight": "1", "thumbnail.deadline": "600s"])
        defer { Task { await f.close() } }
        #expect(f.endpoint.work.maxHeavy == 1)
        let photo = f.source("photo-1.jpg")
        // Each about 40 passes (a 1000 px box, blur:30, its WebP encode): far heavier than a plain thumbnail.
        final class Finished: @unchecked Sendable {
            private let lock = NSLock()
            private var names: [String] = []
            func append(_ name: String) { lock.withLock { names.append(name) } }
            var order: [String] { lock.withLock { names } }
        }
        let finished = Finished()
        let answers = await withTaskGroup(of: HTTPResponse.Status.self) { group in
            for index in 0..<4 {
                group.addTask {
                    let answer = await f.get("/thumbnail?url=\(photo)&w=\(1000 + index)&h=1000&t=blur:30&format=webp")
                    finished.append("heavy")
                    return answer.status
                }
            }
            // Once one heavy render runs (and the others wait for its place), a plain thumbnail of another photo.
            _ = await eventually { f.endpoint.work.heavy.inFlight == 1 && f.endpoint.work.usage.waiting >= 1 }
            group.addTask {
                let answer = await f.get("/thumbnail?url=\(f.source("photo-2.jpg"))&w=120&format=jpeg")
                finished.append("light")
                return answer.status
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 5 && answers.allSatisfy { $0 == .ok }, "\(answers)")
        #expect(f.endpoint.work.heavy.peak == 1, "one heavy render at a time: \(f.endpoint.work.heavy)")
        let order = finished.order
        #expect(order.firstIndex(of: "light").map { $0 < 4 } == true, "the plain thumbnail did not wait for every heavy render: \(order)")

        // 96x96, 8 frames, blur:30: a third of a pass by the box's estimate, about 2.5 once its frames are known.
        let g = try await EndpointFixture.make()
        defer { Task { await g.close() } }
        let animated = await g.get("/thumbnail?url=\(g.source("spinner.gif"))&w=96&h=96&t=blur:30&format=png")
        #expect(animated.status == .ok, "\(EndpointFixture.json(animated))")
        #expect(g.endpoint.work.heavy.peak == 1 && g.endpoint.work.usage.peak >= 2, "the decoded frames took a place and their whole cost: \(g.endpoint.work.heavy) \(g.endpoint.work.usage)")
        #expect(g.endpoint.work.heavy.inFlight == 0 && g.endpoint.work.usage.inFlight == 0, "and gave them back")
    }

    @Test("3 widths x 2 formats x 4 concurrent requests of a new URL: one origin GET, shared while downloading and while its store write is pending")
    func variantsShareOneOriginal() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let photo = try #require(f.samples["photo-1.jpg"])
        // Slow enough that every request arrives while the download is in flight.
        f.origin.serve("/img/variants.jpg", photo, contentType: "image/jpeg", delay: 500)
        let source = f.source("variants.jpg")
        let paths = [40, 60, 80].flatMap { width in ["png", "jpeg"].map { "/thumbnail?url=\(source)&w=\(width)&format=\($0)" } }
        let answers = await withTaskGroup(of: ImageResponse.self) { group in
            for path in paths { for _ in 0..<4 { group.addTask { await f.get(path) } } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 24 && answers.allSatisfy { $0.status == .ok }, "\(answers.map(\.status.code))")
        #expect(f.origin.requestCount(path: "/img/variants.jpg") == 1)
        // A size asked for after the download ended, while (or after) its original is stored: no second GET.
        #expect(await f.get("/thumbnail?url=\(source)&w=100&format=png").status == .ok)
        #expect(f.origin.requestCount(path: "/img/variants.jpg") == 1)
    }

    @Test("a fallback image for an origin's failure: thumbnailed to the box, the failure's status, a short Cache-Control, X-Image-Fallback; none for the request's own mistakes")
    func fallback() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fallback-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fallbackFile = directory.appendingPathComponent("fallback.png")
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        try #require(f.samples["logo.png"]).write(to: fallbackFile)
        let g = try await EndpointFixture.make(["thumbnail.fallbackImage": fallbackFile.path])
        defer { Task { await g.close() } }
        let missing = g.origin.url("/status/404").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let answer = await g.get("/thumbnail?url=\(missing)&w=50&h=50&format=png")
        #expect(answer.status == .notFound)
        #expect(answer.headerFields[.imageFallback] == "1" && answer.headerFields[.cacheControl] == "public, max-age=60")
        let size = try g.manager.configuration.coders.info(answer.body).pixelSize
        #expect(max(size.width, size.height) == 50 && ImageFormat.sniff(answer.body) == .png)
        // Undecodable bytes from the origin fall back too.
        g.origin.serve("/img/not-an-image.jpg", Data("not an image".utf8), contentType: "image/jpeg")
        let junk = await g.get("/thumbnail?url=\(g.source("not-an-image.jpg"))&w=50")
        #expect(junk.headerFields[.imageFallback] == "1" && junk.status == .unsupportedMediaType)
        // The request's mistakes are not the origin's: no fallback.
        let bad = await g.get("/thumbnail?url=\(missing)&w=0")
        #expect(bad.status == .badRequest && bad.headerFields[.imageFallback] == nil)
        let offList = await g.get("/thumbnail?url=http%3A%2F%2Fimages.example.com%2Fa.jpg&w=10")
        #expect(offList.status == .forbidden && offList.headerFields[.imageFallback] == nil)

        let h = try await EndpointFixture.make(["thumbnail.fallbackImage": fallbackFile.path, "thumbnail.fallbackStatus": "200", "thumbnail.fallbackMaxAge": "5s"])
        defer { Task { await h.close() } }
        let ok = await h.get("/thumbnail?url=\(h.origin.url("/status/404").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&w=40")
        #expect(ok.status == .ok && ok.headerFields[.imageFallback] == "1" && ok.headerFields[.cacheControl] == "public, max-age=5")
    }

    @Test("signed URLs: unsigned or tampered is 403 before any work; signed is served")
    func signing() async throws {
        let f = try await EndpointFixture.make(["thumbnail.signingKey": "0123456789abcdef0123456789abcdef"])
        defer { Task { await f.close() } }
        let signer = try #require(URLSigner(key: "0123456789abcdef0123456789abcdef"))
        let path = "/thumbnail?url=\(f.source("photo-1.jpg"))&w=80"
        #expect(await f.get(path).status == .forbidden)
        #expect(await f.get(signer.sign(path).replacingOccurrences(of: "w=80", with: "w=81")).status == .forbidden)
        #expect(await f.get(signer.sign(path)).status == .ok)
        #expect(f.origin.requestCount(path: "/img/photo-1.jpg") == 1)
    }

    @Test("past thumbnail.maxInFlight a request is 503 with Retry-After: 1 at once; a memory hit is still answered, as the fast path answers it")
    func ceiling() async throws {
        let f = try await EndpointFixture.make(["thumbnail.maxInFlight": "1"])
        defer { Task { await f.close() } }
        let warm = "/thumbnail?url=\(f.source("photo-2.jpg"))&w=12"
        #expect(await f.get(warm).status == .ok)
        f.origin.serve("/img/slow.jpg", try #require(f.samples["photo-1.jpg"]), contentType: "image/jpeg", delay: 3000)
        let held = Task { await f.get("/thumbnail?url=\(f.source("slow.jpg"))&w=10") }
        #expect(await eventually { f.endpoint.requestsInFlight > 0 })
        let shed = await f.get("/thumbnail?url=\(f.source("photo-1.jpg"))&w=10")
        #expect(shed.status == .serviceUnavailable && shed.headerFields[.retryAfter] == "1")
        #expect(EndpointFixture.json(shed)["error"] as? String == "overloaded")
        // The warm URL through respond(to:), the router's door: 200 from memory, HEAD without its body.
        let hit = await f.get(warm)
        #expect(hit.status == .ok && hit.headerFields[.imageSource] == "memory" && !hit.body.isEmpty)
        let head = await f.get(warm, method: .head)
        #expect(head.status == .ok && head.body.isEmpty && head.headerFields[.contentLength] == hit.headerFields[.contentLength])
        // Only a memory hit: the same URL at another size is work, and is shed.
        #expect(await f.get("/thumbnail?url=\(f.source("photo-2.jpg"))&w=13").status == .serviceUnavailable)
        #expect(f.endpoint.requestsInFlight == 1)
        #expect(await held.value.status == .ok)
    }
}

@Suite("ImageEndpoint: info and placeholders")
struct EndpointInfoTests {
    @Test("info of an EXIF-rotated photo: its upright size and stored orientation, from the header; placeholder=1 adds BlurHash and ThumbHash")
    func info() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let stored = try f.manager.configuration.coders.info(f.samples["oriented-6.jpg"]!)
        let answer = await f.get("/info?url=\(f.source("oriented-6.jpg"))")
        #expect(answer.status == .ok && answer.headerFields[.contentType] == "application/json")
        let json = EndpointFixture.json(answer)
        #expect(json["orientation"] as? Int == 6 && json["format"] as? String == "jpeg")
        #expect(json["pixelWidth"] as? Int == stored.pixelSize.width && json["pixelHeight"] as? Int == stored.pixelSize.height)
        #expect((json["pixelWidth"] as? Int ?? 0) > (json["pixelHeight"] as? Int ?? 0), "the samples are landscape upright; stored rotated")
        #expect(json["blurHash"] == nil)
        let withPlaceholders = EndpointFixture.json(await f.get("/info?url=\(f.source("oriented-6.jpg"))&placeholder=1"))
        #expect((withPlaceholders["blurHash"] as? String)?.isEmpty == false && (withPlaceholders["thumbHash"] as? String)?.isEmpty == false)
        for spelling in ["maybe", "true", "yes", "", "01"] {
            #expect(await f.get("/info?url=\(f.source("oriented-6.jpg"))&placeholder=\(spelling)").status == .badRequest, "one spelling: 1 or 0, not '\(spelling)'")
        }
        #expect(EndpointFixture.json(await f.get("/info?url=\(f.source("oriented-6.jpg"))&placeholder=0"))["blurHash"] == nil)
        let placeholder = EndpointFixture.json(await f.get("/placeholder?url=\(f.source("photo-1.jpg"))"))
        #expect((placeholder["blurHash"] as? String)?.isEmpty == false)
        // Both carry a strong ETag of their bytes, so they revalidate: 304 without a body, 412 for If-Match another.
        for target in ["/placeholder?url=\(f.source("photo-1.jpg"))", "/info?url=\(f.source("oriented-6.jpg"))&placeholder=1"] {
            let first = await f.get(target)
            let tag = try #require(first.headerFields[.eTag], "\(target)")
            #expect(tag.hasPrefix("\"") && !tag.hasPrefix("W/"))
            let again = await f.get(target, method: .get, [.ifNoneMatch: tag])
            #expect(again.status == .notModified && again.body.isEmpty && again.headerFields[.eTag] == tag, "\(target): \(again.status)")
            #expect(await f.get(target, method: .get, [.ifNoneMatch: "\"other\""]).status == .ok)
            #expect(await f.get(target, method: .get, [.ifMatch: "\"other\""]).status == .preconditionFailed)
        }
        // A parameter the path does not read is refused, naming it, as thumbnail does.
        for (target, named) in [("/info?url=\(f.source("oriented-6.jpg"))&placeholders=1", "'placeholders'"),
                                ("/info?url=\(f.source("oriented-6.jpg"))&w=100", "'w'"),
                                ("/placeholder?url=\(f.source("photo-1.jpg"))&placeholder=1", "'placeholder'"),
                                // A long name is named by its first 64 characters, not echoed whole.
                                ("/info?url=\(f.source("photo-1.jpg"))&" + String(repeating: "x", count: 5000) + "=1", "'" + String(repeating: "x", count: 64) + "…'")] {
            let refused = await f.get(target)
            #expect(refused.status == .badRequest, "\(target)")
            #expect((EndpointFixture.json(refused)["message"] as? String)?.contains(named) == true, "\(target.prefix(200)): \(EndpointFixture.json(refused))")
            #expect(refused.body.count < 1000, "the answer does not echo a long name whole")
        }
    }

    @Test("/info of a new URL asked many times at once downloads it once and keeps it on disk: the next info and the URL's thumbnails do not download it again")
    func infoSharesTheOriginal() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let target = "/info?url=\(f.source("photo-2.jpg"))"
        let answers = await withTaskGroup(of: ImageResponse.self) { group in
            for _ in 0..<12 { group.addTask { await f.get(target) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.status == .ok })
        #expect(f.origin.requestCount(path: "/img/photo-2.jpg") == 1, "one download for twelve infos at once")
        #expect(await eventually { f.manager.pendingStoreWrites.count == 0 })
        let again = EndpointFixture.json(await f.get(target))
        #expect(again["cacheType"] as? String == "disk")
        #expect(await f.get("/thumbnail?url=\(f.source("photo-2.jpg"))&w=64").status == .ok)
        #expect(f.origin.requestCount(path: "/img/photo-2.jpg") == 1, "the thumbnail was made from the stored original")
    }
}

@Suite("maxBytes: the highest quality that fits")
struct MaxBytesTests {
    @Test("EncodeOptions.fitting: the top quality when it fits, else the highest that fits found by bisection, else the floor's; lossless and PNG untouched")
    func fitting() throws {
        // A stand-in encoder whose size grows with quality: 100 bytes per step.
        var asked: [Int] = []
        let encode = { (options: EncodeOptions) -> Data in
            asked.append(options.quality)
            return Data(count: options.quality * 100)
        }
        var options = EncodeOptions()
        options.quality = 90
        options.maxBytes = 10_000
        #expect(options.fitting(.jpeg, encode).count == 9000 && asked == [90])
        asked = []
        options.maxBytes = 5_050
        #expect(options.fitting(.webp, encode).count == 5000, "q50 is the highest under 5050 bytes")
        #expect(asked.count <= 8, "bisection, not a scan: \(asked)")
        options.maxBytes = 100
        #expect(options.fitting(.avif, encode).count == 3000, "nothing fits: the floor's (q30) bytes")
        options.lossless = true
        #expect(options.fitting(.webp, encode).count == 9000)
        options.lossless = false
        #expect(options.fitting(.png, encode).count == 9000)
        #expect(options.key.contains("max=100") && EncodeOptions().key.contains("max") == false)
    }

    @Test("maxBytes=N through the endpoint: a JPEG of at most N bytes, smaller than without, cached under its own key; a bad value is 400")
    func endpoint() async throws {
        let f = try await EndpointFixture.make()
        defer { Task { await f.close() } }
        let base = "/thumbnail?url=\(f.source("photo-1.jpg"))&w=400&format=jpeg"
        let plain = await f.get(base)
        let target = plain.body.count * 2 / 3
        let fitted = await f.get(base + "&maxBytes=\(target)")
        #expect(fitted.status == .ok && ImageFormat.sniff(fitted.body) == .jpeg)
        #expect(fitted.body.count <= target && fitted.body.count < plain.body.count, "\(fitted.body.count) of \(target)")
        #expect(fitted.headerFields[.eTag] != plain.headerFields[.eTag])
        let again = await f.get(base + "&maxBytes=\(target)")
        #expect(again.headerFields[.imageSource] == "memory" && again.body == fitted.body)
        #expect(await f.get(base + "&maxBytes=0").status == .badRequest)
        #expect(await f.get(base + "&maxBytes=lots").status == .badRequest)
    }
}

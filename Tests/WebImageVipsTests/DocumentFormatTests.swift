import Foundation
import Synchronization
import Testing
import WebImage
import WebImageTestSupport
@_spi(Internals) @testable import WebImageVips

/// SVG and PDF: opt-in (`vips.svg`, `vips.pdf`), sanitised or bounded.
@Suite("SVG and PDF: opt-in, sanitised, first page, bounded", .offCooperativePool)
struct DocumentFormatTests {
    let svgCoder = VipsImageCoder(options: .init(allowSVG: true))
    let pdfCoder = VipsImageCoder(options: .init(allowPDF: true))

    static func svg(_ body: String, width: Int = 200, height: Int = 100, prolog: String = "") -> Data {
        Data((prolog + "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"\(width)\" height=\"\(height)\">"
            + body + "</svg>").utf8)
    }

    static let redBox = "<rect width=\"200\" height=\"100\" fill=\"red\"/>"

    /// The colour at the centre of a decoded image, as (r, g, b).
    static func centre(_ image: Image) throws -> (Int, Int, Int) {
        let pixels = try Fixtures.pixels(image)
        let n = pixels.channels, at = ((pixels.size.height / 2) * pixels.size.width + pixels.size.width / 2) * n
        return (Int(pixels.bytes[at]), Int(pixels.bytes[at + min(1, n - 1)]), Int(pixels.bytes[at + min(2, n - 1)]))
    }

    @Test("SVG: refused by default naming vips.svg; allowed, rasterised at the size asked for, thumbnails drawn small rather than shrunk")
    func svgOptIn() throws {
        let data = Self.svg(Self.redBox)
        #expect(ImageFormat.sniff(data) == .svg)
        let refused = #expect(throws: WebImageError.self) { try VipsImageCoder().decode(data, options: DecodeOptions()) }
        #expect(refused?.code == .unsupportedFormat && refused?.message.contains("vips.svg") == true, "\(refused?.message ?? "")")
        #expect(try svgCoder.info(data).pixelSize == PixelSize(width: 200, height: 100))
        let full = try svgCoder.decode(data, options: DecodeOptions())
        #expect(full.pixelSize == PixelSize(width: 200, height: 100))
        let (r, g, b) = try Self.centre(full)
        #expect(r > 240 && g < 15 && b < 15)
        #expect(try svgCoder.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(50))).pixelSize == PixelSize(width: 50, height: 25))
        // A huge declared size: refused in full by the pixel limit, drawn small as a thumbnail.
        let huge = Self.svg("<rect width=\"100%\" height=\"100%\" fill=\"blue\"/>", width: 100_000, height: 100_000)
        #expect { try svgCoder.decode(huge, options: DecodeOptions()) } throws: { ($0 as? WebImageError)?.code == .pixelLimitExceeded }
        // libvips' thumbnail drew this at full size (74 s: the loader refuses a scale under 0.001); drawn at the smallest scale it is instant.
        let started = ContinuousClock.now
        #expect(try svgCoder.decode(huge, options: DecodeOptions(thumbnailPixelSize: PixelSize(64))).pixelSize == PixelSize(64))
        #expect(ContinuousClock.now - started < .seconds(60 * TestTiming.scale), "generous: a busy machine")
        // So large that even the smallest scale would be over the pixel limit: refused
        // (`drawnSmall`), or, as librsvg 2.54 does past its own bound, read as a tiny page; never drawn large.
        let vast = Self.svg("", width: 1_000_000_000, height: 1_000_000_000)
        do {
            #expect(try svgCoder.decode(vast, options: DecodeOptions(thumbnailPixelSize: PixelSize(64))).pixelSize.area <= 64 * 64)
        } catch let error as WebImageError {
            #expect(error.code == .pixelLimitExceeded || error.code == .decodeFailed, "\(error)")
        }
    }

    @Test("SVG: scripts, event handlers and foreign objects are gone before librsvg; the picture still renders")
    func svgScripts() throws {
        let data = Self.svg("<script>fetch('http://127.0.0.1:1/x')</script><g onload=\"alert(1)\" ONCLICK='x()'>" + Self.redBox
            + "</g><foreignObject><div xmlns=\"http://www.w3.org/1999/xhtml\"><script>1</script></div></foreignObject>")
        let clean = String(decoding: try SVGSanitizer.clean(data), as: UTF8.self)
        #expect(!clean.lowercased().contains("script") && !clean.lowercased().contains("onload") && !clean.lowercased().contains("onclick")
                && !clean.lowercased().contains("foreignobject"), "\(clean)")
        #expect(clean.contains("<rect"))
        let (r, _, _) = try Self.centre(try svgCoder.decode(data, options: DecodeOptions()))
        #expect(r > 240)
    }

    @Test("SVG: external references (image href, xlink:href, use, CSS url() and @import) are never fetched; fragments and data: images stay")
    func svgExternal() async throws {
        let origin = try await TestHTTPServer.start()
        defer { Task { await origin.shutdown() } }
        let png = try Fixtures.encode(Fixtures.quadrants(width: 8, height: 8), as: .png)
        origin.serve("/x.png", png, contentType: "image/png")
        let remote = origin.url("/x.png").absoluteString
        let body = """
            <defs><linearGradient id="g"><stop offset="0" stop-color="red"/></linearGradient></defs>
            <style>@import url(\(remote)); rect { fill: url(\(remote)); }</style>
            <rect width="200" height="100" fill="url(#g)"/>
            <image href="\(remote)" width="10" height="10"/>
            <image xlink:href="file:///etc/passwd" width="10" height="10"/>
            <use xlink:href="\(remote)#a"/>
            <rect width="5" height="5" style="fill: url( '\(remote)' )"/>
            <image href="data:image/png;base64,\(png.base64EncodedString())" width="8" height="8"/>
            <use href="#g"/>
            """
        let data = Self.svg(body)
        let clean = String(decoding: try SVGSanitizer.clean(data), as: UTF8.self)
        #expect(!clean.contains("127.0.0.1") && !clean.contains("file:") && !clean.contains("@import"), "\(clean)")
        #expect(clean.contains("url(#g)") && clean.contains("data:image/png;base64,") && clean.contains("href=\"#g\""), "\(clean)")
        _ = try svgCoder.decode(data, options: DecodeOptions())
        #expect(origin.requestCount(path: "/x.png") == 0, "librsvg fetched an external reference")
    }

    @Test("SVG: filters are dropped (a blur of radius 1000 drew for minutes past any deadline), and more than 10 000 elements refuse the file")
    func svgWork() throws {
        let heavy = Self.svg("<filter id=\"f\"><feGaussianBlur stdDeviation=\"1000\"/><feMorphology radius=\"1000\"/></filter>"
            + String(repeating: "<rect width=\"200\" height=\"100\" fill=\"red\" filter=\"url(#f)\" style=\"filter:url(#f)\"/>", count: 50))
        let clean = String(decoding: try SVGSanitizer.clean(heavy), as: UTF8.self).lowercased()
        #expect(!clean.contains("filter") && !clean.contains("fegaussianblur") && clean.contains("<rect"), "\(clean.prefix(300))")
        let started = ContinuousClock.now
        let (r, _, _) = try Self.centre(try svgCoder.decode(heavy, options: DecodeOptions()))
        #expect(r > 240 && ContinuousClock.now - started < .seconds(60 * TestTiming.scale))
        let many = Self.svg(String(repeating: "<g/>", count: SVGSanitizer.maxElements))
        #expect { try svgCoder.decode(many, options: DecodeOptions()) } throws: { ($0 as? WebImageError)?.message.contains("elements") == true }
    }

    @Test("SVG: a document type declaration (XXE, billion laughs) is refused at once; broken markup is a typed error")
    func svgEntities() throws {
        let xxe = Self.svg("<text>&xxe;</text>", prolog: "<?xml version=\"1.0\"?><!DOCTYPE svg [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]>")
        var laughs = "<?xml version=\"1.0\"?><!DOCTYPE svg [<!ENTITY lol \"lol\">"
        for level in 1...9 { laughs += "<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level - 1 == 0 ? "" : String(level - 1));", count: 10) + "\">" }
        let bomb = Self.svg("<text>&lol9;</text>", prolog: laughs + "]>")
        for (name, data) in [("XXE", xxe), ("billion laughs", bomb)] {
            let started = ContinuousClock.now
            let error = #expect(throws: WebImageError.self, "\(name)") { try svgCoder.decode(data, options: DecodeOptions()) }
            #expect(error?.code == .decodeFailed && error?.message.contains("document type declaration") == true, "\(name): \(error?.message ?? "")")
            #expect(ContinuousClock.now - started < .seconds(30), "\(name) refused before any expansion (generous for a busy machine)")
        }
        // An undefined entity without a DTD is dropped; XML's own and character references stay.
        let text = String(decoding: try SVGSanitizer.clean(Self.svg("<text>a &amp; b &#x41; &evil; &lt;</text>")), as: UTF8.self)
        #expect(text.contains("a &amp; b A  &lt;"), "\(text)")
        // Cleaning a clean document gives it back, a bare '>' in text included (found by the svg fuzz target).
        let once = try SVGSanitizer.clean(Data("<?xml version=\"1.0\"?><svg>x > y &amp; z<g/>w ></svg>".utf8))
        #expect(try SVGSanitizer.clean(once) == once)
        // A '<' made of a reference and followed by a combining mark (one grapheme with it)
        // is escaped too: no raw '<' is left in text, and cleaning again gives it back.
        let mark = try SVGSanitizer.clean(Data("t>&vil;&lt;&awp;&#841;tsvg>841;tsvg>".utf8))
        #expect(!String(decoding: mark, as: UTF8.self).contains("<"), "\(String(decoding: mark, as: UTF8.self))")
        #expect(try SVGSanitizer.clean(mark) == mark)
        for broken in ["<svg><rect></svg>", "<svg width=200></svg>", "<svg><rect width=\"1\"", "<svg><!-- never closed", "<svg>< </svg>", "<svg><![CDATA[x</svg>"] {
            #expect(throws: WebImageError.self, "\(broken)") { try svgCoder.decode(Data(broken.utf8), options: DecodeOptions()) }
        }
        #expect(throws: WebImageError.self) { try svgCoder.decode(Data([0x3C, 0x73, 0x76, 0x67, 0xFF, 0xFE, 0x3E]), options: DecodeOptions()) }
    }

    @Test("PDF: refused by default naming vips.pdf; allowed, the first page at its size, the page count in info, thumbnails drawn small")
    func pdfFirstPage() throws {
        let data = PDFFixtures.pages(3)
        #expect(ImageFormat.sniff(data) == .pdf)
        let refused = #expect(throws: WebImageError.self) { try VipsImageCoder().decode(data, options: DecodeOptions()) }
        #expect(refused?.code == .unsupportedFormat && refused?.message.contains("vips.pdf") == true, "\(refused?.message ?? "")")
        let info = try pdfCoder.info(data)
        #expect(info.pixelSize == PixelSize(width: 300, height: 200) && info.pageCount == 3 && info.frameCount == 1)
        let page = try pdfCoder.decode(data, options: DecodeOptions())
        #expect(page.pixelSize == PixelSize(width: 300, height: 200) && page.frameCount == 1)
        let (r, g, b) = try Self.centre(page)
        #expect(r < 15 && g < 15 && b > 240, "the page's blue square")
        #expect(try pdfCoder.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(60))).pixelSize == PixelSize(width: 60, height: 40))
    }

    @Test("PDF thumbnails of a US Letter page at every box size come out at exactly the size asked for (pdftocairo rounds a pixel up at some)")
    func pdfThumbnailSizes() throws {
        let letter = PDFFixtures.pages(1, width: 612, height: 792)
        for side in [25, 32, 50, 51, 65, 89, 91, 100, 102, 107, 113, 129, 178, 200, 211, 237, 259, 281] {
            let expected = PixelSize(width: max(1, Int((612.0 * Double(side) / 792.0).rounded())), height: side)
            let thumbnail = try pdfCoder.decode(letter, options: DecodeOptions(thumbnailPixelSize: PixelSize(side)))
            #expect(thumbnail.pixelSize == expected, "box \(side)")
        }
        let filled = try pdfCoder.decode(letter, options: DecodeOptions(thumbnailPixelSize: PixelSize(width: 200, height: 50), preserveAspectRatio: false))
        #expect(filled.pixelSize == PixelSize(width: 200, height: 50))
        let (r, g, b) = try Self.centre(try pdfCoder.decode(letter, options: DecodeOptions(thumbnailPixelSize: PixelSize(100))))
        #expect(r < 40 && g < 40 && b > 200, "the page's blue square, resized, not blank")

        // A4 as real files give it, in fractional points: one pixel per point, each side rounded.
        let a4 = PDFFixtures.pages(1, width: 600, height: 850, entries: "/CropBox [0 0 595.276 841.89]")
        #expect(try pdfCoder.info(a4).pixelSize == PixelSize(width: 595, height: 842))
        #expect(try pdfCoder.decode(a4, options: DecodeOptions()).pixelSize == PixelSize(width: 595, height: 842))
        #expect(try pdfCoder.decode(a4, options: DecodeOptions(thumbnailPixelSize: PixelSize(135))).pixelSize == PixelSize(width: 95, height: 135))
        #expect(try pdfCoder.decode(a4, options: DecodeOptions(thumbnailPixelSize: PixelSize(width: 260, height: 10_000))).pixelSize
                == PixelSize(width: 260, height: 368))

        // A fill that needs no shrink still cuts its box from the page (never upscaled).
        let page = PDFFixtures.pages(1)  // 300 x 200
        for (box, expected) in [(PixelSize(width: 100, height: 200), PixelSize(width: 100, height: 200)),
                                (PixelSize(width: 300, height: 50), PixelSize(width: 300, height: 50)),
                                (PixelSize(width: 1000, height: 100), PixelSize(width: 300, height: 100))] {
            let filled = try pdfCoder.decode(page, options: DecodeOptions(thumbnailPixelSize: box, preserveAspectRatio: false))
            #expect(filled.pixelSize == expected, "fill \(box)")
        }
    }

    @Test("PDF bombs: 100 pages render one; a 200000-point page is refused in full and drawn small as a thumbnail; broken files are typed errors")
    func pdfBounds() throws {
        let hundred = PDFFixtures.pages(100)
        #expect(try pdfCoder.info(hundred).pageCount == 100)
        #expect(try pdfCoder.decode(hundred, options: DecodeOptions(thumbnailPixelSize: PixelSize(64))).frameCount == 1)
        let large = PDFFixtures.pages(1, width: 200_000, height: 200_000)
        #expect { try pdfCoder.decode(large, options: DecodeOptions()) } throws: { ($0 as? WebImageError)?.code == .pixelLimitExceeded }
        #expect(try pdfCoder.decode(large, options: DecodeOptions(thumbnailPixelSize: PixelSize(64))).pixelSize == PixelSize(64))
        for broken in [Data("%PDF-1.4\nthis is no pdf at all".utf8), hundred.prefix(hundred.count / 3), Data("%PDF-".utf8)] {
            let error = #expect(throws: WebImageError.self) { try pdfCoder.decode(broken, options: DecodeOptions()) }
            #expect(error?.code == .decodeFailed && error?.message.contains("poppler") == true, "\(error?.message ?? "")")
            #expect(throws: WebImageError.self) { try pdfCoder.info(broken) }
        }
        // libvips takes "%PDF" for a PDF, the sniffer "%PDF-": neither draws what is in between.
        let almost = Data("%PDFx".utf8) + hundred.dropFirst(5)
        for coder in [pdfCoder, VipsImageCoder(options: .init(allowUntrusted: true))] {
            #expect { try coder.decode(almost, options: DecodeOptions()) } throws: { ($0 as? WebImageError)?.code == .unsupportedFormat }
        }
    }

    @Test("PDF drawing time: poppler runs in a child killed at vips.pdfTimeLimit (workTimedOut, transient); four bombs at once each stop, and the next PDF draws")
    func pdfTime() throws {
        let bomb = PDFFixtures.nestedForms()
        let coder = VipsImageCoder(options: .init(allowPDF: true, pdfTimeLimit: .seconds(1), pdfConcurrency: 4))
        // Reading the document draws nothing: its header is cheap.
        #expect(try coder.info(bomb).pageCount == 1)
        let errors = Mutex<[WebImageError?]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let error = #expect(throws: WebImageError.self) { try coder.decode(bomb, options: DecodeOptions(thumbnailPixelSize: PixelSize(77))) }
            errors.withLock { $0.append(error) }
        }
        for error in errors.withLock({ $0 }) {
            #expect(error?.code == .workTimedOut && error?.isTransient == true && error?.message.contains("within vips.pdfTimeLimit") == true,
                    "\(error?.message ?? "")")
        }
        // Every child was killed and reaped: none drawing at 77x77 (a size no
        // other test draws: a Letter page's box of 100 is 77 wide, so both sides
        // are matched) is left with our pid as its parent.
        #expect(Self.children(named: "pdftocairo", arguments: ["-scale-to-x", "77", "-scale-to-y", "77"]).isEmpty)
        #expect(try coder.decode(PDFFixtures.pages(1), options: DecodeOptions(thumbnailPixelSize: PixelSize(60))).pixelSize == PixelSize(width: 60, height: 40))
    }

    @Test("PDF slots: while a coder's one slot is held, another PDF for it is refused at once (overloaded, transient) rather than waiting in a decode slot")
    func pdfSlots() throws {
        let coder = VipsImageCoder(options: .init(allowPDF: true))
        let page = PDFFixtures.pages(1)
        // The slot held as a drawing PDF holds it: deterministic, whatever the machine's load.
        try PopplerTools.withSlot(coder.pdfSlots, limit: coder.options.pdfConcurrency) { () throws -> Void in
            let attempts: [() throws -> Void] = [{ _ = try coder.info(page) }, { _ = try coder.decode(page, options: DecodeOptions(thumbnailPixelSize: PixelSize(60))) }]
            for attempt in attempts {
                let refused = #expect(throws: WebImageError.self) { try attempt() }
                #expect(refused?.code.rawValue == "overloaded" && refused?.isTransient == true && refused?.message.contains("vips.pdfConcurrency") == true,
                        "\(refused?.message ?? "")")
            }
            // Another coder has slots of its own.
            #expect(try pdfCoder.info(page).pageCount == 1)
        }
        #expect(try coder.info(page).pageCount == 1, "the slot is free again")
    }

    @Test("PDF pages as poppler draws them: /Rotate in quarter turns only, the crop box not the media box, at most 32767 pixels a side")
    func pdfGeometry() throws {
        for (rotate, size) in [("90", PixelSize(width: 200, height: 300)), ("-90", PixelSize(width: 200, height: 300)), ("450", PixelSize(width: 200, height: 300)),
                               ("180", PixelSize(width: 300, height: 200)), ("45", PixelSize(width: 300, height: 200))] {
            let data = PDFFixtures.pages(1, entries: "/Rotate \(rotate)")
            #expect(try pdfCoder.info(data).pixelSize == size, "/Rotate \(rotate)")
            #expect(try pdfCoder.decode(data, options: DecodeOptions()).pixelSize == size, "/Rotate \(rotate)")
        }
        // The blue square covers x 75…225, y 50…150 (points, from the bottom left);
        // the crop box keeps x 0…100, y 0…100 of it.
        let cropped = try pdfCoder.decode(PDFFixtures.pages(1, entries: "/CropBox [0 0 100 100]"), options: DecodeOptions())
        #expect(cropped.pixelSize == PixelSize(100))
        let pixels = try Fixtures.pixels(cropped)
        func alphaBlue(_ x: Int, _ y: Int) -> (Int, Int) {
            let at = (y * pixels.size.width + x) * pixels.channels
            return (Int(pixels.bytes[at + 3]), Int(pixels.bytes[at + 2]))
        }
        #expect(alphaBlue(90, 25).0 > 240 && alphaBlue(90, 25).1 > 240, "inside the crop box and the square: blue")
        #expect(alphaBlue(50, 50).0 < 15, "inside the crop box, outside the square: nothing drawn (the media box squeezed in would be blue here)")
        let wide = PDFFixtures.pages(1, width: 40_000, height: 2_000)
        let error = #expect(throws: WebImageError.self) { try pdfCoder.decode(wide, options: DecodeOptions()) }
        #expect(error?.code == .pixelLimitExceeded && error?.message.contains("32767") == true, "\(error?.message ?? "")")
    }

    @Test("a PDF or SVG watermark is refused, naming the formats a watermark takes rather than opt-ins that do not reach it")
    func documentWatermarks() {
        for data in [PDFFixtures.pages(1), Self.svg(Self.redBox)] {
            let error = #expect(throws: WebImageError.self) { try ImageTransformers.Watermark.Overlay(data: data) }
            #expect(error?.code == .unsupportedFormat && error?.message.hasPrefix("a watermark is decoded without the opt-in formats") == true, "\(error?.message ?? "")")
        }
    }

    /// This process's children by command name and a run of their arguments, from /proc.
    static func children(named name: String, arguments: [String]) -> [Int32] {
        let run = Data(arguments.joined(separator: "\0").utf8) + Data([0])
        let me = getpid()
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { return false }
            let command = stat[stat.index(after: open)..<close]
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            let argv = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
            return command == name && fields.count > 2 && Int32(fields[1]) == me
                && argv.range(of: run) != nil
        }
    }
}

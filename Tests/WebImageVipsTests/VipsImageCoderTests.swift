import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTesting
@_spi(Internals) import WebImageVips

extension VipsTests {
@Suite("VipsImageCoder", .offCooperativePool)
struct VipsImageCoderTests {
    let coder = VipsImageCoder()

    @Test("reports what it decodes and encodes here")
    func formats() {
        for format in [ImageFormat.jpeg, .png, .gif, .webp, .tiff] {
            #expect(VipsImageCoder.decodableFormats.contains(format), "\(format)")
        }
        for format in [ImageFormat.jpeg, .png, .gif, .webp] {
            #expect(coder.canEncode(format), "\(format)")
        }
        #expect(!coder.canEncode(.pdf))
    }

    @Test("passes ImageCoderConformance")
    func conformance() async throws {
        let quadrants = Fixtures.quadrants(width: 60, height: 40)
        try await ImageCoderConformance(coder: coder, samples: [
            .init(name: "jpeg", data: try Fixtures.encode(quadrants, as: .jpeg), pixelSize: PixelSize(width: 60, height: 40)),
            .init(name: "png", data: try Fixtures.encode(quadrants, as: .png), pixelSize: PixelSize(width: 60, height: 40)),
            .init(name: "webp", data: try Fixtures.encode(quadrants, as: .webp), pixelSize: PixelSize(width: 60, height: 40)),
            .init(name: "animated gif", data: try Fixtures.animated(.gif, delays: [100, 200, 300], loop: 0, size: 30), pixelSize: PixelSize(30), frameCount: 3),
        ]).run()
    }

    @Test("JPEGs tagged with each orientation decode upright", arguments: 1...8)
    func orientation(_ tag: Int) throws {
        let data = try Fixtures.orientedJPEG(tag)
        let image = try coder.decode(data, options: DecodeOptions())
        #expect(image.storedOrientation.rawValue == tag)
        #expect(image.orientation == .up)
        let swapped = tag >= 5
        #expect(image.pixelSize == (swapped ? PixelSize(width: 32, height: 64) : PixelSize(width: 64, height: 32)))

        // Where each stored quadrant's colour must land once upright (EXIF 1..8):
        // stored TL red, TR green, BL blue, BR white.
        let red = [255.0, 0, 0], green = [0.0, 255, 0], blue = [0.0, 0, 255], white = [255.0, 255, 255]
        let expected: [[Double]] = switch tag {  // upright TL, TR, BL, BR
        case 1: [red, green, blue, white]
        case 2: [green, red, white, blue]
        case 3: [white, blue, green, red]
        case 4: [blue, white, red, green]
        case 5: [red, blue, green, white]
        case 6: [blue, red, white, green]
        case 7: [white, green, blue, red]
        default: [green, white, red, blue]
        }
        let pixels = try Fixtures.pixels(image)
        let w = pixels.size.width, h = pixels.size.height
        let quadrants = [(0..<w / 2, 0..<h / 2), (w / 2..<w, 0..<h / 2), (0..<w / 2, h / 2..<h), (w / 2..<w, h / 2..<h)]
        for (index, (xs, ys)) in quadrants.enumerated() {
            // Skip the seams, where JPEG blurs colours together.
            let mean = Fixtures.mean(pixels, x: xs.lowerBound + 3..<xs.upperBound - 3, y: ys.lowerBound + 3..<ys.upperBound - 3)
            let distance = zip(mean, expected[index]).map { abs($0 - $1) }.max() ?? 0
            #expect(distance < 40, "orientation \(tag), quadrant \(index): \(mean.map { Int($0) }) vs \(expected[index])")
        }

        let raw = try coder.decode(data, options: DecodeOptions(keepOrientation: true))
        #expect(raw.pixelSize == PixelSize(width: 64, height: 32) && raw.orientation.rawValue == tag)
    }

    @Test("animated GIF: frames, durations (0 and 5 ms become 100 ms), loop count, round trip")
    func animatedGIF() throws {
        let data = try Fixtures.animated(.gif, delays: [0, 5, 120, 250], loop: 0)
        let image = try coder.decode(data, options: DecodeOptions())
        #expect(image.frameCount == 4 && image.pixelSize == PixelSize(16))
        #expect(image.frames.map(\.duration) == [.milliseconds(100), .milliseconds(100), .milliseconds(120), .milliseconds(250)])
        #expect(image.loopCount == 0)
        // Each frame keeps its own pixels.
        let pixels = try Fixtures.pixels(image)
        for frame in 0..<4 {
            let mean = Fixtures.mean(pixels, x: 0..<16, y: frame * 16..<frame * 16 + 16)[0]
            #expect(abs(mean - Double(frame * 60)) < 4, "frame \(frame) is \(mean)")
        }

        for format in [ImageFormat.gif, .webp] {
            let again = try coder.decode(try coder.encode(image, as: format, options: EncodeOptions(lossless: true)), options: DecodeOptions())
            #expect(again.frameCount == 4 && again.loopCount == 0, "\(format)")
            #expect(again.frames.map(\.duration) == image.frames.map(\.duration), "\(format)")
        }

        let looped = try coder.decode(try Fixtures.animated(.gif, delays: [100, 100], loop: 3), options: DecodeOptions())
        #expect(looped.loopCount == 3)
        let once = try coder.decode(Fixtures.withoutLoopExtension(try Fixtures.animated(.gif, delays: [100, 100], loop: 0)), options: DecodeOptions())
        #expect(once.loopCount == 1, "a GIF without a loop extension plays once")

        let first = try coder.decode(data, options: DecodeOptions(firstFrameOnly: true))
        #expect(first.frameCount == 1 && !first.isAnimated)
    }

    @Test("animated WebP keeps frames, durations and loop")
    func animatedWebP() throws {
        let data = try Fixtures.animated(.webp, delays: [40, 80, 160], loop: 2)
        let image = try coder.decode(data, options: DecodeOptions())
        #expect(image.frameCount == 3 && image.loopCount == 2)
        #expect(image.frames.map(\.duration) == [.milliseconds(40), .milliseconds(80), .milliseconds(160)])
    }

    @Test("a large JPEG's thumbnail is shrunk on load, never decoded in full")
    func thumbnail() throws {
        let data = try Fixtures.photoJPEG(width: 4000, height: 3000)
        let image = try coder.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(256)))
        #expect(image.pixelSize == PixelSize(width: 256, height: 192))
        let storage = try #require(image.storage(as: VipsStorage.self))
        #expect(storage.loadShrink == 8, "the decoder shrank by \(storage.loadShrink) on load")
        #expect(image.cost == 256 * 192 * 3)

        let fill = try coder.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(100), preserveAspectRatio: false))
        #expect(fill.pixelSize == PixelSize(100))
        let small = try coder.decode(try Fixtures.encode(Fixtures.quadrants(width: 40, height: 20), as: .png), options: DecodeOptions(thumbnailPixelSize: PixelSize(256)))
        #expect(small.pixelSize == PixelSize(width: 40, height: 20), "never upscales")
        let animated = try coder.decode(try Fixtures.animated(.gif, delays: [100, 100, 100], loop: 0, size: 64), options: DecodeOptions(thumbnailPixelSize: PixelSize(16)))
        #expect(animated.frameCount == 3 && animated.pixelSize == PixelSize(16), "animation kept in thumbnails")
        let oriented = try coder.decode(try Fixtures.orientedJPEG(6, width: 640, height: 320), options: DecodeOptions(thumbnailPixelSize: PixelSize(64)))
        #expect(oriented.pixelSize == PixelSize(width: 32, height: 64), "orientation applied to thumbnails")
    }

    @Test("a PNG thumbnail with alpha: exact size, colours kept, no bleed from transparent pixels")
    func pngThumbnail() throws {
        // Left half opaque red; right half fully transparent *green* (invisible, and
        // it must stay so: a filter without premultiplied alpha smears it into the red).
        let width = 1000, height = 600
        var bytes = [UInt8](repeating: 0, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 4
                if x < width / 2 { (bytes[i], bytes[i + 3]) = (255, 255) } else { bytes[i + 1] = 255 }
            }
        }
        let data = try Fixtures.encode(PixelBuffer(size: PixelSize(width: width, height: height), channels: 4, bytes: bytes), as: .png)
        for (box, fill, expected) in [(PixelSize(256), false, PixelSize(width: 256, height: 154)),
                                      (PixelSize(width: 333, height: 100), false, PixelSize(width: 167, height: 100)),
                                      (PixelSize(100), true, PixelSize(100))] {
            let image = try coder.decode(data, options: DecodeOptions(thumbnailPixelSize: box, preserveAspectRatio: !fill))
            #expect(image.pixelSize == expected && image.hasAlpha, "\(box) fill \(fill): \(image.pixelSize)")
            let pixels = try Fixtures.pixels(image)
            #expect(pixels.channels == 4)
            let w = pixels.size.width, row = pixels.size.height / 2
            // Premultiplied, the invisible green is 0 everywhere, so no visible pixel, even
            // the half-transparent ones along the edge, may have any green in it.
            var greenInRed = 0
            for x in 0..<w where pixels.bytes[(row * w + x) * 4 + 3] > 0 && pixels.bytes[(row * w + x) * 4 + 1] > 2 { greenInRed += 1 }
            #expect(greenInRed == 0, "\(box): no green bleeds into visible pixels (\(greenInRed) do)")
            let left = (row * w + 2) * 4, right = (row * w + w - 3) * 4
            #expect(pixels.bytes[left] >= 250 && pixels.bytes[left + 3] == 255, "opaque red stays opaque red")
            #expect(pixels.bytes[right + 3] == 0, "the transparent half stays transparent")
        }
    }

    @Test("the pixel limit is checked from the header; scaleDownLargeImages fits it instead")
    func pixelLimit() throws {
        let claim = Fixtures.pngHeader(width: 100_000, height: 100_000)
        let error = #expect(throws: WebImageError.self) { try coder.decode(claim, options: DecodeOptions()) }
        #expect(error?.code == .pixelLimitExceeded && error?.message.contains("100000x100000") == true, "\(String(describing: error))")

        let photo = try Fixtures.photoJPEG(width: 2000, height: 1000)
        #expect(throws: WebImageError.self) { try coder.decode(photo, options: DecodeOptions(pixelLimit: 500_000)) }
        let fitted = try coder.decode(photo, options: DecodeOptions(pixelLimit: 500_000, scaleDownLargeImages: true))
        #expect(fitted.pixelSize.area <= 500_000 && fitted.pixelSize.width == 1000)
    }

    @Test("bad input is a typed error that names the problem")
    func badInput() throws {
        for (name, data) in [("empty", Data()), ("1 byte", Data([0xFF])), ("random", Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }))] {
            let error = #expect(throws: WebImageError.self, "\(name)") { try coder.decode(data, options: DecodeOptions()) }
            #expect(error.map { [.decodeFailed, .unsupportedFormat].contains($0.code) } == true, "\(name): \(String(describing: error))")
        }
        let quadrants = Fixtures.quadrants(width: 64, height: 48)
        let samples: [(ImageFormat, Data)] = [
            (.jpeg, try Fixtures.encode(quadrants, as: .jpeg)), (.png, try Fixtures.encode(quadrants, as: .png)),
            (.webp, try Fixtures.encode(quadrants, as: .webp)), (.gif, try Fixtures.animated(.gif, delays: [100, 100], loop: 0, size: 64)),
        ]
        for (format, data) in samples {
            for fraction in [0.05, 0.3, 0.6, 0.9, 0.98] {
                let cut = Data(data.prefix(max(1, Int(Double(data.count) * fraction))))
                let error = #expect(throws: WebImageError.self, "\(format) cut at \(fraction)") { try coder.decode(cut, options: DecodeOptions()) }
                #expect(error.map { [.decodeFailed, .unsupportedFormat].contains($0.code) } == true)
                #expect(error?.message.isEmpty == false)
            }
        }

        let svg = Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>"#.utf8)
        let blocked = #expect(throws: WebImageError.self) { try coder.decode(svg, options: DecodeOptions()) }
        #expect(blocked?.code == .unsupportedFormat && blocked?.message.contains("untrusted") == true, "\(String(describing: blocked))")
        let pdf = Data("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF".utf8)
        let pdfError = #expect(throws: WebImageError.self) { try coder.decode(pdf, options: DecodeOptions()) }
        #expect(pdfError?.code == .unsupportedFormat && pdfError?.message.contains("vips.pdf = true") == true, "\(String(describing: pdfError))")

        let trusting = VipsImageCoder(options: .init(allowUntrusted: true))
        #expect(try trusting.decode(svg, options: DecodeOptions()).pixelSize == PixelSize(10))
        #expect(throws: WebImageError.self, "a coder that did not opt in still refuses") { try coder.decode(svg, options: DecodeOptions()) }
    }

    @Test("a GIF with thousands of frames decodes or fails within the pixel limit, without hanging")
    func manyFrames() throws {
        let data = try Fixtures.animated(.gif, delays: [Int](repeating: 20, count: 3000), loop: 0, size: 4)
        let image = try coder.decode(data, options: DecodeOptions())
        #expect(image.frameCount == 3000)
        let limited = #expect(throws: WebImageError.self) { try coder.decode(data, options: DecodeOptions(pixelLimit: 10_000)) }
        #expect(limited?.code == .pixelLimitExceeded && limited?.message.contains("3000 frames") == true)
    }

    /// An animated WebP of `frames` copies of `source`'s first frame: its chunks
    /// before the first `ANMF`, then that frame `frames` times, the RIFF size fixed.
    static func webp(repeatingFirstFrameOf source: Data, frames: Int) -> Data {
        let bytes = [UInt8](source)
        var i = 12, head: [UInt8] = [], frame: [UInt8] = []
        while i + 8 <= bytes.count {
            let size = Int(bytes[i + 4]) | Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]) << 16 | Int(bytes[i + 7]) << 24
            let chunk = Array(bytes[i..<min(bytes.count, i + 8 + size + (size & 1))])
            if bytes[i..<i + 4].elementsEqual("ANMF".utf8) { frame = chunk; break }
            head += chunk
            i += chunk.count
        }
        var body = Array("WEBP".utf8) + head
        body.reserveCapacity(body.count + frame.count * frames)
        for _ in 0..<frames { body += frame }
        let size = UInt32(body.count)
        return Data(Array("RIFF".utf8) + [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size >> 16 & 0xFF), UInt8(size >> 24)] + body)
    }

    @Test("an animated WebP of more than 4096 frames is refused before libvips reads it, as GIF and APNG are: decode and info, at once")
    func webpFrameBomb() throws {
        let source = try Fixtures.animated(.webp, delays: [40, 40], loop: 0, size: 1)
        let fine = Self.webp(repeatingFirstFrameOf: source, frames: 4096)
        #expect(fine.withUnsafeBytes { HeaderProbe.webpFrameCount($0) } == 4096)
        #expect(try coder.info(fine).frameCount == 4096)
        // 100 000 one-pixel frames (about 5 MB) took libwebp's demuxer 13 s of CPU for a header.
        let bomb = Self.webp(repeatingFirstFrameOf: source, frames: 100_000)
        for options in [DecodeOptions(), DecodeOptions(thumbnailPixelSize: PixelSize(8))] {
            let error = #expect(throws: WebImageError.self) { try coder.decode(bomb, options: options) }
            #expect(error?.code == .decodeFailed && error?.message.contains("100000 frames") == true, "\(String(describing: error))")
        }
        let info = #expect(throws: WebImageError.self) { try coder.info(bomb) }
        #expect(info?.code == .decodeFailed && info?.message.contains("more than the 4096") == true, "\(String(describing: info))")
        #expect(source.withUnsafeBytes { HeaderProbe.webpFrameCount($0) } == 2)
        #expect(try coder.encode(coder.decode(try Fixtures.orientedJPEG(1), options: DecodeOptions()), as: .webp, options: EncodeOptions())
            .withUnsafeBytes { HeaderProbe.webpFrameCount($0) } == 0, "a still WebP has none")
    }

    @Test("encoders: JPEG quality and progressive, WebP lossless, metadata stripped")
    func encoders() throws {
        let image = try coder.decode(try Fixtures.orientedJPEG(6), options: DecodeOptions())
        let low = try coder.encode(image, as: .jpeg, options: EncodeOptions(quality: 10))
        let high = try coder.encode(image, as: .jpeg, options: EncodeOptions(quality: 95))
        #expect(low.count < high.count)
        #expect(ImageFormat.sniff(try coder.encode(image, as: .jpeg, options: EncodeOptions(progressive: true))) == .jpeg)
        #expect(low.range(of: Data("Exif".utf8)) == nil, "metadata stripped by default")
        let kept = try coder.encode(image, as: .jpeg, options: EncodeOptions(keepMetadata: true))
        #expect(kept.range(of: Data("Exif".utf8)) != nil)
        // WebP: libvips 8.14 writes EXIF whatever `strip` says; the coder removes it.
        let webp = try coder.encode(image, as: .webp, options: EncodeOptions())
        #expect(webp.range(of: Data("EXIF".utf8)) == nil && webp.range(of: Data("Exif".utf8)) == nil, "no EXIF chunk in a WebP without metadata")
        #expect(try coder.decode(webp, options: DecodeOptions()).pixelSize == image.pixelSize, "the edited container still decodes")
        let webpKept = try coder.encode(image, as: .webp, options: EncodeOptions(keepMetadata: true))
        #expect(webpKept.range(of: Data("EXIF".utf8)) != nil, "kept when asked")
        let lossless = try coder.encode(image, as: .webp, options: EncodeOptions(lossless: true))
        let again = try Fixtures.pixels(try coder.decode(lossless, options: DecodeOptions()))
        #expect(again.bytes == (try Fixtures.pixels(image)).bytes, "lossless WebP keeps every pixel")
        #expect(throws: WebImageError.self) { try coder.encode(image, as: .pdf, options: EncodeOptions()) }
    }

    @Test("WebP metadata removal: only EXIF, XMP and (unless kept) ICCP chunks go, VP8X's flags follow; malformed files are left alone")
    func webPMetadataChunks() throws {
        func chunk(_ name: String, _ payload: [UInt8]) -> [UInt8] {
            let n = payload.count
            return Array(name.utf8) + [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), 0, 0] + payload + (n % 2 == 1 ? [0] : [])
        }
        func riff(_ chunks: [[UInt8]]) -> Data {
            let body = Array("WEBP".utf8) + chunks.flatMap { $0 }
            return Data(Array("RIFF".utf8) + [UInt8(body.count & 0xFF), UInt8(body.count >> 8 & 0xFF), 0, 0] + body)
        }
        let vp8x = chunk("VP8X", [0x20 | 0x08 | 0x04, 0, 0, 0, 9, 0, 0, 9, 0, 0])
        let image = chunk("VP8 ", [UInt8](repeating: 7, count: 33))
        let file = riff([vp8x, chunk("ICCP", [1, 2, 3]), image, chunk("EXIF", [4, 5]), chunk("XMP ", [6])])
        let stripped = WebPMetadata.removing(from: file, keepColorProfile: false)
        #expect(stripped == riff([chunk("VP8X", [0, 0, 0, 0, 9, 0, 0, 9, 0, 0]), image]))
        let profileKept = WebPMetadata.removing(from: file, keepColorProfile: true)
        #expect(profileKept == riff([chunk("VP8X", [0x20, 0, 0, 0, 9, 0, 0, 9, 0, 0]), chunk("ICCP", [1, 2, 3]), image]))
        let plain = riff([image])
        #expect(WebPMetadata.removing(from: plain, keepColorProfile: false) == plain)
        for broken in [file.prefix(file.count - 3), file.prefix(14), Data("RIFF".utf8), Data(), Data(repeating: 0xFF, count: 40)] {
            #expect(WebPMetadata.removing(from: Data(broken), keepColorProfile: false) == Data(broken), "left as it is")
        }
    }
}
}

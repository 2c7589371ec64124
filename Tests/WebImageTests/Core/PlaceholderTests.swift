import Foundation
import Testing
import WebImage

/// BlurHash and ThumbHash against their reference implementations: the hashes
/// below were computed by woltapp/blurhash's C encoder (`C/encode.c`) and
/// evanw/thumbhash's JavaScript (`js/thumbhash.js`) for the same generated
/// pixels, so a port that drifts by one quantisation step fails here.
@Suite("Placeholders: BlurHash and ThumbHash")
struct PlaceholderTests {
    /// The generated image both reference programs were given.
    static func pixels(_ w: Int, _ h: Int, alpha: Bool) -> PixelBuffer {
        let channels = alpha ? 4 : 3
        var bytes = [UInt8](repeating: 0, count: w * h * channels)
        for y in 0..<h {
            for x in 0..<w {
                let values = [(x * 37 + y * 11) & 255, (x * x + y * y * 3 + 17) & 255, ((x ^ y) * 9) & 255, ((x + y * 5) * 7) & 255]
                for c in 0..<channels { bytes[(y * w + x) * channels + c] = UInt8(values[c]) }
            }
        }
        return PixelBuffer(size: PixelSize(width: w, height: h), channels: channels, bytes: bytes)
    }

    @Test("BlurHash: the reference C encoder's hashes", arguments: [
        (32, 24, 4, 3, "LMHU|NrnizsFsrVnVsRrNcj3NGnN"),
        (20, 30, 3, 4, "TLHU^Et7aQrlZyima6I.V{bLnWRh"),
        (16, 16, 1, 1, "00G[xz"),
        (64, 40, 5, 4, "VBHV6hwdV~w=V;w$V?W6V;aSV^jAV@nIVnxuR=WCR]Ry"),
        (9, 7, 9, 9, "|nF|#YaL2ZxC#pKMnit6R%rJSeSK#pSeR,w_R+SgX5bGo0oLWobGo2bFa}t6n%SNW.sAj@S4oLn%V]W:jsn+W.azoLWVbH%0ayN^oKjbW;n%bHWVVvW:jsn+W.azoKWVbHxsn%SNW.sCbHWVoLjZVvW:jsn+W.azoKWVbH"),
    ])
    func blurHash(w: Int, h: Int, cx: Int, cy: Int, expected: String) throws {
        #expect(try BlurHash.encode(Self.pixels(w, h, alpha: false), components: (cx, cy)) == expected)
        #expect(try BlurHash.encode(Self.pixels(w, h, alpha: true), components: (cx, cy)) == expected, "alpha is ignored")
    }

    @Test("BlurHash: the published example decodes to the reference decoder's pixels")
    func blurHashDecode() throws {
        // woltapp/blurhash's README example, decoded at 8x6 by the reference C decoder (`C/decode.c`).
        let reference: [UInt8] = [135,164,177,143,167,177,161,173,177,176,178,174,181,180,171,175,177,171,160,172,174,144,167,179,131,161,175,140,162,174,157,166,170,171,168,165,176,169,161,170,168,162,155,166,169,141,163,176,124,154,169,131,153,165,148,148,154,161,145,141,164,145,134,159,148,140,146,152,155,134,154,169,120,148,162,127,144,155,141,134,139,154,126,118,158,125,108,153,132,118,142,140,141,130,146,159,124,144,154,130,141,148,144,134,132,157,129,113,163,130,104,160,135,114,148,140,134,133,142,151,132,144,149,138,144,145,151,144,135,166,146,124,174,148,118,171,149,123,158,147,135,139,143,146]
        let decoded = try BlurHash.decode("LEHV6nWB2yk8pyo0adR*.7kCMdnj", width: 8, height: 6)
        #expect(decoded.bytes == reference)
    }

    @Test("BlurHash decodes back to the image's mean colour")
    func blurHashMean() throws {
        for colour in [[200, 40, 90], [10, 10, 10], [255, 255, 255]] as [[UInt8]] {
            let image = PixelBuffer(size: PixelSize(width: 12, height: 8), channels: 3, bytes: Array((0..<96).flatMap { _ in colour }))
            let hash = try BlurHash.encode(image)
            let mean = try BlurHash.averageColor(hash)
            #expect([mean.red, mean.green, mean.blue] == colour, "\(hash)")
            // (The decoded picture itself is not flat: the reference basis, cos(πix/w)
            // without a half-pixel offset, gives a flat image small AC terms.)
            #expect(try BlurHash.decode(hash, width: 4, height: 3).size == PixelSize(width: 4, height: 3))
        }
    }

    @Test("ThumbHash: the reference JavaScript encoder's hashes", arguments: [
        (32, 24, false, "XggGJYKCd3cGg2eWZHZ2V0z3988t"),
        (24, 32, false, "XggGJQJmdwJ4hjN4WGdnZHf8xPhP"),
        (30, 30, true, "XgiCFQAIdncHh3iTmVj39ssOdXcZclV3cA=="),
        (100, 75, false, "HwgCDYCWdllYpDWGB3VVZwzHZHj7"),
        (40, 20, true, "HgiCC4IIQmtlcJm/i7WPRhlkNrOkcFM="),
        (1, 1, false, "QdgFFwgI9wiIh4hwj3CI+AiIgIAI94cP"),
    ])
    func thumbHash(w: Int, h: Int, alpha: Bool, expected: String) throws {
        #expect(Data(try ThumbHash.encode(Self.pixels(w, h, alpha: alpha))).base64EncodedString() == expected)
    }

    @Test("ThumbHash decodes back to the mean colour, alpha and aspect ratio")
    func thumbHashMean() throws {
        let colour: [UInt8] = [30, 160, 220]
        let image = PixelBuffer(size: PixelSize(width: 60, height: 30), channels: 3, bytes: Array((0..<1800).flatMap { _ in colour }))
        let hash = try ThumbHash.encode(image)
        let mean = try ThumbHash.averageRGBA(hash)
        #expect(abs(mean.red * 255 - 30) < 6 && abs(mean.green * 255 - 160) < 6 && abs(mean.blue * 255 - 220) < 6 && mean.alpha == 1, "\(mean)")
        #expect(abs(try ThumbHash.approximateAspectRatio(hash) - 2) < 0.5)
        let picture = try ThumbHash.decode(hash)
        #expect(picture.size.width == 32 && picture.size.height < 32)
        let centre = (picture.size.height / 2 * picture.size.width + 16) * 4
        #expect(abs(Int(picture.bytes[centre + 1]) - 160) < 8 && picture.bytes[centre + 3] == 255)
        let clear = try ThumbHash.encode(PixelBuffer(size: PixelSize(4), channels: 4, bytes: [UInt8](repeating: 0, count: 64)))
        #expect(try ThumbHash.averageRGBA(clear).alpha == 0)
    }

    @Test("bad input: sizes, components, and text or bytes that are not a hash")
    func badInput() {
        #expect(throws: WebImageError.self) { try BlurHash.encode(Self.pixels(4, 4, alpha: false), components: (0, 3)) }
        #expect(throws: WebImageError.self) { try BlurHash.encode(Self.pixels(4, 4, alpha: false), components: (10, 3)) }
        #expect(throws: WebImageError.self) { try BlurHash.encode(PixelBuffer(size: PixelSize(4), channels: 3, bytes: [1, 2, 3])) }
        #expect(throws: WebImageError.self) { try BlurHash.encode(PixelBuffer(size: PixelSize(4), channels: 1, bytes: [UInt8](repeating: 0, count: 16))) }
        for text in ["", "LEHV6", "LEHV6nWB2yk8pyo0adR*.7kCMdn", "LEHV6nWB2yk8pyo0adR*.7kCMdn\u{E9}", "LEHV6nWB2yk8pyo0adR*.7kCMdnjX"] {
            #expect(throws: WebImageError.self, "\(text)") { try BlurHash.decode(text, width: 4, height: 4) }
        }
        #expect(throws: WebImageError.self) { try BlurHash.decode("LEHV6nWB2yk8pyo0adR*.7kCMdnj", width: 0, height: 4) }
        #expect(throws: WebImageError.self) { try BlurHash.decode("LEHV6nWB2yk8pyo0adR*.7kCMdnj", width: 100_000, height: 4) }
        #expect(throws: WebImageError.self) { try ThumbHash.encode(Self.pixels(101, 10, alpha: false)) }
        #expect(throws: WebImageError.self) { try ThumbHash.decode([1, 2, 3]) }
        #expect(throws: WebImageError.self) { try ThumbHash.decode([0x5E, 0x08, 0x06, 0x25, 0x82]) }
        #expect(throws: WebImageError.self) { try ThumbHash.decode([0, 0, 0x80, 0, 0]) }
        for _ in 0..<200 {
            let random = (0..<Int.random(in: 5...30)).map { _ in UInt8.random(in: 0...255) }
            _ = try? ThumbHash.decode(random)
        }
    }
}

import Foundation
import Testing
@testable import WebImage

@Suite("Format sniffing")
struct SniffingTests {
    static let cases: [(String, [UInt8], ImageFormat?)] = [
        ("jpeg", [0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10], .jpeg),
        ("png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0], .png),
        ("gif87", Array("GIF87a".utf8) + [1, 0], .gif),
        ("gif89", Array("GIF89a".utf8) + [1, 0], .gif),
        ("tiff little-endian", [0x49, 0x49, 0x2A, 0x00, 8, 0], .tiff),
        ("tiff big-endian", [0x4D, 0x4D, 0x00, 0x2A, 0, 8], .tiff),
        ("webp", Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8 ".utf8), .webp),
        ("heic", [0, 0, 0, 0x18] + Array("ftypheic".utf8) + [0, 0, 0, 0], .heif),
        ("mif1", [0, 0, 0, 0x18] + Array("ftypmif1".utf8) + [0, 0, 0, 0], .heif),
        ("avif", [0, 0, 0, 0x1C] + Array("ftypavif".utf8) + [0, 0, 0, 0], .avif),
        ("jxl codestream", [0xFF, 0x0A, 0, 0], .jxl),
        ("jxl container", [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A], .jxl),
        ("pdf", Array("%PDF-1.7\n".utf8), .pdf),
        ("bmp", Array("BM".utf8) + [0x36, 0, 0, 0, 0, 0, 0, 0, 0x36, 0, 0, 0, 40, 0, 0, 0] + [UInt8](repeating: 0, count: 20), .bmp),
        ("BM text is not bmp", Array("BMW cars are fast and expensive, yes".utf8), nil),
        ("svg", Array("<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8), .svg),
        ("svg with prolog", Array("\u{FEFF}  <?xml version=\"1.0\"?>\n<!-- c -->\n<svg>".utf8), .svg),
        ("html is not svg", Array("<html><body>nope</body></html>".utf8), nil),
        ("mp4 is not heif", [0, 0, 0, 0x18] + Array("ftypisom".utf8) + [0, 0, 0, 0], nil),
        ("riff that is not webp", Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WAVE".utf8), nil),
        ("short bmp", Array("BM".utf8), nil),
        ("empty", [], nil),
        ("one byte", [0xFF], nil),
        ("two jpeg bytes", [0xFF, 0xD8], nil),
    ]

    @Test("magic bytes", arguments: cases.indices)
    func sniffs(index: Int) {
        let (name, bytes, expected) = Self.cases[index]
        #expect(ImageFormat.sniff(Data(bytes)) == expected, "\(name)")
    }

    @Test("random data is not taken for an image with a signature of 4 bytes or more")
    func randomData() {
        // Seeded, so the check is the same every run. JPEG (3 magic bytes) and a JPEG XL
        // codestream (2) are short by nature; every other signature must hold.
        var state: UInt64 = 0x5EED
        func next() -> UInt8 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        var misses: [ImageFormat] = []
        for _ in 0..<20_000 {
            let bytes = (0..<64).map { _ in next() }
            if let format = ImageFormat.sniff(Data(bytes)), format != .jpeg, format != .jxl { misses.append(format) }
        }
        #expect(misses.isEmpty, "\(misses)")
    }

    @Test("names and extensions")
    func names() {
        #expect(ImageFormat(name: "JPG") == .jpeg)
        #expect(ImageFormat(name: "heic") == .heif)
        #expect(ImageFormat(name: "exe") == nil)
        #expect(ImageFormat.jpeg.fileExtension == "jpg")
        #expect(ImageFormat.svg.mimeType == "image/svg+xml")
    }
}

@Suite("Scale from key")
struct ScaleTests {
    @Test("scale", arguments: [
        ("https://x.com/avatar@2x.png", 2.0),
        ("https://x.com/avatar@3x.png", 3.0),
        ("https://x.com/avatar%402x.png", 2.0),
        ("https://x.com/avatar%403X.png", 3.0),
        ("HTTPS://x.com/a%402x.jpg", 2.0),
        ("/var/images/icon@2x.png", 2.0),
        ("/var/images/icon%402x.png", 1.0),  // percent forms count only in http(s) URLs
        ("file:///icon%403x.png", 1.0),
        ("a@2x.p", 1.0),  // shorter than 8 characters
        ("@3x.png", 1.0),
        ("https://x.com/a@2x", 1.0),  // no dot after the marker
        ("https://x.com/photo.jpg", 1.0),
        ("", 1.0),
    ])
    func scale(key: String, expected: Double) {
        #expect(ImageScale.scale(forKey: key) == expected, "\(key)")
    }
}

@Suite("SHA-256")
struct SHA256Tests {
    @Test("FIPS 180-4 vectors")
    func vectors() {
        #expect(SHA256Digest.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Digest.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Digest.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256Digest.hex(String(repeating: "a", count: 1_000_000))
            == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}

@Suite("Pixel sizes")
struct PixelSizeTests {
    @Test func parsing() {
        #expect(PixelSize(parsing: "256x128") == PixelSize(width: 256, height: 128))
        #expect(PixelSize(parsing: "64") == PixelSize(64))
        #expect(PixelSize(parsing: "0x5") == nil)
        #expect(PixelSize(parsing: "-3x5") == nil)
        #expect(PixelSize(parsing: "axb") == nil)
        #expect(PixelSize(parsing: "1x2x3") == nil)
        // One spelling per size: no sign, no leading zero, digits only.
        for text in ["+100", "0100", "100x+5", "100x05", " 100", "100 ", "1_000", "١٠٠", "9999999999"] {
            #expect(PixelSize(parsing: text) == nil, "\(text)")
        }
        #expect(PixelSize(parsing: "100X50") == PixelSize(width: 100, height: 50))
        #expect(PixelSize(width: .max, height: 2).area == .max)
    }
}

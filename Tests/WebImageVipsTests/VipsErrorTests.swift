import Foundation
import Testing
import WebImage
import WebImageTestSupport
@testable import WebImageVips

extension VipsTests {
@Suite("libvips' error text belongs to its request", .offCooperativePool)
struct VipsErrorTests {
    /// The buffer a trim failure once read while another request's PNG decode had
    /// failed a moment before: libvips 8.14 keeps one buffer for the process.
    static let mixed = "source: bad seek to 92514\nrank: window too large\n"

    @Test("each stage keeps its own lines: a transform drops a loader's, a decode drops a saver's, an encode drops a loader's; one line")
    func ownLines() {
        #expect(Vips.ownLines(Self.mixed, for: .transformFailed) == ["rank: window too large"])
        #expect(Vips.ownLines(Self.mixed, for: .decodeFailed) == ["source: bad seek to 92514", "rank: window too large"])
        let buffer = "VipsForeignLoadPng: bad adaptive filter value\npngload_buffer: libpng read error\nwebpsave: unable to encode\ntarget: write failed\nextract_area: bad extract area\n"
        #expect(Vips.ownLines(buffer, for: .decodeFailed) == ["VipsForeignLoadPng: bad adaptive filter value", "pngload_buffer: libpng read error", "extract_area: bad extract area"])
        #expect(Vips.ownLines(buffer, for: .encodeFailed) == ["webpsave: unable to encode", "target: write failed", "extract_area: bad extract area"])
        #expect(Vips.ownLines(buffer, for: .transformFailed) == ["extract_area: bad extract area"])
        #expect(Vips.ownLines("\n  \n", for: .decodeFailed).isEmpty)
        // A WebP's decode drops a PNG loader's line: another request's, failing at the same moment.
        let twoDecodes = "vipspng: libpng read error\nwebp: unable to parse image\nsource: bad seek to 10\n"
        #expect(Vips.ownLines(twoDecodes, for: .decodeFailed, format: .webp) == ["webp: unable to parse image", "source: bad seek to 10"])
        #expect(Vips.ownLines(twoDecodes, for: .decodeFailed, format: .png) == ["vipspng: libpng read error", "source: bad seek to 10"])
        #expect(Vips.ownLines("heifload: bad box\n", for: .decodeFailed, format: .avif) == ["heifload: bad box"])
        #expect(Vips.ownLines(twoDecodes, for: .decodeFailed, format: nil).count == 3, "an unknown format keeps every loader line")
        #expect(Vips.stage(ofLine: "pngsave: x") == .save && Vips.stage(ofLine: "VipsJpeg: x") == .load && Vips.stage(ofLine: "no domain here") == .operation)
    }

    @Test("a broken PNG's decode error carries libvips' reason on one line, and leaves nothing for the next failure")
    func brokenPNG() throws {
        let png = try Fixtures.encode(Fixtures.quadrants(width: 64, height: 64), as: .png)
        // Cut inside the image data: the header reads, the pixels do not.
        let cut = png.prefix(png.count - 40)
        let error = #expect(throws: WebImageError.self) { try VipsImageCoder().decode(Data(cut), options: DecodeOptions()) }
        let message = error?.message ?? ""
        #expect(error?.code == .decodeFailed && message.count > "decoding failed".count + 8, "\(message)")
        #expect(!message.contains("\n") && !message.contains("\\u000A"), "\(message)")
        // The next failure, of another stage, reports only its own words.
        let crop = #expect(throws: WebImageError.self) {
            try ImageTransformers.Crop(x: 0, y: 0, width: 100, height: 100).transform(Fixtures.image(Fixtures.quadrants(width: 8, height: 8)))
        }
        #expect(crop?.message.contains("png") == false && crop?.message.contains("source") == false, "\(crop?.message ?? "")")
    }
}
}

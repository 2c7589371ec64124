import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTurboJPEG
import WebImageVips

@Suite("TurboJPEGCoder: scaled decodes reused for other sizes", .offCooperativePool)
struct ScaledDecodeReuseTests {
    /// A 1600 x 1200 photo-like JPEG: every box up to 200 px needs the 1/8 decode.
    static let photo = Result { try TurboJPEGCoderTests.jpeg(TurboJPEGCoderTests.smooth(width: 1600, height: 1200)) }

    static func thumbnail(_ coder: TurboJPEGCoder, _ data: Data, _ side: Int, fill: Bool = false) throws -> [UInt8] {
        var options = DecodeOptions()
        options.thumbnailPixelSize = PixelSize(side)
        options.preserveAspectRatio = !fill
        return try Fixtures.pixels(try coder.decode(data, options: options)).bytes
    }

    @Test("another size at the same scale starts from the kept decode, and its pixels are byte for byte a fresh decode's; another scale decodes again")
    func sameBytes() throws {
        let data = try Self.photo.get()
        let reuse = ScaledDecodeReuse(maxBytes: 64 << 20, window: .seconds(600))
        let kept = TurboJPEGCoder(fallback: nil, reuse: reuse), fresh = TurboJPEGCoder(fallback: nil)
        #expect(try Self.thumbnail(kept, data, 200) == Self.thumbnail(fresh, data, 200))
        #expect(reuse.count == 1 && reuse.hits == 0 && reuse.bytes == 200 * 150 * 3, "the 1/8 decode (200 x 150) is kept: \(reuse.bytes)")
        for (side, fill) in [(180, false), (120, true), (64, false)] {
            #expect(try Self.thumbnail(kept, data, side, fill: fill) == Self.thumbnail(fresh, data, side, fill: fill), "\(side) fill \(fill)")
        }
        #expect(reuse.hits == 3 && reuse.count == 1)
        // 400 px needs 2/8: a decode of its own, kept beside the first.
        #expect(try Self.thumbnail(kept, data, 400) == Self.thumbnail(fresh, data, 400))
        #expect(reuse.hits == 3 && reuse.count == 2)
        // The coder's figures for a service's /metrics say the same; a coder without reuse has none.
        #expect(kept.figures == [PluginFigure("webimage_turbojpeg_reuse_bytes", .gauge, reuse.bytes),
                                 PluginFigure("webimage_turbojpeg_reuse_entries", .gauge, 2),
                                 PluginFigure("webimage_turbojpeg_reuse_hits_total", .total, 3)])
        #expect(fresh.figures.isEmpty)
        // Other bytes, even of the same length, are another file.
        var other = data
        other[other.count / 2] ^= 0x01
        _ = try? Self.thumbnail(kept, other, 100)
        #expect(reuse.hits == 3)
    }

    @Test("sizes asked for at once decode the file once: the others wait for that decode, and get the same pixels")
    func concurrent() async throws {
        let data = try Self.photo.get()
        let reuse = ScaledDecodeReuse(maxBytes: 64 << 20, window: .seconds(600))
        let coder = TurboJPEGCoder(fallback: nil, reuse: reuse)
        let expected = try Self.thumbnail(TurboJPEGCoder(fallback: nil), data, 150)
        let results = try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<6 { group.addTask { try await BlockingThreadPool.io.run { try Self.thumbnail(coder, data, 150) } } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0 == expected })
        #expect(reuse.hits == 5 && reuse.count == 1, "one decode, five reuses: \(reuse.hits)")
    }

    @Test("bounded: at most maxBytes (the least recently used go), nothing over a quarter of it, nothing past the window; a failed decode leaves nothing behind")
    func bounds() async throws {
        let data = try Self.photo.get()
        // 200 x 150 x 3 = 90 000 bytes per 1/8 decode: room for four, each under a quarter.
        let reuse = ScaledDecodeReuse(maxBytes: 370_000, window: .seconds(600))
        let coder = TurboJPEGCoder(fallback: nil, reuse: reuse)
        let pixels = TurboJPEGCoderTests.smooth(width: 1600, height: 1200)
        let files = try [data] + (1...4).map { index in
            try Fixtures.coder.encode(Fixtures.image(pixels), as: .jpeg, options: EncodeOptions(quality: 80 + index))
        }
        for file in files { _ = try Self.thumbnail(coder, file, 100) }
        #expect(reuse.count == 4 && reuse.bytes == 360_000, "\(reuse.count) \(reuse.bytes)")
        _ = try Self.thumbnail(coder, files[4], 90)
        #expect(reuse.hits == 1, "the newest is kept")
        _ = try Self.thumbnail(coder, files[0], 90)
        #expect(reuse.hits == 1, "the oldest went")
        // 2/8 of this photo is 360 000 bytes: over a quarter of the budget, never kept.
        _ = try Self.thumbnail(coder, data, 300)
        #expect(reuse.count == 4 && reuse.bytes == 360_000)

        // Corrupt entropy data past the header: libjpeg's error, and no decode left running for the next to wait on.
        var broken = data
        let cut = broken.count * 3 / 4
        broken.replaceSubrange(cut..<broken.count, with: Data(repeating: 0xFF, count: 8))
        for _ in 0..<2 { #expect(throws: WebImageError.self) { _ = try Self.thumbnail(coder, broken, 100) } }

        // Past the window the timer (at most once a second) drops everything: an idle service holds no pixels.
        let brief = ScaledDecodeReuse(maxBytes: 1 << 20, window: .milliseconds(200))
        _ = try Self.thumbnail(TurboJPEGCoder(fallback: nil, reuse: brief), data, 100)
        #expect(brief.count == 1)
        var waited = Duration.zero
        while brief.count > 0, waited < .seconds(60) {
            try await Task.sleep(for: .milliseconds(50))
            waited += .milliseconds(50)
        }
        #expect(brief.count == 0 && brief.bytes == 0)
    }
}

import Foundation
import Testing
import WebImage
@_spi(Internals) import WebImageVips
import WebImageTestSupport

extension VipsTests {
@Suite("VipsImageCoder: headers and frame counts", .offCooperativePool)
struct VipsInfoTests {
    let coder = VipsImageCoder()

    @Test("info reads the header: size upright, orientation, frames, delays, loop, alpha, colour space")
    func info() throws {
        let oriented = try coder.info(try Fixtures.orientedJPEG(6, width: 64, height: 32))
        #expect(oriented.format == .jpeg && oriented.storedOrientation == .right)
        #expect(oriented.pixelSize == PixelSize(width: 32, height: 64), "upright, as a decode gives it")
        #expect(oriented.storedPixelSize == PixelSize(width: 64, height: 32), "and as the file stores it")
        let decoded = ImageInfo(try coder.decode(try Fixtures.orientedJPEG(6, width: 64, height: 32), options: DecodeOptions()))
        #expect(decoded.pixelSize == oriented.pixelSize && decoded.storedPixelSize == oriented.storedPixelSize, "described from a decode: the same")
        #expect(oriented.frameCount == 1 && !oriented.hasAlpha && oriented.colorSpace == "srgb" && !oriented.hasColorProfile)

        let gif = try coder.info(try Fixtures.animated(.gif, delays: [100, 5, 300], loop: 0, size: 20))
        #expect(gif.format == .gif && gif.pixelSize == PixelSize(20) && gif.loopCount == 0)
        #expect(gif.frameDurations == [.milliseconds(100), .milliseconds(100), .milliseconds(300)], "5 ms becomes 100 ms")

        let rgba = PixelBuffer(size: PixelSize(8), channels: 4, bytes: [UInt8](repeating: 128, count: 8 * 8 * 4))
        let png = try coder.info(try Fixtures.encode(rgba, as: .png))
        #expect(png.hasAlpha && png.format == .png)
    }

    @Test("info on a header claiming 20000x20000 (400 MP) answers without allocating its pixels, and ignores the pixel limit")
    func hugeHeader() throws {
        let info = try coder.info(Fixtures.pngHeader(width: 20_000, height: 20_000, idat: true))
        #expect(info.pixelSize == PixelSize(20_000), "over the 100 MP limit: info decodes nothing, so the limit does not apply")
    }

    @Test("info on bad bytes: typed errors")
    func badInput() throws {
        #expect { try coder.info(Data()) } throws: { ($0 as? WebImageError)?.code == .decodeFailed }
        #expect { try coder.info(Data("not an image".utf8)) } throws: { ($0 as? WebImageError)?.code == .unsupportedFormat }
        let truncated = Fixtures.pngHeader(width: 10, height: 10).prefix(20)
        #expect { try coder.info(truncated) } throws: { $0 is WebImageError }
    }

    @Test("a GIF with 5000 frames: a typed error, never 4097 frames in silence; its first frame still decodes")
    func manyFrames() throws {
        let gif = Fixtures.manyFrameGIF(frames: 5000)
        let decode = #expect(throws: WebImageError.self) { try coder.decode(gif, options: DecodeOptions()) }
        #expect(decode?.code == .decodeFailed && decode?.message.contains("5000 frames") == true, "\(String(describing: decode))")
        let info = #expect(throws: WebImageError.self) { try coder.info(gif) }
        #expect(info?.message.contains("5000 frames") == true)
        var options = DecodeOptions()
        options.firstFrameOnly = true
        #expect(try coder.decode(gif, options: options).frameCount == 1)
        // Under libvips' ceiling every frame arrives.
        #expect(try coder.decode(Fixtures.manyFrameGIF(frames: 300), options: DecodeOptions()).frameCount == 300)
    }
}
}

@Suite("GIF frame count from the block structure", .offCooperativePool)
struct GIFFrameCountTests {
    func count(_ data: Data) -> Int? { data.withUnsafeBytes { HeaderProbe.gifFrameCount($0) } }

    @Test("counts image descriptors past colour tables and extensions; a cut file counts what it has")
    func counts() {
        #expect(count(Fixtures.manyFrameGIF(frames: 1)) == 1)
        #expect(count(Fixtures.manyFrameGIF(frames: 5000)) == 5000)
        #expect(count(Fixtures.manyFrameGIF(frames: 7, localColorTables: true)) == 7)
        #expect(count(Fixtures.manyFrameGIF(frames: 7, trailer: false)) == 7)
        let full = Fixtures.manyFrameGIF(frames: 10)
        #expect(count(full.prefix(full.count / 2)) ?? 0 < 10)
        #expect(count(Data("GIF89a".utf8)) == nil && count(Data("PNG".utf8)) == nil)
    }
}

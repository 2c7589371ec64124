import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTurboJPEG
import WebImageVips

extension VipsTests {
/// Encoders: AVIF and HEIC, effort, chroma subsampling, progressive JPEG.
@Suite("Encoders", .offCooperativePool)
struct EncoderTests {
    let vips = VipsImageCoder()
    let turbo = TurboJPEGCoder()

    func photo(_ width: Int = 240, _ height: Int = 160) throws -> Image {
        try vips.decode(try Fixtures.photoJPEG(width: width, height: height), options: DecodeOptions())
    }

    /// The JPEG's frame marker (0xC0 baseline, 0xC2 progressive) and each component's sampling factors.
    static func frame(_ jpeg: Data) -> (marker: UInt8, sampling: [UInt8])? {
        let b = [UInt8](jpeg)
        var i = 2
        while i + 4 < b.count, b[i] == 0xFF {
            let marker = b[i + 1], length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                let components = Int(b[i + 9])
                return (marker, (0..<components).map { b[i + 10 + $0 * 3 + 1] })
            }
            i += 2 + length
        }
        return nil
    }

    @Test("AVIF and HEIC: written, recognised, and decoded back to the same picture")
    func avifAndHEIC() throws {
        #expect(vips.canEncode(.avif) && vips.canEncode(.heif), "libheif here has the AV1 and HEVC encoders")
        let image = try ImageTransformers.Resize(PixelSize(64), mode: .fit).transform(Image(pixelSize: PixelSize(width: 80, height: 40), storage: Fixtures.quadrants(width: 80, height: 40)))
        for format in [ImageFormat.avif, .heif] {
            let data = try vips.encode(image, as: format, options: EncodeOptions(quality: 90))
            #expect(ImageFormat.sniff(data) == format)
            let back = try Fixtures.pixels(try vips.decode(data, options: DecodeOptions()))
            #expect(back.size == PixelSize(width: 64, height: 32))
            let red = Fixtures.mean(back, x: 4..<28, y: 4..<12), white = Fixtures.mean(back, x: 36..<60, y: 20..<28)
            #expect(red[0] > 200 && red[1] < 50 && white.allSatisfy { $0 > 200 }, "\(format): \(red) \(white)")
            let withAlpha = try ImageTransformers.RoundCorners(radius: 10).transform(image)
            let alpha = try vips.decode(try vips.encode(withAlpha, as: format, options: EncodeOptions()), options: DecodeOptions())
            #expect(alpha.hasAlpha, "\(format) keeps alpha")
        }
    }

    @Test("effort: WebP and AVIF at their lowest and highest effort both decode; higher effort is not larger")
    func effort() throws {
        // Smooth, photo-like and the same every run: noise (a new draw each run)
        // made WebP's highest effort 5 % larger than its lowest about once in ten runs.
        let size = PixelSize(width: 240, height: 160)
        var bytes = [UInt8](repeating: 0, count: size.area * 3)
        for y in 0..<size.height {
            for x in 0..<size.width {
                let i = (y * size.width + x) * 3
                let wave = 128 + 90 * sin(Double(x) / 17) * cos(Double(y) / 11)
                bytes[i] = UInt8(Double(x) * 255 / Double(size.width))
                bytes[i + 1] = UInt8(max(0, min(255, wave)))
                bytes[i + 2] = UInt8(Double(y) * 255 / Double(size.height))
            }
        }
        let image = Image(pixelSize: size, storage: PixelBuffer(size: size, channels: 3, bytes: bytes))
        for format in [ImageFormat.webp, .avif] {
            let fast = try vips.encode(image, as: format, options: EncodeOptions(quality: 60, effort: 0))
            let slow = try vips.encode(image, as: format, options: EncodeOptions(quality: 60, effort: 9))
            #expect(fast != slow, "\(format): effort changes the encoding")
            #expect(Double(slow.count) <= Double(fast.count) * 1.05, "\(format): \(fast.count) → \(slow.count) bytes")
            #expect(try vips.decode(slow, options: DecodeOptions()).pixelSize == image.pixelSize)
        }
    }

    @Test("chroma subsampling: auto follows the quality, on and off force 4:2:0 and 4:4:4, in both JPEG encoders")
    func subsampling() throws {
        let image = try photo()
        for coder in [vips as any ImageCoder, turbo] {
            func luma(_ options: EncodeOptions) throws -> UInt8? { Self.frame(try coder.encode(image, as: .jpeg, options: options))?.sampling.first }
            #expect(try luma(EncodeOptions(quality: 80)) == 0x22, "\(type(of: coder)): auto at 80 is 4:2:0")
            #expect(try luma(EncodeOptions(quality: 95)) == 0x11, "auto at 95 is 4:4:4")
            #expect(try luma(EncodeOptions(quality: 80, chromaSubsampling: .off)) == 0x11)
            #expect(try luma(EncodeOptions(quality: 95, chromaSubsampling: .on)) == 0x22)
        }
    }

    @Test("progressive JPEG output has an SOF2 frame, baseline an SOF0, from both JPEG encoders")
    func progressive() throws {
        let image = try photo()
        for coder in [vips as any ImageCoder, turbo] {
            #expect(Self.frame(try coder.encode(image, as: .jpeg, options: EncodeOptions(progressive: true)))?.marker == 0xC2, "\(type(of: coder))")
            #expect(Self.frame(try coder.encode(image, as: .jpeg, options: EncodeOptions()))?.marker == 0xC0)
        }
    }

    @Test("formats no coder here writes are typed errors naming what it writes")
    func unwritable() throws {
        let image = try photo(16, 16)
        for format in [ImageFormat.svg, .pdf, .jxl, ImageFormat(rawValue: "bogus")] where !vips.canEncode(format) {
            let error = #expect(throws: WebImageError.self) { try vips.encode(image, as: format, options: EncodeOptions()) }
            if format == .jxl, VipsImageCoder.encodableFormats.contains(.jxl) {
                // libvips writes it here, but only a coder allowed its untrusted saver may.
                #expect(error?.code == .unsupportedFormat && error?.message.contains("vips.allowUntrusted") == true, "\(error?.message ?? "")")
            } else {
                #expect(error?.code == .encodeFailed && error?.message.contains("avif") == true, "\(format): \(error?.message ?? "")")
            }
        }
    }
}
}

import CVips
import CVipsOps
import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTurboJPEG
import WebImageVips

/// A thumbnail is exactly the fit's size, whatever the coder and however it
/// shrinks on load: libvips' WebP, AVIF and HEIF loaders take a shrink factor
/// of their own and round it their way, and an image 100 times wider than tall
/// has one side of a few pixels, where one pixel off is a third of the image.
@Suite("Thumbnails fill the box exactly, in every coder that shrinks on load", .offCooperativePool)
struct ThumbnailBoxTests {
    /// bryce.webp's 11158x2156 at a quarter, libwebp's 1920x96, 100:1 and 1:100.
    static let sizes = [PixelSize(width: 2790, height: 539), PixelSize(width: 1920, height: 96),
                        PixelSize(width: 6400, height: 64), PixelSize(width: 64, height: 6400)]

    /// Smooth diagonal bands (libvips' loaders shrink noise and gradients alike).
    static func pixels(_ size: PixelSize) -> PixelBuffer {
        var bytes = [UInt8](repeating: 0, count: size.width * size.height * 3)
        for y in 0..<size.height {
            for x in 0..<size.width {
                let i = (y * size.width + x) * 3
                bytes[i] = UInt8(truncatingIfNeeded: x / 8)
                bytes[i + 1] = UInt8(truncatingIfNeeded: y / 8)
                bytes[i + 2] = UInt8(truncatingIfNeeded: (x + y) / 16)
            }
        }
        return PixelBuffer(size: size, channels: 3, bytes: bytes)
    }

    /// The fit of `size` in `box`, each side rounded, at least 1.
    static func fit(_ size: PixelSize, in box: PixelSize) -> PixelSize {
        let scale = min(Double(box.width) / Double(size.width), Double(box.height) / Double(size.height))
        return PixelSize(width: max(1, Int((Double(size.width) * scale).rounded())), height: max(1, Int((Double(size.height) * scale).rounded())))
    }

    @Test("fit and fill, extreme aspect ratios, through the vips coder and the direct JPEG path",
          arguments: [ImageFormat.webp, .jpeg, .avif, .heif, .png])
    func exact(format: ImageFormat) throws {
        let vips = VipsImageCoder()
        let turbo = TurboJPEGCoder()
        for size in Self.sizes {
            let data = try Fixtures.encode(Self.pixels(size), as: format, quality: 80)
            for box in [PixelSize(64), PixelSize(width: 48, height: 64), PixelSize(width: 600, height: 20)] {
                for (name, coder) in format == .jpeg ? [("vips", vips as any ImageCoder), ("turbojpeg", turbo)] : [("vips", vips as any ImageCoder)] {
                    let fitted = try coder.decode(data, options: DecodeOptions(thumbnailPixelSize: box))
                    #expect(fitted.pixelSize == Self.fit(size, in: box), "\(format) \(size) into \(box) (\(name)): \(fitted.pixelSize)")
                    // A fill that would enlarge returns the image as it is (never upscale).
                    guard max(Double(box.width) / Double(size.width), Double(box.height) / Double(size.height)) < 1 else { continue }
                    let filled = try coder.decode(data, options: DecodeOptions(thumbnailPixelSize: box, preserveAspectRatio: false))
                    #expect(filled.pixelSize == box, "\(format) \(size) filling \(box) (\(name)): \(filled.pixelSize)")
                }
            }
        }
    }

    @Test("an animation filled at every focus keeps every frame and its delays, each frame the box", arguments: [CropFocus.centre, .attention, .point(x: 0.9, y: 0.1)])
    func animatedFill(focus: CropFocus) throws {
        let data = try Fixtures.animated(.webp, delays: [100, 200, 300], loop: 0, size: 64)
        var options = DecodeOptions(thumbnailPixelSize: PixelSize(width: 40, height: 20), preserveAspectRatio: false)
        options.cropFocus = focus
        let image = try VipsImageCoder().decode(data, options: options)
        #expect(image.pixelSize == PixelSize(width: 40, height: 20) && image.frameCount == 3, "\(focus): \(image.pixelSize), \(image.frameCount) frames")
        #expect(image.frames.map(\.duration) == [.milliseconds(100), .milliseconds(200), .milliseconds(300)])
    }
}

/// JPEG XL is opt-in (docs/coder.md, "Formats"): libvips marks its loader and saver untrusted.
@Suite("JPEG XL: refused by default, naming the key that allows it; decoded and written when allowed", .offCooperativePool)
struct JPEGXLTests {
    static func jxl(_ size: PixelSize) throws -> Data {
        Fixtures.ready()
        // libvips marks the JPEG XL saver untrusted too, and blocks it until a coder
        // allows untrusted operations; a coder that does not still refuses to write JPEG XL itself.
        vips_operation_block_set("VipsForeignSaveJxl", 0)
        let pixels = ThumbnailBoxTests.pixels(size)
        let handle = try pixels.bytes.withUnsafeBytes { raw in
            guard let image = CVips_from_memory(raw.baseAddress, raw.count, Int32(size.width), Int32(size.height), 3) else { throw Fixtures.Failure("from memory") }
            return image
        }
        defer { CVips_unref(handle) }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard CVips_jxlsave(handle, &buffer, &length, 75, 7, 0, 1) == 0, let buffer else { throw Fixtures.Failure("jxlsave: \(String(cString: vips_error_buffer()))") }
        defer { CVips_free(buffer) }
        return Data(bytes: buffer, count: length)
    }

    @Test("decode and info refuse it with unsupportedFormat naming vips.allowUntrusted; an allowing coder decodes it, thumbnails exact")
    func optIn() throws {
        let data = try Self.jxl(PixelSize(width: 640, height: 96))
        #expect(ImageFormat.sniff(data) == .jxl)
        let coder = VipsImageCoder()
        for call in ["decode", "info"] {
            let error = #expect(throws: WebImageError.self) {
                if call == "decode" { _ = try coder.decode(data, options: DecodeOptions()) } else { _ = try coder.info(data) }
            }
            #expect(error?.code == .unsupportedFormat && error?.message.contains("set vips.allowUntrusted = true") == true, "\(call): \(error?.message ?? "")")
        }
        let allowing = VipsImageCoder(options: .init(allowUntrusted: true))
        #expect(try allowing.info(data).pixelSize == PixelSize(width: 640, height: 96))
        #expect(try allowing.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(64))).pixelSize == PixelSize(width: 64, height: 10))
        let limited = #expect(throws: WebImageError.self) { try allowing.decode(data, options: DecodeOptions(pixelLimit: 10_000)) }
        #expect(limited?.code == .pixelLimitExceeded, "the pixel limit holds from the header")
    }

    @Test("JPEG XL out: only a coder that allows untrusted savers writes it; the file decodes back close; alpha kept, an animation's first frame, maxBytes fitted")
    func output() throws {
        let image = Fixtures.image(ThumbnailBoxTests.pixels(PixelSize(width: 200, height: 120)))
        let refusing = VipsImageCoder()
        #expect(!refusing.canEncode(.jxl))
        let refused = #expect(throws: WebImageError.self) { try refusing.encode(image, as: .jxl, options: EncodeOptions()) }
        #expect(refused?.code == .unsupportedFormat && refused?.message.contains("vips.allowUntrusted") == true, "\(refused?.message ?? "")")
        let allowing = VipsImageCoder(options: .init(allowUntrusted: true))
        #expect(allowing.canEncode(.jxl))
        let data = try allowing.encode(image, as: .jxl, options: EncodeOptions(quality: 90))
        #expect(ImageFormat.sniff(data) == .jxl)
        let back = try allowing.decode(data, options: DecodeOptions())
        #expect(back.pixelSize == image.pixelSize)
        let difference = try TurboJPEGCoderTests.difference(back, image)
        #expect(difference.mean < 3, "mean difference \(difference.mean) at quality 90")
        // Effort and quality are passed on: a lower quality is smaller.
        #expect(try allowing.encode(image, as: .jxl, options: EncodeOptions(quality: 40)).count < data.count)
        // Alpha survives; an animation becomes its first frame.
        let rgba = PixelBuffer(size: PixelSize(32), channels: 4, bytes: (0..<(32 * 32 * 4)).map { UInt8(truncatingIfNeeded: $0 % 4 == 3 ? ($0 / 4) % 200 : $0 * 7) })
        #expect(try allowing.decode(try allowing.encode(Fixtures.image(rgba), as: .jxl, options: EncodeOptions()), options: DecodeOptions()).hasAlpha)
        // After a colour step too (its bands once lost their alpha's name, and libjxl refused the image).
        let brighter = try ImageTransformers.Brightness(1.2).transform(Fixtures.image(rgba))
        #expect(try allowing.decode(try allowing.encode(brighter, as: .jxl, options: EncodeOptions()), options: DecodeOptions()).hasAlpha)
        let greyAlpha = PixelBuffer(size: PixelSize(16), channels: 2, bytes: (0..<(16 * 16 * 2)).map { UInt8(truncatingIfNeeded: $0 * 5) })
        _ = try allowing.encode(try ImageTransformers.Gamma(2).transform(Fixtures.image(greyAlpha)), as: .jxl, options: EncodeOptions())
        let gif = try allowing.decode(try Fixtures.animated(.gif, delays: [100, 200], loop: 0, size: 24), options: DecodeOptions())
        let still = try allowing.decode(try allowing.encode(gif, as: .jxl, options: EncodeOptions()), options: DecodeOptions())
        #expect(still.frameCount == 1 && still.pixelSize == PixelSize(24))
        // maxBytes: the highest quality whose file fits.
        let target = try allowing.encode(image, as: .jxl, options: EncodeOptions(quality: 50)).count
        var fitted = EncodeOptions(quality: 95)
        fitted.maxBytes = target
        let fit = try fitted.fitting(.jxl) { try allowing.encode(image, as: .jxl, options: $0) }
        #expect(fit.count <= target && fit.count < data.count, "\(fit.count) bytes for a limit of \(target)")
    }
}

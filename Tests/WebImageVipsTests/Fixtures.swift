import CVips
import CVipsOps
import Foundation
import Testing
@_spi(WebImageInternal) import WebImage
import WebImageTestSupport
import WebImageVips

/// Fixtures made by libvips at test time: a fresh clone has no sample images.
enum Fixtures {
    static let coder = VipsImageCoder()

    /// `width`x`height` RGB where each quadrant has its own colour:
    /// top-left red, top-right green, bottom-left blue, bottom-right white.
    static func quadrants(width: Int, height: Int) -> PixelBuffer {
        var bytes = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let colour: (UInt8, UInt8, UInt8) = switch (x < width / 2, y < height / 2) {
                case (true, true): (255, 0, 0)
                case (false, true): (0, 255, 0)
                case (true, false): (0, 0, 255)
                case (false, false): (255, 255, 255)
                }
                let i = (y * width + x) * 3
                (bytes[i], bytes[i + 1], bytes[i + 2]) = colour
            }
        }
        return PixelBuffer(size: PixelSize(width: width, height: height), channels: 3, bytes: bytes)
    }

    /// libvips initialised through the coder, before a test calls it directly. A
    /// direct call first (`vips_image_new_from_memory`) starts libvips' own lazy
    /// init, which marks it done before its format modules (heif, jxl) are loaded:
    /// a coder initialised meanwhile then finds no AVIF saver for the whole run.
    static func ready() { _ = VipsImageCoder.encodableFormats }

    static func image(_ buffer: PixelBuffer, frames: [Duration] = [.zero], loop: Int = 1) -> Image {
        Image(pixelSize: buffer.size, frames: frames.map(Image.Frame.init), loopCount: loop, hasAlpha: buffer.channels == 4 || buffer.channels == 2, storage: buffer)
    }

    static func encode(_ buffer: PixelBuffer, as format: ImageFormat, quality: Int = 95) throws -> Data {
        try coder.encode(image(buffer), as: format, options: EncodeOptions(quality: quality))
    }

    /// A JPEG whose stored pixels are `quadrants` and whose EXIF says `orientation`.
    static func orientedJPEG(_ orientation: Int, width: Int = 64, height: Int = 32) throws -> Data {
        ready()
        let plain = try encode(quadrants(width: width, height: height), as: .jpeg)
        return try plain.withUnsafeBytes { raw in
            guard let image = CVips_new_from_buffer(raw.baseAddress, raw.count, 0, 0, 0, 0, 1) else { throw Failure("load") }
            defer { CVips_unref(image) }
            var copy: UnsafeMutablePointer<VipsImage>?
            guard CVips_copy(image, &copy) == 0, let copy else { throw Failure("copy") }
            defer { CVips_unref(copy) }
            CVips_set_int(copy, "orientation", Int32(orientation))
            var buffer: UnsafeMutableRawPointer?
            var length = 0
            guard CVips_jpegsave(copy, &buffer, &length, 95, 0, 0, 0) == 0, let buffer else { throw Failure("jpegsave") }
            defer { CVips_free(buffer) }
            return Data(bytes: buffer, count: length)
        }
    }

    /// A photo-like JPEG (noise in every band) of the given size.
    static func photoJPEG(width: Int, height: Int) throws -> Data {
        ready()
        var out: UnsafeMutablePointer<VipsImage>?
        guard CVips_noise_rgb(&out, Int32(width), Int32(height)) == 0, let out else { throw Failure("noise") }
        defer { CVips_unref(out) }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard CVips_jpegsave(out, &buffer, &length, 85, 0, 1, 0) == 0, let buffer else { throw Failure("jpegsave") }
        defer { CVips_free(buffer) }
        return Data(bytes: buffer, count: length)
    }

    /// An animated image: frame i is filled with a grey level of i * 60.
    static func animated(_ format: ImageFormat, delays: [Int], loop: Int, size: Int = 16) throws -> Data {
        var bytes: [UInt8] = []
        for index in delays.indices { bytes += [UInt8](repeating: UInt8(index * 60 % 256), count: size * size * 3) }
        let buffer = PixelBuffer(size: PixelSize(size), channels: 3, bytes: bytes)
        return try coder.encode(image(buffer, frames: delays.map { .milliseconds($0) }, loop: loop), as: format, options: EncodeOptions(quality: 100, lossless: true))
    }

    static func manyFrameGIF(frames: Int, localColorTables: Bool = false, trailer: Bool = true) -> Data {
        SyntheticImages.manyFrameGIF(frames: frames, localColorTables: localColorTables, trailer: trailer)
    }

    static func pngHeader(width: UInt32, height: UInt32, idat: Bool = false) -> Data {
        SyntheticImages.pngHeader(width: width, height: height, idat: idat)
    }

    /// The same GIF without its NETSCAPE2.0 loop extension (plays once).
    static func withoutLoopExtension(_ gif: Data) -> Data {
        let marker = Data("NETSCAPE2.0".utf8)
        guard let range = gif.range(of: marker) else { return gif }
        var data = gif
        data.removeSubrange((range.lowerBound - 3)..<(range.upperBound + 5))
        return data
    }

    static func mean(_ buffer: PixelBuffer, x: Range<Int>, y: Range<Int>) -> [Double] {
        var sums = [Double](repeating: 0, count: buffer.channels)
        for row in y { for column in x { for c in 0..<buffer.channels { sums[c] += Double(buffer.bytes[(row * buffer.size.width + column) * buffer.channels + c]) } } }
        return sums.map { $0 / Double(x.count * y.count) }
    }

    /// The pixels of a libvips image, or of the direct JPEG path's `PixelBuffer`.
    static func pixels(_ image: Image) throws -> PixelBuffer {
        if let buffer = image.storage(as: PixelBuffer.self) { return buffer }
        guard let storage = image.storage(as: VipsStorage.self) else { throw Failure("not a vips image") }
        return try storage.pixels(frameHeight: image.pixelSize.height)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// The harness suite's own executor (below).
let harnessExecutor = BlockingTestExecutor(threads: 2)

/// The trait's mechanism, on an executor of the suite's own.
///
/// What it can promise is the task's executor preference: where the runtime then
/// runs a job is the runtime's. Under load (two CPU burners beside a full run),
/// all eight bodies were once seen on Swift's global pool after 41 s, most likely
/// through priority escalation, which gives a waiting task a second job there;
/// the thread a body lands on is therefore reported, and the preference checked.
@Suite("Test harness", .offCooperativePool(harnessExecutor))
struct HarnessTests {
    static let cases = 8
    static let seen = Lock<[String]>([])

    /// `make tsan` runs in parallel only because the blocking suites' bodies leave
    /// the cooperative pool; this fails if the trait stops setting the preference
    /// that moves them.
    @Test("A suite with .offCooperativePool runs its synchronous bodies with the blocking executor as their task's preference", arguments: 0..<cases)
    func offPool(_ index: Int) {
        let preferred = withUnsafeCurrentTask { $0?.unownedTaskExecutor }
        #expect(preferred == harnessExecutor.asUnownedTaskExecutor(), "body \(index) runs without the suite's executor as its preference")
        let name = Thread.current.name ?? "nil"
        let all = Self.seen.withLock { seen in
            seen.append(name)
            return seen.count == Self.cases ? seen : nil
        }
        if let all, all.contains(where: { !$0.hasPrefix("test-blocking-") }) {
            // Not a failure (see the suite's comment): said so that a run shows it.
            print("Test harness: of \(Self.cases) synchronous bodies, \(all.filter { !$0.hasPrefix("test-blocking-") }.count) ran on another thread: \(all)")
        }
    }
}

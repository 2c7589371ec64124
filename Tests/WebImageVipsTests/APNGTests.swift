import Foundation
import Logging
import Testing
import WebImage
import WebImageTestSupport
import WebImageVips

/// Animated PNGs, made here from PNG frames a few chunks at a time.
@Suite("APNG: frames composited with their blend and dispose ops, bounded, damage falls back loudly", .offCooperativePool)
struct APNGTests {
    struct Frame {
        var pixels: PixelBuffer
        var x = 0, y = 0
        var delay = 100
        /// The delay's denominator: 1000 for milliseconds, 1 for seconds.
        var denominator = 1000
        var dispose: UInt8 = 0
        var blend: UInt8 = 0
    }

    static func be32(_ value: Int) -> [UInt8] { [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }

    /// The chunks of a PNG: (type, data).
    static func chunks(_ png: Data) -> [(String, [UInt8])] {
        let bytes = [UInt8](png)
        var out: [(String, [UInt8])] = []
        var offset = 8
        while offset + 12 <= bytes.count {
            let length = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            out.append((String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self), Array(bytes[(offset + 8)..<(offset + 8 + length)])))
            offset += 12 + length
        }
        return out
    }

    /// An APNG of `canvas` whose frames are 8-bit RGBA PNGs; the first frame is the default image.
    static func apng(_ canvas: PixelSize, _ frames: [Frame], plays: Int = 0, sequence: ((Int) -> Int)? = nil, declared: Int? = nil) throws -> Data {
        var out = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var number = 0
        func next() -> [UInt8] { defer { number += 1 }; return be32(sequence?(number) ?? number) }
        for (index, frame) in frames.enumerated() {
            let png = Self.chunks(try Fixtures.encode(frame.pixels, as: .png))
            if index == 0 {
                var ihdr = png.first { $0.0 == "IHDR" }!.1
                ihdr.replaceSubrange(0..<8, with: be32(canvas.width) + be32(canvas.height))
                out.append(APNG.chunk("IHDR", ihdr))
                out.append(APNG.chunk("acTL", be32(declared ?? frames.count) + be32(plays)))
            }
            let control = next() + be32(frame.pixels.size.width) + be32(frame.pixels.size.height) + be32(frame.x) + be32(frame.y)
                + [UInt8(frame.delay >> 8), UInt8(frame.delay & 0xFF), UInt8(frame.denominator >> 8), UInt8(frame.denominator & 0xFF), frame.dispose, frame.blend]
            out.append(APNG.chunk("fcTL", control))
            let data = png.filter { $0.0 == "IDAT" }.flatMap(\.1)
            out.append(index == 0 ? APNG.chunk("IDAT", data) : APNG.chunk("fdAT", next() + data))
        }
        out.append(APNG.chunk("IEND", []))
        return out
    }

    static func flat(_ size: PixelSize, _ rgba: [UInt8]) -> PixelBuffer {
        PixelBuffer(size: size, channels: 4, bytes: [UInt8]((0..<size.area).flatMap { _ in rgba }))
    }

    /// Pixel (x, y) of frame `index` of a decoded animation, RGBA.
    static func pixel(_ image: Image, frame index: Int, _ x: Int, _ y: Int) throws -> [UInt8] {
        let pixels = try Fixtures.pixels(image)
        let size = image.pixelSize, channels = pixels.channels
        let start = ((index * size.height + y) * size.width + x) * channels
        return Array(pixels.bytes[start..<(start + channels)])
    }

    @Test("three frames: their count, delays and loop through decode and info; each frame's own colour")
    func frames() throws {
        let size = PixelSize(16)
        let data = try Self.apng(size, [Frame(pixels: Self.flat(size, [255, 0, 0, 255]), delay: 100),
                                        Frame(pixels: Self.flat(size, [0, 255, 0, 255]), delay: 200),
                                        Frame(pixels: Self.flat(size, [0, 0, 255, 255]), delay: 300)], plays: 3)
        let image = try Fixtures.coder.decode(data, options: DecodeOptions())
        #expect(image.frameCount == 3 && image.pixelSize == size && image.loopCount == 3)
        #expect(image.frames.map(\.duration) == [.milliseconds(100), .milliseconds(200), .milliseconds(300)])
        #expect(try Self.pixel(image, frame: 0, 8, 8).prefix(3) == [255, 0, 0])
        #expect(try Self.pixel(image, frame: 2, 8, 8).prefix(3) == [0, 0, 255])
        let info = try Fixtures.coder.info(data)
        #expect(info.frameCount == 3 && info.loopCount == 3 && info.pixelSize == size)
        let first = try Fixtures.coder.decode(data, options: DecodeOptions(firstFrameOnly: true))
        #expect(first.frameCount == 1 && first.pixelSize == size)
    }

    @Test("blend over and source, dispose to background and to previous, on a sub-rectangle")
    func compositing() throws {
        let canvas = PixelSize(16)
        let square = PixelSize(8)
        let data = try Self.apng(canvas, [
            Frame(pixels: Self.flat(canvas, [255, 0, 0, 255])),                                          // red canvas
            Frame(pixels: Self.flat(square, [0, 0, 255, 128]), x: 4, y: 4, dispose: 2, blend: 1),          // half blue over, then back
            Frame(pixels: Self.flat(square, [0, 255, 0, 128]), x: 0, y: 0, dispose: 1, blend: 0),          // half green as is, then cleared
            Frame(pixels: Self.flat(square, [0, 0, 0, 0]), x: 8, y: 8, blend: 1),                          // nothing over
        ])
        let image = try Fixtures.coder.decode(data, options: DecodeOptions())
        #expect(image.frameCount == 4)
        let over = try Self.pixel(image, frame: 1, 8, 8)
        #expect(abs(Int(over[0]) - 127) <= 2 && abs(Int(over[2]) - 128) <= 2 && over[3] == 255, "half blue over red: \(over)")
        #expect(try Self.pixel(image, frame: 1, 1, 1) == [255, 0, 0, 255], "outside the frame the canvas stays")
        #expect(try Self.pixel(image, frame: 2, 8, 8) == [255, 0, 0, 255], "dispose previous restored the red under frame 1")
        #expect(try Self.pixel(image, frame: 2, 2, 2) == [0, 255, 0, 128], "blend source replaces, alpha and all")
        #expect(try Self.pixel(image, frame: 3, 2, 2) == [0, 0, 0, 0], "dispose background cleared frame 2's rectangle")
        #expect(try Self.pixel(image, frame: 3, 12, 12) == [255, 0, 0, 255], "a transparent frame blended over changes nothing")
    }

    @Test("thumbnails and fills resize every frame to exactly the fit; the frames stay")
    func thumbnails() throws {
        let canvas = PixelSize(width: 64, height: 32)
        let data = try Self.apng(canvas, [Frame(pixels: Self.flat(canvas, [255, 0, 0, 255])), Frame(pixels: Self.flat(canvas, [0, 0, 255, 255]), delay: 50)])
        let fitted = try Fixtures.coder.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(20)))
        #expect(fitted.pixelSize == PixelSize(width: 20, height: 10) && fitted.frameCount == 2)
        #expect(fitted.frames.map(\.duration) == [.milliseconds(100), .milliseconds(50)])
        #expect(try Self.pixel(fitted, frame: 1, 10, 5).prefix(3) == [0, 0, 255])
        let filled = try Fixtures.coder.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(12), preserveAspectRatio: false))
        #expect(filled.pixelSize == PixelSize(12) && filled.frameCount == 2)
        // A fill that needs no shrink still cuts its box from each frame, and stays animated.
        let cut = try Fixtures.coder.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(32), preserveAspectRatio: false))
        #expect(cut.pixelSize == PixelSize(32) && cut.frameCount == 2)
        #expect(cut.frames.map(\.duration) == [.milliseconds(100), .milliseconds(50)])
        #expect(try Self.pixel(cut, frame: 1, 16, 16).prefix(3) == [0, 0, 255])
    }

    @Test("bounded: frames × canvas against the pixel limit, a typed error naming the frames")
    func bounded() throws {
        let canvas = PixelSize(32)
        let data = try Self.apng(canvas, (0..<5).map { _ in Frame(pixels: Self.flat(canvas, [9, 9, 9, 255])) })
        let error = #expect(throws: WebImageError.self) { try Fixtures.coder.decode(data, options: DecodeOptions(pixelLimit: 4 * 1024)) }
        #expect(error?.code == .pixelLimitExceeded && error?.message.contains("5 frames") == true, "\(error?.message ?? "")")
    }

    @Test("damage (a sequence out of order, a frame count that lies, a frame off the canvas) gives the default image and a warning")
    func damage() throws {
        let canvas = PixelSize(16)
        let frames = [Frame(pixels: Self.flat(canvas, [255, 0, 0, 255])), Frame(pixels: Self.flat(PixelSize(8), [0, 0, 255, 255]), x: 4, y: 4)]
        var offCanvas = frames
        offCanvas[1].x = 12
        let damaged = [try Self.apng(canvas, frames, sequence: { $0 == 1 ? 5 : $0 }), try Self.apng(canvas, frames, declared: 7),
                       try Self.apng(canvas, offCanvas)]
        for (index, data) in damaged.enumerated() {
            let logs = CapturedLogs()
            let image = try CoderLog.$logger.withValue(logs.logger) { try Fixtures.coder.decode(data, options: DecodeOptions()) }
            #expect(image.frameCount == 1 && image.pixelSize == canvas, "case \(index)")
            #expect(try Self.pixel(image, frame: 0, 8, 8).prefix(3) == [255, 0, 0], "the default image, case \(index)")
            let warning = logs.all.first { $0.level == .warning && $0.message.hasPrefix("APNG animation ignored") }
            #expect(warning != nil, "case \(index): \(logs.all.map(\.message))")
        }
    }

    @Test("out-of-range timing: a play count of 2^31 and more, a 65535 s frame; decoded, and written as GIF, WebP and AVIF within their limits")
    func extremeTiming() throws {
        let size = PixelSize(8)
        let frames = [Frame(pixels: Self.flat(size, [255, 0, 0, 255]), delay: 65_535, denominator: 1), Frame(pixels: Self.flat(size, [0, 0, 255, 255]))]
        for plays in [Int(Int32.max) + 1, Int(UInt32.max)] {
            let data = try Self.apng(size, frames, plays: plays)
            let image = try Fixtures.coder.decode(data, options: DecodeOptions())
            #expect(image.frameCount == 2 && image.loopCount == 65_535, "plays \(plays): loop \(image.loopCount)")
            #expect(image.frames.first?.duration == .seconds(65_535))
            #expect(try Fixtures.coder.info(data).loopCount == 65_535)
            for format in [ImageFormat.gif, .webp, .avif] {
                let written = try Fixtures.coder.encode(image, as: format, options: EncodeOptions())
                let again = try Fixtures.coder.decode(written, options: DecodeOptions())
                #expect(again.frameCount == 2, "\(format)")
                #expect(again.frames.first?.duration == .milliseconds(655_350), "\(format): the longest delay every animated format can write")
                if format != .avif { #expect(again.loopCount == 65_535, "\(format) keeps the count, not forever") }
            }
        }
    }
}

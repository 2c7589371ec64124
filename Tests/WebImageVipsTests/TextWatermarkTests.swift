import Foundation
import Testing
import WebImage
import WebImageTestSupport
@testable import WebImageVips

/// Text watermarks (`t=text:…`): drawn where asked, escaped, bounded.
@Suite("Text watermarks", .offCooperativePool)
struct TextWatermarkTests {
    static let grey = PixelBuffer(size: PixelSize(width: 300, height: 120), channels: 3, bytes: [UInt8](repeating: 60, count: 300 * 120 * 3))

    /// The bounding box of the pixels that differ from the grey background.
    static func inked(_ image: Image) throws -> (count: Int, minX: Int, minY: Int, maxX: Int, maxY: Int, reddest: Int) {
        let pixels = try Fixtures.pixels(image)
        var count = 0, minX = Int.max, minY = Int.max, maxX = -1, maxY = -1, reddest = 0
        let n = pixels.channels
        for y in 0..<pixels.size.height {
            for x in 0..<pixels.size.width {
                let at = (y * pixels.size.width + x) * n
                guard (0..<3).contains(where: { pixels.bytes[at + $0] != 60 }) else { continue }
                count += 1
                minX = min(minX, x); minY = min(minY, y); maxX = max(maxX, x); maxY = max(maxY, y)
                reddest = max(reddest, Int(pixels.bytes[at]) - Int(pixels.bytes[at + 1]))
            }
        }
        return (count, minX, minY, maxX, maxY, reddest)
    }

    @Test("drawn in the corner its gravity names, inside the margin, in its colour; the image keeps its size and bands")
    func placement() throws {
        let base = Fixtures.image(Self.grey)
        let southEast = try ImageTransformers.TextWatermark("Hello", size: 24, colour: RGBColor(red: 255, green: 0, blue: 0), opacity: 1).transform(base)
        #expect(southEast.pixelSize == base.pixelSize && !southEast.hasAlpha)
        let se = try Self.inked(southEast)
        #expect(se.count > 50 && se.minX > 150 && se.minY > 60 && se.maxX <= 300 - 10 && se.maxY <= 120 - 10, "\(se)")
        #expect(se.reddest > 150, "red text")
        let northWest = try Self.inked(try ImageTransformers.TextWatermark("Hello", gravity: .northWest).transform(base))
        #expect(northWest.minX >= 10 && northWest.maxX < 150 && northWest.maxY < 60, "\(northWest)")
        // Wider than the room: scaled down to fit inside the margins.
        let long = try Self.inked(try ImageTransformers.TextWatermark(String(repeating: "W", count: 60), size: 64).transform(base))
        #expect(long.minX >= 10 && long.maxX <= 290, "\(long)")
    }

    @Test("markup is text: <span>, &amp; and quotes are drawn as characters, never interpreted")
    func markupEscaped() throws {
        let base = Fixtures.image(Self.grey)
        // Pango would draw this red and huge were it markup; as text it is white glyphs.
        let spec = "<span foreground=\"red\" size=\"100000\">&amp;</span>"
        let drawn = try Self.inked(try ImageTransformers.TextWatermark(spec, size: 12, opacity: 1).transform(base))
        #expect(drawn.count > 20 && drawn.reddest < 30, "\(drawn)")
        #expect(ImageTransformers.TextWatermark.markup("<b>&'\"") == "&lt;b&gt;&amp;&apos;&quot;")
    }

    @Test("bounds: empty, too long, control characters, sizes, opacity, a margin that leaves no room; keys stay short")
    func bounds() throws {
        for bad in ["", String(repeating: "a", count: 101), "two\nlines", "tab\there", String(repeating: "e\u{301}", count: 130),
                    "a" + String(repeating: "\u{0336}", count: 9)] {
            #expect(throws: WebImageError.self, "\(bad.prefix(20))") { try ImageTransformers.TextWatermark(bad) }
        }
        for size in [3, 257] { #expect(throws: WebImageError.self) { try ImageTransformers.TextWatermark("x", size: size) } }
        #expect(throws: WebImageError.self) { try ImageTransformers.TextWatermark("x", opacity: 1.5) }
        let tight = try ImageTransformers.TextWatermark("x", margin: 60)
        #expect { try tight.transform(Fixtures.image(Self.grey)) } throws: { ($0 as? WebImageError)?.code == .stepDoesNotFit }
        let mark = try ImageTransformers.TextWatermark(String(repeating: "long text ", count: 10))
        let other = try ImageTransformers.TextWatermark("other")
        #expect(mark.key.count < 100 && mark.key != other.key)
        // The tallest stack allowed, on a full line at the largest size: drawn, or refused past the pixel bound, in bounded memory.
        let tall = try ImageTransformers.TextWatermark(String(repeating: "a\u{0336}\u{0489}\u{0336}\u{0489}\u{0336}\u{0489}\u{0336}", count: 32), size: 256)
        do { _ = try tall.transform(Fixtures.image(Self.grey)) } catch let error as WebImageError { #expect(error.code == .stepDoesNotFit) }
        #expect(try ImageTransformers.TextWatermark("👨‍👩‍👧‍👦 é").text.count == 3, "a family emoji and an accent are fine")
    }

    @Test("every frame of an animation gets it")
    func animation() throws {
        let gif = try Fixtures.coder.decode(try Fixtures.animated(.gif, delays: [100, 200], loop: 0, size: 96), options: DecodeOptions())
        let result = try ImageTransformers.TextWatermark("Hi", size: 20).transform(gif)
        #expect(result.frameCount == 2 && result.frames.map(\.duration) == gif.frames.map(\.duration))
    }
}

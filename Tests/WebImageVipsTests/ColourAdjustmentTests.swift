import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageVips

/// The colour adjustments against their formulas, computed here in doubles from
/// the input's bytes: no libvips in the reference.
@Suite("Colour adjustments: brightness, contrast, saturation, gamma, pixelate", .offCooperativePool)
struct ColourAdjustmentTests {
    /// Every value 0...255 in each band somewhere, colours that differ per band,
    /// and (with `alpha`) an alpha ramp that must come through untouched.
    static func gradient(alpha: Bool = false, channels: Int = 3) -> PixelBuffer {
        let size = PixelSize(width: 64, height: 48)
        let bands = channels + (alpha ? 1 : 0)
        var bytes = [UInt8]()
        for y in 0..<size.height {
            for x in 0..<size.width {
                let values = [(x * 4 + y) & 255, (y * 5 + x * 3) & 255, (x * y) & 255]
                bytes += values.prefix(channels).map { UInt8($0) }
                if alpha { bytes.append(UInt8((x * 4) & 255)) }
            }
        }
        return PixelBuffer(size: size, channels: bands, bytes: bytes)
    }

    /// The largest difference between `output` and `expected(input pixel)`, per band.
    static func largestError(_ input: PixelBuffer, _ output: PixelBuffer, _ expected: ([Double]) -> [Double]) -> Int {
        #expect(output.size == input.size && output.channels == input.channels)
        var worst = 0
        let n = input.channels
        for pixel in 0..<(input.size.area) {
            let source = (0..<n).map { Double(input.bytes[pixel * n + $0]) }
            let want = expected(source).map { Int(max(0, min(255, $0.rounded()))) }
            for band in 0..<n { worst = max(worst, abs(Int(output.bytes[pixel * n + band]) - want[band])) }
        }
        return worst
    }

    /// The step's pixels; alpha must stay alpha (the encoder picks the format by it).
    func run(_ transformer: any ImageTransformer, on buffer: PixelBuffer) throws -> PixelBuffer {
        let image = try transformer.transform(Fixtures.image(buffer))
        #expect(image.hasAlpha == (buffer.channels == 2 || buffer.channels == 4), "\(transformer.key) on \(buffer.channels) bands: hasAlpha \(image.hasAlpha)")
        return try Fixtures.pixels(image)
    }

    @Test("brightness, contrast and gamma: exactly their formula on each 8-bit value, alpha untouched", arguments: [0, 0.5, 1, 1.7, 10])
    func curves(factor: Double) throws {
        for alpha in [false, true] {
            let input = Self.gradient(alpha: alpha)
            let colourBands = 3
            func each(_ f: @escaping (Double) -> Double) -> ([Double]) -> [Double] {
                { values in values.enumerated().map { $0.offset < colourBands ? f($0.element) : $0.element } }
            }
            #expect(Self.largestError(input, try run(ImageTransformers.Brightness(factor), on: input), each { $0 * factor }) == 0, "brightness \(factor)")
            #expect(Self.largestError(input, try run(ImageTransformers.Contrast(factor), on: input), each { ($0 - 128) * factor + 128 }) == 0, "contrast \(factor)")
            let gamma = max(0.1, factor)
            #expect(Self.largestError(input, try run(ImageTransformers.Gamma(gamma), on: input), each { 255 * pow($0 / 255, 1 / gamma) }) == 0, "gamma \(gamma)")
        }
    }

    @Test("saturation: each pixel's distance from its Rec. 601 grey times the factor, within one level; 0 is grey, 1 is the image", arguments: [0, 0.4, 1, 2.5])
    func saturation(factor: Double) throws {
        for alpha in [false, true] {
            let input = Self.gradient(alpha: alpha)
            let output = try run(ImageTransformers.Saturation(factor), on: input)
            let error = Self.largestError(input, output) { values in
                let grey = 0.299 * values[0] + 0.587 * values[1] + 0.114 * values[2]
                return values.enumerated().map { $0.offset < 3 ? grey + ($0.element - grey) * factor : $0.element }
            }
            #expect(error <= 1, "saturation \(factor), alpha \(alpha): off by \(error)")
            if factor == 1 { #expect(output.bytes == input.bytes) }
        }
        // A grey image stays one grey band.
        let grey = Self.gradient(channels: 1)
        #expect(try run(ImageTransformers.Saturation(factor), on: grey).bytes == grey.bytes)
    }

    @Test("pixelate: each block is its mean (partial ones at the edges with the last column and row repeated), the size kept", arguments: [2, 5, 8, 100])
    func pixelate(size: Int) throws {
        let input = Self.gradient()
        let output = try run(ImageTransformers.Pixelate(size: size), on: input)
        #expect(output.size == input.size && output.channels == 3)
        let width = input.size.width, height = input.size.height
        for blockY in stride(from: 0, to: height, by: size) {
            for blockX in stride(from: 0, to: width, by: size) {
                let xs = blockX..<min(width, blockX + size), ys = blockY..<min(height, blockY + size)
                for band in 0..<3 {
                    let filled = (blockY..<(blockY + size)).flatMap { y in (blockX..<(blockX + size)).map { x in
                        Int(input.bytes[(min(y, height - 1) * width + min(x, width - 1)) * 3 + band])
                    } }
                    let mean = Double(filled.reduce(0, +)) / Double(filled.count)
                    let seen = ys.flatMap { y in xs.map { x in Int(output.bytes[(y * width + x) * 3 + band]) } }
                    #expect(Set(seen).count == 1, "block \(blockX),\(blockY) of \(size) is not one colour")
                    #expect(abs(Double(seen[0]) - mean) <= 1, "block \(blockX),\(blockY) band \(band): \(seen[0]), mean \(mean)")
                }
            }
        }
        #expect(try run(ImageTransformers.Pixelate(size: 1), on: input).bytes == input.bytes)
    }

    @Test("animations: every frame adjusted, frames and delays kept")
    func animation() throws {
        let gif = try Fixtures.coder.decode(try Fixtures.animated(.gif, delays: [100, 200, 300], loop: 0, size: 24), options: DecodeOptions())
        for step in [ImageTransformers.Brightness(0.5) as any ImageTransformer, ImageTransformers.Saturation(0), ImageTransformers.Pixelate(size: 4)] {
            let result = try step.transform(gif)
            #expect(result.frameCount == 3 && result.frames.map(\.duration) == gif.frames.map(\.duration) && result.loopCount == 0, "\(step.key)")
        }
    }
}

internal import CVips
internal import CVipsOps
import Foundation
public import WebImage

/// Colour adjustments and pixelation: `brightness:F`, `contrast:F`,
/// `saturation:F`, `gamma:F` and `pixelate:N` in a transform spec.
///
/// Each works on 8-bit values in the image's own space after a conversion to
/// sRGB (grey stays grey: one band, two with alpha), frame by frame; alpha is
/// never changed. Values are rounded to the nearest and clamped to 0...255, so
/// each is exact arithmetic on the 8-bit input (docs/coder.md gives the formulas).
extension ImageTransformers {
    /// Every colour value times `factor`: 1 leaves the image as it is, 0 makes it
    /// black, 2 twice as bright (clamped at white). As CSS's `brightness()` and
    /// Pillow's `ImageEnhance.Brightness`.
    ///
    /// ```swift
    /// let brighter = ImageTransformers.Brightness(1.2)
    /// ```
    public struct Brightness: ImageTransformer {
        public var factor: Double
        /// `factor` is clamped to 0...10.
        public init(_ factor: Double) { self.factor = ColourLUT.clamp(factor, 0...10) }
        public var key: String { "brightness(\(factor))" }
        public func footprint(after input: ImageFootprint) -> ImageFootprint { ColourLUT.eightBit(input) }
        public func transform(_ image: Image) throws -> Image {
            try ColourLUT.apply(image, operation: "brightness") { value in value * factor }
        }
    }

    /// Every colour value's distance from mid-grey (128) times `factor`: 1
    /// leaves the image as it is, 0 makes it a flat 128 grey, 2 doubles the
    /// contrast. As CSS's `contrast()` (Pillow's `ImageEnhance.Contrast` pivots
    /// on the image's mean grey instead).
    public struct Contrast: ImageTransformer {
        public var factor: Double
        /// `factor` is clamped to 0...10.
        public init(_ factor: Double) { self.factor = ColourLUT.clamp(factor, 0...10) }
        public var key: String { "contrast(\(factor))" }
        public func footprint(after input: ImageFootprint) -> ImageFootprint { ColourLUT.eightBit(input) }
        public func transform(_ image: Image) throws -> Image {
            try ColourLUT.apply(image, operation: "contrast") { value in (value - 128) * factor + 128 }
        }
    }

    /// Each pixel's distance from its own grey times `factor`: 1 leaves the
    /// image as it is, 0 makes it grey, 2 twice as colourful. The grey is the
    /// Rec. 601 luma, 0.299 R + 0.587 G + 0.114 B, as Pillow's
    /// `ImageEnhance.Color` computes it. A grey image is unchanged.
    public struct Saturation: ImageTransformer {
        public var factor: Double
        /// `factor` is clamped to 0...10.
        public init(_ factor: Double) { self.factor = ColourLUT.clamp(factor, 0...10) }
        public var key: String { "saturation(\(factor))" }
        public func footprint(after input: ImageFootprint) -> ImageFootprint { ColourLUT.eightBit(input) }
        public func transform(_ image: Image) throws -> Image {
            try VipsFrames.map(image) { frame in
                let eight = try ColourLUT.eightBit(frame)
                guard eight.bands >= 3 else { return eight }
                // grey + (v - grey) * f for each of R, G, B: one matrix; alpha passes through.
                let luma = [0.299, 0.587, 0.114]
                let n = eight.bands
                var matrix = [Double](repeating: 0, count: n * n)
                for row in 0..<n {
                    for column in 0..<n {
                        matrix[row * n + column] = row < 3 && column < 3
                            ? (1 - factor) * luma[column] + (row == column ? factor : 0)
                            : (row == column ? 1 : 0)
                    }
                }
                return try Vips.make(.transformFailed, "vips_recomb") { CVips_recomb_uchar(eight.pointer, $0, matrix, Int32(n)) }
            }
        }
    }

    /// Every colour value through a gamma curve: 255 × (value / 255)^(1 / `gamma`).
    /// 1 leaves the image as it is; above 1 lightens the mid-tones, below 1
    /// darkens them; black and white stay. As ImageMagick's `-gamma`.
    public struct Gamma: ImageTransformer {
        public var gamma: Double
        /// `gamma` is clamped to 0.1...10.
        public init(_ gamma: Double) { self.gamma = ColourLUT.clamp(gamma, 0.1...10) }
        public var key: String { "gamma(\(gamma))" }
        public func footprint(after input: ImageFootprint) -> ImageFootprint { ColourLUT.eightBit(input) }
        public func transform(_ image: Image) throws -> Image {
            try ColourLUT.apply(image, operation: "gamma") { value in 255 * pow(value / 255, 1 / gamma) }
        }
    }

    /// Blocks of `size` × `size` pixels, each filled with its mean, from the
    /// top left; a partial block at the right or bottom edge is the mean of its
    /// pixels with the image's last column or row repeated to fill it. The size
    /// is unchanged. Alpha is averaged with the colours.
    public struct Pixelate: ImageTransformer {
        public var size: Int
        /// `size` is at least 1 (1 changes nothing).
        public init(size: Int) { self.size = max(1, size) }
        public var key: String { "pixelate(\(size))" }
        public func footprint(after input: ImageFootprint) -> ImageFootprint { ColourLUT.eightBit(input) }
        /// A shrink and a zoom: two passes.
        ///
        /// ```swift
        /// let blocks = ImageTransformers.Pixelate(size: 12)
        /// ```
        public func cost(for input: ImageFootprint) -> Double { 2 * TransformCost.pass(input) }
        public func transform(_ image: Image) throws -> Image {
            guard size > 1 else { return image }
            return try VipsFrames.map(image) { frame in
                let eight = try ColourLUT.eightBit(frame)
                return try Vips.make(.transformFailed, "pixelate") { CVips_pixelate(eight.pointer, $0, Int32(size)) }
            }
        }
    }
}

/// The 8-bit conversion and the per-band tables the colour adjustments share.
enum ColourLUT {
    static func clamp(_ value: Double, _ range: ClosedRange<Double>) -> Double {
        value.isFinite ? min(range.upperBound, max(range.lowerBound, value)) : range.lowerBound
    }

    /// One byte per sample: what the adjustments leave.
    static func eightBit(_ input: ImageFootprint) -> ImageFootprint {
        var output = input
        output.bytesPerSample = 1
        return output
    }

    /// The frame as 8-bit sRGB, or 8-bit grey when it is grey (one band, or two with alpha).
    static func eightBit(_ frame: VipsHandle) throws -> VipsHandle {
        let grey = frame.bands <= 2
        let converted = try Vips.make(.transformFailed, "vips_colourspace") { grey ? CVips_grey(frame.pointer, $0) : CVips_srgb(frame.pointer, $0) }
        return try Vips.make(.transformFailed, "vips_cast") { CVips_cast_uchar(converted.pointer, $0) }
    }

    /// Each frame in 8 bits through `curve` on its colour bands (rounded to the
    /// nearest, clamped), alpha through unchanged: one table lookup per sample.
    static func apply(_ image: Image, operation: String, _ curve: (Double) -> Double) throws -> Image {
        let values = (0..<256).map { UInt8(max(0, min(255, curve(Double($0)).rounded()))) }
        return try VipsFrames.map(image) { frame in
            let eight = try eightBit(frame)
            let bands = eight.bands, colourBands = eight.hasAlpha ? bands - 1 : bands
            var table = [UInt8](repeating: 0, count: 256 * bands)
            for value in 0..<256 {
                for band in 0..<bands { table[value * bands + band] = band < colourBands ? values[value] : UInt8(value) }
            }
            return try Vips.make(.transformFailed, operation) { CVips_maplut_uchar(eight.pointer, $0, table, Int32(bands)) }
        }
    }
}

internal import CVips
internal import CVipsOps
import Foundation
public import WebImage

/// Pixel operations over libvips, applied to every frame of an animated image.
/// Each has a stable `ImageTransformer/key` used in derived cache keys.
///
/// ```swift
/// let context = ImageContext(transformer: .pipeline([
///     ImageTransformers.Resize(PixelSize(256), mode: .fill),
///     ImageTransformers.RoundCorners(radius: 16),
/// ]))
/// ```
extension ImageTransformers {
    /// How ``Resize`` fits the image in its box.
    public enum ResizeMode: String, Sendable, Hashable {
        /// Inside the box, keeping the aspect ratio.
        case fit
        /// Covering the box, keeping the aspect ratio, then cropped to it (centred).
        case fill
        /// Exactly the box, ignoring the aspect ratio.
        case stretch
    }

    /// Which part of the image a ``ResizeMode/fill`` keeps when it crops.
    public typealias CropFocus = WebImage.CropFocus

    /// Resizes with a Lanczos kernel.
    public struct Resize: ImageTransformer {
        public var size: PixelSize
        public var mode: ResizeMode
        /// What a fill keeps of the covered image; ignored by fit and stretch.
        public var focus: CropFocus
        public init(_ size: PixelSize, mode: ResizeMode = .fit, focus: CropFocus = .centre) {
            self.size = size
            self.mode = mode
            self.focus = focus
        }
        public var key: String { "resize(\(size),\(mode.rawValue)\(mode == .fill && focus != .centre ? ",\(focus.key)" : ""))" }
        public func footprint(after input: ImageFootprint) -> ImageFootprint {
            var output = input
            let w = Double(size.width) / Double(max(1, input.size.width)), h = Double(size.height) / Double(max(1, input.size.height))
            switch mode {
            case .stretch, .fill: output.size = size
            case .fit:
                let s = min(w, h)
                output.size = PixelSize(width: max(1, Int((Double(input.size.width) * s).rounded())), height: max(1, Int((Double(input.size.height) * s).rounded())))
            }
            return output
        }
        /// Reads the input and writes the output (a fill covers the box first).
        public func cost(for input: ImageFootprint) -> Double {
            TransformCost.pass(input) + TransformCost.pass(footprint(after: input)) * (mode == .fill ? 2 : 1)
        }
        public func transform(_ image: Image) throws -> Image {
            try VipsFrames.map(image) { frame in
                let w = Double(size.width) / Double(frame.width), h = Double(size.height) / Double(frame.height)
                switch mode {
                case .stretch:
                    return try Vips.make(.transformFailed, "vips_resize") { CVips_resize(frame.pointer, $0, w, h) }
                case .fit:
                    let s = min(w, h)
                    return try exact(frame, PixelSize(width: max(1, Int((Double(frame.width) * s).rounded())), height: max(1, Int((Double(frame.height) * s).rounded()))))
                case .fill:
                    let s = max(w, h)
                    let covered = try exact(frame, PixelSize(width: max(size.width, Int((Double(frame.width) * s).rounded())), height: max(size.height, Int((Double(frame.height) * s).rounded()))))
                    if focus.isSmart {
                        return try Vips.make(.transformFailed, "vips_smartcrop") {
                            CVips_smartcrop(covered.pointer, $0, Int32(size.width), Int32(size.height), focus.interesting)
                        }
                    }
                    let (left, top) = focus.origin(of: size, in: PixelSize(width: covered.width, height: covered.height))
                    return try Vips.make(.transformFailed, "vips_extract_area") {
                        CVips_extract_area(covered.pointer, $0, Int32(left), Int32(top), Int32(size.width), Int32(size.height))
                    }
                }
            }
        }
        private func exact(_ frame: VipsHandle, _ target: PixelSize) throws -> VipsHandle {
            try Vips.make(.transformFailed, "vips_resize") {
                CVips_resize(frame.pointer, $0, Double(target.width) / Double(frame.width), Double(target.height) / Double(frame.height))
            }
        }
    }

    /// Cuts out a rectangle (in pixels of one frame).
    public struct Crop: ImageTransformer {
        public var x: Int, y: Int, width: Int, height: Int
        public init(x: Int, y: Int, width: Int, height: Int) {
            (self.x, self.y, self.width, self.height) = (x, y, width, height)
        }
        public var key: String { "crop(\(x),\(y),\(width)x\(height))" }

        /// What puts the rectangle outside an image of `size`, in the terms of its
        /// parameters, or nil when it fits.
        static func misfit(x: Int, y: Int, width: Int, height: Int, in size: PixelSize) -> String? {
            if x < 0 || y < 0 { return "x and y must be 0 or more" }
            if width <= 0 || height <= 0 { return "width and height must be positive" }
            if x >= size.width { return "x \(x) is past its width \(size.width)" }
            if y >= size.height { return "y \(y) is past its height \(size.height)" }
            func sum(_ a: Int, _ b: Int) -> String {
                let (total, overflow) = a.addingReportingOverflow(b)
                return overflow ? "" : " (\(total))"
            }
            if width > size.width - x { return "x + width\(sum(x, width)) is past its width \(size.width)" }
            if height > size.height - y { return "y + height\(sum(y, height)) is past its height \(size.height)" }
            return nil
        }
        public func footprint(after input: ImageFootprint) -> ImageFootprint {
            var output = input
            output.size = PixelSize(width: min(width, input.size.width), height: min(height, input.size.height))
            return output
        }
        public func transform(_ image: Image) throws -> Image {
            if let problem = Self.misfit(x: x, y: y, width: width, height: height, in: image.pixelSize) {
                throw WebImageError(.stepDoesNotFit, "crop:\(x),\(y),\(width),\(height) does not fit the \(image.pixelSize) image: \(problem)")
            }
            return try VipsFrames.map(image) { frame in
                try Vips.make(.transformFailed, "vips_extract_area") {
                    CVips_extract_area(frame.pointer, $0, Int32(x), Int32(y), Int32(width), Int32(height))
                }
            }
        }
    }

    /// Rotates clockwise: exact for multiples of 90°, else on a larger transparent canvas.
    public struct Rotate: ImageTransformer {
        public var degrees: Double
        public init(degrees: Double) { self.degrees = degrees }
        public var key: String { "rotate(\(degrees))" }
        /// A quarter turn swaps the sides; any other angle makes the bounding
        /// canvas of the turned image, with an alpha band added.
        public func footprint(after input: ImageFootprint) -> ImageFootprint {
            var output = input
            let normalized = degrees.truncatingRemainder(dividingBy: 360) + (degrees < 0 ? 360 : 0)
            if normalized.truncatingRemainder(dividingBy: 90) == 0 {
                if Int(normalized / 90) % 2 == 1 { output.size = PixelSize(width: input.size.height, height: input.size.width) }
                return output
            }
            let radians = normalized * .pi / 180
            let c = abs(cos(radians)), s = abs(sin(radians))
            let w = Double(input.size.width), h = Double(input.size.height)
            output.size = PixelSize(width: Int((w * c + h * s).rounded(.up)) + 1, height: Int((w * s + h * c).rounded(.up)) + 1)
            if input.bands == 1 || input.bands == 3 { output.bands += 1 }
            return output
        }
        public func transform(_ image: Image) throws -> Image {
            let normalized = degrees.truncatingRemainder(dividingBy: 360) + (degrees < 0 ? 360 : 0)
            if normalized.truncatingRemainder(dividingBy: 90) == 0 {
                let quarters = Int32(normalized / 90) % 4
                return try VipsFrames.map(image) { frame in
                    try Vips.make(.transformFailed, "vips_rot") { CVips_rot(frame.pointer, $0, quarters) }
                }
            }
            return try VipsFrames.map(image) { frame in
                let withAlpha = frame.hasAlpha ? frame : try Vips.make(.transformFailed, "vips_addalpha") { CVips_addalpha(frame.pointer, $0) }
                return try Vips.make(.transformFailed, "vips_rotate") { CVips_rotate(withAlpha.pointer, $0, normalized) }
            }
        }
    }

    /// Mirrors horizontally (left ⇄ right) or vertically (top ⇄ bottom).
    public struct Flip: ImageTransformer {
        public var vertical: Bool
        public init(vertical: Bool = false) { self.vertical = vertical }
        public var key: String { vertical ? "flip(v)" : "flip(h)" }
        public func transform(_ image: Image) throws -> Image {
            try VipsFrames.map(image) { frame in
                try Vips.make(.transformFailed, "vips_flip") { CVips_flip(frame.pointer, $0, vertical ? 1 : 0) }
            }
        }
    }

    /// Gaussian blur.
    public struct Blur: ImageTransformer {
        public var sigma: Double
        public init(sigma: Double) { self.sigma = sigma }
        public var key: String { "blur(\(sigma))" }
        /// A separable Gaussian about 6 sigma wide.
        public func cost(for input: ImageFootprint) -> Double { TransformCost.pass(input) * (1 + sigma) }
        public func transform(_ image: Image) throws -> Image {
            guard sigma > 0 else { throw WebImageError(.transformFailed, "blur sigma must be positive, not \(sigma)") }
            return try VipsFrames.map(image) { frame in
                try Vips.make(.transformFailed, "vips_gaussblur") { CVips_gaussblur(frame.pointer, $0, sigma) }
            }
        }
    }

    /// Blends a colour over the image: `amount` 0 leaves it, 1 paints it over.
    public struct Tint: ImageTransformer {
        public var red: UInt8, green: UInt8, blue: UInt8
        public var amount: Double
        public init(red: UInt8, green: UInt8, blue: UInt8, amount: Double = 0.5) {
            (self.red, self.green, self.blue) = (red, green, blue)
            self.amount = min(1, max(0, amount))
        }
        public var key: String { "tint(\(red),\(green),\(blue),\(amount))" }
        public func footprint(after input: ImageFootprint) -> ImageFootprint {
            var output = input
            output.bands = max(3, input.bands)
            return output
        }
        public func transform(_ image: Image) throws -> Image {
            try VipsFrames.map(image) { frame in
                let rgb = try Vips.make(.transformFailed, "vips_colourspace") { CVips_srgb(frame.pointer, $0) }
                let colour = [Double(red), Double(green), Double(blue)]
                let a = (0..<rgb.bands).map { $0 < 3 ? 1 - amount : 1 }
                let b = (0..<rgb.bands).map { $0 < 3 ? colour[$0] * amount : 0 }
                return try Vips.make(.transformFailed, "vips_linear") { CVips_linear(rgb.pointer, $0, a, b, Int32(rgb.bands)) }
            }
        }
    }

    /// Makes the corners transparent with the given radius (adds an alpha channel).
    public struct RoundCorners: ImageTransformer {
        public var radius: Int
        public init(radius: Int) { self.radius = radius }
        public var key: String { "round(\(radius))" }
        /// sRGB with alpha: four bands, or two for grey.
        public func footprint(after input: ImageFootprint) -> ImageFootprint {
            var output = input
            output.bands = input.bands <= 2 ? 2 : 4
            output.bytesPerSample = 1
            return output
        }
        public func transform(_ image: Image) throws -> Image {
            var result = try VipsFrames.map(image) { frame in
                let rgb = try Vips.make(.transformFailed, "vips_colourspace") { CVips_srgb(frame.pointer, $0) }
                let eight = try Vips.make(.transformFailed, "vips_cast") { CVips_cast_uchar(rgb.pointer, $0) }
                let mask = try Self.mask(width: eight.width, height: eight.height, radius: radius)
                if eight.hasAlpha {
                    let colour = try Vips.make(.transformFailed, "vips_extract_band") { CVips_extract_band(eight.pointer, $0, 0, Int32(eight.bands - 1)) }
                    let alpha = try Vips.make(.transformFailed, "vips_extract_band") { CVips_extract_band(eight.pointer, $0, Int32(eight.bands - 1), 1) }
                    let product = try Vips.make(.transformFailed, "vips_multiply") { CVips_multiply(alpha.pointer, mask.pointer, $0) }
                    let scaled = try Vips.make(.transformFailed, "vips_linear1") { CVips_linear1(product.pointer, $0, 1.0 / 255, 0) }
                    let alphaOut = try Vips.make(.transformFailed, "vips_cast") { CVips_cast_uchar(scaled.pointer, $0) }
                    return try Vips.make(.transformFailed, "vips_bandjoin") { CVips_bandjoin2(colour.pointer, alphaOut.pointer, $0) }
                }
                return try Vips.make(.transformFailed, "vips_bandjoin") { CVips_bandjoin2(eight.pointer, mask.pointer, $0) }
            }
            result.hasAlpha = true
            return result
        }

        /// 255 inside the rounded rectangle, 0 outside, one pixel of anti-aliasing.
        static func mask(width: Int, height: Int, radius: Int) throws -> VipsHandle {
            let r = Double(max(0, min(radius, min(width, height) / 2)))
            var bytes = [UInt8](repeating: 255, count: width * height)
            if r > 0 {
                for y in 0..<height {
                    for x in 0..<width {
                        let cx = Double(x) + 0.5, cy = Double(y) + 0.5
                        let dx = cx < r ? r - cx : (cx > Double(width) - r ? cx - (Double(width) - r) : 0)
                        let dy = cy < r ? r - cy : (cy > Double(height) - r ? cy - (Double(height) - r) : 0)
                        guard dx > 0, dy > 0 else { continue }
                        let distance = (dx * dx + dy * dy).squareRoot()
                        bytes[y * width + x] = UInt8(max(0, min(255, (r - distance + 0.5) * 255)))
                    }
                }
            }
            guard let pointer = bytes.withUnsafeBytes({ CVips_from_memory($0.baseAddress, $0.count, Int32(width), Int32(height), 1) }) else {
                throw Vips.error(.transformFailed, "making the corner mask")
            }
            return VipsHandle(pointer)
        }
    }
}

extension CropFocus {
    /// libvips' VipsInteresting for this focus.
    var interesting: Int32 {
        switch self {
        case .centre: Int32(VIPS_INTERESTING_CENTRE.rawValue)
        case .attention: Int32(VIPS_INTERESTING_ATTENTION.rawValue)
        case .entropy: Int32(VIPS_INTERESTING_ENTROPY.rawValue)
        case .point: Int32(VIPS_INTERESTING_NONE.rawValue)  // placed by `origin(of:in:)`, not by libvips
        }
    }
}

/// Applies an operation to every frame and stacks the results again.
enum VipsFrames {
    static func map(_ image: Image, _ operation: (VipsHandle) throws -> VipsHandle) throws -> Image {
        try Vips.ensureInitialized()
        let source = try VipsEncoder.handle(for: image)
        let pageHeight = image.pixelSize.height
        let count = image.frameCount
        var output: VipsHandle
        if count == 1 {
            output = try operation(source)
        } else {
            let frames = try (0..<count).map { index in
                let frame = try Vips.make(.transformFailed, "vips_extract_area") {
                    CVips_extract_area(source.pointer, $0, 0, Int32(index * pageHeight), Int32(source.width), Int32(pageHeight))
                }
                return try operation(frame)
            }
            var pointers: [UnsafeMutablePointer<VipsImage>?] = frames.map(\.pointer)
            output = try Vips.make(.transformFailed, "vips_arrayjoin") { CVips_arrayjoin(&pointers, $0, Int32(count)) }
            withExtendedLifetime(frames) {}
        }
        let frameHeight = output.height / count
        output = try output.inMemory()
        var result = image
        result.pixelSize = PixelSize(width: output.width, height: frameHeight)
        result.hasAlpha = output.hasAlpha
        result.storage = VipsStorage(output)
        return result
    }
}

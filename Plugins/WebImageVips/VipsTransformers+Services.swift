internal import CVips
internal import CVipsOps
public import Foundation
public import WebImage

/// The operations image services offer (imgproxy, thumbor): sharpen, flatten,
/// pad, trim, greyscale and watermark. Smart crop is ``ImageTransformers/Resize``
/// with a ``ImageTransformers/CropFocus``; a DPR multiplies the sizes a spec asks
/// for (`TransformSpec`).
extension ImageTransformers {
    /// Where something goes in a box: the centre or a compass point.
    public enum Gravity: String, Sendable, Hashable, CaseIterable {
        case centre, north, northEast, east, southEast, south, southWest, west, northWest

        /// Parses `centre`/`center`/`c`, `north`/`n`, `ne`, `e`, `se`, `s`, `sw`, `w`, `nw`
        /// and the long names (`northEast`, `north-east`, `north_east`).
        public init?(parsing text: String) {
            let t = text.lowercased().replacingOccurrences(of: "-", with: "").replacingOccurrences(of: "_", with: "")
            let short: [String: Gravity] = ["c": .centre, "center": .centre, "n": .north, "ne": .northEast, "e": .east, "se": .southEast,
                                            "s": .south, "sw": .southWest, "w": .west, "nw": .northWest]
            if let value = short[t] ?? Self.allCases.first(where: { $0.rawValue.lowercased() == t }) { self = value } else { return nil }
        }

        /// The short form used in keys: `c`, `n`, `ne`, ...
        public var shortName: String {
            switch self {
            case .centre: "c"
            case .north: "n"
            case .northEast: "ne"
            case .east: "e"
            case .southEast: "se"
            case .south: "s"
            case .southWest: "sw"
            case .west: "w"
            case .northWest: "nw"
            }
        }

        var compass: Int32 {
            let value: VipsCompassDirection = switch self {
            case .centre: VIPS_COMPASS_DIRECTION_CENTRE
            case .north: VIPS_COMPASS_DIRECTION_NORTH
            case .northEast: VIPS_COMPASS_DIRECTION_NORTH_EAST
            case .east: VIPS_COMPASS_DIRECTION_EAST
            case .southEast: VIPS_COMPASS_DIRECTION_SOUTH_EAST
            case .south: VIPS_COMPASS_DIRECTION_SOUTH
            case .southWest: VIPS_COMPASS_DIRECTION_SOUTH_WEST
            case .west: VIPS_COMPASS_DIRECTION_WEST
            case .northWest: VIPS_COMPASS_DIRECTION_NORTH_WEST
            }
            return Int32(value.rawValue)
        }

        /// The top-left corner of an `inner` box placed in `outer` with `margin` from the edges it touches.
        func origin(inner: PixelSize, outer: PixelSize, margin: Int) -> (x: Int, y: Int) {
            let left = margin, right = outer.width - inner.width - margin, midX = (outer.width - inner.width) / 2
            let top = margin, bottom = outer.height - inner.height - margin, midY = (outer.height - inner.height) / 2
            return switch self {
            case .centre: (midX, midY)
            case .north: (midX, top)
            case .northEast: (right, top)
            case .east: (right, midY)
            case .southEast: (right, bottom)
            case .south: (midX, bottom)
            case .southWest: (left, bottom)
            case .west: (left, midY)
            case .northWest: (left, top)
            }
        }
    }

    /// Unsharp masking, for the softness a downscale leaves (`resize:…;sharpen`).
    public struct Sharpen: ImageTransformer {
        /// The mask's Gaussian sigma: 0.5 to 1 for screen thumbnails.
        public var sigma: Double
        public init(sigma: Double = 0.75) { self.sigma = sigma }
        public var key: String { "sharpen(\(sigma))" }
        /// A Gaussian mask about 6 sigma wide, and the LAB conversions around it.
        public func cost(for input: ImageFootprint) -> Double { TransformCost.pass(input) * (2 + sigma) }
        public func transform(_ image: Image) throws -> Image {
            guard sigma > 0, sigma <= 10 else { throw WebImageError(.transformFailed, "sharpen sigma must be above 0 and at most 10, not \(sigma)") }
            return try VipsFrames.map(image) { frame in
                let sharpened = try Vips.make(.transformFailed, "vips_sharpen") { CVips_sharpen(frame.pointer, $0, sigma) }
                // vips_sharpen answers 16-bit LabS-derived sRGB for some inputs; keep 8 bits.
                return try Vips.make(.transformFailed, "vips_cast") { CVips_cast_uchar(sharpened.pointer, $0) }
            }
        }
    }

    /// Removes alpha by blending the image onto a colour. An image without alpha
    /// is returned as it is.
    public struct Flatten: ImageTransformer {
        public var background: RGBColor
        public init(background: RGBColor = .white) { self.background = background }
        public var key: String { "flatten(\(background))" }
        public func transform(_ image: Image) throws -> Image {
            guard image.hasAlpha else { return image }
            let b = background
            return try VipsFrames.map(image) { frame in
                guard frame.hasAlpha else { return frame }
                return try Vips.make(.transformFailed, "vips_flatten") { CVips_flatten(frame.pointer, $0, Double(b.red), Double(b.green), Double(b.blue)) }
            }
        }
    }

    /// Letterboxes to exactly `size`: an image larger than the box is first
    /// fitted inside it (Lanczos), then placed at `gravity` on `background`, or
    /// on transparency when `background` is nil (which adds alpha).
    public struct Pad: ImageTransformer {
        public var size: PixelSize
        public var background: RGBColor?
        public var gravity: Gravity
        public init(_ size: PixelSize, background: RGBColor? = .white, gravity: Gravity = .centre) {
            self.size = size
            self.background = background
            self.gravity = gravity
        }
        public var key: String { "pad(\(size),\(background.map(\.description) ?? "none"),\(gravity.shortName))" }
        /// Reads the input and writes the larger output.
        public func cost(for input: ImageFootprint) -> Double { TransformCost.pass(input) + TransformCost.pass(footprint(after: input)) }
        public func footprint(after input: ImageFootprint) -> ImageFootprint {
            var output = input
            output.size = size
            if background == nil, input.bands == 1 || input.bands == 3 { output.bands += 1 }
            return output
        }
        public func transform(_ image: Image) throws -> Image {
            guard size.width > 0, size.height > 0 else { throw WebImageError(.transformFailed, "pad needs a positive box, not \(size)") }
            let fitted = image.pixelSize.width > size.width || image.pixelSize.height > size.height
                ? try Resize(size, mode: .fit).transform(image) : image
            return try VipsFrames.map(fitted) { frame in
                var source = frame
                if background == nil, !source.hasAlpha {
                    source = try Vips.make(.transformFailed, "vips_addalpha") { CVips_addalpha(source.pointer, $0) }
                }
                let fill = background ?? .black
                let colour: [Double] = [Double(fill.red), Double(fill.green), Double(fill.blue)]
                let grey: Double = 0.2126 * colour[0] + 0.7152 * colour[1] + 0.0722 * colour[2]
                let colourBands = source.hasAlpha ? source.bands - 1 : source.bands
                var values = colourBands >= 3 ? Array(colour.prefix(3)) + [Double](repeating: 0, count: colourBands - 3) : [grey]
                if source.hasAlpha { values.append(background == nil ? 0 : 255) }
                return try Vips.make(.transformFailed, "vips_gravity") {
                    CVips_gravity(source.pointer, $0, gravity.compass, Int32(size.width), Int32(size.height), values, Int32(values.count))
                }
            }
        }
    }

    /// Cuts away uniform borders: the colour of the top-left pixel, give or take
    /// `threshold` (0...255). An image that is all border is returned as it is,
    /// and so is one less than 3 pixels wide or high (the search looks at each
    /// pixel's 3x3 neighbourhood). An animation is trimmed by its first frame's box, so that frames stay aligned.
    public struct Trim: ImageTransformer {
        public var threshold: Double
        public init(threshold: Double = 10) { self.threshold = threshold }
        public var key: String { "trim(\(threshold))" }
        public func transform(_ image: Image) throws -> Image {
            guard (0...255).contains(threshold) else { throw WebImageError(.transformFailed, "trim threshold must be 0 to 255, not \(threshold)") }
            // vips_find_trim looks at each pixel's 3x3 neighbourhood (its rank
            // filter): a thinner image is all border, and is returned as it is.
            guard image.pixelSize.width >= 3, image.pixelSize.height >= 3 else { return image }
            try Vips.ensureInitialized()
            let source = try VipsEncoder.handle(for: image)
            let first = try Vips.make(.transformFailed, "vips_extract_area") {
                CVips_extract_area(source.pointer, $0, 0, 0, Int32(source.width), Int32(image.pixelSize.height))
            }
            // Flattened, so that transparent borders count as the background they show.
            let flat = first.hasAlpha ? try Vips.make(.transformFailed, "vips_flatten") { CVips_flatten(first.pointer, $0, 255, 255, 255) } : first
            var corner = [Double](repeating: 0, count: 8)
            let bands = CVips_getpoint(flat.pointer, 0, 0, &corner, 8)
            guard bands > 0 else { throw Vips.error(.transformFailed, "vips_getpoint") }
            var left: Int32 = 0, top: Int32 = 0, width: Int32 = 0, height: Int32 = 0
            guard CVips_find_trim(flat.pointer, &left, &top, &width, &height, threshold, corner, bands) == 0 else {
                throw Vips.error(.transformFailed, "vips_find_trim")
            }
            guard width > 0, height > 0 else { return image }
            return try Crop(x: Int(left), y: Int(top), width: Int(width), height: Int(height)).transform(image)
        }
    }

    /// Greyscale: one 8-bit grey band (two with alpha).
    public struct Greyscale: ImageTransformer {
        public init() {}
        public var key: String { "grey" }
        public func transform(_ image: Image) throws -> Image {
            try VipsFrames.map(image) { frame in
                let grey = try Vips.make(.transformFailed, "vips_colourspace") { CVips_grey(frame.pointer, $0) }
                return try Vips.make(.transformFailed, "vips_cast") { CVips_cast_uchar(grey.pointer, $0) }
            }
        }
    }

    /// Draws an image (a logo) over every frame at `gravity`, `margin` pixels in
    /// from the edges it touches, with its alpha multiplied by `opacity`. A
    /// watermark larger than the image (less the margins) is scaled down to fit
    /// it. The result has alpha only when the image had it.
    public struct Watermark: ImageTransformer {
        public let overlay: Image
        public var gravity: Gravity
        public var opacity: Double
        public var margin: Int
        /// Identifies the overlay's pixels in the key: a hash of its encoded bytes.
        public let overlayID: String

        /// An overlay decoded once, for a server that applies the same logo to
        /// many requests: building a ``Watermark`` from it costs no decode (the
        /// transformer is built for every request, hits included, to make its key).
        public struct Overlay: Sendable {
            /// The decoded pixels (first frame only).
            public let image: Image
            /// A hash of the encoded bytes (`XXH64` in WebImage, stable across processes and
            /// versions, unlike `Hasher`): the overlay's part of the cache key.
            public let id: String

            /// - Parameters:
            ///   - data: the overlay's encoded bytes (PNG with alpha, usually).
            ///   - coder: decodes `data`.
            /// - Throws: `WebImageError` when the bytes do not decode or hold more
            ///   than 16 megapixels.
            public init(data: Data, coder: VipsImageCoder = VipsImageCoder()) throws {
                var options = DecodeOptions(firstFrameOnly: true)
                options.pixelLimit = 16_000_000
                do {
                    image = try coder.decode(data, options: options)
                } catch let error as WebImageError where error.code == .unsupportedFormat && coder.options == VipsImageCoder.Options() {
                    // The default coder's advice names the opt-ins, which do not reach a watermark.
                    throw WebImageError(.unsupportedFormat, "a watermark is decoded without the opt-in formats (SVG, PDF, JPEG XL): use PNG, JPEG, WebP, GIF or AVIF (\(error.message))")
                }
                id = String(XXH64.hash(data), radix: 16)
            }
        }

        /// - Parameters:
        ///   - data: the overlay's encoded bytes (PNG with alpha, usually), decoded here.
        ///   - gravity: where it goes; bottom right by default.
        ///   - opacity: what its alpha is multiplied by, 0...1.
        ///   - margin: pixels between it and the edges it touches, 0...10 000.
        ///   - coder: decodes `data`.
        /// - Throws: `WebImageError` when the bytes do not decode, or the opacity
        ///   or margin is out of range.
        public init(data: Data, gravity: Gravity = .southEast, opacity: Double = 0.5, margin: Int = 10, coder: VipsImageCoder = VipsImageCoder()) throws {
            try self.init(overlay: Overlay(data: data, coder: coder), gravity: gravity, opacity: opacity, margin: margin)
        }

        /// The same, from an overlay decoded earlier (``Overlay``); the key is the
        /// one ``init(data:gravity:opacity:margin:coder:)`` gives for its bytes.
        /// - Throws: `WebImageError` when the opacity or margin is out of range.
        public init(overlay: Overlay, gravity: Gravity = .southEast, opacity: Double = 0.5, margin: Int = 10) throws {
            guard (0...1).contains(opacity) else { throw WebImageError(.invalidArgument, "watermark opacity must be 0 to 1, not \(opacity)") }
            guard (0...10_000).contains(margin) else { throw WebImageError(.invalidArgument, "watermark margin must be 0 to 10000, not \(margin)") }
            self.overlay = overlay.image
            self.overlayID = overlay.id
            self.gravity = gravity
            self.opacity = opacity
            self.margin = margin
        }

        public var key: String { "watermark(\(overlayID),\(gravity.shortName),\(opacity),\(margin))" }

        public func transform(_ image: Image) throws -> Image {
            try Vips.ensureInitialized()
            return try Self.composite(image, mark: try VipsEncoder.handle(for: overlay), gravity: gravity, opacity: opacity, margin: margin, what: "watermark")
        }

        /// `mark` over every frame of `image` (``transform(_:)``; ``TextWatermark`` too).
        static func composite(_ image: Image, mark: VipsHandle, gravity: Gravity, opacity: Double, margin: Int, what: String) throws -> Image {
            let frame = image.pixelSize
            let room = PixelSize(width: frame.width - 2 * margin, height: frame.height - 2 * margin)
            guard room.width > 0, room.height > 0 else {
                throw WebImageError(.stepDoesNotFit, "\(what) margin \(margin) does not fit the \(frame) image: twice the margin must be less than its width and height")
            }
            var mark = mark
            if mark.width > room.width || mark.height > room.height {
                let scale = min(Double(room.width) / Double(mark.width), Double(room.height) / Double(mark.height))
                let current = mark
                mark = try Vips.make(.transformFailed, "vips_resize") { CVips_resize(current.pointer, $0, scale, scale) }
            }
            if !mark.hasAlpha {
                let current = mark
                mark = try Vips.make(.transformFailed, "vips_addalpha") { CVips_addalpha(current.pointer, $0) }
            }
            if opacity < 1 {
                let current = mark
                mark = try Vips.make(.transformFailed, "watermark opacity") { CVips_scale_alpha(current.pointer, $0, opacity) }
            }
            let overlayHandle = mark
            let origin = gravity.origin(inner: PixelSize(width: mark.width, height: mark.height), outer: frame, margin: margin)
            let hadAlpha = image.hasAlpha
            return try VipsFrames.map(image) { base in
                let rgb = try Vips.make(.transformFailed, "vips_colourspace") { CVips_srgb(base.pointer, $0) }
                let composed = try Vips.make(.transformFailed, "vips_composite2") {
                    CVips_composite(rgb.pointer, overlayHandle.pointer, $0, Int32(origin.x), Int32(origin.y))
                }
                let eight = try Vips.make(.transformFailed, "vips_cast") { CVips_cast_uchar(composed.pointer, $0) }
                guard !hadAlpha, eight.hasAlpha else { return eight }
                // The base was opaque: so is the result (composite adds an alpha band of 255).
                return try Vips.make(.transformFailed, "vips_extract_band") { CVips_extract_band(eight.pointer, $0, 0, Int32(eight.bands - 1)) }
            }
        }
    }
}

public import Foundation
public import WebImage
public import WebImageVips
import WebImageConfiguration

/// Parses transformer specifications as the command line and query strings write them:
///
/// | spec | transformer |
/// | --- | --- |
/// | `resize:256x256`, `resize:256x256:fill`, `resize:200x100:stretch` | ``ImageTransformers/Resize`` |
/// | `resize:256x256:fill:attention`, `…:fill:entropy` | ``ImageTransformers/Resize`` with a smart crop (``ImageTransformers/CropFocus``) |
/// | `crop:x,y,w,h` | ``ImageTransformers/Crop`` |
/// | `rotate:90`, `rotate:-12.5` | ``ImageTransformers/Rotate`` |
/// | `flip:h`, `flip:v` | ``ImageTransformers/Flip`` |
/// | `round:16` | ``ImageTransformers/RoundCorners`` |
/// | `blur:2.5` | ``ImageTransformers/Blur`` |
/// | `tint:r,g,b[,amount]` | ``ImageTransformers/Tint`` |
/// | `sharpen`, `sharpen:0.8` | ``ImageTransformers/Sharpen`` |
/// | `flatten`, `flatten:000000` | ``ImageTransformers/Flatten`` (white by default) |
/// | `pad:300x300`, `pad:300x300:000000`, `pad:300x300:none:north` | ``ImageTransformers/Pad`` (`none`: transparent) |
/// | `trim`, `trim:25` | ``ImageTransformers/Trim`` |
/// | `grey` (or `greyscale`, `gray`) | ``ImageTransformers/Greyscale`` |
/// | `brightness:1.2` | ``ImageTransformers/Brightness`` (1 unchanged, 0 black) |
/// | `contrast:1.5` | ``ImageTransformers/Contrast`` (1 unchanged, 0 flat grey) |
/// | `saturation:0.5` (or `saturate`) | ``ImageTransformers/Saturation`` (1 unchanged, 0 grey) |
/// | `gamma:2.2` | ``ImageTransformers/Gamma`` (1 unchanged, above 1 lighter mid-tones) |
/// | `pixelate:12` | ``ImageTransformers/Pixelate`` (blocks of 12 pixels, times the DPR) |
/// | `text:WORDS[:size[:colour[:opacity[:gravity[:font]]]]]` | ``ImageTransformers/TextWatermark`` (size 24 times the DPR, white, 0.7, `se`; a font of ``Limits/fonts``) |
/// | `watermark:NAME[:gravity[:opacity[:margin]]]` | ``ImageTransformers/Watermark`` (NAME resolved by the caller) |
/// | `dpr:2` | multiplies every size in the spec (resize, pad, crop, round, watermark margin) |
///
/// Colours are `ffffff`, `#fff`, `255,255,255`, `white` or `black` (a `,` inside a
/// colour is fine: fields are separated by `:`). Gravities: `centre`, `n`, `ne`,
/// `e`, `se`, `s`, `sw`, `w`, `nw`.
///
/// Every number is bounded, and out of bounds is a typed error naming the spec:
/// sizes 1...``Limits/maxSide`` (after the DPR), blur 0...100, sharpen 0...10,
/// trim 0...255, opacity 0...1, margin 0...10 000, DPR 0.1...5, brightness,
/// contrast and saturation 0...10, gamma 0.1...10, pixelate 1...``Limits/maxSide``
/// (after the DPR); and a spec has at
/// most ``Limits/maxSteps`` steps. A server passes its own limits (its largest
/// thumbnail side bounds every size in a spec: a pad, a crop, a resize).
/// What the steps then cost in memory is bounded when they run
/// (``TransformBudget``, ``DecodeOptions/memoryLimit``).
public enum TransformSpec {
    /// The largest side a spec may ask for by default, after the DPR: 8192. Larger
    /// resizes are what a hostile query asks for to make a server allocate gigabytes.
    public static let maxSide = 8192

    /// The bounds a spec is parsed within.
    public struct Limits: Sendable, Hashable {
        /// The most steps (`;`-separated parts; a `dpr` is not a step). Default 8: every
        /// step is a pass over the pixels, and 200 blurs are 18 s of CPU.
        public var maxSteps: Int
        /// The largest side any size in the spec may name, after the DPR. Default 8192.
        public var maxSide: Int
        /// The font families `text:` may name; the first is its default. A
        /// request picks from these, never names a font of its own.
        public var fonts: [String]
        public init(maxSteps: Int = 8, maxSide: Int = TransformSpec.maxSide, fonts: [String] = [ImageTransformers.TextWatermark.defaultFont]) {
            self.maxSteps = max(1, maxSteps)
            self.maxSide = max(1, maxSide)
            self.fonts = fonts.isEmpty ? [ImageTransformers.TextWatermark.defaultFont] : fonts
        }
    }

    /// One transformer, or several joined with `;` (a pipeline).
    /// - Parameter watermark: turns a `watermark:` NAME into the overlay's bytes.
    ///   The default refuses every name: a query string must never name a file
    ///   to read. The command line reads files; the example server looks names
    ///   up in a directory it was configured with.
    public static func parse(_ text: String, limits: Limits = Limits(), watermark: (String) throws -> Data = refuseWatermarks) throws -> any ImageTransformer {
        try parse(text, limits: limits, watermarkOverlay: { try ImageTransformers.Watermark.Overlay(data: watermark($0)) })
    }

    /// The same, with `watermark:` NAMEs turned into overlays decoded earlier,
    /// for a server that parses a spec per request: its watermarks are then
    /// decoded once, not on every request (the example server decodes its
    /// `thumbnail.watermarks` at start).
    public static func parse(_ text: String, limits: Limits = Limits(),
                             watermarkOverlay watermark: (String) throws -> ImageTransformers.Watermark.Overlay) throws -> any ImageTransformer {
        let parts = text.unicodeScalars.split(separator: ";").map { String(String.UnicodeScalarView($0)).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !parts.isEmpty else { throw WebImageError(.invalidArgument, "empty transform") }
        let steps = parts.filter { !$0.lowercased().hasPrefix("dpr") }.count
        guard steps <= limits.maxSteps else {
            throw WebImageError(.invalidArgument, "transform: \(steps) steps, more than the \(limits.maxSteps) allowed")
        }
        var dpr = 1.0
        for part in parts where part.lowercased().hasPrefix("dpr:") || part.lowercased() == "dpr" {
            guard let value = plainDecimal(part.dropFirst(4)), value.isFinite, (0.1...5).contains(value) else {
                throw WebImageError(.invalidArgument, "transform '\(part)': expected dpr:N with N from 0.1 to 5")
            }
            dpr *= value
        }
        guard (0.1...5).contains(dpr) else { throw WebImageError(.invalidArgument, "transform '\(text)': the DPRs multiply to \(dpr), outside 0.1...5") }
        let transformers = try parts.filter { !$0.lowercased().hasPrefix("dpr") }.map { try parseOne($0, dpr: dpr, maxSide: limits.maxSide, fonts: limits.fonts, watermark: watermark) }
        guard !transformers.isEmpty else { throw WebImageError(.invalidArgument, "transform '\(text)': a dpr alone changes nothing; add a resize or pad") }
        return transformers.count == 1 ? transformers[0] : ImageTransformers.Pipeline(transformers)
    }

    /// The default watermark resolver: refuses, saying how to allow watermarks.
    public static func refuseWatermarks(_ name: String) throws -> Data {
        throw watermarksRefused(name)
    }

    /// The same refusal, for ``parse(_:watermarkOverlay:)``.
    public static func refuseWatermarkOverlays(_ name: String) throws -> ImageTransformers.Watermark.Overlay {
        throw watermarksRefused(name)
    }

    private static func watermarksRefused(_ name: String) -> WebImageError {
        WebImageError(.invalidArgument, "watermark '\(name)': watermarks are not enabled here")
    }

    /// Reads `watermark:` names as file paths: for the command line, whose user may read files anyway.
    public static func watermarkFile(_ path: String) throws -> Data {
        do { return try readWatermark(at: URL(fileURLWithPath: expandingHome(path))) } catch {
            throw WebImageError(.invalidArgument, "watermark '\(path)': \((error as? WebImageError)?.message ?? "\(error)")")
        }
    }

    /// The most bytes a watermark file may have: a PNG of a logo is a few kB.
    static let maxWatermarkBytes = 16 << 20

    /// A watermark file's bytes: a regular file (not a FIFO, device or directory,
    /// which would block or never end) of at most 16 MiB; else why not, as
    /// `invalidArgument` with a plain message.
    static func readWatermark(at file: URL) throws -> Data {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file.path) else {
            throw WebImageError(.invalidArgument, FileManager.default.fileExists(atPath: file.path) ? "cannot read it" : "there is no such file")
        }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            throw WebImageError(.invalidArgument, "it is not a regular file (a directory, FIFO, socket or device)")
        }
        if let size = attributes[.size] as? Int, size > maxWatermarkBytes {
            throw WebImageError(.invalidArgument, "it is \(size) bytes, more than a watermark may be (\(maxWatermarkBytes >> 20) MiB)")
        }
        do { return try Data(contentsOf: file) } catch {
            throw WebImageError(.invalidArgument, "cannot read it (\(error.localizedDescription))")
        }
    }

    static func parseOne(_ text: String, dpr: Double, maxSide: Int, fonts: [String] = [ImageTransformers.TextWatermark.defaultFont],
                         watermark: (String) throws -> ImageTransformers.Watermark.Overlay) throws -> any ImageTransformer {
        let step = Step(text: text, dpr: dpr, maxSide: maxSide)
        switch step.name {
        case "resize":
            return try step.resize()
        case "crop":
            let v = try step.numbers(1, count: 4...4, within: 0...1e7).map { try step.side($0, "crop offsets and sides") }
            guard v[2] > 0, v[3] > 0 else { throw step.bad("a crop with a positive width and height") }
            return ImageTransformers.Crop(x: v[0], y: v[1], width: v[2], height: v[3])
        case "rotate":
            return ImageTransformers.Rotate(degrees: try step.numbers(1, count: 1...1)[0])
        case "flip":
            guard step.fields.count == 2, ["h", "v"].contains(step.fields[1].lowercased()) else { throw step.bad("flip:h or flip:v") }
            return ImageTransformers.Flip(vertical: step.fields[1].lowercased() == "v")
        case "round":
            return ImageTransformers.RoundCorners(radius: try step.side(try step.numbers(1, count: 1...1, within: 0...1e7)[0], "a radius"))
        case "blur":
            // libvips' Gaussian mask grows with sigma: an absurd one costs minutes and gigabytes.
            let sigma = try step.numbers(1, count: 1...1, within: 0...100)[0]
            guard sigma > 0 else { throw step.bad("a positive blur radius") }
            return ImageTransformers.Blur(sigma: sigma)
        case "tint":
            return try step.tint()
        case "sharpen":
            let sigma = try step.optionalNumber(1, default: 0.75, within: 0...10)
            guard sigma > 0 else { throw step.bad("a sharpen sigma above 0") }
            return ImageTransformers.Sharpen(sigma: sigma)
        case "flatten":
            return ImageTransformers.Flatten(background: try step.colour(1) ?? .white)
        case "pad":
            let box = try step.size(1, "pad:WxH[:colour|none[:gravity]]")
            let background: RGBColor? = step.fields.count > 2 && step.fields[2].lowercased() == "none" ? nil : try step.colour(2) ?? .white
            return ImageTransformers.Pad(box, background: background, gravity: try step.gravity(3, default: .centre))
        case "trim":
            return ImageTransformers.Trim(threshold: try step.optionalNumber(1, default: 10, within: 0...255))
        case "grey", "greyscale", "gray", "grayscale":
            guard step.fields.count == 1 else { throw step.bad("'\(step.name)' alone") }
            return ImageTransformers.Greyscale()
        case "watermark":
            return try step.watermark(watermark)
        case "brightness":
            return ImageTransformers.Brightness(try step.single(within: 0...10))
        case "contrast":
            return ImageTransformers.Contrast(try step.single(within: 0...10))
        case "saturation", "saturate":
            return ImageTransformers.Saturation(try step.single(within: 0...10))
        case "gamma":
            return ImageTransformers.Gamma(try step.single(within: 0.1...10))
        case "text":
            return try step.text(fonts: fonts)
        case "pixelate":
            let size = try step.side(try step.single(within: 1...Double(maxSide)), "a block")
            guard size >= 1 else { throw step.bad("a block of at least 1 pixel after the DPR") }
            return ImageTransformers.Pixelate(size: size)
        default:
            throw step.bad("one of resize, crop, rotate, flip, round, blur, tint, sharpen, flatten, pad, trim, grey, watermark, text, "
                           + "brightness, contrast, saturation, gamma, pixelate, dpr")
        }
    }
}

/// One step of a spec, split at its colons, with the readers of its fields: each
/// value checked (finite, in range, a side within `maxSide` after the DPR) and a
/// bad one refused with what was expected.
private struct Step {
    let text: String
    let fields: [String]
    let name: String
    let dpr: Double
    let maxSide: Int

    init(text: String, dpr: Double, maxSide: Int) {
        self.text = text
        // Split at the scalar, not the Character: a combining mark after ':' makes
        // one Character of the two (`text:\u{301}` would read as one unknown step).
        self.fields = text.unicodeScalars.split(separator: ":", omittingEmptySubsequences: false).map { String(String.UnicodeScalarView($0)) }
        self.name = fields[0].lowercased()
        self.dpr = dpr
        self.maxSide = maxSide
    }

    func bad(_ expected: String) -> WebImageError {
        WebImageError(.invalidArgument, "transform '\(text)': expected \(expected)")
    }
    /// Numbers, each finite and within `range`: a value that does not fit an Int
    /// (found by fuzzing: `round:8666…6` trapped), infinity or NaN is refused here.
    func numbers(_ index: Int, count: ClosedRange<Int>, within range: ClosedRange<Double> = -1e7...1e7) throws -> [Double] {
        guard fields.count > index else { throw bad("\(name):…") }
        let values = fields[index].split(separator: ",").compactMap { plainDecimal($0) }
        guard count.contains(values.count), values.count == fields[index].split(separator: ",").count else { throw bad("\(count.lowerBound) number(s) after '\(name):'") }
        guard values.allSatisfy({ $0.isFinite && range.contains($0) }) else {
            throw bad("numbers from \(range.lowerBound.formatted()) to \(range.upperBound.formatted()) after '\(name):'")
        }
        return values
    }
    /// The one number of a step that takes one (`brightness:1.2`): a second field is refused.
    func single(within range: ClosedRange<Double>) throws -> Double {
        guard fields.count == 2 else { throw bad("\(name):N, one number") }
        return try numbers(1, count: 1...1, within: range)[0]
    }
    /// A side times the DPR, 1...maxSide.
    func side(_ value: Double, _ what: String) throws -> Int {
        let scaled = (value * dpr).rounded()
        guard scaled <= Double(maxSide) else {
            throw bad("\(what) of at most \(maxSide) pixels\(dpr == 1 ? "" : " after the DPR of \(dpr)"), not \(Int(scaled))")
        }
        return Int(scaled)
    }
    /// A size times the DPR, each side 1...maxSide.
    func size(_ index: Int, _ usage: String) throws -> PixelSize {
        guard fields.count > index, let size = PixelSize(parsing: fields[index]) else { throw bad(usage) }
        let scaled = PixelSize(width: Int((Double(size.width) * dpr).rounded()), height: Int((Double(size.height) * dpr).rounded()))
        guard (1...maxSide).contains(scaled.width), (1...maxSide).contains(scaled.height) else {
            throw bad("sides from 1 to \(maxSide) pixels\(dpr == 1 ? "" : " after the DPR of \(dpr)"), not \(scaled)")
        }
        return scaled
    }
    func colour(_ index: Int) throws -> RGBColor? {
        guard fields.count > index, !fields[index].isEmpty else { return nil }
        guard let colour = RGBColor(parsing: fields[index]) else { throw bad("a colour such as ffffff, #fff, 255,255,255 or white, not '\(fields[index])'") }
        return colour
    }
    func gravity(_ index: Int, default value: ImageTransformers.Gravity) throws -> ImageTransformers.Gravity {
        guard fields.count > index, !fields[index].isEmpty else { return value }
        guard let gravity = ImageTransformers.Gravity(parsing: fields[index]) else { throw bad("a gravity (centre, n, ne, e, se, s, sw, w, nw), not '\(fields[index])'") }
        return gravity
    }
    func optionalNumber(_ index: Int, default value: Double, within range: ClosedRange<Double>) throws -> Double {
        guard fields.count > index, !fields[index].isEmpty else { return value }
        return try numbers(index, count: 1...1, within: range)[0]
    }

    /// `resize:WxH[:fit|fill|stretch[:attention|entropy|centre|fp:X:Y]]`.
    func resize() throws -> any ImageTransformer {
        let box = try size(1, "resize:WxH[:fit|fill|stretch[:attention|entropy|centre|fp:X:Y]]")
        let mode = fields.count > 2 ? ImageTransformers.ResizeMode(rawValue: fields[2].lowercased()) : .fit
        guard let mode else { throw bad("fit, fill or stretch") }
        var focus = ImageTransformers.CropFocus.centre
        if fields.count > 3 {
            // A focal point takes three fields (fp:X:Y), the others one.
            guard mode == .fill, fields.count == 4 || fields.count == 6,
                  let parsed = ImageTransformers.CropFocus(parsing: fields[3...].joined(separator: ":")) else {
                throw bad("a crop focus after 'fill': attention, entropy, centre, or fp:X:Y with X and Y from 0 to 1")
            }
            focus = parsed
        }
        return ImageTransformers.Resize(box, mode: mode, focus: focus)
    }

    /// `tint:R,G,B[,amount]`.
    func tint() throws -> any ImageTransformer {
        let v = try numbers(1, count: 3...4)
        guard v.prefix(3).allSatisfy({ (0...255).contains($0) }) else { throw bad("colour components 0...255") }
        guard v.count < 4 || (0...1).contains(v[3]) else { throw bad("a tint amount from 0 to 1") }
        return ImageTransformers.Tint(red: UInt8(v[0]), green: UInt8(v[1]), blue: UInt8(v[2]), amount: v.count > 3 ? v[3] : 0.5)
    }

    /// `text:WORDS[:size[:colour[:opacity[:gravity[:font]]]]]`: the words as
    /// written (a `:` or `;` cannot be in them: those separate fields and steps);
    /// the font one of `fonts`, by name, case-insensitive.
    func text(fonts: [String]) throws -> any ImageTransformer {
        guard fields.count > 1, !fields[1].isEmpty else { throw bad("text:WORDS[:size[:colour[:opacity[:gravity[:font]]]]]") }
        let size = try side(try optionalNumber(2, default: 24, within: 1...1e7), "a text size")
        guard ImageTransformers.TextWatermark.sizes.contains(size) else {
            throw bad("a text size from \(ImageTransformers.TextWatermark.sizes.lowerBound) to \(ImageTransformers.TextWatermark.sizes.upperBound) pixels\(dpr == 1 ? "" : " after the DPR of \(dpr)"), not \(size)")
        }
        var font = fonts[0]
        if fields.count > 6, !fields[6].isEmpty {
            guard let named = fonts.first(where: { $0.lowercased() == fields[6].lowercased() }) else {
                throw bad("a font of this service's: \(fonts.joined(separator: ", "))")
            }
            font = named
        }
        guard fields.count <= 7 else { throw bad("text:WORDS[:size[:colour[:opacity[:gravity[:font]]]]]: a ':' cannot be in the words") }
        // The fields' own errors name the step already; only the watermark's are wrapped.
        let colour = try colour(3) ?? .white, opacity = try optionalNumber(4, default: 0.7, within: 0...1)
        let gravity = try gravity(5, default: .southEast), margin = try side(10, "a margin")
        do {
            return try ImageTransformers.TextWatermark(fields[1], size: size, colour: colour, opacity: opacity, gravity: gravity, margin: margin, font: font)
        } catch let error as WebImageError where error.code == .invalidArgument {
            throw bad("\(error.message)")
        }
    }

    /// `watermark:NAME[:gravity[:opacity[:margin]]]`.
    func watermark(_ overlay: (String) throws -> ImageTransformers.Watermark.Overlay) throws -> any ImageTransformer {
        guard fields.count > 1, !fields[1].isEmpty else { throw bad("watermark:NAME[:gravity[:opacity[:margin]]]") }
        let opacity = try optionalNumber(3, default: 0.5, within: 0...1)
        let margin = try optionalNumber(4, default: 10, within: 0...10_000)
        return try ImageTransformers.Watermark(overlay: try overlay(fields[1]), gravity: try gravity(2, default: .southEast),
                                               opacity: opacity, margin: try side(margin, "a margin"))
    }
}

/// Which part of an image a fill (cover-and-crop) keeps.
public enum CropFocus: Sendable, Hashable {
    /// The centre (the default).
    case centre
    /// libvips' attention strategy: skin tones, saturated colour and edges
    /// (faces and subjects, as thumbor's and imgproxy's smart crops find them).
    case attention
    /// The part with the most entropy (detail).
    case entropy
    /// A focal point the caller knows (imgproxy's `gravity:fp`, thumbor's
    /// `focal`): `x` and `y` are fractions of the width and height from the
    /// top-left, 0…1. The crop is centred on it as far as the image allows.
    case point(x: Double, y: Double)

    /// The focus's name in keys and specs: `centre`, `attention`, `entropy`, or
    /// `fp:X:Y` with up to four decimals.
    public var key: String {
        switch self {
        case .centre: "centre"
        case .attention: "attention"
        case .entropy: "entropy"
        case .point(let x, let y): "fp:\(Self.decimal(x)):\(Self.decimal(y))"
        }
    }

    /// Parses ``key``'s forms (and `center`); nil for anything else, including a
    /// point outside 0…1 or not a plain decimal number (no exponent or hexadecimal).
    public init?(parsing text: String) {
        let lowered = text.lowercased()
        switch lowered {
        case "centre", "center": self = .centre
        case "attention": self = .attention
        case "entropy": self = .entropy
        default:
            let parts = lowered.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0] == "fp", parts[1].count <= 32, parts[2].count <= 32,
                  let x = plainDecimal(parts[1]), let y = plainDecimal(parts[2]), (0...1).contains(x), (0...1).contains(y) else { return nil }
            self = .point(x: x, y: y)
        }
    }

    /// The top-left corner of a `crop`-sized window of an `image`-sized one,
    /// centred on a point focus and kept inside; centred for the other foci.
    public func origin(of crop: PixelSize, in image: PixelSize) -> (x: Int, y: Int) {
        guard case .point(let fx, let fy) = self else {
            return (max(0, image.width - crop.width) / 2, max(0, image.height - crop.height) / 2)
        }
        func place(_ size: Int, _ total: Int, _ fraction: Double) -> Int {
            let ideal = Int((fraction * Double(total) - Double(size) / 2).rounded())
            return min(max(0, ideal), max(0, total - size))
        }
        return (place(crop.width, image.width, fx), place(crop.height, image.height, fy))
    }

    /// Whether libvips picks the window itself (`vips_smartcrop`).
    public var isSmart: Bool { self == .attention || self == .entropy }

    private static func decimal(_ value: Double) -> String {
        let rounded = (value * 10_000).rounded() / 10_000
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }
}

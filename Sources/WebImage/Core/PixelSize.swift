/// A size in pixels.
public struct PixelSize: Hashable, Sendable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }
    /// A square box, as in "a 256 px thumbnail".
    public init(_ side: Int) { self.init(width: side, height: side) }

    /// The number of pixels, saturating instead of overflowing for absurd headers.
    public var area: Int { width.multipliedReportingOverflow(by: height).overflow ? .max : width * height }

    /// `256x256`, the form used in derived cache keys and the command line.
    public var description: String { "\(width)x\(height)" }

    /// Parses `WxH` or a single number `N` (a square box). Zero or negative sides are rejected.
    public init?(parsing text: String) {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            guard let n = Int(parts[0]), n > 0 else { return nil }
            self.init(n)
        case 2:
            guard let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0 else { return nil }
            self.init(width: w, height: h)
        default:
            return nil
        }
    }
}

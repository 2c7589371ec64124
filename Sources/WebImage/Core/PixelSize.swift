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

    /// Parses `WxH` or a single number `N` (a square box). Each side is written in
    /// decimal digits alone, without a sign or a leading zero (`+100` and `0100`
    /// are refused: one spelling per size); zero is rejected.
    public init?(parsing text: String) {
        func side<S: StringProtocol>(_ part: S) -> Int? {
            guard let first = part.utf8.first, first != UInt8(ascii: "0"), part.utf8.count <= 9,
                  part.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
            return Int(part)
        }
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            guard let n = side(parts[0]) else { return nil }
            self.init(n)
        case 2:
            guard let w = side(parts[0]), let h = side(parts[1]) else { return nil }
            self.init(width: w, height: h)
        default:
            return nil
        }
    }
}

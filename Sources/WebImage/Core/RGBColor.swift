/// An opaque 8-bit sRGB colour: a background to flatten or pad onto.
public struct RGBColor: Hashable, Sendable, CustomStringConvertible {
    public var red: UInt8, green: UInt8, blue: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8) {
        (self.red, self.green, self.blue) = (red, green, blue)
    }

    public static let white = RGBColor(red: 255, green: 255, blue: 255)
    public static let black = RGBColor(red: 0, green: 0, blue: 0)

    /// `ffffff`: the form used in cache keys and specs.
    public var description: String {
        [red, green, blue].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Parses `ffffff`, `#ffffff`, `fff`, `255,255,255`, `white` or `black`;
    /// nil for anything else (a component over 255, a stray character).
    public init?(parsing text: String) {
        let t = text.trimmingPrefix("#").lowercased()
        switch t {
        case "white": self = .white; return
        case "black": self = .black; return
        default: break
        }
        if t.contains(",") {
            let parts = t.split(separator: ",", omittingEmptySubsequences: false).map { UInt8($0) }
            guard parts.count == 3, let r = parts[0], let g = parts[1], let b = parts[2] else { return nil }
            self.init(red: r, green: g, blue: b)
            return
        }
        guard t.allSatisfy(\.isHexDigit) else { return nil }
        let digits = t.count == 3 ? t.map { "\($0)\($0)" }.joined() : String(t)
        guard digits.count == 6, let value = UInt32(digits, radix: 16) else { return nil }
        self.init(red: UInt8(value >> 16 & 0xFF), green: UInt8(value >> 8 & 0xFF), blue: UInt8(value & 0xFF))
    }
}

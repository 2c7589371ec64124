import CJPEGTurboOps
import Foundation
import Testing

/// The direct JPEG path's resample (Plugins/CJPEGTurboOps/resample.c): both of its
/// row loops, the portable one and the AVX2 one, against a plain double-precision
/// Lanczos-3 written here from the definition.
@Suite("Direct-path resample")
struct ResampleTests {
    /// Cases: a 2 MP photo's 2/8 decode to a 256 px box, enlargements, extreme
    /// strips, an unchanged size; each with 1, 3 and 4 bands.
    static let cases: [(sw: Int, sh: Int, dw: Int, dh: Int)] = [
        (300, 450, 171, 256), (37, 5, 100, 13), (1000, 3, 7, 1), (3, 900, 2, 17), (64, 64, 64, 64), (513, 257, 129, 65),
    ]

    static func pixels(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<count).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state >> 24)
        }
    }

    static func resample(_ source: [UInt8], _ c: (sw: Int, sh: Int, dw: Int, dh: Int), bands: Int, wide: Int32?) -> (Int32, [UInt8]) {
        var out = [UInt8](repeating: 0, count: c.dw * c.dh * bands)
        let status = source.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                if let wide {
                    CJT_resample_variant(src.baseAddress, Int32(c.sw), Int32(c.sh), Int32(bands), dst.baseAddress, Int32(c.dw), Int32(c.dh), wide)
                } else {
                    CJT_resample(src.baseAddress, Int32(c.sw), Int32(c.sh), Int32(bands), dst.baseAddress, Int32(c.dw), Int32(c.dh))
                }
            }
        }
        return (status, out)
    }

    /// Separable Lanczos-3 in doubles: every source index whose weight is not
    /// zero (a window wider than the C code's), edges repeated, weights normalised.
    static func reference(_ source: [UInt8], _ c: (sw: Int, sh: Int, dw: Int, dh: Int), bands: Int) -> [Double] {
        func kernel(_ n: Int, _ m: Int) -> [[(Int, Double)]] {
            let scale = Double(n) / Double(m), stretch = max(scale, 1), support = 3 * stretch
            return (0..<m).map { i in
                let centre = (Double(i) + 0.5) * scale - 0.5
                var taps: [(Int, Double)] = []
                for j in Int((centre - support).rounded(.down)) - 1...Int((centre + support).rounded(.up)) + 1 {
                    let x = (Double(j) - centre) / stretch
                    guard abs(x) < 3 else { continue }
                    let w = x == 0 ? 1 : 3 * sin(.pi * x) * sin(.pi * x / 3) / (.pi * .pi * x * x)
                    taps.append((min(max(j, 0), n - 1), w))
                }
                let sum = taps.reduce(0) { $0 + $1.1 }
                return taps.map { ($0.0, $0.1 / sum) }
            }
        }
        let vertical = kernel(c.sh, c.dh), horizontal = kernel(c.sw, c.dw)
        var middle = [Double](repeating: 0, count: c.sw * c.dh * bands)
        for y in 0..<c.dh { for k in 0..<c.sw * bands { middle[y * c.sw * bands + k] = vertical[y].reduce(0) { $0 + $1.1 * Double(source[$1.0 * c.sw * bands + k]) } } }
        var out = [Double](repeating: 0, count: c.dw * c.dh * bands)
        for y in 0..<c.dh { for x in 0..<c.dw { for b in 0..<bands {
            out[(y * c.dw + x) * bands + b] = horizontal[x].reduce(0) { $0 + $1.1 * middle[(y * c.sw + $1.0) * bands + b] }
        } } }
        return out.map { min(max($0, 0), 255) }
    }

    @Test("both row loops give the definition's pixels, within a level; CJT_resample runs the AVX2 loop where the processor has one")
    func loopsAgree() {
        for c in Self.cases {
            for bands in [1, 3, 4] {
                let label = "\(c.sw)x\(c.sh) to \(c.dw)x\(c.dh), \(bands) bands"
                let source = Self.pixels(c.sw * c.sh * bands, seed: UInt64(c.sw * 31 + c.sh * 7 + bands))
                let expected = Self.reference(source, c, bands: bands)
                let (portableStatus, portable) = Self.resample(source, c, bands: bands, wide: 0)
                let (wideStatus, wide) = Self.resample(source, c, bands: bands, wide: 1)
                let (_, chosen) = Self.resample(source, c, bands: bands, wide: nil)
                #expect(portableStatus == 0, "\(label)")
                // Random pixels are the hardest case for a kernel: any tap left
                // out, or a weight wrong, moves results by many levels.
                let portableError = zip(portable, expected).map { abs(Double($0) - $1) }.max() ?? 0
                #expect(portableError <= 1, "\(label): the portable loop is \(portableError) levels from the definition")
                if wideStatus == -2 {
                    #expect(chosen == portable, "\(label): no AVX2 loop here, so CJT_resample is the portable one")
                } else {
                    #expect(wideStatus == 0 && chosen == wide, "\(label): CJT_resample is the AVX2 loop")
                    let wideError = zip(wide, expected).map { abs(Double($0) - $1) }.max() ?? 0
                    #expect(wideError <= 1, "\(label): the AVX2 loop is \(wideError) levels from the definition")
                    let differing = zip(wide, portable).filter { $0 != $1 }.count
                    #expect(differing * 100 <= wide.count, "\(label): \(differing) of \(wide.count) samples differ between the loops (rounding ties only)")
                }
            }
        }
    }

    @Test("a flat image stays flat and bad sizes are refused, in both loops")
    func flatAndBadSizes() {
        for wide: Int32 in [0, 1] {
            let c = (sw: 300, sh: 450, dw: 171, dh: 256)
            let (status, out) = Self.resample([UInt8](repeating: 77, count: c.sw * c.sh * 3), c, bands: 3, wide: wide)
            if status == -2 { continue }  // no AVX2 loop on this processor; loopsAgree checks which ran
            #expect(status == 0 && out.allSatisfy { $0 == 77 }, "wide \(wide)")
            let (bad, _) = Self.resample([1, 2, 3], (sw: 1, sh: 1, dw: 0, dh: 1), bands: 3, wide: wide)
            #expect(bad == -1, "wide \(wide)")
            let (badBands, _) = Self.resample([1, 2, 3, 4, 5], (sw: 1, sh: 1, dw: 1, dh: 1), bands: 5, wide: wide)
            #expect(badBands == -1, "wide \(wide)")
        }
    }
}

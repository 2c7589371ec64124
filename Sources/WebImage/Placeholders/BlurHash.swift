import Foundation

/// BlurHash (blurha.sh, by Wolt): a short text that decodes to a blurred
/// picture of an image, to show while the image loads.
///
/// The encoder follows the reference C implementation step for step, in
/// single precision as it does, so that the same pixels give the same text
/// (tested against hashes the reference computed). Hashes are made from small
/// images: `WebImageVips`' `Image.placeholders()` shrinks the image first.
public enum BlurHash {
    /// The hash of 8-bit RGB or RGBA pixels (alpha is ignored: composite onto a
    /// background first). `components` are the numbers of cosine terms across and
    /// down, 1...9 each; 4x3 suits a landscape photo.
    /// - Throws: ``WebImageError/Code/invalidArgument`` for components outside
    ///   1...9, an empty image, or a buffer that is not whole RGB(A) pixels.
    public static func encode(_ pixels: PixelBuffer, components: (x: Int, y: Int) = (4, 3)) throws -> String {
        let (cx, cy) = components
        guard (1...9).contains(cx), (1...9).contains(cy) else {
            throw WebImageError(.invalidArgument, "BlurHash components must be 1 to 9 each, not \(cx)x\(cy)")
        }
        let width = pixels.size.width, height = pixels.size.height, channels = pixels.channels
        guard width > 0, height > 0, channels == 3 || channels == 4, pixels.bytes.count >= width * height * channels else {
            throw WebImageError(.invalidArgument, "BlurHash needs RGB or RGBA pixels, not a \(pixels.size) buffer of \(channels) channels and \(pixels.bytes.count) bytes")
        }
        let linear = (0...255).map { sRGBToLinear($0) }
        var factors = [(Float, Float, Float)]()
        for j in 0..<cy {
            for i in 0..<cx {
                var r: Float = 0, g: Float = 0, b: Float = 0
                let normalisation: Float = i == 0 && j == 0 ? 1 : 2
                for y in 0..<height {
                    for x in 0..<width {
                        let basis = cosf(Float.pi * Float(i) * Float(x) / Float(width)) * cosf(Float.pi * Float(j) * Float(y) / Float(height))
                        let p = (y * width + x) * channels
                        r += basis * linear[Int(pixels.bytes[p])]
                        g += basis * linear[Int(pixels.bytes[p + 1])]
                        b += basis * linear[Int(pixels.bytes[p + 2])]
                    }
                }
                let scale = normalisation / Float(width * height)
                factors.append((r * scale, g * scale, b * scale))
            }
        }
        var hash = base83((cx - 1) + (cy - 1) * 9, length: 1)
        let ac = factors.dropFirst()
        var maximum: Float = 1
        if ac.isEmpty {
            hash += base83(0, length: 1)
        } else {
            let actual = ac.reduce(Float(0)) { max($0, abs($1.0), abs($1.1), abs($1.2)) }
            let quantised = Int(max(0, min(82, floorf(actual * 166 - 0.5))))
            maximum = Float(quantised + 1) / 166
            hash += base83(quantised, length: 1)
        }
        let dc = factors[0]
        hash += base83(linearToSRGB(dc.0) << 16 + linearToSRGB(dc.1) << 8 + linearToSRGB(dc.2), length: 4)
        for factor in ac {
            func quantise(_ value: Float) -> Int { Int(max(0, min(18, floorf(signPow(value / maximum, 0.5) * 9 + 9.5)))) }
            hash += base83(quantise(factor.0) * 19 * 19 + quantise(factor.1) * 19 + quantise(factor.2), length: 2)
        }
        return hash
    }

    /// The picture a hash stands for, `width`x`height` RGB. `punch` raises the
    /// contrast (1: as encoded).
    /// - Throws: ``WebImageError/Code/invalidArgument`` for text that is not a
    ///   BlurHash (wrong length, a character outside base 83) or an absurd size.
    public static func decode(_ hash: String, width: Int, height: Int, punch: Float = 1) throws -> PixelBuffer {
        guard (1...1024).contains(width), (1...1024).contains(height) else {
            throw WebImageError(.invalidArgument, "a BlurHash decodes to 1 to 1024 pixels a side, not \(width)x\(height)")
        }
        let (cx, cy, colours) = try components(of: hash, punch: max(1, punch))
        var bytes = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                var r: Float = 0, g: Float = 0, b: Float = 0
                for j in 0..<cy {
                    for i in 0..<cx {
                        // In double, as the reference decoder computes it, then single.
                        let basis = Float(cos(Double.pi * Double(x * i) / Double(width)) * cos(Double.pi * Double(y * j) / Double(height)))
                        let colour = colours[i + j * cx]
                        r += colour.0 * basis
                        g += colour.1 * basis
                        b += colour.2 * basis
                    }
                }
                let p = (y * width + x) * 3
                bytes[p] = UInt8(clamping: linearToSRGB(r))
                bytes[p + 1] = UInt8(clamping: linearToSRGB(g))
                bytes[p + 2] = UInt8(clamping: linearToSRGB(b))
            }
        }
        return PixelBuffer(size: PixelSize(width: width, height: height), channels: 3, bytes: bytes)
    }

    /// The image's average colour, from the hash's first term.
    public static func averageColor(_ hash: String) throws -> RGBColor {
        let (_, _, colours) = try components(of: hash)
        let dc = colours[0]
        return RGBColor(red: UInt8(clamping: linearToSRGB(dc.0)), green: UInt8(clamping: linearToSRGB(dc.1)), blue: UInt8(clamping: linearToSRGB(dc.2)))
    }

    /// The hash's terms, as linear RGB, DC first.
    static func components(of hash: String, punch: Float = 1) throws -> (Int, Int, [(Float, Float, Float)]) {
        let characters = Array(hash.utf8)
        func invalid(_ why: String) -> WebImageError { WebImageError(.invalidArgument, "'\(hash.prefix(40))' is not a BlurHash: \(why)") }
        guard characters.count >= 6 else { throw invalid("it is shorter than 6 characters") }
        func value(_ range: Range<Int>) throws -> Int {
            var result = 0
            for c in characters[range] {
                guard let digit = digitValue[c] else { throw invalid("'\(Character(UnicodeScalar(c)))' is not a base-83 digit") }
                result = result * 83 + digit
            }
            return result
        }
        let size = try value(0..<1)
        let cx = size % 9 + 1, cy = size / 9 + 1
        guard characters.count == 4 + 2 * cx * cy else { throw invalid("\(cx)x\(cy) terms need \(4 + 2 * cx * cy) characters, not \(characters.count)") }
        let maximum = Float(try value(1..<2) + 1) / 166
        let dc = try value(2..<6)
        var colours = [(sRGBToLinear(dc >> 16), sRGBToLinear(dc >> 8 & 255), sRGBToLinear(dc & 255))]
        for index in 1..<(cx * cy) {
            let ac = try value((4 + index * 2)..<(6 + index * 2))
            func unquantise(_ q: Int) -> Float { signPow((Float(q) - 9) / 9, 2) * maximum * punch }
            colours.append((unquantise(ac / (19 * 19)), unquantise(ac / 19 % 19), unquantise(ac % 19)))
        }
        return (cx, cy, colours)
    }

    static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~".utf8)
    static let digitValue: [UInt8: Int] = Dictionary(uniqueKeysWithValues: alphabet.enumerated().map { ($1, $0) })

    static func base83(_ value: Int, length: Int) -> String {
        var divisor = 1
        for _ in 0..<(length - 1) { divisor *= 83 }
        var out = ""
        for _ in 0..<length {
            out.append(Character(UnicodeScalar(alphabet[(value / divisor) % 83])))
            divisor /= 83
        }
        return out
    }

    static func sRGBToLinear(_ value: Int) -> Float {
        let v = Float(value) / 255
        return v <= 0.04045 ? v / 12.92 : powf((v + 0.055) / 1.055, 2.4)
    }

    /// As the reference: computed in double from a float, truncated after adding 0.5.
    static func linearToSRGB(_ value: Float) -> Int {
        let v = max(0, min(1, value))
        if v <= 0.0031308 { return Int(Double(v) * 12.92 * 255 + 0.5) }
        return Int((1.055 * Double(powf(v, 1 / 2.4)) - 0.055) * 255 + 0.5)
    }

    static func signPow(_ value: Float, _ exponent: Float) -> Float {
        copysignf(powf(abs(value), exponent), value)
    }
}

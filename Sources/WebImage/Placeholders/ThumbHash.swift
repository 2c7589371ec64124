import Foundation

/// ThumbHash (evanw.github.io/thumbhash): about 25 bytes that decode to a
/// blurred picture of an image, with its aspect ratio and alpha, and sharper
/// detail than a BlurHash of the same size.
///
/// Follows the reference JavaScript implementation step for step (in double
/// precision, rounding as `Math.round` does), so that the same pixels give the
/// same bytes (tested against hashes the reference computed). The input is at
/// most 100x100: `WebImageVips`' `Image.placeholders()` shrinks the image first.
public enum ThumbHash {
    /// The hash of 8-bit RGBA (or RGB, taken as opaque) pixels, at most 100x100.
    /// - Throws: ``WebImageError/Code/invalidArgument`` for a larger or empty
    ///   image, or a buffer that is not whole RGB(A) pixels.
    public static func encode(_ pixels: PixelBuffer) throws -> [UInt8] {
        let w = pixels.size.width, h = pixels.size.height, channels = pixels.channels
        guard (1...100).contains(w), (1...100).contains(h) else {
            throw WebImageError(.invalidArgument, "ThumbHash takes images up to 100x100, not \(pixels.size); shrink it first")
        }
        guard channels == 3 || channels == 4, pixels.bytes.count >= w * h * channels else {
            throw WebImageError(.invalidArgument, "ThumbHash needs RGB or RGBA pixels, not \(channels) channels and \(pixels.bytes.count) bytes")
        }
        let rgba = pixels.bytes
        func component(_ i: Int, _ c: Int) -> Double { c == 3 && channels == 3 ? 255 : Double(rgba[i * channels + c]) }

        var avgR = 0.0, avgG = 0.0, avgB = 0.0, avgA = 0.0
        for i in 0..<(w * h) {
            let alpha = component(i, 3) / 255
            avgR += alpha / 255 * component(i, 0)
            avgG += alpha / 255 * component(i, 1)
            avgB += alpha / 255 * component(i, 2)
            avgA += alpha
        }
        if avgA > 0 { avgR /= avgA; avgG /= avgA; avgB /= avgA }

        let hasAlpha = avgA < Double(w * h)
        let lLimit = hasAlpha ? 5.0 : 7.0
        let lx = max(1, round(lLimit * Double(w) / Double(max(w, h))))
        let ly = max(1, round(lLimit * Double(h) / Double(max(w, h))))
        var l = [Double](), p = [Double](), q = [Double](), a = [Double]()
        for i in 0..<(w * h) {
            let alpha = component(i, 3) / 255
            let r = avgR * (1 - alpha) + alpha / 255 * component(i, 0)
            let g = avgG * (1 - alpha) + alpha / 255 * component(i, 1)
            let b = avgB * (1 - alpha) + alpha / 255 * component(i, 2)
            l.append((r + g + b) / 3)
            p.append((r + g) / 2 - b)
            q.append(r - g)
            a.append(alpha)
        }

        let lChannel = encodeChannel(l, w, h, max(3, lx), max(3, ly))
        let pChannel = encodeChannel(p, w, h, 3, 3)
        let qChannel = encodeChannel(q, w, h, 3, 3)
        let aChannel = hasAlpha ? encodeChannel(a, w, h, 5, 5) : nil

        let isLandscape = w > h
        let header24 = round(63 * lChannel.dc) | round(31.5 + 31.5 * pChannel.dc) << 6 | round(31.5 + 31.5 * qChannel.dc) << 12
            | round(31 * lChannel.scale) << 18 | (hasAlpha ? 1 << 23 : 0)
        let header16 = (isLandscape ? ly : lx) | round(63 * pChannel.scale) << 3 | round(63 * qChannel.scale) << 9 | (isLandscape ? 1 << 15 : 0)
        var hash: [UInt8] = [UInt8(header24 & 255), UInt8(header24 >> 8 & 255), UInt8(header24 >> 16 & 255), UInt8(header16 & 255), UInt8(header16 >> 8 & 255)]
        if let aChannel { hash.append(UInt8(round(15 * aChannel.dc) | round(15 * aChannel.scale) << 4)) }
        let acStart = hash.count
        var index = 0
        for ac in [lChannel.ac, pChannel.ac, qChannel.ac] + (aChannel.map { [$0.ac] } ?? []) {
            for f in ac {
                let position = acStart + index >> 1
                if position >= hash.count { hash.append(0) }
                hash[position] |= UInt8(round(15 * f) << ((index & 1) << 2))
                index += 1
            }
        }
        return hash
    }

    /// One channel's DCT: its DC, its AC terms scaled to 0...1, and their scale.
    private static func encodeChannel(_ channel: [Double], _ w: Int, _ h: Int, _ nx: Int, _ ny: Int) -> (dc: Double, ac: [Double], scale: Double) {
        var dc = 0.0, ac = [Double](), scale = 0.0
        var fx = [Double](repeating: 0, count: w)
        for cy in 0..<ny {
            var cx = 0
            while cx * ny < nx * (ny - cy) {
                var f = 0.0
                for x in 0..<w { fx[x] = cos(Double.pi / Double(w) * Double(cx) * (Double(x) + 0.5)) }
                for y in 0..<h {
                    let fy = cos(Double.pi / Double(h) * Double(cy) * (Double(y) + 0.5))
                    for x in 0..<w { f += channel[x + y * w] * fx[x] * fy }
                }
                f /= Double(w * h)
                if cx > 0 || cy > 0 {
                    ac.append(f)
                    scale = max(scale, abs(f))
                } else {
                    dc = f
                }
                cx += 1
            }
        }
        if scale > 0 { ac = ac.map { 0.5 + 0.5 / scale * $0 } }
        return (dc, ac, scale)
    }

    /// The picture a hash stands for: RGBA, 32 pixels on its longer side.
    /// - Throws: ``WebImageError/Code/invalidArgument`` for bytes too short to be a ThumbHash.
    public static func decode(_ hash: [UInt8]) throws -> PixelBuffer {
        let header = try Header(hash)
        let ratio = header.aspectRatio
        let w = Int(jsRound(ratio > 1 ? 32 : 32 * ratio)), h = Int(jsRound(ratio > 1 ? 32 / ratio : 32))
        var index = 0
        func decodeChannel(_ nx: Int, _ ny: Int, _ scale: Double) throws -> [Double] {
            var ac = [Double]()
            for cy in 0..<ny {
                var cx = cy > 0 ? 0 : 1
                while cx * ny < nx * (ny - cy) {
                    let position = header.acStart + index >> 1
                    guard position < hash.count else { throw WebImageError(.invalidArgument, "the ThumbHash is cut short (\(hash.count) bytes)") }
                    ac.append((Double(Int(hash[position]) >> ((index & 1) << 2) & 15) / 7.5 - 1) * scale)
                    index += 1
                    cx += 1
                }
            }
            return ac
        }
        let lAC = try decodeChannel(header.lx, header.ly, header.lScale)
        let pAC = try decodeChannel(3, 3, header.pScale * 1.25)
        let qAC = try decodeChannel(3, 3, header.qScale * 1.25)
        let aAC = header.hasAlpha ? try decodeChannel(5, 5, header.aScale) : []
        var bytes = [UInt8](repeating: 0, count: w * h * 4)
        var fx = [Double](repeating: 0, count: 8), fy = [Double](repeating: 0, count: 8)
        for y in 0..<h {
            for x in 0..<w {
                var l = header.lDC, p = header.pDC, q = header.qDC, a = header.aDC
                for cx in 0..<max(header.lx, header.hasAlpha ? 5 : 3) { fx[cx] = cos(Double.pi / Double(w) * (Double(x) + 0.5) * Double(cx)) }
                for cy in 0..<max(header.ly, header.hasAlpha ? 5 : 3) { fy[cy] = cos(Double.pi / Double(h) * (Double(y) + 0.5) * Double(cy)) }
                var j = 0
                for cy in 0..<header.ly {
                    var cx = cy > 0 ? 0 : 1
                    let fy2 = fy[cy] * 2
                    while cx * header.ly < header.lx * (header.ly - cy) { l += lAC[j] * fx[cx] * fy2; cx += 1; j += 1 }
                }
                j = 0
                for cy in 0..<3 {
                    var cx = cy > 0 ? 0 : 1
                    let fy2 = fy[cy] * 2
                    while cx < 3 - cy { let f = fx[cx] * fy2; p += pAC[j] * f; q += qAC[j] * f; cx += 1; j += 1 }
                }
                if header.hasAlpha {
                    j = 0
                    for cy in 0..<5 {
                        var cx = cy > 0 ? 0 : 1
                        let fy2 = fy[cy] * 2
                        while cx < 5 - cy { a += aAC[j] * fx[cx] * fy2; cx += 1; j += 1 }
                    }
                }
                let b = l - 2.0 / 3 * p
                let r = (3 * l - b + q) / 2
                let g = r - q
                let i = (y * w + x) * 4
                // Uint8Array stores truncate toward zero.
                bytes[i] = UInt8(max(0, 255 * min(1, r)))
                bytes[i + 1] = UInt8(max(0, 255 * min(1, g)))
                bytes[i + 2] = UInt8(max(0, 255 * min(1, b)))
                bytes[i + 3] = UInt8(max(0, 255 * min(1, a)))
            }
        }
        return PixelBuffer(size: PixelSize(width: w, height: h), channels: 4, bytes: bytes)
    }

    /// The image's average colour and alpha (0...1 each), from the header alone.
    public static func averageRGBA(_ hash: [UInt8]) throws -> (red: Double, green: Double, blue: Double, alpha: Double) {
        let header = try Header(hash)
        let b = header.lDC - 2.0 / 3 * header.pDC
        let r = (3 * header.lDC - b + header.qDC) / 2
        let g = r - header.qDC
        return (max(0, min(1, r)), max(0, min(1, g)), max(0, min(1, b)), header.aDC)
    }

    /// The original image's approximate aspect ratio (width / height).
    public static func approximateAspectRatio(_ hash: [UInt8]) throws -> Double { try Header(hash).aspectRatio }

    struct Header {
        let lDC, pDC, qDC, lScale, pScale, qScale, aDC, aScale: Double
        let hasAlpha, isLandscape: Bool
        let lx, ly, acStart: Int
        let aspectRatio: Double

        init(_ hash: [UInt8]) throws {
            guard hash.count >= 5 else { throw WebImageError(.invalidArgument, "a ThumbHash has at least 5 bytes, not \(hash.count)") }
            let header24 = Int(hash[0]) | Int(hash[1]) << 8 | Int(hash[2]) << 16
            let header16 = Int(hash[3]) | Int(hash[4]) << 8
            lDC = Double(header24 & 63) / 63
            pDC = Double(header24 >> 6 & 63) / 31.5 - 1
            qDC = Double(header24 >> 12 & 63) / 31.5 - 1
            lScale = Double(header24 >> 18 & 31) / 31
            hasAlpha = header24 >> 23 != 0
            pScale = Double(header16 >> 3 & 63) / 63
            qScale = Double(header16 >> 9 & 63) / 63
            isLandscape = header16 >> 15 != 0
            guard !hasAlpha || hash.count >= 6 else { throw WebImageError(.invalidArgument, "the ThumbHash says it has alpha but has only 5 bytes") }
            lx = max(3, isLandscape ? (hasAlpha ? 5 : 7) : header16 & 7)
            ly = max(3, isLandscape ? header16 & 7 : (hasAlpha ? 5 : 7))
            aDC = hasAlpha ? Double(hash[5] & 15) / 15 : 1
            aScale = hasAlpha ? Double(hash[5] >> 4) / 15 : 0
            acStart = hasAlpha ? 6 : 5
            let ratioX = isLandscape ? (hasAlpha ? 5 : 7) : header16 & 7
            let ratioY = isLandscape ? header16 & 7 : (hasAlpha ? 5 : 7)
            guard ratioX > 0, ratioY > 0 else { throw WebImageError(.invalidArgument, "the ThumbHash's header declares an empty image") }
            aspectRatio = Double(ratioX) / Double(ratioY)
        }
    }

    /// `Math.round`: halves go up.
    static func jsRound(_ x: Double) -> Double { (x + 0.5).rounded(.down) }
    static func round(_ x: Double) -> Int { Int(jsRound(x)) }
}

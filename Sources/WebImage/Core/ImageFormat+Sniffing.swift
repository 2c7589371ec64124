public import Foundation

extension ImageFormat {
    /// Recognises the format of encoded bytes by their magic numbers.
    ///
    /// Recognised: JPEG, PNG, GIF, TIFF (both byte orders), WebP, HEIF and AVIF
    /// (ISO BMFF `ftyp` brands), JPEG XL (codestream and container), SVG (an
    /// `<svg` element near the start, after an optional XML prolog), PDF and BMP.
    ///
    /// - Returns: the format, or `nil` for empty, too short or unrecognised data.
    public static func sniff(_ data: Data) -> ImageFormat? {
        data.withUnsafeBytes { raw -> ImageFormat? in
            let b = raw.bindMemory(to: UInt8.self)
            return sniff(b)
        }
    }

    static func sniff(_ b: UnsafeBufferPointer<UInt8>) -> ImageFormat? {
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            guard b.count >= offset + prefix.count else { return false }
            for (i, byte) in prefix.enumerated() where b[offset + i] != byte { return false }
            return true
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return .gif }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return .tiff }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return .webp }
        if starts([0xFF, 0x0A]) { return .jxl }
        if starts([0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) { return .jxl }
        if starts(Array("ftyp".utf8), at: 4), b.count >= 12 {
            let brand = String(decoding: UnsafeBufferPointer(rebasing: b[8..<12]), as: UTF8.self)
            switch brand {
            case "avif", "avis": return .avif
            case "heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1": return .heif
            default: break
            }
        }
        if starts(Array("%PDF-".utf8)) { return .pdf }
        // "BM", reserved bytes zero, and a DIB header size that exists.
        if starts(Array("BM".utf8)), b.count >= 26, b[6] == 0, b[7] == 0, b[8] == 0, b[9] == 0,
           [12, 40, 52, 56, 64, 108, 124].contains(Int(b[14]) | Int(b[15]) << 8), b[16] == 0, b[17] == 0 { return .bmp }
        if looksLikeSVG(b) { return .svg }
        return nil
    }

    /// An `<svg` tag within the first kilobyte, after optional BOM, whitespace,
    /// XML prolog, comments and doctype.
    private static func looksLikeSVG(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        let head = String(decoding: UnsafeBufferPointer(rebasing: b[0..<min(b.count, 1024)]), as: UTF8.self)
        let trimmed = head.drop { $0.isWhitespace || $0 == "\u{FEFF}" }
        guard trimmed.hasPrefix("<") else { return false }
        return trimmed.range(of: "<svg", options: .caseInsensitive) != nil
    }
}

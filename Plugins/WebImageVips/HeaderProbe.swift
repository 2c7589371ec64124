import WebImage

/// Reads the declared size of PNG, GIF and JPEG straight from their headers, so
/// the pixel limit holds before any library parses the image (some refuse absurd
/// headers without saying why, and libvips' error buffer is shared by threads).
enum HeaderProbe {
    static func size(of bytes: UnsafeRawBufferPointer, format: ImageFormat?) -> PixelSize? {
        func be16(_ i: Int) -> Int { Int(bytes[i]) << 8 | Int(bytes[i + 1]) }
        func be32(_ i: Int) -> Int { be16(i) << 16 | be16(i + 2) }
        func le16(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 }
        switch format {
        case .png where bytes.count >= 24:
            return PixelSize(width: be32(16), height: be32(20))
        case .gif where bytes.count >= 10:
            return PixelSize(width: le16(6), height: le16(8))
        case .jpeg:
            // Walk the markers to the first start-of-frame (SOF0..SOF15 but DHT, JPG, DAC).
            var i = 2
            while i + 9 < bytes.count {
                guard bytes[i] == 0xFF else { return nil }
                let marker = bytes[i + 1]
                if marker == 0xFF { i += 1; continue }
                if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                    return PixelSize(width: be16(i + 7), height: be16(i + 5))
                }
                if marker == 0xD8 || (0xD0...0xD7).contains(marker) { i += 2; continue }
                i += 2 + be16(i + 2)
            }
            return nil
        default:
            return nil
        }
    }
}

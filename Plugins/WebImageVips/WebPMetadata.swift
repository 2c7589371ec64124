package import Foundation

/// Metadata chunks of a WebP file (its RIFF container), removed after libvips
/// writes it. libvips 8.14's `webpsave` writes an `EXIF` chunk whatever `strip`
/// says: the source's EXIF when it had some (an `Artist` or GPS position
/// survives into a thumbnail asked to carry no metadata), else one built from
/// the resolution (212 bytes, 3 % of a 256 px thumbnail). So the encoder
/// removes `EXIF` and `XMP ` chunks itself, and `ICCP` unless the profile is
/// kept, and clears their flags in `VP8X`.
package enum WebPMetadata {
    /// `data` without its metadata chunks; `data` itself when it has none, or
    /// when it is not a well-formed WebP file (then there is nothing safe to edit).
    package static func removing(from data: Data, keepColorProfile: Bool) -> Data {
        let bytes = [UInt8](data)
        guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WEBP".utf8) else { return data }
        var dropped: Set<String> = ["EXIF", "XMP "]
        if !keepColorProfile { dropped.insert("ICCP") }
        var kept: [UInt8] = []
        kept.reserveCapacity(bytes.count)
        var removedFlags: UInt8 = 0
        var offset = 12
        while offset < bytes.count {
            guard offset + 8 <= bytes.count else { return data }
            let name = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let size = Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8 | Int(bytes[offset + 6]) << 16 | Int(bytes[offset + 7]) << 24
            let end = offset + 8 + size + (size & 1)
            guard end <= bytes.count else { return data }
            if dropped.contains(name) {
                removedFlags |= name == "EXIF" ? 0x08 : name == "XMP " ? 0x04 : 0x20
            } else {
                kept.append(contentsOf: bytes[offset..<end])
            }
            offset = end
        }
        guard removedFlags != 0 else { return data }
        // VP8X, when present, is the first chunk: its flags say which chunks follow.
        if kept.count >= 9, kept[0..<4].elementsEqual("VP8X".utf8) { kept[8] &= ~removedFlags }
        let riffSize = UInt32(4 + kept.count)
        var out: [UInt8] = Array("RIFF".utf8)
        out += [UInt8(riffSize & 0xFF), UInt8(riffSize >> 8 & 0xFF), UInt8(riffSize >> 16 & 0xFF), UInt8(riffSize >> 24)]
        out += Array("WEBP".utf8)
        out += kept
        return Data(out)
    }
}

package import Foundation

/// Image files written byte by byte, for what libvips will not write: more GIF
/// frames than it reads, PNG headers that claim sizes no pixels back.
package enum SyntheticImages {
    /// A 1x1 GIF with `frames` frames of 10 ms each, written block by block (libvips
    /// cannot write more frames than it reads), looping forever.
    package static func manyFrameGIF(frames: Int, localColorTables: Bool = false, trailer: Bool = true) -> Data {
        var out = Array("GIF89a".utf8) + [1, 0, 1, 0, 0x80, 0, 0] + [0, 0, 0, 255, 255, 255]
        out += [0x21, 0xFF, 0x0B] + Array("NETSCAPE2.0".utf8) + [3, 1, 0, 0, 0]
        for _ in 0..<frames {
            out += [0x21, 0xF9, 4, 0, 1, 0, 0, 0]                          // graphic control: 10 ms
            out += [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, localColorTables ? 0x80 : 0]  // descriptor
            if localColorTables { out += [0, 0, 0, 255, 255, 255] }
            out += [2, 2, 0x44, 0x01, 0]                                    // LZW data for one pixel
        }
        if trailer { out.append(0x3B) }
        return Data(out)
    }

    /// A valid PNG signature and IHDR that claims `width`x`height`, and no pixels;
    /// with `idat`, a first IDAT chunk of 100 zero bytes (a stored deflate block),
    /// enough for a header reader to accept the file.
    package static func pngHeader(width: UInt32, height: UInt32, idat: Bool = false) -> Data {
        func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        let ihdr = Array("IHDR".utf8) + be(width) + be(height) + [8, 2, 0, 0, 0]
        let iend = Array("IEND".utf8)
        var chunks = be(13) + ihdr + be(crc32(ihdr))
        if idat {
            // zlib header, one final stored block of 100 zeros, Adler-32 of them (0x00640001).
            let stream: [UInt8] = [0x78, 0x01, 0x01, 100, 0, 0x9B, 0xFF] + [UInt8](repeating: 0, count: 100) + [0x00, 0x64, 0x00, 0x01]
            let chunk = Array("IDAT".utf8) + stream
            chunks += be(UInt32(stream.count)) + chunk + be(crc32(chunk))
        }
        return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunks + be(0) + iend + be(crc32(iend)))
    }

    package static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    /// A JPEG header that declares `size` with `components` components, `progressive`
    /// or baseline, with one quantisation table, one Huffman table and a scan header,
    /// then a few bytes of entropy data: a few hundred bytes, like the file that took
    /// a tool 2 GB.
    package static func declaredJPEG(width: Int, height: Int, components: Int, progressive: Bool) -> Data {
        func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var bytes: [UInt8] = [0xFF, 0xD8]
        bytes += [0xFF, 0xDB] + be16(67) + [0x00] + [UInt8](repeating: 1, count: 64)
        bytes += [0xFF, progressive ? 0xC2 : 0xC0] + be16(8 + 3 * components) + [8] + be16(height) + be16(width) + [UInt8(components)]
        for id in 0..<components { bytes += [UInt8(id + 1), 0x11, 0x00] }
        // DC table 0: one code of length 1 for category 0.
        bytes += [0xFF, 0xC4] + be16(3 + 16 + 1) + [0x00, 1] + [UInt8](repeating: 0, count: 15) + [0x00]
        let scanComponents = 1  // libjpeg reads at most 4 components per scan
        bytes += [0xFF, 0xDA] + be16(6 + 2 * scanComponents) + [UInt8(scanComponents)]
        for id in 0..<scanComponents { bytes += [UInt8(id + 1), 0x00] }
        bytes += progressive ? [0, 0, 0] : [0, 63, 0]
        bytes += [UInt8](repeating: 0, count: 32) + [0xFF, 0xD9]
        return Data(bytes)
    }
}

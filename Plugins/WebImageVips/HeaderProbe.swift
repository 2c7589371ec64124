public import WebImage
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Internal to the package (SPI `Internals`, for its tests and fuzzers).
///
/// Reads the declared size of PNG, GIF and JPEG straight from their headers, so
/// the pixel limit holds before any library parses the image (some refuse absurd
/// headers without saying why, and libvips' error buffer is shared by threads).
@_spi(Internals) public enum HeaderProbe {
    /// A JPEG's first frame header: its size, components, bits per sample and
    /// whether it is progressive (SOF2, SOF6, SOF10, SOF14).
    public struct JPEGFrame: Sendable, Hashable {
        public var size: PixelSize
        public var components: Int
        public var precision: Int
        public var progressive: Bool

        /// libjpeg's whole-image coefficient buffer for a progressive file (two
        /// bytes per sample of every block, whatever scale it is decoded at): the
        /// memory a decode of it takes before a pixel comes out.
        public var coefficientFootprint: ImageFootprint {
            ImageFootprint(size: PixelSize(width: (size.width + 7) / 8 * 8, height: (size.height + 7) / 8 * 8),
                           bands: components, bytesPerSample: 2)
        }
    }

    /// The first start-of-frame of a JPEG, walked to without decoding.
    public static func jpegFrame(_ bytes: UnsafeRawBufferPointer) -> JPEGFrame? {
        guard bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
        func be16(_ i: Int) -> Int { Int(bytes[i]) << 8 | Int(bytes[i + 1]) }
        var i = 2
        while i + 9 < bytes.count {
            guard bytes[i] == 0xFF else { return nil }
            let marker = bytes[i + 1]
            if marker == 0xFF { i += 1; continue }
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                return JPEGFrame(size: PixelSize(width: be16(i + 7), height: be16(i + 5)), components: Int(bytes[i + 9]),
                                 precision: Int(bytes[i + 4]), progressive: [0xC2, 0xC6, 0xCA, 0xCE].contains(marker))
            }
            if marker == 0xD8 || (0xD0...0xD7).contains(marker) { i += 2; continue }
            i += 2 + be16(i + 2)
        }
        return nil
    }

    /// The start-of-scan markers of a JPEG: every 0xFF 0xDA byte pair in it.
    /// libjpeg reads a scan only where that pair is, so this is never fewer than
    /// the scans any decoder reads (an EXIF thumbnail's scan is counted too). A
    /// search for 0xFF bytes, without parsing: cheap, and the same number for
    /// every decoder that asks (`VipsImageCoder.maxJPEGScans`).
    public static func jpegScanMarkers(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress, bytes.count >= 2 else { return 0 }
        var i = 0, scans = 0
        while i + 1 < bytes.count, let found = memchr(base + i, 0xFF, bytes.count - 1 - i) {
            i = base.distance(to: UnsafeRawPointer(found)) + 1
            if bytes[i] == 0xDA { scans += 1 }
        }
        return scans
    }

    public static func size(of bytes: UnsafeRawBufferPointer, format: ImageFormat?) -> PixelSize? {
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
            return jpegFrame(bytes)?.size
        default:
            return nil
        }
    }

    /// The frames (`ANMF` chunks) of a WebP file, counted by walking its RIFF
    /// chunks by their sizes without decoding: 0 for a still image, nil when the
    /// bytes are not a WebP; a file cut short counts the frames it has. Linear in
    /// the file, where libwebp's demuxer, which libvips' loader runs even for a
    /// header, grew faster than that: 100 000 frames of 1 x 1 pixels (5 MB) took
    /// 13 s of CPU.
    public static func webpFrameCount(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let count = bytes.count
        guard count >= 12, bytes[0] == 0x52, bytes[1] == 0x49, bytes[2] == 0x46, bytes[3] == 0x46,
              bytes[8] == 0x57, bytes[9] == 0x45, bytes[10] == 0x42, bytes[11] == 0x50 else { return nil }
        var i = 12, frames = 0
        while i + 8 <= count {
            let size = Int(bytes[i + 4]) | Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]) << 16 | Int(bytes[i + 7]) << 24
            // "ANMF": one frame of an animation.
            if bytes[i] == 0x41, bytes[i + 1] == 0x4E, bytes[i + 2] == 0x4D, bytes[i + 3] == 0x46 { frames += 1 }
            i += 8 + size + (size & 1)
        }
        return frames
    }

    /// The number of frames (image descriptors) a GIF's block structure holds,
    /// walked without decoding: the screen descriptor and colour tables skipped,
    /// each extension and image's sub-blocks skipped by their lengths. Nil when the
    /// bytes are not a GIF or a block is malformed; a file cut short counts the
    /// frames it has.
    public static func gifFrameCount(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let count = bytes.count
        guard count >= 13, bytes[0] == 0x47, bytes[1] == 0x49, bytes[2] == 0x46 else { return nil }
        var i = 13
        if bytes[10] & 0x80 != 0 { i += 3 << (Int(bytes[10] & 0x07) + 1) }
        var frames = 0
        /// Skips data sub-blocks from `i`; false when the data ends first.
        func skipSubBlocks() -> Bool {
            while i < count {
                let length = Int(bytes[i])
                i += 1
                if length == 0 { return true }
                i += length
            }
            return false
        }
        while i < count {
            switch bytes[i] {
            case 0x2C:  // image descriptor: 9 bytes, a local colour table, the LZW code size, data
                guard i + 10 <= count else { return frames }
                let flags = bytes[i + 9]
                i += 10
                if flags & 0x80 != 0 { i += 3 << (Int(flags & 0x07) + 1) }
                i += 1  // LZW minimum code size
                frames += 1
                guard skipSubBlocks() else { return frames }
            case 0x21:  // extension: label, then sub-blocks
                i += 2
                guard skipSubBlocks() else { return frames }
            case 0x3B:  // trailer
                return frames
            default:
                return frames == 0 ? nil : frames
            }
        }
        return frames
    }
}

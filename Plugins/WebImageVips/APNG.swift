package import Foundation
import WebImage

/// An animated PNG's structure, read from its chunks: the canvas, the frames'
/// rectangles, timing, dispose and blend operations, and each frame's
/// compressed data, which ``framePNG(_:)`` wraps as a PNG of its own for
/// libpng (Debian's libpng has no APNG support, so libvips sees only the
/// default image).
///
/// Damage is an ``APNG/Damage`` naming what is wrong; the decoder then falls
/// back to the default image with a warning. The chunks' CRCs are checked here,
/// because a frame's data moves into a chunk with a new CRC.
package struct APNG {
    struct Damage: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    enum Dispose: UInt8 { case none = 0, background = 1, previous = 2 }
    enum Blend: UInt8 { case source = 0, over = 1 }

    struct Frame {
        var x: Int, y: Int, width: Int, height: Int
        /// In milliseconds, before the browsers' rule for short delays.
        var delay: Int
        var dispose: Dispose
        var blend: Blend
        var data: [UInt8] = []
    }

    /// The most frames an animation may have (libvips' GIF loader stops at 4096 too):
    /// every frame is a PNG decode of its own.
    static let maxFrames = 4096

    let width: Int
    let height: Int
    /// `acTL`'s play count: 0 plays forever.
    let plays: Int
    let frames: [Frame]
    private let header: [UInt8]
    /// The chunks before the first IDAT every frame's PNG needs (PLTE, tRNS, iCCP, gAMA…).
    private let shared: [(type: [UInt8], data: [UInt8])]

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// The animation in `bytes`, nil for a PNG without `acTL` before its image data
    /// (a still PNG, or one whose animation a browser would not play).
    /// - Throws: ``Damage`` for a broken animation; `WebImageError` for one over ``maxFrames``.
    static func parse(_ bytes: UnsafeRawBufferPointer) throws -> APNG? {
        guard bytes.count > 8, bytes.prefix(8).elementsEqual(signature) else { return nil }
        var reader = ChunkReader(bytes: bytes, offset: 8)
        var header: [UInt8] = []
        var shared: [(type: [UInt8], data: [UInt8])] = []
        var builder: Builder?
        var sawImageData = false
        // Damage before an acTL is libpng's to judge: the file is not an animation.
        func next() throws -> ChunkReader.Chunk? {
            do { return try reader.next() } catch where builder == nil { return nil }
        }
        reading: while let chunk = try next() {
            switch chunk.type {
            case "IHDR":
                header = chunk.data
            case "acTL":
                guard !sawImageData else { return nil }
                guard builder == nil, chunk.data.count == 8 else { throw Damage("acTL is repeated or not 8 bytes long") }
                // A play count over 65535 (the most GIF and WebP can say) is taken as 65535.
                builder = Builder(declared: Int(chunk.data.uint32(at: 0)), plays: min(Int(chunk.data.uint32(at: 4)), 65_535))
            case "IDAT":
                guard builder != nil else { return nil }
                sawImageData = true
                try builder?.imageData(chunk.data)
            case "fcTL":
                guard builder != nil else { throw Damage("fcTL without acTL") }
                try builder?.control(chunk.data)
            case "fdAT":
                guard builder != nil else { throw Damage("fdAT without acTL") }
                try builder?.frameData(chunk.data)
            case "IEND":
                break reading
            default:
                if !sawImageData { shared.append((chunk.typeBytes, chunk.data)) }
            }
        }
        guard let builder else { return nil }
        return try builder.finish(header: header, shared: shared)
    }

    fileprivate init(width: Int, height: Int, plays: Int, frames: [Frame], header: [UInt8], shared: [(type: [UInt8], data: [UInt8])]) {
        self.width = width
        self.height = height
        self.plays = plays
        self.frames = frames
        self.header = header
        self.shared = shared
    }

    /// Frame `index` as a PNG of its own: the file's header at the frame's size, the
    /// shared chunks, its data as IDAT, IEND.
    func framePNG(_ index: Int) -> Data {
        let frame = frames[index]
        var ihdr = header
        ihdr.replaceSubrange(0..<4, with: UInt32(frame.width).bigEndianBytes)
        ihdr.replaceSubrange(4..<8, with: UInt32(frame.height).bigEndianBytes)
        var out = Data(Self.signature)
        out.append(Self.chunk("IHDR", ihdr))
        for chunk in shared { out.append(Self.chunk(chunk.type, chunk.data)) }
        out.append(Self.chunk("IDAT", frame.data))
        out.append(Self.chunk("IEND", []))
        return out
    }

    /// One chunk: length, type, data, CRC of type and data (tests build APNGs with it).
    package static func chunk(_ type: String, _ data: [UInt8]) -> Data { chunk(Array(type.utf8), data) }

    static func chunk(_ type: [UInt8], _ data: [UInt8]) -> Data {
        var out = Data(UInt32(data.count).bigEndianBytes)
        out.append(contentsOf: type)
        out.append(contentsOf: data)
        out.append(contentsOf: CRC32.of(type + data).bigEndianBytes)
        return out
    }
}

/// Reads a PNG's chunks in order, checking each one's length and CRC.
private struct ChunkReader {
    let bytes: UnsafeRawBufferPointer
    var offset: Int

    struct Chunk {
        let type: String
        let typeBytes: [UInt8]
        let data: [UInt8]
    }

    mutating func next() throws -> Chunk? {
        guard offset + 12 <= bytes.count else { return nil }
        let length = Int(bytes.uint32(at: offset))
        guard length <= bytes.count - offset - 12 else { throw APNG.Damage("a chunk at byte \(offset) runs past the end of the file") }
        let typeBytes = Array(bytes[(offset + 4)..<(offset + 8)])
        let data = Array(bytes[(offset + 8)..<(offset + 8 + length)])
        let stored = bytes.uint32(at: offset + 8 + length)
        let type = String(decoding: typeBytes, as: UTF8.self)
        guard CRC32.of(typeBytes + data) == stored else { throw APNG.Damage("the \(type) chunk at byte \(offset) has a bad CRC") }
        offset += 12 + length
        return Chunk(type: type, typeBytes: typeBytes, data: data)
    }
}

/// Collects the frames as the chunks come.
private struct Builder {
    let declared: Int
    let plays: Int
    var frames: [APNG.Frame] = []
    var current: APNG.Frame?
    var nextSequence = 0
    var sawImageData = false
    /// The first fcTL came before IDAT: the default image is the first frame.
    var defaultIsFirstFrame = false

    mutating func sequence(_ number: UInt32) throws {
        guard Int(number) == nextSequence else { throw APNG.Damage("sequence number \(number) where \(nextSequence) was due") }
        nextSequence += 1
    }

    mutating func control(_ data: [UInt8]) throws {
        guard data.count == 26 else { throw APNG.Damage("an fcTL chunk is \(data.count) bytes, not 26") }
        try sequence(data.uint32(at: 0))
        try closeFrame()
        guard frames.count < APNG.maxFrames else {
            throw WebImageError(.decodeFailed, "the APNG has more than \(APNG.maxFrames) frames; decode its first frame only")
        }
        guard let dispose = APNG.Dispose(rawValue: data[24]), let blend = APNG.Blend(rawValue: data[25]) else {
            throw APNG.Damage("frame \(frames.count) has dispose op \(data[24]) or blend op \(data[25]), which do not exist")
        }
        let numerator = Int(data.uint16(at: 20)), denominator = Int(data.uint16(at: 22))
        current = APNG.Frame(x: Int(data.uint32(at: 12)), y: Int(data.uint32(at: 16)), width: Int(data.uint32(at: 4)), height: Int(data.uint32(at: 8)),
                             delay: numerator * 1000 / (denominator == 0 ? 100 : denominator), dispose: dispose, blend: blend)
    }

    mutating func imageData(_ data: [UInt8]) throws {
        if !sawImageData {
            sawImageData = true
            defaultIsFirstFrame = current != nil && frames.isEmpty
        }
        if defaultIsFirstFrame && frames.isEmpty { current?.data += data }
    }

    mutating func frameData(_ data: [UInt8]) throws {
        guard data.count > 4 else { throw APNG.Damage("an fdAT chunk carries no data") }
        try sequence(data.uint32(at: 0))
        guard sawImageData, current != nil, !(defaultIsFirstFrame && frames.isEmpty) else {
            throw APNG.Damage("fdAT where no frame takes it (before the image data, or in the first frame)")
        }
        current?.data += data[4...]
    }

    mutating func closeFrame() throws {
        guard let frame = current else { return }
        guard !frame.data.isEmpty else { throw APNG.Damage("frame \(frames.count) has no image data") }
        frames.append(frame)
        current = nil
    }

    consuming func finish(header: [UInt8], shared: [(type: [UInt8], data: [UInt8])]) throws -> APNG {
        try closeFrame()
        guard header.count == 13 else { throw APNG.Damage("the IHDR chunk is missing or not 13 bytes long") }
        let width = Int(header.uint32(at: 0)), height = Int(header.uint32(at: 4))
        guard declared >= 1, frames.count == declared else {
            throw APNG.Damage("acTL declares \(declared) frames and the file has \(frames.count)")
        }
        for (index, frame) in frames.enumerated() {
            guard frame.width > 0, frame.height > 0, frame.x <= width - frame.width, frame.y <= height - frame.height else {
                throw APNG.Damage("frame \(index) (\(frame.width)x\(frame.height) at \(frame.x),\(frame.y)) is outside the \(width)x\(height) canvas")
            }
        }
        if defaultIsFirstFrame, let first = frames.first, first.x != 0 || first.y != 0 || first.width != width || first.height != height {
            throw APNG.Damage("the first frame is the default image but does not cover the canvas")
        }
        return APNG(width: width, height: height, plays: plays, frames: frames, header: header, shared: shared)
    }
}

/// CRC-32 (ISO-HDLC, as PNG uses), table-driven.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    static func of(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}

extension UInt32 {
    var bigEndianBytes: [UInt8] { [UInt8(self >> 24), UInt8(self >> 16 & 0xFF), UInt8(self >> 8 & 0xFF), UInt8(self & 0xFF)] }
}

extension Collection where Element == UInt8, Index == Int {
    func uint32(at offset: Int) -> UInt32 {
        let i = startIndex + offset
        return UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3])
    }

    func uint16(at offset: Int) -> UInt16 {
        let i = startIndex + offset
        return UInt16(self[i]) << 8 | UInt16(self[i + 1])
    }
}

public import Foundation

/// XXH64 (seed 0): the package's stable hash of keys.
///
/// Watermark overlays and text steps are keyed by it, and a fallback image's URL
/// carries it: values that must not change between versions, processes or
/// machines (unlike `Hasher`). Entries written before ``XXH3`` became the
/// payload checksum (format 2) are still checked with it. Not for secrets.
///
/// ```swift
/// let id = String(XXH64.hash(bytes), radix: 16)
/// ```
///
/// The values are the reference implementation's (`xxhsum -H1`), tested
/// against its published vectors.
public enum XXH64 {
    private static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    @inline(__always) private static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 &- r)) }
    @inline(__always) private static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        rotl(acc &+ input &* p2, 31) &* p1
    }
    @inline(__always) private static func merge(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        (acc ^ round(0, value)) &* p1 &+ p4
    }

    /// XXH64 of `bytes` with seed 0.
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let count = bytes.count
        var offset = 0
        var h: UInt64
        @inline(__always) func u64(_ at: Int) -> UInt64 { UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
        @inline(__always) func u32(_ at: Int) -> UInt64 { UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self))) }
        if count >= 32 {
            var v1 = p1 &+ p2, v2 = p2, v3: UInt64 = 0, v4 = 0 &- p1
            let limit = count - 32
            while offset <= limit {
                v1 = round(v1, u64(offset))
                v2 = round(v2, u64(offset + 8))
                v3 = round(v3, u64(offset + 16))
                v4 = round(v4, u64(offset + 24))
                offset += 32
            }
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            h = merge(h, v1)
            h = merge(h, v2)
            h = merge(h, v3)
            h = merge(h, v4)
        } else {
            h = p5
        }
        h = h &+ UInt64(count)
        while offset + 8 <= count {
            h ^= round(0, u64(offset))
            h = rotl(h, 27) &* p1 &+ p4
            offset += 8
        }
        if offset + 4 <= count {
            h ^= u32(offset) &* p1
            h = rotl(h, 23) &* p2 &+ p3
            offset += 4
        }
        while offset < count {
            h ^= UInt64(bytes[offset]) &* p5
            h = rotl(h, 11) &* p1
            offset += 1
        }
        h ^= h >> 33
        h = h &* p2
        h ^= h >> 29
        h = h &* p3
        h ^= h >> 32
        return h
    }

    /// XXH64 of any contiguous bytes (`Data`, `[UInt8]`).
    public static func hash(_ bytes: some ContiguousBytes) -> UInt64 {
        bytes.withUnsafeBytes { hash($0) }
    }
}

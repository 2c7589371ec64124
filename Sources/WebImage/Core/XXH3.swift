public import Foundation
import CWebImageSystem

/// XXH3-64 (seed 0): the checksum of every stored entry's payload, verified on
/// every read, and the strong ETag a service makes from it.
///
/// It replaced ``XXH64`` there because a hit pays for it in full: XXH64 is bound
/// by a multiply's latency (about 3.5 µs for 32 KiB in Swift here), XXH3 runs in
/// SIMD lanes (about 0.6 µs with AVX2, 1.1 µs with SSE2; docs/performance.md).
/// The values are xxHash's own (`xxhsum -H3`): the system's `xxhash.h`
/// (Debian's `libxxhash-dev`) compiled into the package, nothing to link at run
/// time. ``XXH64`` stays the hash of keys (watermark overlays, text), which must
/// not change between versions, and reads entries written before.
///
/// ```swift
/// let etag = String(XXH3.hash(bytes), radix: 16)
/// ```
public enum XXH3 {
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        UInt64(CWI_xxh3_64(bytes.baseAddress, UInt(bytes.count)))
    }

    public static func hash(_ bytes: some ContiguousBytes) -> UInt64 {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// XXH3-128 of `bytes` with `seed` (low and high halves): a key for bytes
    /// that strangers choose, with a seed they do not know.
    package static func hash128(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> (low: UInt64, high: UInt64) {
        var low: CUnsignedLongLong = 0, high: CUnsignedLongLong = 0
        CWI_xxh3_128_seeded(bytes.baseAddress, UInt(bytes.count), CUnsignedLongLong(seed), &low, &high)
        return (UInt64(low), UInt64(high))
    }

    /// A copy of `bytes` as `Data`, and their hash (the value `hash(_:)` gives).
    ///
    /// The hash reads the bytes first, so the copy reads them from the CPU's
    /// cache rather than from RAM; the copy goes into storage the `Data` takes
    /// over, which measured 3 to 10 % faster per LMDB hit than `Data`'s copying
    /// initialiser. (A single pass that stores each 32 bytes as AVX2 hashes them
    /// was tried: no faster than this, within the machine's noise.)
    package static func hashCopying(_ bytes: UnsafeRawBufferPointer) -> (data: Data, hash: UInt64) {
        let hash = hash(bytes)
        guard let source = bytes.baseAddress, bytes.count > 0 else { return (Data(), hash) }
        let destination = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 16)
        destination.copyMemory(from: source, byteCount: bytes.count)
        return (Data(bytesNoCopy: destination, count: bytes.count, deallocator: .custom { pointer, _ in pointer.deallocate() }), hash)
    }
}

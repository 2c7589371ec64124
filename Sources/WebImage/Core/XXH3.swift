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
}

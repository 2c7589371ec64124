import Foundation
import WebImage

/// How keys and values are laid out in the LMDB databases.
///
/// - `entries`: database key → header + bytes. Keys up to 400 UTF-8 bytes are
///   stored as `k` + the bytes (readable with `mdb_dump`); longer ones as
///   `h` + SHA-256, with the full key in the header to detect a collision.
/// - `access`: database key → last access (ms since 1970, big-endian UInt64).
/// - `lru`: last access (big-endian, so LMDB's order is time order) + database
///   key → data size. Expiry and trimming walk it from the oldest: no full scan.
/// - `totals`: `size` and `count` as big-endian UInt64, kept in every write
///   transaction, so several processes agree on them.
enum LMDBRecord {
    /// Written: 3 (an XXH3 checksum). Read: 3, and 2 (an XXH64 checksum, the
    /// format before), so an upgrade keeps its cache.
    static let version: UInt8 = 3
    static let legacyVersion: UInt8 = 2

    static func databaseKey(_ key: String) -> [UInt8] {
        let count = key.utf8.count
        guard count > 0, count <= 400 else { return [UInt8(ascii: "h")] + SHA256Digest.hash(Array(key.utf8)) }
        // Writes and removals; a read takes the key on the stack (`withDatabaseKey`).
        return [UInt8](unsafeUninitializedCapacity: count + 1) { buffer, initialized in
            buffer[0] = UInt8(ascii: "k")
            _ = UnsafeMutableBufferPointer(rebasing: buffer[1...]).initialize(from: key.utf8)
            initialized = count + 1
        }
    }

    /// Calls `body` with `key`'s database key in a buffer on the stack: what a
    /// read needs, with no array allocated (an array's allocation looks up its
    /// generic metadata at run time, a twentieth of a warm hit).
    @inline(__always)
    static func withDatabaseKey<T>(_ key: String, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let count = key.utf8.count
        guard count > 0, count <= 400 else { return try databaseKey(key).withUnsafeBytes(body) }
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count + 1) { buffer in
            buffer[0] = UInt8(ascii: "k")
            _ = UnsafeMutableBufferPointer(rebasing: buffer[1...]).initialize(fromContentsOf: key.utf8)
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    static func isHashed(_ databaseKey: [UInt8]) -> Bool { databaseKey.first == UInt8(ascii: "h") }
    static func isHashed(_ databaseKey: UnsafeRawBufferPointer) -> Bool { databaseKey.first == UInt8(ascii: "h") }

    static func milliseconds(_ date: Date) -> UInt64 { UInt64(max(0, date.timeIntervalSince1970 * 1000)) }
    static func date(_ milliseconds: UInt64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    static func bigEndian(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) } }
    static func uint64(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0) -> UInt64 {
        guard bytes.count >= offset + 8 else { return 0 }
        return (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[offset + $1]) }
    }

    static func lruKey(access: UInt64, databaseKey: [UInt8]) -> [UInt8] { bigEndian(access) + databaseKey }

    /// The header: version, stored-at, the payload's checksum
    /// (`XXH3`, verified on every read), full key (hashed keys only),
    /// and the metadata strings, each length-prefixed. Binary, because a cache hit
    /// must not pay for JSON. A value of version 1 (no checksum) reads as damaged;
    /// one of version 2 is checked with XXH64.
    static func header(key: String, hashed: Bool, metadata: CacheMetadata, storedAt: UInt64, checksum: UInt64) -> [UInt8] {
        var out: [UInt8] = [version]
        out += bigEndian(storedAt)
        out += bigEndian(checksum)
        for field in [hashed ? key : nil, metadata.contentType, metadata.etag, metadata.lastModified, metadata.originalURL] {
            let bytes = field.map { Array($0.utf8) }
            out += bigEndian(bytes.map { UInt64($0.count) + 1 } ?? 0)  // 0 = nil, n+1 = n bytes
            out += bytes ?? []
        }
        return out
    }

    struct Decoded {
        var fullKey: String?
        var metadata: CacheMetadata
        var dataOffset: Int
        var checksum: UInt64
        /// Format 2: the checksum is an XXH64.
        var isLegacy = false
    }

    /// Parses a value; nil for a value this version cannot read (treated as a miss).
    static func decode(_ value: UnsafeRawBufferPointer) -> Decoded? {
        guard value.count >= 17, value[0] == version || value[0] == legacyVersion else { return nil }
        var offset = 17
        var damaged = false
        // The five fields in order, each read where it lies (no array of them per hit).
        func field() -> String? {
            guard !damaged, value.count >= offset + 8 else { damaged = true; return nil }
            let length = uint64(value, at: offset)
            offset += 8
            if length == 0 { return nil }
            guard length - 1 <= UInt64(value.count - offset) else { damaged = true; return nil }
            let count = Int(length - 1)
            defer { offset += count }
            return String(decoding: UnsafeRawBufferPointer(rebasing: value[offset..<offset + count]), as: UTF8.self)
        }
        let (fullKey, contentType, etag, lastModified, originalURL) = (field(), field(), field(), field(), field())
        guard !damaged else { return nil }
        let stored = date(uint64(value, at: 1))
        let metadata = CacheMetadata(contentType: contentType, etag: etag, lastModified: lastModified, originalURL: originalURL,
                                     storedAt: stored, accessedAt: stored, size: value.count - offset)
        return Decoded(fullKey: fullKey, metadata: metadata, dataOffset: offset, checksum: uint64(value, at: 9), isLegacy: value[0] == legacyVersion)
    }

    /// The payload of a decoded value, copied out and checked against its
    /// checksum in the same pass (``XXH3/hashCopying(_:)``), or why it is damaged.
    static func verifiedPayload(_ value: UnsafeRawBufferPointer, _ decoded: Decoded) -> (data: Data, damage: String?) {
        let payload = UnsafeRawBufferPointer(rebasing: value[decoded.dataOffset...])
        let (data, actual) = decoded.isLegacy ? (Data(payload), XXH64.hash(payload)) : XXH3.hashCopying(payload)
        return actual == decoded.checksum ? (data, nil) : (Data(), XXH64.mismatch(decoded.checksum, actual))
    }
}

package import Foundation
import Logging
import Metrics

/// How an entry is laid out as one blob: `bytes ‖ record ‖ footer`. The file store
/// writes it as a file, the Redis store as a value.
///
/// - record: the key, then `contentType`, `etag`, `lastModified`, `originalURL`,
///   each a little-endian `UInt32` length (`0xFFFF_FFFF` for nil) and UTF-8;
///   then `storedAt` in milliseconds since 1970 (`Int64`), then the payload's
///   checksum (``XXH3``, `UInt64`), verified on every read.
/// - footer (16 bytes): the record's length (`UInt32`), the format version
///   (`UInt32`, 3), and the magic `WEBIMGF1`. Entries of version 2 (the same
///   layout with an ``XXH64`` checksum) are read and checked with it, so an
///   upgrade keeps its cache; entries of version 1 (no checksum) are read as
///   damaged: they are removed and loaded again.
///
/// The access date is not in the blob: the file store keeps it as the file's
/// modification time, the Redis store as the key's TTL.
package enum CacheEntryCodec {
    package static let magic = Array("WEBIMGF1".utf8)
    package static let version: UInt32 = 3
    /// The version before: the same layout, the checksum an XXH64.
    package static let legacyVersion: UInt32 = 2
    package static let footerSize = 16
    package static let absent: UInt32 = 0xFFFF_FFFF

    package static func record(key: String, metadata: CacheMetadata, checksum: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(key.utf8.count + 128)
        func put(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        func put(_ text: String?) {
            guard let text else { return put(absent) }
            put(UInt32(text.utf8.count))
            bytes.append(contentsOf: text.utf8)
        }
        put(key)
        put(metadata.contentType)
        put(metadata.etag)
        put(metadata.lastModified)
        put(metadata.originalURL)
        let stored = Int64((metadata.storedAt.timeIntervalSince1970 * 1000).rounded())
        withUnsafeBytes(of: stored.littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: checksum.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    package static func footer(recordLength: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        withUnsafeBytes(of: UInt32(recordLength).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: version.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes + magic
    }

    /// The record's length from a footer, or nil if it is not one of this
    /// version (or the one before) that fits in a file of `fileSize` bytes.
    package static func recordLength(footer: UnsafeRawBufferPointer, fileSize: Int) -> Int? {
        guard footer.count == footerSize, Array(footer[8..<16]) == magic,
              [version, legacyVersion].contains(footerVersion(footer))
        else { return nil }
        let length = Int(UInt32(littleEndian: footer.loadUnaligned(as: UInt32.self)))
        return length + footerSize <= fileSize ? length : nil
    }

    /// The format version a footer names.
    package static func footerVersion(_ footer: UnsafeRawBufferPointer) -> UInt32 {
        UInt32(littleEndian: footer.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
    }

    /// The key, metadata and payload checksum in a record; nil when it does not parse.
    package static func parse(_ record: UnsafeRawBufferPointer) -> (key: String, metadata: CacheMetadata, checksum: UInt64)? {
        var offset = 0
        func uint32() -> UInt32? {
            guard offset + 4 <= record.count else { return nil }
            defer { offset += 4 }
            return UInt32(littleEndian: record.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        }
        func text() -> String?? {
            guard let length = uint32() else { return .none }
            if length == absent { return .some(nil) }
            guard offset + Int(length) <= record.count else { return .none }
            defer { offset += Int(length) }
            return .some(String(decoding: UnsafeRawBufferPointer(rebasing: record[offset..<offset + Int(length)]), as: UTF8.self))
        }
        guard let key = text(), let key, let contentType = text(), let etag = text(),
              let lastModified = text(), let originalURL = text(), offset + 16 == record.count
        else { return nil }
        let stored = Int64(littleEndian: record.loadUnaligned(fromByteOffset: offset, as: Int64.self))
        let checksum = UInt64(littleEndian: record.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
        let metadata = CacheMetadata(contentType: contentType, etag: etag, lastModified: lastModified, originalURL: originalURL,
                                     storedAt: Date(timeIntervalSince1970: Double(stored) / 1000))
        return (key, metadata, checksum)
    }
}

extension CacheEntryCodec {
    /// The blob for an entry.
    package static func encode(_ data: Data, key: String, metadata: CacheMetadata) -> Data {
        let record = record(key: key, metadata: metadata, checksum: XXH3.hash(data))
        var blob = Data(capacity: data.count + record.count + footerSize)
        blob.append(data)
        blob.append(contentsOf: record)
        blob.append(contentsOf: footer(recordLength: record.count))
        return blob
    }

    /// What a blob holds.
    package enum Decoded {
        /// A well-formed entry of this key whose payload matches its checksum.
        case entry(CacheEntry)
        /// A well-formed entry of another key (a hash collision): not ours, left alone.
        case otherKey
        /// Not an entry of this version, or its payload fails its checksum: to remove.
        case damaged(String)
    }

    /// The entry in a blob, checked against its checksum; its bytes are the blob's
    /// first bytes (no copy). `size` is set; `accessedAt` is `storedAt`.
    package static func decode(_ blob: Data, key: String) -> Decoded {
        let size = blob.count
        guard size >= footerSize else { return .damaged("\(size) bytes, shorter than a footer") }
        let parsed = blob.withUnsafeBytes { bytes -> (key: String, metadata: CacheMetadata, checksum: UInt64, length: Int, actual: UInt64, legacy: Bool)? in
            let footer = UnsafeRawBufferPointer(rebasing: bytes[(size - footerSize)...])
            guard let length = recordLength(footer: footer, fileSize: size),
                  let record = parse(UnsafeRawBufferPointer(rebasing: bytes[(size - footerSize - length)..<(size - footerSize)]))
            else { return nil }
            let legacy = footerVersion(footer) == legacyVersion
            guard record.key == key else { return (record.key, record.metadata, 0, length, 0, legacy) }
            let payload = UnsafeRawBufferPointer(rebasing: bytes[..<(size - footerSize - length)])
            return (record.key, record.metadata, record.checksum, length, legacy ? XXH64.hash(payload) : XXH3.hash(payload), legacy)
        }
        guard let parsed else { return .damaged("no readable footer or record of format version \(version)") }
        guard parsed.key == key else { return .otherKey }
        guard parsed.checksum == parsed.actual else { return .damaged(XXH64.mismatch(parsed.checksum, parsed.actual)) }
        var data = blob
        data.count = size - footerSize - parsed.length
        var result = parsed.metadata
        result.size = data.count
        result.accessedAt = parsed.metadata.storedAt
        // A version-2 checksum is an XXH64: the ETag is hashed from the bytes instead.
        return .entry(CacheEntry(data: data, metadata: result, checksum: parsed.legacy ? nil : parsed.checksum))
    }
}

/// What a store does with an entry that fails its checksum or does not parse: it
/// removes it (the caller's part) and reports it here, once per entry read: a
/// counter `webimage_store_damaged_entries_total{store}` and a warning.
package struct DamagedEntryReport: Sendable {
    private let counter: Counter
    private let store: String
    private static let logger = Logger(label: "webimage.store")

    package init(store: String) {
        self.store = store
        self.counter = Counter(label: "webimage_store_damaged_entries_total", dimensions: [("store", store)])
    }

    package func report(key: String, reason: String) {
        counter.increment()
        Self.logger.warning("damaged cache entry removed; it will be loaded again",
                            metadata: ["store": "\(store)", "key": "\(key)", "reason": "\(reason)"])
    }
}

extension XXH64 {
    package static func mismatch(_ stored: UInt64, _ actual: UInt64) -> String {
        "payload checksum \(String(actual, radix: 16)) does not match the stored \(String(stored, radix: 16))"
    }
}

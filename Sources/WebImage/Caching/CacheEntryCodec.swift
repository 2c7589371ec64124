package import Foundation

/// How an entry is laid out as one blob: `bytes ‖ record ‖ footer`. The file store
/// writes it as a file, the Redis store as a value.
///
/// - record: the key, then `contentType`, `etag`, `lastModified`, `originalURL`,
///   each a little-endian `UInt32` length (`0xFFFF_FFFF` for nil) and UTF-8;
///   then `storedAt` in milliseconds since 1970 (`Int64`).
/// - footer (16 bytes): the record's length (`UInt32`), the format version
///   (`UInt32`, 1), and the magic `WEBIMGF1`.
///
/// The access date is not in the blob: the file store keeps it as the file's
/// modification time, the Redis store as the key's TTL.
package enum CacheEntryCodec {
    package static let magic = Array("WEBIMGF1".utf8)
    package static let version: UInt32 = 1
    package static let footerSize = 16
    package static let absent: UInt32 = 0xFFFF_FFFF

    package static func record(key: String, metadata: CacheMetadata) -> [UInt8] {
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
        return bytes
    }

    package static func footer(recordLength: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        withUnsafeBytes(of: UInt32(recordLength).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: version.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes + magic
    }

    /// The record's length from a footer, or nil if it is not one that fits in a
    /// file of `fileSize` bytes.
    package static func recordLength(footer: UnsafeRawBufferPointer, fileSize: Int) -> Int? {
        guard footer.count == footerSize, Array(footer[8..<16]) == magic,
              UInt32(littleEndian: footer.loadUnaligned(fromByteOffset: 4, as: UInt32.self)) == version
        else { return nil }
        let length = Int(UInt32(littleEndian: footer.loadUnaligned(as: UInt32.self)))
        return length + footerSize <= fileSize ? length : nil
    }

    /// The key and metadata in a record; nil when it does not parse.
    package static func parse(_ record: UnsafeRawBufferPointer) -> (key: String, metadata: CacheMetadata)? {
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
              let lastModified = text(), let originalURL = text(), offset + 8 == record.count
        else { return nil }
        let stored = Int64(littleEndian: record.loadUnaligned(fromByteOffset: offset, as: Int64.self))
        let metadata = CacheMetadata(contentType: contentType, etag: etag, lastModified: lastModified, originalURL: originalURL,
                                     storedAt: Date(timeIntervalSince1970: Double(stored) / 1000))
        return (key, metadata)
    }
}

extension CacheEntryCodec {
    /// The blob for an entry.
    package static func encode(_ data: Data, key: String, metadata: CacheMetadata) -> Data {
        let record = record(key: key, metadata: metadata)
        var blob = Data(capacity: data.count + record.count + footerSize)
        blob.append(data)
        blob.append(contentsOf: record)
        blob.append(contentsOf: footer(recordLength: record.count))
        return blob
    }

    /// The entry in a blob if it is well formed and holds `key`; its bytes are
    /// the blob's first bytes (no copy). `size` is set; `accessedAt` is `storedAt`.
    package static func decode(_ blob: Data, key: String) -> CacheEntry? {
        let size = blob.count
        guard size >= footerSize else { return nil }
        let parsed = blob.withUnsafeBytes { bytes -> (CacheMetadata, Int)? in
            guard let length = recordLength(footer: UnsafeRawBufferPointer(rebasing: bytes[(size - footerSize)...]), fileSize: size),
                  let record = parse(UnsafeRawBufferPointer(rebasing: bytes[(size - footerSize - length)..<(size - footerSize)])),
                  record.key == key
            else { return nil }
            return (record.metadata, length)
        }
        guard let (metadata, length) = parsed else { return nil }
        var data = blob
        data.count = size - footerSize - length
        var result = metadata
        result.size = data.count
        result.accessedAt = metadata.storedAt
        return CacheEntry(data: data, metadata: result)
    }
}

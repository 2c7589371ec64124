public import Foundation

/// What a load returns.
public struct ImageResult: Sendable {
    /// The decoded image; nil for a hit with `.avoidDecode`.
    public var image: Image?
    /// The encoded bytes of the result, when the pipeline had them: always with
    /// `.avoidDecode`; on a load or a disk hit (for a thumbnail or a transform,
    /// the derived bytes, which a load has only with `.waitStoreCache`, since
    /// otherwise they are encoded in the background); on a memory hit when the
    /// memory tier holds them, or with `.queryMemoryData`.
    public var data: Data?
    public var cacheType: CacheType
    /// The key the result is cached under (derived for transformed results).
    public var key: String
    public var url: URL
    /// A cache write that failed although the load succeeded (seen with
    /// `.waitStoreCache`; without it, writes finish later and failures are only
    /// logged and counted). The image is good; it is just not on disk. A failed
    /// cache write never fails a load.
    public var storeFailure: WebImageError? = nil
    /// The ``XXH3`` of ``data`` when the pipeline already had it: a disk hit the
    /// store verified, a memory hit cached with it, or derived bytes just encoded.
    /// ``entityTag`` uses it, and hashes the bytes only when it is nil.
    public var checksum: UInt64? = nil
    /// When ``data`` was made: the store's `storedAt` for a disk hit, the encode's
    /// time for derived bytes just made, the time the memory tier was given them;
    /// nil when the pipeline does not know (original bytes, a memory hit cached
    /// without a date). A server's `Last-Modified`.
    public var lastModified: Date? = nil

    public init(image: Image?, data: Data?, cacheType: CacheType, key: String, url: URL,
                storeFailure: WebImageError? = nil, checksum: UInt64? = nil, lastModified: Date? = nil) {
        self.image = image
        self.data = data
        self.cacheType = cacheType
        self.key = key
        self.url = url
        self.storeFailure = storeFailure
        self.checksum = data == nil ? nil : checksum
        self.lastModified = data == nil ? nil : lastModified
    }

    /// The format of ``data``, from its leading bytes; nil without bytes or when no
    /// known format matches.
    public var format: ImageFormat? { data.flatMap { ImageFormat.sniff($0) } }

    /// The MIME type of ``data`` (`image/webp`); nil as ``format`` is.
    public var contentType: String? { format?.mimeType }

    /// A strong HTTP entity tag for ``data``: its ``XXH3`` (from ``checksum`` when
    /// the pipeline had it, else hashed now) and its length, in hex and quoted
    /// (`"9f3c…-7d2a"`). The same bytes give the same tag on every host and after
    /// every restart; different bytes give a different one (it is not a
    /// cryptographic hash: it only has to change when the bytes do). Nil without bytes.
    public var entityTag: String? {
        guard let data else { return nil }
        let hash = checksum ?? XXH3.hash(data)
        return Self.entityTag(hash: hash, count: data.count)
    }

    /// `"<hash in hex>-<count in hex>"`, lower case, no leading zeros: written
    /// into one buffer (two `String(radix:)` and three concatenations were a few
    /// percent of a warm request).
    package static func entityTag(hash: UInt64, count: Int) -> String {
        func digits(_ value: UInt64) -> Int { value == 0 ? 1 : (67 - value.leadingZeroBitCount) / 4 }
        let count = UInt64(max(0, count))
        let (hashDigits, countDigits) = (digits(hash), digits(count))
        return String(unsafeUninitializedCapacity: hashDigits + countDigits + 3) { out in
            func put(_ value: UInt64, _ length: Int, at index: Int) {
                var value = value
                for place in stride(from: index + length - 1, through: index, by: -1) {
                    let digit = UInt8(value & 0xF)
                    out[place] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                    value >>= 4
                }
            }
            out[0] = UInt8(ascii: "\"")
            put(hash, hashDigits, at: 1)
            out[1 + hashDigits] = UInt8(ascii: "-")
            put(count, countDigits, at: 2 + hashDigits)
            out[2 + hashDigits + countDigits] = UInt8(ascii: "\"")
            return hashDigits + countDigits + 3
        }
    }
}

public import Foundation

/// What a store keeps about an entry besides its bytes.
public struct CacheMetadata: Hashable, Sendable, Codable {
    /// The `Content-Type` the bytes came with.
    public var contentType: String?
    /// The validator for `If-None-Match`.
    public var etag: String?
    /// The validator for `If-Modified-Since`, as the server wrote it.
    public var lastModified: String?
    /// The URL the bytes were loaded from.
    public var originalURL: String?
    /// When the entry was written. Set by the store.
    public var storedAt: Date
    /// When the entry was last read or written. Set by the store.
    public var accessedAt: Date
    /// The size of the bytes. Set by the store.
    public var size: Int

    public init(
        contentType: String? = nil,
        etag: String? = nil,
        lastModified: String? = nil,
        originalURL: String? = nil,
        storedAt: Date = Date(timeIntervalSince1970: 0),
        accessedAt: Date = Date(timeIntervalSince1970: 0),
        size: Int = 0
    ) {
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
        self.originalURL = originalURL
        self.storedAt = storedAt
        self.accessedAt = accessedAt
        self.size = size
    }

    /// Whether the entry can be revalidated (it has an ETag or a Last-Modified).
    public var hasValidators: Bool { etag != nil || lastModified != nil }
}

/// Limits every disk store honours.
public struct CacheLimits: Hashable, Sendable {
    /// Entries not accessed for this long are removed. Default 7 days.
    public var maxAge: Duration?
    /// When data exceeds this many bytes, the store trims to half of it,
    /// least recently accessed first. Default 1 GiB.
    public var maxSize: Int?
    /// How often the store sweeps by itself. Default 10 minutes; nil: never on a timer.
    public var sweepInterval: Duration?

    public init(maxAge: Duration? = .seconds(7 * 24 * 3600), maxSize: Int? = 1 << 30, sweepInterval: Duration? = .seconds(600)) {
        self.maxAge = maxAge
        self.maxSize = maxSize
        self.sweepInterval = sweepInterval
    }

    /// No expiry, no size limit, no timer.
    public static let unlimited = CacheLimits(maxAge: nil, maxSize: nil, sweepInterval: nil)

    /// The largest entry a store keeps: a quarter of ``maxSize``. A larger one is
    /// not stored (and an older entry under its key is removed), since writing it
    /// would trim the store to half at once and flush every other entry: one
    /// large image, asked for by anyone, must not empty a cache.
    public var maxEntrySize: Int? { maxSize.map { $0 / 4 } }

    /// Whether an entry of `size` bytes is kept (``maxEntrySize``).
    public func admits(_ size: Int) -> Bool { maxEntrySize.map { size <= $0 } ?? true }

    /// The oldest access date that is still fresh at `now`.
    public func expiryCutoff(now: Date) -> Date? {
        guard let maxAge else { return nil }
        return now.addingTimeInterval(-maxAge.timeInterval)
    }
}

public import Foundation

/// The disk tier: bytes in, bytes out, with metadata per entry.
///
/// The manager stores original bytes under a URL's plain key, and encoded
/// transformed results under derived keys (see ``ImageManager/resultKey(for:options:context:)``).
///
/// ## Implementation requirements
/// - Any `String` is a valid key: long, empty-looking, `../../etc/passwd`, with NUL
///   bytes or lone surrogates. A store never lets a key name a place outside itself
///   and never confuses two keys (hash collisions are detected).
/// - ``setData(_:forKey:metadata:)`` is atomic: a reader sees the old entry, the new
///   one, or none, never part of one, even if the process dies mid-write.
/// - The store fills ``CacheMetadata/storedAt``, ``CacheMetadata/accessedAt`` and
///   ``CacheMetadata/size`` itself; the caller's values for those are ignored.
///   Reading an entry updates its access date (it may do so lazily, in batches).
/// - ``removeExpired()`` removes entries not accessed within the maximum age and, if
///   the store is over its size limit, removes least-recently-accessed entries until
///   it is at half the limit. A store also does this by itself: on a timer and when
///   a write takes it over the limit.
/// - Errors are ``WebImageError`` with code ``WebImageError/Code/storeFailed`` and
///   the underlying system or library message. A missing key is `nil`, not an error.
/// - Blocking I/O runs on threads of the store's own, never on the cooperative pool.
///
/// `WebImageTesting.CacheStoreConformance` checks these.
public protocol CacheStore: Sendable {
    /// The entry for a key, or nil.
    func entry(forKey key: String) async throws -> CacheEntry?
    /// The metadata for a key without its bytes, or nil.
    func metadata(forKey key: String) async throws -> CacheMetadata?
    /// Stores bytes and metadata under a key, replacing any entry there.
    func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws
    /// Replaces an entry's metadata (after a 304 revalidation) without rewriting its bytes.
    /// Does nothing if there is no entry.
    func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws
    /// Removes one entry; removing a missing key is not an error.
    func removeData(forKey key: String) async throws
    /// Removes every entry.
    func removeAll() async throws
    /// Removes expired entries and trims to half the size limit when over it. (A
    /// store with limits keeps no entry over ``CacheLimits/maxEntrySize``.)
    func removeExpired() async throws
    /// The bytes of every entry's data.
    var totalSize: Int { get async throws }
    /// The number of entries.
    var count: Int { get async throws }
    /// Finishes the store's background work (a sweep in progress, batched access
    /// dates, queued writes) and stops its timers, so that nothing is lost when the
    /// process exits. ``ImageManager/shutdown(gracePeriod:)`` calls it last.
    ///
    /// The store stays usable afterwards (a late call still works, it just starts
    /// no timer again); its files and handles are released when the last reference
    /// to it goes. Closing twice is harmless. The default does nothing.
    func close() async
}

extension CacheStore {
    public func close() async {}

    /// The bytes stored under a key, or nil.
    public func data(forKey key: String) async throws -> Data? {
        try await entry(forKey: key)?.data
    }

    /// Stores bytes with empty metadata.
    public func setData(_ data: Data, forKey key: String) async throws {
        try await setData(data, forKey: key, metadata: CacheMetadata())
    }
}

/// A store whose warm read costs no wait (LMDB's mapped memory): it answers on
/// the calling thread, synchronously.
///
/// The manager asks it first for a load of bytes (``ImageOptions/avoidDecode``)
/// that the memory tier missed, before it makes the load's plan or enters any
/// async call: a hit then costs what the store's lookup costs. Anything but a
/// hit goes the usual way, through ``CacheStore/entry(forKey:)``, which reports
/// errors and removes damaged entries. A class: the manager holds it as one
/// reference, which a hit copies with a retain rather than through an existential box.
package protocol ImmediateCacheReading: AnyObject, CacheStore {
    /// The entry under `key`, read on the calling thread, with its access date
    /// updated as ``CacheStore/entry(forKey:)`` does; nil for "ask `entry(forKey:)`":
    /// a miss, a damaged entry, a failure, or a store that reads on a pool.
    func immediateEntry(forKey key: String) -> CacheEntry?
}

/// Bytes and their metadata, as a store returns them.
public struct CacheEntry: Sendable {
    /// Which tier of a ``TieredCacheStore`` an entry came from.
    public enum Source: Sendable, Hashable {
        /// A store of this host (any store that is not tiered answers this).
        case local
        /// The shared tier, after a local miss.
        case shared
    }

    public var data: Data
    public var metadata: CacheMetadata
    /// Where the entry came from; the manager reports `.shared` as ``CacheType/shared``.
    public var source: Source
    /// The ``XXH3`` of ``data``, when the store verified the entry against it on
    /// this read (the LMDB, file and Redis stores do); nil when it did not. A
    /// server can use it as the entry's ETag without hashing the bytes again
    /// (``ImageResult/entityTag``).
    public var checksum: UInt64?

    public init(data: Data, metadata: CacheMetadata, source: Source = .local, checksum: UInt64? = nil) {
        self.data = data
        self.metadata = metadata
        self.source = source
        self.checksum = checksum
    }
}

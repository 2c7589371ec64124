/// Where a result came from.
public enum CacheType: String, Sendable, Hashable, Codable {
    /// Loaded (from the network or a file) for this request.
    case none
    /// From the memory cache.
    case memory
    /// From the disk store (with a ``TieredCacheStore``, its local tier).
    case disk
    /// From the shared tier of a ``TieredCacheStore`` (Redis, for a fleet).
    case shared
}

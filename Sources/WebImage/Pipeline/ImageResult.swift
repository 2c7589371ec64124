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
}

/// Per-load switches, after SDWebImage's options (those that make sense off a phone).
public struct ImageOptions: OptionSet, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Try a URL on the failed-URL blocklist anyway.
    public static let retryFailed = ImageOptions(rawValue: 1 << 0)
    /// Queue the download behind normal ones.
    public static let lowPriority = ImageOptions(rawValue: 1 << 1)
    /// Queue the download ahead of normal ones.
    public static let highPriority = ImageOptions(rawValue: 1 << 2)
    /// Do not write to the disk store.
    public static let cacheMemoryOnly = ImageOptions(rawValue: 1 << 3)
    /// Revalidate the cached bytes with the stored ETag/Last-Modified; a 304 keeps them.
    public static let refreshCached = ImageOptions(rawValue: 1 << 4)
    /// Never call a loader; a miss in every tier fails with ``WebImageError/Code/notCached``.
    public static let fromCacheOnly = ImageOptions(rawValue: 1 << 5)
    /// Skip the cache lookups (results are still stored).
    public static let fromLoaderOnly = ImageOptions(rawValue: 1 << 6)
    /// Decode only the first frame of animated images.
    public static let decodeFirstFrameOnly = ImageOptions(rawValue: 1 << 7)
    /// Decode images over the pixel limit scaled down to fit, instead of failing.
    public static let scaleDownLargeImages = ImageOptions(rawValue: 1 << 8)
    /// Return only after the disk store has been written (otherwise it is written in the background).
    public static let waitStoreCache = ImageOptions(rawValue: 1 << 9)
    /// Return encoded bytes in ``ImageResult/data``: the original's, or with a
    /// thumbnail or transformer in the context, the derived result's. A hit in
    /// memory or on disk is returned without decoding (``ImageResult/image`` is
    /// nil); on a miss the manager makes the result, and returns its image too.
    /// The memory tier keeps the bytes (charged at their length). This is how a
    /// service that answers with bytes should load.
    public static let avoidDecode = ImageOptions(rawValue: 1 << 10)
    /// On a memory hit, also read the bytes from the disk store into ``ImageResult/data``.
    public static let queryMemoryData = ImageOptions(rawValue: 1 << 11)
}

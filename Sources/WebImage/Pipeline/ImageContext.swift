public import Foundation

/// Per-load settings that carry values, after SDWebImage's context.
public struct ImageContext: Sendable {
    /// Decode straight to a size that fits this box (shrink on load).
    public var thumbnailPixelSize: PixelSize?
    /// Fit inside the thumbnail box (true) or fill it exactly (false).
    public var preserveAspectRatio: Bool = true
    /// What a fill thumbnail keeps of the image (with ``preserveAspectRatio``
    /// false): the centre, or a smart crop that finds the subject.
    public var cropFocus: CropFocus = .centre
    /// The scale to give the image, overriding the one the key implies (`@2x`).
    public var scaleFactor: Double?
    /// Keep the pixels as stored instead of applying the EXIF orientation.
    public var keepOrientation: Bool = false
    /// Accept truncated images instead of failing.
    public var allowTruncated: Bool = false
    /// Turns URLs into cache keys; overrides the manager's filter.
    public var cacheKeyFilter: CacheKeyFilter?
    /// Makes the bytes stored on disk for a transformed or thumbnailed result.
    public var cacheSerializer: CacheSerializer?
    /// Applied after decoding; its key becomes part of the cache key.
    public var transformer: (any ImageTransformer)?
    /// The format derived results are encoded in on disk; default: the source's
    /// (see ``ImageFormat/output(for:requested:canEncode:)``: a result with alpha
    /// is never written in a format without it).
    public var encodeFormat: ImageFormat?
    /// Pick the derived result's format per image from what the client
    /// accepts (overrides ``encodeFormat``): AVIF or WebP when accepted, else
    /// JPEG, PNG for alpha, GIF for animations. Its ``AcceptedFormats/key``
    /// becomes part of the derived key.
    public var acceptedFormats: AcceptedFormats?
    /// How derived results are encoded, instead of the manager's
    /// ``ImageManager/Configuration/encodeOptions``. Its
    /// ``EncodeOptions/keepColorProfile`` also decides how the image is decoded.
    public var encodeOptions: EncodeOptions?
    /// Adjusts each request before it is sent (headers such as `Authorization`).
    public var requestModifier: (@Sendable (inout LoadRequest) -> Void)?
    /// Judges the URL of this load and every redirect hop it takes
    /// (``LoadRequest/urlPolicy``); nil uses ``ImageManager/Configuration/urlPolicy``.
    /// A refused URL fails with ``WebImageError/Code/forbidden`` without being requested.
    public var urlPolicy: URLPolicy?
    /// When this load must have ended: past it, the caller gets
    /// ``WebImageError/Code/timedOut`` and, if no other caller waits for the same
    /// work, its download is cancelled and its transform chain stops at the next
    /// step. A server sets one per request. Nil: no deadline but the loader's timeout.
    public var deadline: ContinuousClock.Instant?
    /// Use this store instead of the manager's.
    public var store: (any CacheStore)?
    /// Use this loader instead of the registry's.
    public var loader: (any Loader)?
    /// Use this coder instead of the registry's.
    public var coder: (any ImageCoder)?
    /// The tiers looked up. Default: both.
    public var queryCacheTiers: CacheTiers = .all
    /// The tiers written. Default: both.
    public var storeCacheTiers: CacheTiers = .all

    public init(
        thumbnailPixelSize: PixelSize? = nil,
        scaleFactor: Double? = nil,
        transformer: (any ImageTransformer)? = nil,
        encodeFormat: ImageFormat? = nil
    ) {
        self.thumbnailPixelSize = thumbnailPixelSize
        self.scaleFactor = scaleFactor
        self.transformer = transformer
        self.encodeFormat = encodeFormat
    }
}

/// The cache tiers of the pipeline.
public struct CacheTiers: OptionSet, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let memory = CacheTiers(rawValue: 1)
    public static let disk = CacheTiers(rawValue: 2)
    public static let all: CacheTiers = [.memory, .disk]
    public static let none: CacheTiers = []
}

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

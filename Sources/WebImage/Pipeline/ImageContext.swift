import Foundation

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
    /// The most ``transformer`` may cost on the decoded image, in megapixel passes
    /// (``TransformCost``; every frame counted); past it the load fails with
    /// `costLimitExceeded` before any step runs. Nil: no limit.
    public var maxTransformCost: Double?
    /// Refuse private, loopback and link-local addresses for this load's requests
    /// (``LoadRequest/refusesPrivateAddresses``), whatever the loader's own SSRF
    /// setting: a service sets it for URLs its users choose.
    public var refusesPrivateAddresses = false
    /// At most so many of this load's origin's downloads at once, across the loads
    /// that share the ``OriginLimit``.
    public var originLimit: OriginLimit?
    /// The breaker asked before this load's download, in place of the manager's
    /// (``ImageManager/Configuration/originBreaker``).
    public var originBreaker: OriginCircuitBreaker?
    /// A service-wide bound on heavy work: the load waits for ``workCost`` of it
    /// before its decode, transform and encode run (``WorkBudget``).
    public var workBudget: WorkBudget?
    /// What this load's render is expected to cost, in megapixel passes, per
    /// frame: the decode and the transform, before the image is known.
    public var workCost: Double = 0
    /// What encoding the result costs, in megapixel passes per megapixel of it
    /// (``TransformCost/encodeWeight(_:)``, times the encodes a `maxBytes`
    /// search makes). Weighed from the image's header before its decode (when
    /// the box could make it heavy, and for every animation) and again once it
    /// is decoded, every frame counted, with ``workCost`` per frame: a load
    /// that turns out a pass or more heavier than the room it holds waits for
    /// the rest, before its decode when the header told.
    public var encodeWorkWeight: Double = 0
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
    /// The URL asked for is judged before any tier (a refused one is not served
    /// from the cache either), each redirect hop by the loader: each URL once.
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

import Foundation
public import Logging
public import Tracing

extension ImageManager {
    /// Everything a manager is made of. Every field has a default with a reason
    /// (docs/configuration.md lists them).
    ///
    /// ```swift
    /// var configuration = ImageManager.Configuration()
    /// configuration.store = try FileCacheStore(directory: cacheDirectory)
    /// configuration.coders.register(VipsImageCoder(), name: "vips")
    /// let manager = ImageManager(configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// The memory tier; nil disables it. Default: 25% of available memory.
        public var memoryCache: MemoryImageCache? = MemoryImageCache()
        /// The disk tier; nil (the default) disables it.
        public var store: (any CacheStore)?
        /// Coders, asked newest first. Empty by default: register one (`vips`).
        public var coders = CoderRegistry()
        /// Loaders by scheme. Default: ``FileLoader`` for `file://` and plain paths.
        public var loaders = LoaderRegistry.standard
        /// Turns URLs into cache keys. Default: the absolute URL string.
        public var cacheKeyFilter: CacheKeyFilter = .identity
        /// Makes disk bytes for derived results. Default: see ``CacheSerializer/encoding(as:options:)``.
        public var cacheSerializer: CacheSerializer?
        /// How derived results (thumbnails, transforms) are encoded: quality,
        /// effort, colour profile, the background under alpha in JPEG. Default
        /// ``EncodeOptions/derivedDefault`` (quality 90, sRGB). Options other than
        /// that default become part of derived keys, so changing them makes new
        /// entries rather than serving old bytes.
        public var encodeOptions: EncodeOptions = .derivedDefault
        /// Failed URLs. Default: 5 minutes, 10 000 URLs.
        public var blocklist = FailedURLBlocklist()
        /// Fails loads of an origin that keeps failing transiently (down, timing
        /// out, 5xx), at once and for a while, so that a few dead hosts cannot
        /// hold every download slot. Default nil (off); servers that load URLs
        /// their users choose should set one (``OriginCircuitBreaker``).
        public var originBreaker: OriginCircuitBreaker?
        /// Decoding defaults; per-load options and context refine them. The pixel
        /// limit (100 MP by default) guards against decompression bombs.
        public var decodeOptions = DecodeOptions()
        /// Headers sent with every request. Default: an `Accept` of what libvips decodes.
        public var requestHeaders: [String: String] = ["Accept": "image/webp,image/avif,image/*;q=0.8"]
        /// Judges every URL a load reaches, the first and each redirect hop, unless
        /// the load's context has its own (``ImageContext/urlPolicy``): the first
        /// before any tier, so a refused URL is not served from the cache either. Nil: none.
        public var urlPolicy: URLPolicy?
        /// The longest a load may take. Default 15 s (SDWebImage, Kingfisher).
        public var timeout: Duration = LoadRequest.defaultTimeout
        /// The largest response accepted. Default 64 MiB: a server must bound it.
        public var maxResponseSize: Int64 = LoadRequest.defaultMaxResponseSize
        /// The bytes of downloaded originals that may wait for, or be in, their
        /// decode at once, charged by bytes that exist: a load is admitted before
        /// its download while there is room, then the download is charged what
        /// its response has delivered and, ahead of that, what it declares
        /// (`Content-Length`) up to as much again plus 1 MiB, once however
        /// many loads share it (the sizes of one URL), and gives it all back when
        /// the last of those loads ends. A request not yet answered holds nothing, so an
        /// origin that never answers takes no room from others; an origin that
        /// holds half the budget lets other origins' loads pass it. Past the
        /// budget, loads wait their turn (in order, each cancellable) before they
        /// download. A body already downloading is never stopped, so the charges
        /// can pass the budget by what the downloads in flight receive after it
        /// filled: every download that started while it had room, each up to
        /// ``maxResponseSize``. A download waiting for its origin's slot
        /// (``ImageContext/originLimit``) is admitted again once it has it; one
        /// queued inside the loader (its own per-host limit) is not.
        /// Default 512 MiB.
        public var originalsBudget = 512 << 20
        /// Where decoding, transforming and encoding run.
        public var pool: BlockingThreadPool = .shared
        /// Store writes a load may leave running in the background (without
        /// `.waitStoreCache`) at once; past it a write is dropped and counted
        /// (`webimage_store_writes_dropped_total`), the image served all the same.
        /// Default 256.
        public var maxPendingWrites = 256
        /// The bytes those writes may hold at once. Default 256 MiB.
        public var maxPendingWriteBytes = 256 << 20
        public var logger = Logger(label: "webimage")
        /// Where the load's spans go (swift-distributed-tracing): one per stage
        /// (`webimage.memory`, `webimage.disk` or `webimage.shared`,
        /// `webimage.download`, `webimage.decode`, `webimage.transform`,
        /// `webimage.encode`, `webimage.store`) inside a `webimage.load`, with the
        /// host and sizes as attributes. Nil (the default): the process's
        /// `InstrumentationSystem.tracer` as it is when the manager is made (bootstrap
        /// it first), a no-op until the application bootstraps one (swift-otel,
        /// docs/serving.md).
        public var tracer: (any Tracer)?
        /// Dimensions added to every metric (swift-metrics), to tell several
        /// managers apart: `[("pipeline", "avatars")]`. Metrics: hits per tier,
        /// misses, bytes loaded, load and decode durations, errors by code, store errors.
        public var metricsDimensions: [(String, String)] = []

        public init() {}
    }
}

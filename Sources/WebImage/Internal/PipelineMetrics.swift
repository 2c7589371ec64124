import Metrics

/// The manager's counters and timers, made once (swift-metrics factories are not free).
///
/// - `webimage_cache_hits_total{tier=memory|disk|shared}`, `webimage_cache_misses_total`
/// - `webimage_loaded_bytes_total`, `webimage_load_duration_seconds`
/// - `webimage_decode_duration_seconds`
/// - `webimage_errors_total{code=...}`, `webimage_store_errors_total`,
///   `webimage_store_writes_dropped_total` (background writes past the bound)
///
/// Every metric also carries the configuration's ``ImageManager/Configuration/metricsDimensions``.
///
/// A class: a hit reads it through the manager, and a struct of ten references
/// was copied there (ten retains and releases, a tenth of a warm disk hit).
final class PipelineMetrics: Sendable {
    private let dimensions: [(String, String)]
    private let memoryHits: Counter
    private let diskHits: Counter
    private let sharedHits: Counter
    private let misses: Counter
    private let loadedBytes: Counter
    private let loadTimer: Metrics.Timer
    private let decodeTimer: Metrics.Timer
    private let storeErrors: Counter
    private let droppedWrites: Counter

    init(dimensions: [(String, String)] = []) {
        self.dimensions = dimensions
        memoryHits = Counter(label: "webimage_cache_hits_total", dimensions: [("tier", "memory")] + dimensions)
        diskHits = Counter(label: "webimage_cache_hits_total", dimensions: [("tier", "disk")] + dimensions)
        sharedHits = Counter(label: "webimage_cache_hits_total", dimensions: [("tier", "shared")] + dimensions)
        misses = Counter(label: "webimage_cache_misses_total", dimensions: dimensions)
        loadedBytes = Counter(label: "webimage_loaded_bytes_total", dimensions: dimensions)
        loadTimer = Metrics.Timer(label: "webimage_load_duration_seconds", dimensions: dimensions)
        decodeTimer = Metrics.Timer(label: "webimage_decode_duration_seconds", dimensions: dimensions)
        storeErrors = Counter(label: "webimage_store_errors_total", dimensions: dimensions)
        droppedWrites = Counter(label: "webimage_store_writes_dropped_total", dimensions: dimensions)
    }

    func hit(_ tier: CacheType) {
        switch tier {
        case .memory: memoryHits.increment()
        case .shared: sharedHits.increment()
        case .disk, .none: diskHits.increment()
        }
    }
    func miss() { misses.increment() }
    func loaded(bytes: Int, duration: Duration) {
        loadedBytes.increment(by: bytes)
        loadTimer.recordNanoseconds(duration.wholeNanoseconds)
    }
    func decoded(duration: Duration) { decodeTimer.recordNanoseconds(duration.wholeNanoseconds) }
    func failed(_ code: WebImageError.Code) {
        Counter(label: "webimage_errors_total", dimensions: [("code", code.rawValue)] + dimensions).increment()
    }
    func storeError() { storeErrors.increment() }
    func droppedWrite() { droppedWrites.increment() }
}

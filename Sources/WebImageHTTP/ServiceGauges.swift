import Foundation
import Metrics
import Synchronization
@_spi(WebImageInternal) import WebImage

extension ImageEndpoint {
    /// Sets the service's gauges (swift-metrics `Gauge`s) to their values now:
    /// what the service holds, for a dashboard to set beside process memory.
    ///
    /// | gauge | what |
    /// | --- | --- |
    /// | `webimage_memory_tier_bytes`, `webimage_memory_tier_entries` | the memory tier's exact cost and entries |
    /// | `webimage_originals_bytes`, `webimage_originals_limit_bytes` | downloaded originals charged to the originals budget (each download once, until the last load holding its bytes ends), and its limit |
    /// | `webimage_loads_in_flight` | loads the manager is running |
    /// | `webimage_decoded_pixels_in_flight` | pixels decoded by render jobs still running, every frame counted, an image waiting for room included |
    /// | `webimage_work_in_flight`, `webimage_work_waiting` | megapixel passes rendering now (`thumbnail.maxCostInFlight`), and renders waiting for room |
    /// | `webimage_store_writes_pending`, `webimage_store_writes_pending_bytes` | background store writes not yet landed |
    /// | `webimage_store_bytes`, `webimage_store_entries` | the disk store's data bytes and entries, read at most once a minute (a file store or a bucket walks its entries to count them), within 2 s |
    /// | a plugin's own | the figures of every coder, loader and the store that conform to `PluginFiguresReporting` (`webimage_turbojpeg_reuse_bytes`...) |
    ///
    /// `ImageServer` (WebImageHummingbird) calls this before every `/metrics`
    /// answer. An app that serves its own metrics calls it before each scrape, or
    /// every few seconds.
    public func recordGauges() async {
        let dimensions = manager.configuration.metricsDimensions
        func gauge(_ label: String, _ value: Int) { Gauge(label: label, dimensions: dimensions).record(value) }
        func gauge(_ label: String, _ value: Double) { Gauge(label: label, dimensions: dimensions).record(value) }
        if let memory = manager.memoryCache {
            gauge("webimage_memory_tier_bytes", memory.totalCost)
            gauge("webimage_memory_tier_entries", memory.count)
        }
        let originals = manager.originalsInFlight
        gauge("webimage_originals_bytes", originals.bytes)
        gauge("webimage_originals_limit_bytes", manager.configuration.originalsBudget)
        gauge("webimage_loads_in_flight", manager.loadsInFlight)
        gauge("webimage_decoded_pixels_in_flight", manager.decodedPixelsInFlight)
        let work = work.usage
        gauge("webimage_work_in_flight", work.inFlight)
        gauge("webimage_work_waiting", work.waiting)
        let writes = manager.pendingStoreWrites
        gauge("webimage_store_writes_pending", writes.count)
        gauge("webimage_store_writes_pending_bytes", writes.bytes)
        if let store = manager.store, let sample = await storeSample.value(of: store) {
            gauge("webimage_store_bytes", sample.bytes)
            gauge("webimage_store_entries", sample.entries)
        }
        let configuration = manager.configuration
        let plugins: [Any] = configuration.coders.coders + configuration.loaders.loaders + [configuration.store as Any]
        for case let plugin as any PluginFiguresReporting in plugins {
            for figure in plugin.figures {
                switch figure.kind {
                case .gauge: gauge(figure.label, figure.value)
                case .total:
                    // Made at the first report even at 0, so that the series exists from then.
                    Counter(label: figure.label, dimensions: dimensions).increment(by: pluginTotals.grown(figure.label, to: figure.value))
                }
            }
        }
    }
}

/// The totals of plugins' figures last reported, so that a `Counter` is raised
/// by what each grew since.
final class PluginTotals: Sendable {
    private let last = Lock([String: Int]())

    /// What `label` grew by since the last call (all of it the first time; 0 if it fell).
    func grown(_ label: String, to value: Int) -> Int {
        last.withLock { last in
            defer { last[label] = value }
            return max(0, value - (last[label] ?? 0))
        }
    }
}

/// The store's size and count, read at most once per `interval` and within
/// `timeout` (the last value stands when a read is slow or fails): a file store
/// or a bucket walks every entry to count them, which a scrape every few
/// seconds must not repeat.
final class StoreSample: Sendable {
    struct Value: Sendable { var bytes: Int, entries: Int }
    private struct State { var value: Value?, takenAt: ContinuousClock.Instant?, reading = false }
    private let state = Lock(State())
    let interval: Duration, timeout: Duration

    init(interval: Duration = .seconds(60), timeout: Duration = .seconds(2)) {
        (self.interval, self.timeout) = (interval, timeout)
    }

    func value(of store: any CacheStore) async -> Value? {
        let now = ContinuousClock.now
        let due = state.withLock { state -> Bool in
            guard !state.reading, state.takenAt.map({ now - $0 >= interval }) ?? true else { return false }
            state.reading = true
            return true
        }
        guard due else { return state.withLock { $0.value } }
        let read: Value? = await withTaskGroup(of: Value?.self) { group in
            group.addTask { try? await Value(bytes: store.totalSize, entries: store.count) }
            group.addTask { try? await Task.sleep(for: self.timeout); return nil }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return state.withLock { state in
            state.reading = false
            state.takenAt = .now
            if let read { state.value = read }
            return state.value
        }
    }
}

/// Figures a plugin keeps about itself, for a service's metrics.
///
/// A coder, store or loader that holds memory or counts work of its own (a
/// cache inside a coder, a connection pool) conforms, and a service that records
/// its gauges (`ImageEndpoint.recordGauges()`, before every `/metrics` answer in
/// `webimage serve`) reports them with the manager's dimensions: a
/// ``PluginFigure/Kind/gauge`` as a swift-metrics `Gauge`, a
/// ``PluginFigure/Kind/total`` as a `Counter` raised by what it grew since the
/// last report. Reading them must be cheap: it happens on every scrape.
///
/// ```swift
/// struct MyCoder: PluginFiguresReporting {  // and ImageCoder
///     let cache: MyDecodeCache
///
///     var figures: [PluginFigure] {
///         [PluginFigure("mycoder_cache_bytes", .gauge, cache.bytes),
///          PluginFigure("mycoder_cache_hits_total", .total, cache.hits)]
///     }
/// }
/// ```
public protocol PluginFiguresReporting: Sendable {
    /// The figures now.
    var figures: [PluginFigure] { get }
}

/// One figure of ``PluginFiguresReporting``.
public struct PluginFigure: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A level now (bytes held, entries).
        case gauge
        /// A running total since the plugin was made (hits); never decreases.
        case total
    }

    /// The metric's label, `snake_case` with the plugin's prefix.
    public var label: String
    public var kind: Kind
    public var value: Int

    public init(_ label: String, _ kind: Kind, _ value: Int) {
        self.label = label
        self.kind = kind
        self.value = value
    }
}

import Foundation
import Logging
package import Tracing

/// What every stage of a load shares: the manager's configuration, its metrics,
/// its spans, and the stage each job is in. Made once by ``ImageManager``; each
/// stage holds a reference to it (a class: a load then retains one object instead
/// of copying the whole configuration).
final class StageServices: Sendable {
    let configuration: ImageManager.Configuration
    let metrics: PipelineMetrics
    let spans: Spans
    /// The stage of each job running, for the message of a deadline that passes.
    let jobStages: JobStages

    init(configuration: ImageManager.Configuration) {
        self.configuration = configuration
        self.metrics = PipelineMetrics(dimensions: configuration.metricsDimensions)
        self.spans = Spans(tracer: configuration.tracer ?? InstrumentationSystem.tracer)
        self.jobStages = JobStages()
    }

    var logger: Logger { configuration.logger }

    /// The URL policy's judgement of the URL a load asks for, before any tier.
    func judge(_ url: URL, _ context: ImageContext) throws {
        guard let policy = context.urlPolicy ?? configuration.urlPolicy, let reason = policy(url) else { return }
        throw WebImageError(.forbidden, "\(url.absoluteString) \(reason)", isTransient: false)
    }

    /// The policy's judgement of where a stored entry's bytes came from, when a
    /// redirect took the load elsewhere (``CacheMetadata/originalURL``): a host
    /// taken off an allow-list is not served from the cache through a redirect either.
    func judge(stored entry: CacheEntry, _ plan: LoadPlan) throws {
        try judge(stored: entry, url: plan.url, context: plan.context)
    }

    func judge(stored entry: CacheEntry, url: URL, context: ImageContext) throws {
        guard let text = entry.metadata.originalURL, text != url.absoluteString, let final = URL(string: text),
              let policy = context.urlPolicy ?? configuration.urlPolicy, let reason = policy(final) else { return }
        throw WebImageError(.forbidden, "\(url.absoluteString) redirected to \(text), which \(reason)", isTransient: false)
    }

    /// A store that failed: counted in `webimage_store_errors_total` and logged.
    /// The disk tier is a cache, so the load goes on.
    func logStoreError(_ error: any Error, key: String) {
        metrics.storeError()
        logger.warning("cache store failed", metadata: ["key": "\(key)", "error": "\(error)"])
    }
}

/// The spans of a load, or none at all with the no-op tracer (a memory hit would
/// otherwise pay for three spans and their attributes' dictionaries).
///
/// The tracer is read when the manager is made (a lookup per span cost a lock
/// each): bootstrap the process's tracer before making managers, or set
/// ``ImageManager/Configuration/tracer``.
struct Spans: Sendable {
    /// The tracer spans go to; nil for the no-op one.
    let tracer: (any Tracer)?
    /// Whether ``tracer`` is set: asked on every load, where reading the optional
    /// existential copied it (a retain and a release).
    let isTracing: Bool

    init(tracer: any Tracer) {
        self.tracer = tracer is NoOpTracer ? nil : tracer
        isTracing = self.tracer != nil
    }

    /// Runs `body` inside a span named `name` (a child of the task's current span),
    /// ended when `body` returns or throws (the error recorded on it).
    func traced<T>(_ name: String, _ body: (any Span) async throws -> T) async throws -> T {
        guard let tracer else { return try await body(Self.none) }
        func run<Traced: Tracer>(_ tracer: Traced) async throws -> T {
            try await tracer.withSpan(name, ofKind: .internal) { span in try await body(span) }
        }
        return try await run(tracer)
    }

    /// A span started now under `context`, for work that runs off the task (a pool
    /// thread): the caller ends it.
    func start(_ name: String, context: ServiceContext) -> any Span {
        guard let tracer else { return Self.none }
        func start<Traced: Tracer>(_ tracer: Traced) -> any Span { tracer.startSpan(name, context: context, ofKind: .internal) }
        return start(tracer)
    }

    /// Runs one step of a pool job inside a span under `parent`, its error recorded.
    func step<T>(_ name: String, _ parent: ServiceContext, _ body: (any Span) throws -> T) throws -> T {
        let span = start(name, context: parent)
        defer { span.end() }
        do { return try body(span) } catch {
            span.recordError(error)
            throw error
        }
    }

    static let none: any Span = NoOpTracer.NoOpSpan(context: .topLevel)
}

extension Span {
    /// Sets an attribute, when the span records (a no-op span's attributes would
    /// still build a dictionary to throw away).
    package func set<Value: SpanAttributeConvertible>(_ key: String, _ value: @autoclosure () -> Value) {
        guard isRecording else { return }
        attributes[key] = value()
    }

    /// Sets a pixel size as `NAME.width` and `NAME.height`.
    func setSize(_ name: String, _ size: PixelSize) {
        set("\(name).width", size.width)
        set("\(name).height", size.height)
    }
}

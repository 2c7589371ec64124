import Foundation
package import Tracing

extension ImageManager {
    /// The tracer, unless it is the no-op one: then no span is made at all (a memory
    /// hit would otherwise pay for three spans and their attributes' dictionaries).
    /// Read when the manager is made (a lookup per span cost a lock each): bootstrap
    /// the process's tracer before making managers, or set ``Configuration/tracer``.
    package var activeTracer: (any Tracer)? { spanTracer }

    /// Runs `body` inside a span named `name` (a child of the task's current span),
    /// ended when `body` returns or throws (the error recorded on it).
    func traced<T>(_ name: String, _ body: (any Span) async throws -> T) async throws -> T {
        guard let tracer = activeTracer else { return try await body(Self.noSpan) }
        func run<Traced: Tracer>(_ tracer: Traced) async throws -> T {
            try await tracer.withSpan(name, ofKind: .internal) { span in try await body(span) }
        }
        return try await run(tracer)
    }

    /// A span started now under `context`, for work that runs off the task (a pool
    /// thread): the caller ends it.
    func startSpan(_ name: String, context: ServiceContext) -> any Span {
        guard let tracer = activeTracer else { return Self.noSpan }
        func start<Traced: Tracer>(_ tracer: Traced) -> any Span { tracer.startSpan(name, context: context, ofKind: .internal) }
        return start(tracer)
    }

    static let noSpan: any Span = NoOpTracer.NoOpSpan(context: .topLevel)
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

import Foundation
package import Tracing

extension ImageManager {
    /// The configured tracer, else the process's (read on each use, so that a
    /// tracer bootstrapped after the manager was made is seen).
    package var tracer: any Tracer { configuration.tracer ?? InstrumentationSystem.tracer }

    /// Runs `body` inside a span named `name` (a child of the task's current span),
    /// ended when `body` returns or throws (the error recorded on it).
    func traced<T>(_ name: String, _ body: (any Span) async throws -> T) async throws -> T {
        func run<Traced: Tracer>(_ tracer: Traced) async throws -> T {
            try await tracer.withSpan(name, ofKind: .internal) { span in try await body(span) }
        }
        return try await run(tracer)
    }

    /// A span started now under `context`, for work that runs off the task (a pool
    /// thread): the caller ends it.
    func startSpan(_ name: String, context: ServiceContext) -> any Span {
        func start<Traced: Tracer>(_ tracer: Traced) -> any Span { tracer.startSpan(name, context: context, ofKind: .internal) }
        return start(tracer)
    }
}

extension Span {
    /// Sets a pixel size as `NAME.width` and `NAME.height`.
    func setSize(_ name: String, _ size: PixelSize) {
        attributes["\(name).width"] = size.width
        attributes["\(name).height"] = size.height
    }
}

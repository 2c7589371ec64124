import Foundation
import HTTPTypes
import InMemoryTracing
import Testing
import Tracing
import WebImage
import WebImageHTTP

@Suite("Tracing: spans per stage, continuing the caller's trace")
struct TracingTests {
    @Test("a cold thumbnail: a server span in the caller's trace, and inside it load, memory, disk, download (with the host), decode, transform, encode and store spans; a warm one: load and a memory hit")
    func stages() async throws {
        let tracer = InMemoryTracer()
        let f = try await EndpointFixture.make(tracer: tracer)
        defer { Task { await f.close() } }
        // The caller's trace, in the in-memory tracer's own headers (swift-otel reads `traceparent`).
        let headers: HTTPFields = [HTTPField.Name(InMemoryTracer.traceIDKey)!: "trace-1", HTTPField.Name(InMemoryTracer.spanIDKey)!: "caller"]
        let path = "/thumbnail?url=\(f.source("photo-1.jpg"))&w=64&format=jpeg&t=sharpen"
        #expect(await f.get(path, headers).status == .ok)

        // The store's span ends with the background write, after the response.
        var spans: [FinishedInMemorySpan] = []
        for _ in 0..<600 {
            spans = tracer.finishedSpans
            if spans.contains(where: { $0.operationName == "webimage.store" }) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let names = Set(spans.map(\.operationName))
        for stage in ["GET /thumbnail", "webimage.load", "webimage.memory", "webimage.disk", "webimage.download",
                      "webimage.decode", "webimage.transform", "webimage.encode", "webimage.store"] {
            #expect(names.contains(stage), "\(stage) in \(names.sorted())")
        }
        #expect(spans.allSatisfy { $0.traceID == "trace-1" }, "every span continues the caller's trace")
        let server = try #require(spans.first { $0.operationName == "GET /thumbnail" })
        #expect(server.kind == .server && server.parentSpanID == "caller")
        #expect(server.attributes["http.response.status_code"]?.toSpanAttribute() == .int64(200))
        let load = try #require(spans.first { $0.operationName == "webimage.load" })
        #expect(load.parentSpanID == server.spanID)
        let download = try #require(spans.first { $0.operationName == "webimage.download" })
        #expect(download.attributes["server.address"]?.toSpanAttribute() == .string("127.0.0.1"))
        #expect(download.attributes["webimage.bytes"]?.toSpanAttribute() == .int64(Int64(f.samples["photo-1.jpg"]!.count)))
        let decode = try #require(spans.first { $0.operationName == "webimage.decode" })
        #expect(decode.parentSpanID != nil && spans.contains { $0.spanID == decode.parentSpanID }, "the pool's spans hang under the load's")

        tracer.clearAll()
        #expect(await f.get(path, headers).status == .ok)
        let warm = tracer.finishedSpans
        let memory = try #require(warm.first { $0.operationName == "webimage.memory" })
        #expect(memory.attributes["webimage.hit"]?.toSpanAttribute() == .bool(true))
        #expect(!warm.contains { $0.operationName == "webimage.download" || $0.operationName == "webimage.decode" })
    }
}

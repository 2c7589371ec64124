// writing-plugins.md's and WritingPlugins.md's registration lines and the DocC
// conformance test, compiled with the tests. The types they name are the
// reader's own plugins, stood in for here (this file does not import WebImageS3,
// whose S3Loader has another shape). The conformance test runs, on a file store.

import Foundation
import Testing
import WebImage
import WebImageTesting

private struct S3Loader: Loader {
    func canLoad(_ url: URL) -> Bool { url.scheme == "s3" }
    func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        throw WebImageError(.notFound, "s3")
    }
}
private struct QOICoder: ImageCoder {
    func canDecode(_ data: Data) -> Bool { false }
    func decode(_ data: Data, options: DecodeOptions) throws -> Image { throw WebImageError(.unsupportedFormat, "qoi") }
    func canEncode(_ format: ImageFormat) -> Bool { false }
    func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data { throw WebImageError(.unsupportedFormat, "qoi") }
}
private func RedisStore(_ settings: CacheStoreSettings) throws -> MemoryCacheStore { MemoryCacheStore(limits: settings.limits) }

/// WritingPlugins.md's store under test: a file store, in folders removed when the process exits.
private func MyStore(directory: URL, limits: CacheLimits = CacheLimits(), clock: @escaping @Sendable () -> Date = { Date() }) throws -> FileCacheStore {
    try FileCacheStore(directory: directory, limits: limits, clock: clock)
}
private func freshDirectory() -> URL {
    _ = removedAtExit
    return guideFolder.appendingPathComponent(UUID().uuidString)
}
private let guideFolder = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-doc-guides-\(getpid())")
private let removedAtExit: Void = { atexit { try? FileManager.default.removeItem(at: guideFolder) } }()

// docs/writing-plugins.md
package func writingPluginsLoader(configuration: inout ImageManager.Configuration) {
// snippet-begin: writing-plugins-loader
    configuration.loaders.register(S3Loader(), name: "s3", schemes: ["s3"])
// snippet-end
}

// Sources/WebImage/WebImage.docc/WritingPlugins.md
package func doccWritingPluginsRegistration(configuration: inout ImageManager.Configuration) {
// snippet-begin: docc-writing-plugins-registration
    configuration.coders.register(QOICoder(), name: "qoi")                        // asked before older coders
    configuration.loaders.register(S3Loader(), name: "s3", schemes: ["s3"])
    CacheStoreRegistry.standard.register(name: "redis") { settings in try RedisStore(settings) }
// snippet-end
}

/// WritingPlugins.md's conformance test, run against a file store.
struct DocCStoreConformanceExample {
// snippet-begin: docc-store-conformance
    @Test func conforms() async throws {
        try await CacheStoreConformance(
            makeStore: { try MyStore(directory: freshDirectory()) },
            makeLimitedStore: { limits, clock in try MyStore(directory: freshDirectory(), limits: limits, clock: clock) }
        ).run()
    }
// snippet-end
}

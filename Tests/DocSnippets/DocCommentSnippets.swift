// The ```swift examples of the doc comments in Sources/ and Plugins/, compiled
// with the tests. DocSnippetsTests checks that every such example is one of the
// regions below, character for character (`snippet-begin: NAME` to
// `snippet-end`, each line's first four spaces removed). Each region sits in a
// function whose parameters are the names the example takes as given
// (`manager`, `configuration`, `url`); nothing here runs, except the
// conformance test the WebImageTesting example declares.

import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Testing
import WebImage
import WebImageConfiguration
import WebImageCurl
import WebImageHTTP
import WebImageHummingbird
import WebImageKit
import WebImageLMDB
import WebImageRedis
import WebImageS3
import WebImageTesting
import WebImageTurboJPEG
import WebImageVips

// MARK: - Names the examples take as given

/// A coder of the user's own (`MyQOICoder`, `QOICoder` in the examples).
private struct MyQOICoder: ImageCoder {
    func canDecode(_ data: Data) -> Bool { false }
    func decode(_ data: Data, options: DecodeOptions) throws -> Image { throw WebImageError(.unsupportedFormat, "qoi") }
    func canEncode(_ format: ImageFormat) -> Bool { false }
    func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data { throw WebImageError(.unsupportedFormat, "qoi") }
}
private typealias QOICoder = MyQOICoder

/// A C decoder the BlockingThreadPool example calls.
private func decodeWithC(_ bytes: Data) throws -> [UInt8] { Array(bytes) }

/// The InFlightCounter example's answer past the limit.
private func overloaded() -> Response { Response(status: .serviceUnavailable) }

/// The WebImageTesting example's store and folder: a file store in a fresh folder,
/// under one folder of the process that is removed when the process exits.
private func MyStore(path: URL) throws -> FileCacheStore { try FileCacheStore(directory: path) }
private func tempDir() -> URL {
    _ = removedAtExit
    return conformanceFolder.appendingPathComponent(UUID().uuidString)
}
private let conformanceFolder = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-doc-conformance-\(getpid())")
private let removedAtExit: Void = { atexit { try? FileManager.default.removeItem(at: conformanceFolder) } }()

// MARK: - WebImage

package func loaderRegistryExample() {
// snippet-begin: LoaderRegistry
    let loaders = LoaderRegistry.standard           // "file" for file:// and paths
    loaders.register(CurlLoader(), name: "curl", schemes: ["http", "https"])
// snippet-end
}

package func blockingThreadPoolExample(bytes: Data) async throws {
// snippet-begin: BlockingThreadPool
    let pixels = try await BlockingThreadPool.shared.run { try decodeWithC(bytes) }
// snippet-end
    _ = pixels
}

/// The blocking(_:) example's decode of the same file that another job runs.
private struct RunningDecode { func wait() -> [UInt8] { [] } }

package func blockingRegionExample() {
    let decodeOfTheSameFile = RunningDecode()
// snippet-begin: BlockingThreadPool.blocking
    let pixels = BlockingThreadPool.blocking { decodeOfTheSameFile.wait() }
// snippet-end
    _ = pixels
}

package func cacheKeyFilterExample(configuration: inout ImageManager.Configuration) {
// snippet-begin: CacheKeyFilter
    // Signed URLs change on every request; strip the signature to share one entry.
    configuration.cacheKeyFilter = .removingQueryItems(["X-Amz-Signature", "X-Amz-Date", "Expires"])
// snippet-end
}

package func configurationExample(cacheDirectory: URL) throws {
// snippet-begin: ImageManager.Configuration
    var configuration = ImageManager.Configuration()
    configuration.store = try FileCacheStore(directory: cacheDirectory)
    configuration.coders.register(VipsImageCoder(), name: "vips")
    let manager = ImageManager(configuration: configuration)
// snippet-end
    _ = manager
}

package func imageManagerExample(configuration: ImageManager.Configuration) async throws {
// snippet-begin: ImageManager
    let manager = ImageManager(configuration: configuration)
    let result = try await manager.loadImage(
        with: URL(string: "https://example.com/photo@2x.jpg")!,
        context: ImageContext(thumbnailPixelSize: PixelSize(256)))
    print(result.cacheType, result.image!.pixelSize, result.image!.scale)  // none 256x171 2.0
// snippet-end
}

package func shutdownExample(manager: ImageManager) async {
// snippet-begin: ImageManager.shutdown
    // On SIGTERM, after the server stopped accepting requests:
    let clean = await manager.shutdown(gracePeriod: .seconds(20))
// snippet-end
    _ = clean
}

package func prefetcherExample(manager: ImageManager, urls: [URL]) async {
// snippet-begin: ImagePrefetcher
    let prefetcher = ImagePrefetcher(manager: manager, maxConcurrent: 4)
    let done = await prefetcher.prefetch(urls) { print("\($0.finished)/\($0.total)") }
// snippet-end
    _ = done
}

package func imageTaskExample(manager: ImageManager, url: URL) async throws {
// snippet-begin: ImageTask
    let task = manager.imageTask(with: url)
    Task { for await p in task.progress { print(p.received, p.expected ?? -1) } }
    let result = try await task.result
// snippet-end
    _ = result
}

package func inFlightCounterExample() -> Response {
// snippet-begin: InFlightCounter
    let requests = InFlightCounter(limit: 256)
    guard requests.enter() else { return overloaded() }   // 503, Retry-After
    defer { requests.leave() }
// snippet-end
    return Response(status: .ok)
}

package func originLimitExample() {
// snippet-begin: OriginLimit
    var context = ImageContext()
    context.originLimit = OriginLimit(limit: 4)
// snippet-end
    _ = context
}

package func sharedFailureStoreExample(configuration: inout ImageManager.Configuration, local: any CacheStore) throws {
// snippet-begin: SharedFailureStore
    let shared = try RedisCacheStore(configuration: .init(urls: ["redis://cache.internal:6379"]))
    configuration.store = TieredCacheStore(local: local, shared: shared)
    configuration.blocklist = FailedURLBlocklist(shared: shared)
// snippet-end
}

package func transformCostExample(transformer: any ImageTransformer) {
// snippet-begin: TransformCost
    let cost = TransformCost.estimate(transformer, input: ImageFootprint(size: PixelSize(width: 2048, height: 2048), bands: 4))
// snippet-end
    _ = cost
}

package func workBudgetExample(transformer: any ImageTransformer, footprint: ImageFootprint) {
// snippet-begin: WorkBudget
    let work = WorkBudget(limit: 500)
    var context = ImageContext()
    context.workBudget = work
    context.workCost = TransformCost.estimate(transformer, input: footprint)
// snippet-end
    _ = context
}

package func configValuesExample() throws {
// snippet-begin: ConfigValues
    let values = ConfigValues(["store.lmdb.mapSize": "1GiB"]).scoped(to: "store.lmdb")
    let mapSize = try values.bytes("mapSize") // 1073741824
// snippet-end
    _ = mapSize
}

package func negotiateExample(request: Request, image: Image) {
// snippet-begin: ImageFormat.negotiate
    let format = ImageFormat.negotiate(accept: request.headers[.accept], hasAlpha: image.hasAlpha,
                                       isAnimated: image.isAnimated, allowed: [.avif, .webp, .jpeg, .png, .gif])
// snippet-end
    _ = format
}

package func errorExample(manager: ImageManager, url: URL) async throws {
// snippet-begin: WebImageError
    do { _ = try await manager.loadImage(with: url) }
    catch let error as WebImageError where error.code == .notFound { print("gone:", error.message) }
// snippet-end
}

package func conditionalRequestExample(request: HTTPRequest) {
// snippet-begin: ConditionalRequest.evaluate
    switch ConditionalRequest.evaluate(request.headerFields, entityTag: "\"v1\"", lastModified: nil) {
    case .proceed: print("200 with the body")
    case .notModified: print("304")
    case .preconditionFailed: print("412")
    }
// snippet-end
}

package func xxh3Example(bytes: Data) {
// snippet-begin: XXH3
    let etag = String(XXH3.hash(bytes), radix: 16)
// snippet-end
    _ = etag
}

package func xxh64Example(bytes: Data) {
// snippet-begin: XXH64
    let id = String(XXH64.hash(bytes), radix: 16)
// snippet-end
    _ = id
}

package func coderLogExample(myLogger: Logger) {
// snippet-begin: CoderLog
    (CoderLog.logger ?? myLogger).warning("qoi: trailing bytes ignored")
// snippet-end
}

package func coderRegistryExample() {
// snippet-begin: CoderRegistry
    let coders = CoderRegistry()
    coders.register(VipsImageCoder(), name: "vips")
    let token = coders.register(MyQOICoder(), name: "qoi")  // asked before vips
    coders.unregister(token)
// snippet-end
}

package func cacheStoreSettingsExample() throws {
// snippet-begin: CacheStoreSettings
    let registry = CacheStoreRegistry.standard
    let store = try registry.makeStore(named: "filesystem", settings: CacheStoreSettings(
        directory: URL(fileURLWithPath: "/var/cache/images"),
        values: ConfigValues(["store.filesystem.readsOnCallingThread": "false"])))
// snippet-end
    _ = store
}

package func tieredExample(configuration: inout ImageManager.Configuration, cacheDirectory: URL) throws {
// snippet-begin: TieredCacheStore
    let local = try LMDBCacheStore(directory: cacheDirectory)
    let shared = try RedisCacheStore(configuration: .init(urls: ["redis://cache.internal:6379"]))
    configuration.store = TieredCacheStore(local: local, shared: shared)
// snippet-end
}

// MARK: - WebImageKit, WebImageHTTP, WebImageHummingbird, WebImageConfiguration, WebImageTesting

package func configuredExample() async throws {
// snippet-begin: ImageEndpoint.configured
    let endpoint = try await ImageEndpoint.configured(file: "images.json")
// snippet-end
    _ = endpoint
}

package func lineLogHandlerExample() {
// snippet-begin: LineLogHandler
    LoggingSystem.bootstrap { LineLogHandler(label: $0) }
// snippet-end
}

package func imageRoutesExample(manager: ImageManager, settings: ImageEndpoint.Settings) {
// snippet-begin: addImageRoutes
    let router = Router()
    router.add(middleware: RequestMetricsMiddleware())
    router.addImageRoutes(ImageEndpoint(manager: manager, settings: settings), at: "/img")
    // GET /img/thumbnail?url=…&w=256&h=256
// snippet-end
}

package func fallbackImageExample(settings: inout ImageEndpoint.Settings) throws {
// snippet-begin: FallbackImage
    settings.fallbackImage = try ImageEndpoint.FallbackImage(contentsOf: URL(fileURLWithPath: "/srv/missing.png"))
// snippet-end
}

package func imageEndpointExample(manager: ImageManager) async {
// snippet-begin: ImageEndpoint
    var settings = ImageEndpoint.Settings()
    settings.allowedHosts = HostAllowList(["images.example.com"])!
    let endpoint = ImageEndpoint(manager: manager, settings: settings)
    let response = await endpoint.respond(to: HTTPRequest(method: .get, scheme: nil, authority: nil,
                                                           path: "/thumbnail?url=…&w=256&h=256"))
// snippet-end
    _ = response
}

package func imageManagerServiceExample(manager: ImageManager, app: some Service, logger: Logger) async throws {
// snippet-begin: ImageManagerService
    let group = ServiceGroup(configuration: .init(
        services: [ImageManagerService(manager), app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    try await group.run()
// snippet-end
}

package func configKeyCheckExample() throws {
// snippet-begin: ConfigKeyCheck
    let known = PluginCatalog.standard.knownKeys.union(["http.port"])
    try ConfigKeyCheck(known: known).check(["store.kind", "store.maxSise"], source: "--set")
    // invalidArgument: unknown configuration key 'store.maxSise' (--set); did you mean 'store.maxSize'?
// snippet-end
}

package func configReaderExample() async throws {
// snippet-begin: ImageManager.Configuration(config:catalog:)
    let config = ConfigReader(providers: [
        EnvironmentVariablesProvider().prefixKeys(with: "webimage"),   // WEBIMAGE_STORE_KIND=lmdb
        try await FileProvider<JSONSnapshot>(filePath: "/etc/webimage.json"),
    ])
    let manager = ImageManager(configuration: try .init(config: config, catalog: .standard))
// snippet-end
    _ = manager
}

package func pluginCatalogExample(reader: ConfigReader) throws {
// snippet-begin: PluginCatalog
    var catalog = PluginCatalog.core
    catalog.registerCoder(name: "qoi") { _ in QOICoder() }
    let configuration = try ImageManager.Configuration(config: reader, catalog: catalog)
// snippet-end
    _ = configuration
}

/// WebImageTesting's example is a test: it runs the conformance suite against a file store.
struct ConformanceExample {
// snippet-begin: CacheStoreConformance
    @Test func conforms() async throws {
        try await CacheStoreConformance { try MyStore(path: tempDir()) }.run()
    }
// snippet-end
}

/// PluginFiguresReporting's example: a plugin's own figures.
enum PluginFiguresExample {
    final class MyDecodeCache: Sendable {
        var bytes: Int { 0 }
        var hits: Int { 0 }
    }

// snippet-begin: PluginFiguresReporting
    struct MyCoder: PluginFiguresReporting {  // and ImageCoder
        let cache: MyDecodeCache

        var figures: [PluginFigure] {
            [PluginFigure("mycoder_cache_bytes", .gauge, cache.bytes),
             PluginFigure("mycoder_cache_hits_total", .total, cache.hits)]
        }
    }
// snippet-end
}

/// ConnectionRequestContext's example: a context of the user's own that knows its connection.
enum ConnectionRequestContextExample {
// snippet-begin: ConnectionRequestContext
    struct MyContext: RequestContext, ConnectionRequestContext {
        var coreContext: CoreRequestContextStorage
        let channel: any Channel

        init(source: ApplicationRequestContextSource) {
            coreContext = CoreRequestContextStorage(source: source)
            channel = source.channel
        }
    }
// snippet-end
}

// MARK: - Plugins

package func s3CacheStoreExample(configuration: inout ImageManager.Configuration, dir: URL) throws {
// snippet-begin: S3CacheStore
    let s3 = S3Configuration(region: "eu-west-1", credentials: try S3Credentials.fromEnvironment())
    let bucket = try S3CacheStore(url: "s3://thumbs-cache/v1/", configuration: s3,
                                  limits: CacheLimits(maxAge: .seconds(30 * 86_400)))
    configuration.store = TieredCacheStore(local: try LMDBCacheStore(directory: dir), shared: bucket)
// snippet-end
}

package func s3ConfigurationExample() throws {
// snippet-begin: S3Configuration
    var s3 = S3Configuration(region: "eu-west-1")              // AWS, virtual-hosted URLs
    s3.credentials = try S3Credentials.fromEnvironment()       // AWS_ACCESS_KEY_ID, …
    let minio = S3Configuration(endpoint: URL(string: "http://minio.internal:9000")!, region: "us-east-1")
// snippet-end
    _ = (s3, minio)
}

package func s3LoaderExample(configuration: inout ImageManager.Configuration, manager: ImageManager) async throws {
// snippet-begin: S3Loader
    let s3 = S3Configuration(region: "eu-west-1", credentials: try S3Credentials.fromEnvironment())
    configuration.loaders.registerS3(try S3Loader(configuration: s3))
    let image = try await manager.loadImage(with: URL(string: "s3://photos/2026/cat.jpg")!)
// snippet-end
    _ = image
}

package func turboJPEGExample(configuration: inout ImageManager.Configuration) {
// snippet-begin: TurboJPEGCoder
    configuration.coders.registerVips()
    configuration.coders.registerTurboJPEG()  // asked first, for JPEGs
// snippet-end
}

package func scaledDecodeReuseExample() {
// snippet-begin: ScaledDecodeReuse
    let coder = TurboJPEGCoder(fallback: nil, reuse: ScaledDecodeReuse(maxBytes: 8 << 20, window: .seconds(10)))
// snippet-end
    _ = coder
}

package func lmdbExample(configuration: inout ImageManager.Configuration) throws {
// snippet-begin: LMDBCacheStore
    let store = try LMDBCacheStore(directory: URL(fileURLWithPath: "/var/cache/webimage"))
    configuration.store = store
// snippet-end
}

package func vipsCoderExample(configuration: inout ImageManager.Configuration) {
// snippet-begin: VipsImageCoder
    configuration.coders.register(VipsImageCoder(), name: "vips")
// snippet-end
}

package func brightnessExample() {
// snippet-begin: Brightness
    let brighter = ImageTransformers.Brightness(1.2)
// snippet-end
    _ = brighter
}

package func pixelateExample() {
// snippet-begin: Pixelate
    let blocks = ImageTransformers.Pixelate(size: 12)
// snippet-end
    _ = blocks
}

package func textWatermarkExample() throws {
// snippet-begin: TextWatermark
    let mark = try ImageTransformers.TextWatermark("© Example", size: 24, colour: .white)
// snippet-end
    _ = mark
}

package func transformersExample() {
// snippet-begin: ImageTransformers
    let context = ImageContext(transformer: .pipeline([
        ImageTransformers.Resize(PixelSize(256), mode: .fill),
        ImageTransformers.RoundCorners(radius: 16),
    ]))
// snippet-end
    _ = context
}

package func redisExample(configuration: inout ImageManager.Configuration, dir: URL) throws {
// snippet-begin: RedisCacheStore
    let shared = try RedisCacheStore(configuration: .init(
        urls: ["redis://:secret@cache-1:6379", "redis://cache-2:6379"],   // seeds of a cluster
        prefix: "thumbs:"))
    configuration.store = TieredCacheStore(local: try LMDBCacheStore(directory: dir), shared: shared)
// snippet-end
}

package func curlExample(configuration: inout ImageManager.Configuration) {
// snippet-begin: CurlLoader
    let loader = CurlLoader(configuration: .init(maxConcurrentDownloads: 6))
    configuration.loaders.register(loader, name: "curl", schemes: ["http", "https"])
// snippet-end
}

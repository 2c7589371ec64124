// The ```swift blocks of README.md, the guides in docs/ and the DocC catalogues'
// articles, compiled with the tests (generated once from the pages, then kept by
// hand). DocSnippetsTests checks that each block is a region of a file of
// Tests/DocSnippets, character for character, or one it names as not compilable
// here (a manifest, another framework's code). A region that starts with imports
// is at file scope; the function that holds the rest begins in its paused lines.

import Foundation
import Testing
import WebImage
import WebImageConfiguration
import WebImageCurl
import WebImageKit
import WebImageLMDB
import WebImageRedis
import WebImageS3
import WebImageTesting
import WebImageTurboJPEG
import WebImageVips

/// docs/coder.md's and WebImage.md's own coder.
private struct MyCoder: ImageCoder {
    func canDecode(_ data: Data) -> Bool { false }
    func decode(_ data: Data, options: DecodeOptions) throws -> Image { throw WebImageError(.unsupportedFormat, "mine") }
    func canEncode(_ format: ImageFormat) -> Bool { false }
    func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data { throw WebImageError(.unsupportedFormat, "mine") }
}

// README.md
// snippet-begin: readme-configuration
import WebImage
import WebImageCurl
import WebImageLMDB
import WebImageTurboJPEG
import WebImageVips
// snippet-pause

package func readmeConfiguration() async throws {
// snippet-resume

    var configuration = ImageManager.Configuration()
    configuration.store = try LMDBCacheStore(directory: URL(fileURLWithPath: "/var/cache/images"),
                                             limits: CacheLimits(maxAge: .seconds(7 * 86_400), maxSize: 1 << 30))
    configuration.memoryCache = MemoryImageCache(limits: .init(costLimit: 512 << 20))
    configuration.coders.registerVips()                      // register your own coder after: it is asked first
    configuration.coders.registerTurboJPEG()                 // JPEG thumbnails on libjpeg-turbo
    configuration.loaders.registerCurl(CurlLoader(configuration: .init(blockPrivateAddresses: true)))
    configuration.cacheKeyFilter = .removingQueryItems(["X-Amz-Signature", "X-Amz-Date"])
    let manager = ImageManager(configuration: configuration)

    let result = try await manager.loadImage(
        with: URL(string: "https://example.com/photo@2x.jpg")!,
        context: ImageContext(thumbnailPixelSize: PixelSize(256)))
    print(result.cacheType, result.image!.pixelSize, result.image!.scale)   // none 256x171 2.0
// snippet-end
}

// README.md
// snippet-begin: readme-config-layers
import WebImageKit
// snippet-pause

package func readmeConfigLayers() async throws {
// snippet-resume
    let config = try await ConfigLayers.reader(flags: [:], file: "/etc/webimage.json")  // + WEBIMAGE_* variables
    let manager = try ConfigLayers.manager(config: config)
// snippet-end
    _ = manager
}

// docs/coder.md
// snippet-begin: coder-registration
import WebImageVips
// snippet-pause

package func coderRegistration(configuration: inout ImageManager.Configuration) {
// snippet-resume
    configuration.coders.registerVips()                    // VipsImageCoder under "vips"
    configuration.coders.register(MyCoder(), name: "mine")  // asked before vips
// snippet-end
}

// docs/loading.md
// snippet-begin: loading-curl
import WebImageCurl
// snippet-pause

package func loadingCurl(configuration: inout ImageManager.Configuration) {
// snippet-resume
    configuration.loaders.registerCurl(CurlLoader(configuration: .init(blockPrivateAddresses: true)))
// snippet-end
}

// docs/object-storage.md
// snippet-begin: object-storage-bucket
import WebImageS3
// snippet-pause

package func objectStorageBucket(configuration: inout ImageManager.Configuration, httpLoader: CurlLoader, dir: URL) throws {
// snippet-resume

    let s3 = S3Configuration(region: "eu-west-1", credentials: try S3Credentials.fromEnvironment())
    configuration.loaders.registerS3(try S3Loader(configuration: s3, curl: httpLoader))   // share the http loader's limits and guard
    let bucket = try S3CacheStore(url: "s3://thumbs-cache/v1/", configuration: s3,
                                  limits: CacheLimits(maxAge: .seconds(30 * 86_400)))
    configuration.store = TieredCacheStore(local: try LMDBCacheStore(directory: dir), shared: bucket)
// snippet-end
}

// docs/object-storage.md
package func objectStorageThreeTiers(configuration: inout ImageManager.Configuration, dir: URL, redis: RedisCacheStore, bucket: S3CacheStore) throws {
// snippet-begin: object-storage-three-tiers
    let hot = TieredCacheStore(local: try LMDBCacheStore(directory: dir), shared: redis)
    configuration.store = TieredCacheStore(local: hot, shared: bucket)
// snippet-end
}

// Sources/WebImage/WebImage.docc/Configuration.md
// snippet-begin: docc-configuration
import WebImageKit
// snippet-pause

package func doccConfiguration() async throws {
// snippet-resume

    let config = try await ConfigLayers.reader(flags: [:], file: "/etc/webimage.json",
                                               defaults: ["loader.blockPrivateAddresses": "true"])
    let manager = try ConfigLayers.manager(config: config)
// snippet-end
    _ = manager
}

// Sources/WebImage/WebImage.docc/GettingStarted.md
// snippet-begin: docc-getting-started-manager
import WebImage
import WebImageVips
import WebImageLMDB
import WebImageCurl
// snippet-pause

package func doccGettingStartedManager() throws {
// snippet-resume

    var configuration = ImageManager.Configuration()
    configuration.store = try LMDBCacheStore(directory: URL(fileURLWithPath: "/var/cache/images"))
    configuration.coders.registerVips()
    configuration.loaders.registerCurl(CurlLoader(configuration: .init(blockPrivateAddresses: true)))
    let manager = ImageManager(configuration: configuration)
// snippet-end
    _ = manager
}

// Sources/WebImage/WebImage.docc/GettingStarted.md
package func doccGettingStartedLoad(manager: ImageManager) async throws {
// snippet-begin: docc-getting-started-load
    let result = try await manager.loadImage(
        with: URL(string: "https://example.com/photo@2x.jpg")!,
        context: ImageContext(thumbnailPixelSize: PixelSize(256)))
    print(result.cacheType)          // .none the first time, .memory after
    print(result.image!.pixelSize)   // at most 256x256, upright
    print(result.image!.scale)       // 2, from "@2x"
// snippet-end
}

// Sources/WebImage/WebImage.docc/WebImage.md
package func doccOverview(url: URL) async throws {
// snippet-begin: docc-overview
    var configuration = ImageManager.Configuration()
    configuration.store = try FileCacheStore(directory: URL(fileURLWithPath: "/var/cache/images"))
    configuration.coders.register(MyCoder(), name: "mine")
    let manager = ImageManager(configuration: configuration)
    let result = try await manager.loadImage(with: url, context: ImageContext(thumbnailPixelSize: PixelSize(256)))
// snippet-end
    _ = result
}

// Plugins/WebImageCurl/WebImageCurl.docc/WebImageCurl.md
package func doccCurl(configuration: inout ImageManager.Configuration) {
// snippet-begin: docc-curl
    configuration.loaders.registerCurl(CurlLoader(configuration: .init(blockPrivateAddresses: true)))
// snippet-end
}

// Plugins/WebImageLMDB/WebImageLMDB.docc/WebImageLMDB.md
package func doccLMDB(configuration: inout ImageManager.Configuration) throws {
// snippet-begin: docc-lmdb
    configuration.store = try LMDBCacheStore(
        directory: URL(fileURLWithPath: "/var/cache/webimage"),
        limits: CacheLimits(maxAge: .seconds(14 * 86_400), maxSize: 4 << 30))
// snippet-end
}

// Plugins/WebImageRedis/WebImageRedis.docc/WebImageRedis.md
package func doccRedis(configuration: inout ImageManager.Configuration, dir: URL) throws {
// snippet-begin: docc-redis
    let shared = try RedisCacheStore(
        configuration: .init(urls: ["redis://:secret@cache.internal:6379"], prefix: "thumbs:"),
        limits: CacheLimits(maxAge: .seconds(7 * 86_400)))   // the sliding TTL
    configuration.store = TieredCacheStore(local: try LMDBCacheStore(directory: dir), shared: shared)
// snippet-end
}

// Plugins/WebImageS3/WebImageS3.docc/WebImageS3.md
package func doccS3(configuration: inout ImageManager.Configuration, httpLoader: CurlLoader, dir: URL) throws {
// snippet-begin: docc-s3
    let s3 = S3Configuration(region: "eu-west-1", credentials: try S3Credentials.fromEnvironment())
    configuration.loaders.registerS3(try S3Loader(configuration: s3, curl: httpLoader))
    let bucket = try S3CacheStore(url: "s3://thumbs-cache/v1/", configuration: s3)
    configuration.store = TieredCacheStore(local: try LMDBCacheStore(directory: dir), shared: bucket)
// snippet-end
}

// Plugins/WebImageTurboJPEG/WebImageTurboJPEG.docc/WebImageTurboJPEG.md
// snippet-begin: docc-turbojpeg
import WebImageTurboJPEG
import WebImageVips
// snippet-pause

package func doccTurboJPEG(configuration: inout ImageManager.Configuration) {
// snippet-resume

    configuration.coders.registerVips()        // everything, and JPEG encoding
    configuration.coders.registerTurboJPEG()   // asked first: JPEG thumbnails
// snippet-end
}

// Plugins/WebImageVips/WebImageVips.docc/WebImageVips.md
package func doccVips(configuration: inout ImageManager.Configuration) {
// snippet-begin: docc-vips
    configuration.coders.registerVips()
    let context = ImageContext(thumbnailPixelSize: PixelSize(256),
                               transformer: ImageTransformers.RoundCorners(radius: 12))
// snippet-end
    _ = context
}

// swift-tools-version:6.2
import PackageDescription

/// Upcoming features on every target, as swift-configuration does: explicit
/// existentials, imports that must be visible where they are used, and imports
/// that are internal unless a public signature needs them.
let upcoming: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

#if canImport(Glibc)
import Glibc
/// DT_RELR needs glibc 2.36 or later (Debian 12, Ubuntu 22.10); an older loader
/// refuses the binary, so the flag is only passed where the build machine has it.
let glibcReadsPackedRelocations: Bool = {
    var buffer = [CChar](repeating: 0, count: 64)
    guard confstr(Int32(_CS_GNU_LIBC_VERSION), &buffer, buffer.count) > 0 else { return false }
    // "glibc 2.36"
    let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let version = text.split(separator: " ").last.map { $0.split(separator: ".").compactMap { Int($0) } } ?? []
    return version.count >= 2 && (version[0], version[1]) >= (2, 36)
}()
#else
let glibcReadsPackedRelocations = false
#endif

/// How the release `webimage` tool is linked on Linux, for its memory (measured in
/// docs/performance.md, "How the tool is linked"), with the toolchain's lld:
/// - Swift's runtime and Foundation statically (with the libraries the static
///   Foundation's modules would name, had every module been compiled for it), so
///   only the code a run executes is paged in and nothing is bound at start;
/// - the functions a thumbnail batch and the cache job execute placed together
///   (`Linking/webimage.order`, written by `make link-order`), so the pages the
///   kernel maps 64 KiB around each one touched (fault-around) are mostly theirs,
///   not the rest of 25 MB of code;
/// - no export of the tool's own symbols (nothing loads against it);
/// - relative relocations packed (DT_RELR) where the C library reads them
///   (glibc 2.36), so start-up neither reads 2.6 MB of relocation records nor
///   keeps them.
/// Release only: debug builds, where the tests run, link the usual way (a release
/// build of the tests would carry these flags into the bundles that link the
/// tool's module, next to XCTest's dynamic Foundation: not supported).
let releaseToolLinking: [LinkerSetting] = {
    var flags = ["-static-stdlib", "-l_FoundationICU", "-lCoreFoundation", "-l_FoundationCShims", "-l_FoundationCollections",
                 "-use-ld=lld", "-Xlinker", "--no-export-dynamic",
                 "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Linking/webimage.order",
                 "-Xlinker", "--no-warn-symbol-ordering"]
    if glibcReadsPackedRelocations {
        flags += ["-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]
    }
    return [.unsafeFlags(flags, .when(platforms: [.linux], configuration: .release))]
}()

/// How libvips, libavif and libcurl are linked. On x86-64 Linux each is loaded on
/// its first call, not at start: linked the usual way, the dynamic loader maps
/// and relocates them and the 130 libraries they need at every start (about 30
/// ms of CPU and 25 MiB resident, docs/performance.md "How the tool is linked"),
/// which JPEG work, files and cache hits never use.
/// Sources/CWebImageSystem/include/CWILazyLibrary.h says how: each function the
/// package calls (Plugins/CVipsOps/lazy_vips_symbols.h and lazy_avif_symbols.h,
/// Plugins/CCurlOps/lazy_curl_symbols.h) is a jump that loads the library
/// first. Elsewhere (no such code written) they are linked.
#if arch(x86_64) && os(Linux)
let librariesLoadedLazily = true
#else
let librariesLoadedLazily = false
#endif
let vipsLinking: (c: [CSetting], linker: [LinkerSetting]) = librariesLoadedLazily
    ? ([.define("CVIPSOPS_LAZY_LOADING")], [.linkedLibrary("dl")])
    : ([], [.linkedLibrary("vips"), .linkedLibrary("avif")])
let curlLinking: (c: [CSetting], linker: [LinkerSetting]) = librariesLoadedLazily
    ? ([.define("CCURLOPS_LAZY_CURL")], [.linkedLibrary("dl")])
    : ([], [.linkedLibrary("curl")])

/// Whether the `webimage` tool is built with `serve`: yes, unless the environment
/// sets `WEBIMAGE_TOOL_WITHOUT_SERVE` (`make demo` does). The server's Hummingbird,
/// SwiftNIO and Prometheus are about a third of a first build of the tool, and the
/// demo does not serve. Only the `webimage` target's settings change, so building
/// the full tool afterwards (`swift build --product webimage`) recompiles that one
/// module, not the package; its `serve` without them says how to get it.
let toolServes = Context.environment["WEBIMAGE_TOOL_WITHOUT_SERVE"] == nil

let package = Package(
    name: "swift-web-image",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "WebImage", targets: ["WebImage"]),
        .library(name: "WebImageTesting", targets: ["WebImageTesting"]),
        .library(name: "WebImageLMDB", targets: ["WebImageLMDB"]),
        .library(name: "WebImageVips", targets: ["WebImageVips"]),
        .library(name: "WebImageCurl", targets: ["WebImageCurl"]),
        .library(name: "WebImageRedis", targets: ["WebImageRedis"]),
        .library(name: "WebImageS3", targets: ["WebImageS3"]),
        .library(name: "WebImageTurboJPEG", targets: ["WebImageTurboJPEG"]),
        .library(name: "WebImageConfiguration", targets: ["WebImageConfiguration"]),
        .library(name: "WebImageKit", targets: ["WebImageKit"]),
        .library(name: "WebImageSamples", targets: ["WebImageSamples"]),
        .library(name: "WebImageHTTP", targets: ["WebImageHTTP"]),
        .library(name: "WebImageHummingbird", targets: ["WebImageHummingbird"]),
        .executable(name: "webimage", targets: ["webimage"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        // ImageManagerService (WebImageHTTP); already in the graph through swift-configuration.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Spans per stage of a load (the API only: the application picks an exporter).
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Deque: work queues that release each item as it is taken.
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        // `swift package generate-documentation` (DocC catalogs in each public module).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
        // WebImageHTTP: request and response types with no server framework.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // WebImageHummingbird and `webimage serve`: the server, and /metrics. One trait,
        // not its two defaults: SwiftPM 6.3 writes a package's trait flags in a random
        // order each time it reads the manifests again (another environment, another
        // root package), and a new order recompiles Hummingbird, about 45 s in
        // release. Its other default (ConfigurationSupport: an init from a
        // ConfigReader) is unused here; an app that wants it asks for it, and gets it.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: ["FullFoundation"]),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Tests only: the real HTTP server the curl loader is tested against.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // NIOHTTPTypes only (Hummingbird depends on it already): the memory-hit channel handler's parts.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
    ],
    targets: [
        // Core: contracts, registries, the manager, memory cache, file store, file loader.
        // No image or network C library: its only C is CWebImageSystem, system-call shims
        // and XXH3 (the system's header-only xxhash.h compiled in: nothing to link).
        // A user who wants only these links `WebImage` alone.
        .target(
            name: "WebImage",
            dependencies: [
                "CWebImageSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                // Typed, scoped settings for the plugins' factories (ConfigValues).
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            swiftSettings: upcoming
        ),
        // The few libc calls and fields Swift's Glibc module does not declare (preadv2,
        // Linux's tcp_info).
        .target(name: "CWebImageSystem"),
        // SHA-256 and HMAC-SHA256 from the system's libcrypto (OpenSSL 3, which libcurl
        // links anyway): the URL signer and S3's payload digests. Not swift-crypto,
        // whose BoringSSL was 460 of the 1000 compile steps of a first build.
        .target(name: "CWebImageCrypto", linkerSettings: [.linkedLibrary("crypto")]),
        // Conformance suites for plugin authors; framework-agnostic (they throw).
        .target(name: "WebImageTesting", dependencies: ["WebImage"], swiftSettings: upcoming),

        // LMDB cache store, over the system liblmdb.
        .systemLibrary(
            name: "CLMDB",
            path: "Plugins/CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .target(name: "WebImageLMDB", dependencies: ["WebImage", "CLMDB", .product(name: "Logging", package: "swift-log"),
                                              .product(name: "Metrics", package: "swift-metrics")],
                path: "Plugins/WebImageLMDB", swiftSettings: upcoming),

        .testTarget(
            name: "WebImageTests",
            dependencies: ["WebImage", "WebImageTesting", "WebImageTestSupport", .product(name: "CoreMetrics", package: "swift-metrics")],
            swiftSettings: upcoming
        ),
        // libvips coders and transformers; the C shim wraps the variadic calls.
        .systemLibrary(
            name: "CVips",
            path: "Plugins/CVips",
            // vips.h needs only the GLib headers; pkg-config for "vips" itself adds
            // -pthread (from its dependencies), which SwiftPM warns about and drops.
            pkgConfig: "gobject-2.0",
            providers: [.apt(["libvips-dev", "libglib2.0-dev"])]
        ),
        // Our C over libvips (colour, resampling and alpha policy; test fixtures).
        // Our C over libvips, and over libavif (Debian's libavif-dev) for AVIF transforms and sequences.
        .target(name: "CVipsOps", dependencies: ["CVips", "CWebImageSystem"], path: "Plugins/CVipsOps", cSettings: vipsLinking.c,
                linkerSettings: vipsLinking.linker),
        .target(name: "WebImageVips", dependencies: ["WebImage", "CVips", "CVipsOps", .product(name: "Logging", package: "swift-log")],
                path: "Plugins/WebImageVips", swiftSettings: upcoming),

        // JPEG thumbnails on libjpeg-turbo's scaled decode, finished by our C (small
        // results) or by libvips.
        .systemLibrary(
            name: "CJPEGTurbo",
            path: "Plugins/CJPEGTurbo",
            // No pkgConfig: jpeglib.h and libjpeg are on the default paths.
            providers: [.apt(["libjpeg62-turbo-dev"])]
        ),
        // Our C over libjpeg-turbo, compiled (and optimised) by SwiftPM: every libjpeg
        // call inside a setjmp, the EXIF and ICC readers, the DC-only decoders and scan
        // filter, the direct path's resample, orientation and lcms2 colour
        // conversion, and its WebP writer (lcms2 and libwebp from liblcms2-dev and
        // libwebp-dev, which libvips links anyway).
        .target(name: "CJPEGTurboOps", dependencies: ["CJPEGTurbo"], path: "Plugins/CJPEGTurboOps",
                linkerSettings: [.linkedLibrary("lcms2"), .linkedLibrary("webp"), .linkedLibrary("m")]),
        .target(name: "WebImageTurboJPEG", dependencies: ["WebImage", "WebImageVips", "CJPEGTurbo", "CJPEGTurboOps"], path: "Plugins/WebImageTurboJPEG", swiftSettings: upcoming),

        // libcurl loader; the C shim has typed setters for curl_easy_setopt.
        .systemLibrary(
            name: "CCurl",
            path: "Plugins/CCurl",
            // pkg-config would add -lcurl, which lazy loading leaves out (its
            // headers are on the default paths).
            pkgConfig: librariesLoadedLazily ? nil : "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // libcurl loaded on its first call (lazy_curl.S).
        .target(name: "CCurlOps", dependencies: ["CCurl", "CWebImageSystem"], path: "Plugins/CCurlOps", cSettings: curlLinking.c,
                linkerSettings: curlLinking.linker),
        .target(name: "WebImageCurl", dependencies: ["WebImage", "CCurl", "CCurlOps", .product(name: "DequeModule", package: "swift-collections")], path: "Plugins/WebImageCurl", swiftSettings: upcoming),

        // Redis (standalone or Cluster) store for the shared tier, over the system hiredis.
        .systemLibrary(
            name: "CHiredis",
            path: "Plugins/CHiredis",
            // No pkgConfig: hiredis.pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM
            // warns about and drops; the header and library are on the default paths.
            providers: [.apt(["libhiredis-dev"])]
        ),
        .target(name: "WebImageRedis", dependencies: ["WebImage", "CHiredis"], path: "Plugins/WebImageRedis", swiftSettings: upcoming),

        // s3:// loading and a bucket as the shared tier, signed (SigV4) by libcurl
        // over the curl loader's transfers; SHA-256 of uploads from libcrypto.
        .target(name: "WebImageS3", dependencies: ["WebImage", "WebImageCurl", "CWebImageCrypto"],
                path: "Plugins/WebImageS3", swiftSettings: upcoming),

        // Pipelines built from configuration (swift-configuration), by plugin name.
        .target(
            name: "WebImageConfiguration",
            dependencies: ["WebImage", .product(name: "Configuration", package: "swift-configuration")],
            swiftSettings: upcoming
        ),
        // The image service as a value: request in, response out, no server framework.
        .target(
            name: "WebImageHTTP",
            dependencies: ["WebImage", "WebImageConfiguration",
                           "CWebImageCrypto",
                           .product(name: "HTTPTypes", package: "swift-http-types"),
                           .product(name: "Tracing", package: "swift-distributed-tracing"),
                           .product(name: "Configuration", package: "swift-configuration"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "Metrics", package: "swift-metrics"),
                           // ImageManagerService
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle")],
            swiftSettings: upcoming
        ),
        // The endpoint in a Hummingbird 2 router.
        .target(
            name: "WebImageHummingbird",
            dependencies: ["WebImageHTTP", "WebImage", "CWebImageSystem",
                           .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "HummingbirdCore", package: "hummingbird"),
                           .product(name: "HTTPTypes", package: "swift-http-types"),
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "NIOHTTP1", package: "swift-nio"),
                           .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                           .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "Metrics", package: "swift-metrics"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle")],
            swiftSettings: upcoming
        ),
        // Everything together: the standard plugin catalog.
        .target(
            name: "WebImageKit",
            dependencies: ["WebImageConfiguration", "WebImageVips", "WebImageTurboJPEG", "WebImageLMDB", "WebImageCurl", "WebImageRedis", "WebImageS3", "WebImageHTTP",
                           .product(name: "Configuration", package: "swift-configuration"),
                           .product(name: "SystemPackage", package: "swift-system"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: upcoming
        ),
        // Demo pixels (photo-like JPEGs, a PNG with alpha, an animated GIF, oriented
        // JPEGs) made with libvips, for the tool's `samples`, examples, tests and benchmarks.
        .target(name: "WebImageSamples", dependencies: ["WebImage", "WebImageVips"], swiftSettings: upcoming),
        .executableTarget(
            name: "webimage",
            dependencies: ["WebImageKit", "WebImageSamples", "WebImageVips", "WebImageLMDB", "WebImageHTTP",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Configuration", package: "swift-configuration"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "Metrics", package: "swift-metrics"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle")]
                + (toolServes ? ["WebImageHummingbird", .product(name: "Prometheus", package: "swift-prometheus")] : []),
            swiftSettings: upcoming + (toolServes ? [.define("WEBIMAGE_SERVE")] : []),
            linkerSettings: releaseToolLinking
        ),

        .executableTarget(
            name: "webimage-lmdb-helper",
            dependencies: ["WebImage", "WebImageLMDB"],
            path: "Tests/LMDBHelper",
            swiftSettings: upcoming
        ),
        // Tests only: docs/serving.md's Swift snippets, compiled (DocSnippetsTests
        // checks that the page shows them as they are here).
        .target(
            name: "WebImageDocSnippets",
            dependencies: ["WebImageKit", "WebImageHTTP", "WebImageHummingbird", "WebImageConfiguration", "WebImageTesting",
                           "WebImageLMDB", "WebImageVips", "WebImageTurboJPEG", "WebImageCurl", "WebImageRedis", "WebImageS3",
                           .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "HTTPTypes", package: "swift-http-types"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "Configuration", package: "swift-configuration"),
                           .product(name: "Metrics", package: "swift-metrics"),
                           .product(name: "Prometheus", package: "swift-prometheus"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            path: "Tests/DocSnippets"  // a new user's settings: Swift 6, no upcoming features
        ),
        .testTarget(
            name: "WebImageHTTPTests",
            dependencies: ["WebImageHTTP", "WebImageHummingbird", "WebImageDocSnippets", "WebImageKit", "WebImageConfiguration", "WebImageSamples", "WebImage", "WebImageTestSupport", "WebImageCurl",
                           .product(name: "HTTPTypes", package: "swift-http-types"),
                           .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "NIOEmbedded", package: "swift-nio"),
                           .product(name: "NIOHTTP1", package: "swift-nio"),
                           .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                           .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                           .product(name: "Tracing", package: "swift-distributed-tracing"),
                           .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                           .product(name: "Configuration", package: "swift-configuration")],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "WebImageVipsTests",
            dependencies: ["WebImageVips", "WebImageTurboJPEG", "CVips", "CVipsOps", "CJPEGTurboOps", "WebImageTesting", "WebImageTestSupport",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: upcoming
        ),
        // Tests only: a real HTTP server on loopback with misbehaving routes, and a
        // runner for the `webimage` tool as a child process (exit status, output, peak RSS).
        .target(
            name: "WebImageTestSupport",
            dependencies: [
                "WebImage",  // its Lock, the package's one lock type
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "WebImageCurlTests",
            dependencies: ["WebImageCurl", "WebImageTesting", "WebImageTestSupport", "webimage"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "WebImageKitTests",
            dependencies: ["WebImageKit", "WebImageSamples", "WebImageConfiguration", "WebImageLMDB", "WebImageVips", "WebImageTurboJPEG", "WebImageCurl", "webimage", "WebImageTestSupport", "WebImageHTTP",
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"), .product(name: "Logging", package: "swift-log"),
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Configuration", package: "swift-configuration")],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "WebImageRedisTests",
            dependencies: ["WebImageRedis", "WebImageTesting", "WebImageTestSupport", "WebImageKit", "WebImageSamples", "WebImageConfiguration",
                           .product(name: "Configuration", package: "swift-configuration")],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "WebImageS3Tests",
            dependencies: ["WebImageS3", "WebImageCurl", "WebImageTesting", "WebImageTestSupport", "WebImageKit", "WebImageSamples", "WebImageConfiguration",
                           "WebImageLMDB", "WebImageHTTP", "webimage", .product(name: "Configuration", package: "swift-configuration"),
                           "CWebImageCrypto", .product(name: "HTTPTypes", package: "swift-http-types")],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "WebImageLMDBTests",
            dependencies: ["WebImageLMDB", "WebImageTesting", "WebImageTestSupport", "webimage-lmdb-helper"],
            swiftSettings: upcoming
        ),
    ],
    swiftLanguageModes: [.v6]
)

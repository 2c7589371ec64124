// swift-tools-version:6.2
import PackageDescription

// Measurements of swift-web-image, kept apart from the library so that its users
// never build them. `make bench` (root Makefile) runs the comparisons with peers.
let package = Package(
    name: "swift-web-image-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-web-image", path: ".."),
        // ordo-one's package-benchmark, with its malloc interposer for allocation counts
        // (the runtime interposer trait is left off: its package is not needed on 6.3).
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        // The floor of compare.py server's warm path: a bare Hummingbird route.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: ["FullFoundation"]),  // as the root declares it (Package.swift says why)
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        // Runs one scenario through the package and prints its timings as JSON, so
        // that compare/compare.py can interleave it with peers in one run.
        .executableTarget(
            name: "webimage-bench",
            dependencies: [
                .product(name: "WebImage", package: "swift-web-image"),
                .product(name: "WebImageLMDB", package: "swift-web-image"),
                .product(name: "WebImageCurl", package: "swift-web-image"),
                .product(name: "WebImageRedis", package: "swift-web-image"),
                .product(name: "WebImageS3", package: "swift-web-image"),
                .product(name: "WebImageVips", package: "swift-web-image"),
                .product(name: "WebImageTurboJPEG", package: "swift-web-image"),
                // endpoint-hit: the service's own work per warm request, without a server.
                .product(name: "WebImageHTTP", package: "swift-web-image"),
                .product(name: "WebImageKit", package: "swift-web-image"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // A Hummingbird route answering the same bytes from a dictionary: the floor a
        // service on Hummingbird can reach (compare.py server).
        .executableTarget(
            name: "hb-floor",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The package-benchmark suite: `swift package benchmark` in this directory.
        .executableTarget(
            name: "WebImageBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "WebImage", package: "swift-web-image"),
                .product(name: "WebImageKit", package: "swift-web-image"),
                .product(name: "WebImageSamples", package: "swift-web-image"),
                .product(name: "WebImageLMDB", package: "swift-web-image"),
                .product(name: "WebImageVips", package: "swift-web-image"),
            ],
            path: "Benchmarks/WebImageBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

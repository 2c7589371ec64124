// swift-tools-version:6.2
import PackageDescription

// A thumbnail service over HTTP: Hummingbird in front of an ImageManager, with a
// gallery page, Prometheus metrics and graceful shutdown. Depends on
// swift-web-image by path, as an application would by URL.
let package = Package(
    name: "ThumbnailServer",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ThumbnailService", targets: ["ThumbnailService"]),
        .executable(name: "ThumbnailServer", targets: ["ThumbnailServer"]),
    ],
    dependencies: [
        .package(name: "swift-web-image", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: ["FullFoundation"]),  // as the root declares it (Package.swift says why)
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        .target(
            name: "ThumbnailService",
            dependencies: [
                .product(name: "WebImage", package: "swift-web-image"),
                .product(name: "WebImageKit", package: "swift-web-image"),
                .product(name: "WebImageSamples", package: "swift-web-image"),
                .product(name: "WebImageConfiguration", package: "swift-web-image"),
                .product(name: "WebImageVips", package: "swift-web-image"),
                .product(name: "WebImageHTTP", package: "swift-web-image"),
                .product(name: "WebImageHummingbird", package: "swift-web-image"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "ThumbnailServer",
            dependencies: [
                "ThumbnailService",
                .product(name: "WebImageKit", package: "swift-web-image"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ThumbnailServiceTests",
            dependencies: [
                "ThumbnailService",
                .product(name: "WebImage", package: "swift-web-image"),
                .product(name: "WebImageKit", package: "swift-web-image"),
                .product(name: "WebImageSamples", package: "swift-web-image"),
                .product(name: "WebImageConfiguration", package: "swift-web-image"),
                .product(name: "WebImageVips", package: "swift-web-image"),
                .product(name: "WebImageHTTP", package: "swift-web-image"),
                .product(name: "WebImageRedis", package: "swift-web-image"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

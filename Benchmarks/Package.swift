// swift-tools-version:6.1
import PackageDescription

// Measurements of swift-web-image, kept apart from the library so that its users
// never build them. `make bench` (root Makefile) runs the comparisons with peers.
let package = Package(
    name: "swift-web-image-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-web-image", path: ".."),
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
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

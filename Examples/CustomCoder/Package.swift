// swift-tools-version:6.2
import PackageDescription

// A coder of your own, written in pure Swift, registered ahead of libvips.
// Depends on swift-web-image by path, as an application would by URL.
let package = Package(
    name: "CustomCoder",
    platforms: [.macOS(.v15)],
    products: [.library(name: "PPMCoder", targets: ["PPMCoder"])],
    dependencies: [
        .package(name: "swift-web-image", path: "../.."),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
    ],
    targets: [
        .target(name: "PPMCoder", dependencies: [.product(name: "WebImage", package: "swift-web-image")]),
        .testTarget(
            name: "PPMCoderTests",
            dependencies: [
                "PPMCoder",
                .product(name: "WebImageTesting", package: "swift-web-image"),
                .product(name: "WebImageKit", package: "swift-web-image"),
                .product(name: "WebImageConfiguration", package: "swift-web-image"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

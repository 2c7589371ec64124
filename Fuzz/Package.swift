// swift-tools-version:6.2
import PackageDescription

// libFuzzer targets over the package's parsers and decoders. Built apart from the
// package (its executable's main comes from libFuzzer), with coverage and
// AddressSanitizer: `make fuzz` (all targets, bounded time) or, by hand,
//   swift build --package-path Fuzz --scratch-path .build-fuzz --sanitize fuzzer --sanitize address \
//     -Xswiftc -sanitize=fuzzer,address
//   FUZZ_TARGET=sniff .build-fuzz/debug/webimage-fuzz Fuzz/corpus/sniff -max_total_time=60
// docs/testing.md lists the targets and what was found.
let package = Package(
    name: "webimage-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "swift-web-image", path: "..")],
    targets: [
        .executableTarget(
            name: "webimage-fuzz",
            dependencies: [
                .product(name: "WebImage", package: "swift-web-image"),
                .product(name: "WebImageVips", package: "swift-web-image"),
                .product(name: "WebImageTurboJPEG", package: "swift-web-image"),
                .product(name: "WebImageCurl", package: "swift-web-image"),
                .product(name: "WebImageS3", package: "swift-web-image"),
                .product(name: "WebImageConfiguration", package: "swift-web-image"),
                .product(name: "WebImageKit", package: "swift-web-image"),
                .product(name: "WebImageSamples", package: "swift-web-image"),
            ],
            // libFuzzer supplies main; this module only defines LLVMFuzzerTestOneInput.
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
    ],
    swiftLanguageModes: [.v6]
)

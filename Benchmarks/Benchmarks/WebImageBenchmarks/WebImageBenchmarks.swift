// The package-benchmark suite: `swift package --package-path Benchmarks benchmark`
// (or `make bench-suite`). Each benchmark reports wall-clock time, mallocs and peak
// resident memory; compare runs with `benchmark baseline update` / `compare`.
import Benchmark
import Foundation
import Synchronization
import WebImage
import WebImageKit
import WebImageLMDB
import WebImageVips
import WebImageSamples

/// Inputs made once with libvips, so the suite needs no files.
struct Fixtures: Sendable {
    let coder = VipsImageCoder()
    let jpeg: Data   // 2400x1600 photo-like
    let png: Data    // 1024x1024 with alpha
    let gif: Data    // 256x256, 8 frames
    let webp: Data   // 2400x1600
    let photo: Image // decoded jpeg, for encoding
    let directory: URL

    init() throws {
        let size = PixelSize(width: 2400, height: 1600)
        let pixels = SampleImages.landscape(size, seed: 4)
        let image = Image(pixelSize: size, storage: pixels)
        jpeg = try coder.encode(image, as: .jpeg, options: EncodeOptions(quality: 85))
        webp = try coder.encode(image, as: .webp, options: EncodeOptions(quality: 80))
        let disc = SampleImages.disc(PixelSize(1024))
        png = try coder.encode(Image(pixelSize: disc.size, hasAlpha: true, storage: disc), as: .png, options: EncodeOptions())
        var bytes: [UInt8] = []
        for frame in 0..<8 { bytes += SampleImages.landscape(PixelSize(256), seed: frame).bytes }
        let frames = PixelBuffer(size: PixelSize(256), channels: 3, bytes: bytes)
        gif = try coder.encode(Image(pixelSize: frames.size, frames: Array(repeating: .init(duration: .milliseconds(50)), count: 8), loopCount: 0, storage: frames),
                               as: .gif, options: EncodeOptions())
        photo = try coder.decode(jpeg, options: DecodeOptions())
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-benchmarks-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    static let shared: Fixtures = {
        do { return try Fixtures() } catch { fatalError("making the benchmark fixtures: \(error)") }
    }()
}

/// A store filled with `count` entries of `size` bytes under keys k0, k1, …
/// (Made once per process: LMDB forbids opening one directory twice in a process.)
func filledStore(_ kind: String, count: Int, size: Int) async throws -> any CacheStore {
    if let existing = Prepared.shared.stores.withLock({ $0[kind] }) { return existing }
    let directory = Fixtures.shared.directory.appendingPathComponent("\(kind)-\(count)")
    let store: any CacheStore = switch kind {
    case "lmdb": try LMDBCacheStore(directory: directory, limits: .unlimited, options: .init(mapSize: 1 << 30))
    default: try FileCacheStore(directory: directory, limits: .unlimited)
    }
    let value = Data(repeating: 0x5A, count: size)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<count { group.addTask { try await store.setData(value, forKey: "k\(index)") } }
        try await group.waitForAll()
    }
    return store
}

/// What a benchmark's setup made, for its measured closure to use.
final class Prepared: Sendable {
    static let shared = Prepared()
    let managers = Mutex<[String: ImageManager]>([:])
    let stores = Mutex<[String: any CacheStore]>([:])
    func manager(_ name: String) -> ImageManager { managers.withLock { $0[name]! } }
    func store(_ name: String) -> any CacheStore { stores.withLock { $0[name]! } }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident],
        warmupIterations: 3,
        maxDuration: .seconds(3),
        maxIterations: 10_000
    )
    let fixtures = Fixtures.shared
    let entries = 2000

    // MARK: Cache hits through the manager (1000 gets per sample; times are per get)

    let hits = Benchmark.Configuration(metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident], warmupIterations: 2,
                                       scalingFactor: .kilo, maxDuration: .seconds(3), maxIterations: 100_000)
    let prepared = Prepared.shared

    Benchmark("manager: memory-cache hit", configuration: hits) { benchmark in
        let manager = prepared.manager("memory")
        let urls = (0..<entries).map { URL(string: "bench://x/k\($0)")! }
        benchmark.startMeasurement()
        for iteration in benchmark.scaledIterations {
            blackHole(try await manager.loadImage(with: urls[iteration % entries]))
        }
    } setup: {
        var configuration = ImageManager.Configuration()
        let cache = MemoryImageCache()
        let pixels = PixelBuffer(size: PixelSize(64), channels: 4, bytes: [UInt8](repeating: 0, count: 64 * 64 * 4))
        for index in 0..<entries { cache.setImage(Image(pixelSize: PixelSize(64), storage: pixels), forKey: "bench://x/k\(index)") }
        configuration.memoryCache = cache
        let manager = ImageManager(configuration: configuration)
        prepared.managers.withLock { $0["memory"] = manager }
    }

    for kind in ["lmdb", "files"] {
        Benchmark("manager: disk hit, \(kind), 32 KiB", configuration: hits) { benchmark in
            let manager = prepared.manager(kind)
            let urls = (0..<entries).map { URL(string: "k\($0)")! }
            benchmark.startMeasurement()
            for iteration in benchmark.scaledIterations {
                blackHole(try await manager.loadImage(with: urls[iteration % entries], options: [.avoidDecode, .fromCacheOnly]))
            }
        } setup: {
            let store = try await filledStore(kind, count: entries, size: 32 << 10)
            var configuration = ImageManager.Configuration()
            configuration.store = store
            configuration.memoryCache = nil
            let manager = ImageManager(configuration: configuration)
            prepared.stores.withLock { $0[kind] = store }
            prepared.managers.withLock { $0[kind] = manager }
        }

        Benchmark("store: get, \(kind), 32 KiB", configuration: hits) { benchmark in
            let store = prepared.store(kind)
            let keys = (0..<entries).map { "k\($0)" }
            benchmark.startMeasurement()
            for iteration in benchmark.scaledIterations {
                blackHole(try await store.data(forKey: keys[iteration % entries]))
            }
        } setup: {
            let store = try await filledStore(kind, count: entries, size: 32 << 10)
            prepared.stores.withLock { $0[kind] = store }
        }
    }

    // MARK: Decoding and encoding (libvips, on the calling thread)

    let inputs: [(String, Data)] = [("JPEG 2400x1600", fixtures.jpeg), ("PNG 1024x1024 alpha", fixtures.png),
                                    ("GIF 256x256 x8", fixtures.gif), ("WebP 2400x1600", fixtures.webp)]
    for (name, data) in inputs {
        Benchmark("decode: \(name), full") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try fixtures.coder.decode(data, options: DecodeOptions()))
            }
        }
        Benchmark("decode: \(name), 256 px thumbnail") { benchmark in
            var options = DecodeOptions()
            options.thumbnailPixelSize = PixelSize(256)
            for _ in benchmark.scaledIterations {
                blackHole(try fixtures.coder.decode(data, options: options))
            }
        }
    }
    for format in [ImageFormat.jpeg, .webp] {
        Benchmark("encode: \(format) 2400x1600") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try fixtures.coder.encode(fixtures.photo, as: format, options: EncodeOptions(quality: 80)))
            }
        }
    }

    // MARK: Coalescing

    Benchmark("manager: 100 concurrent loads of one file, one decode") { benchmark in
        let file = fixtures.directory.appendingPathComponent("coalesced.jpg")
        try fixtures.jpeg.write(to: file)
        var configuration = ImageManager.Configuration()
        configuration.coders.registerVips()
        configuration.memoryCache = nil
        configuration.store = nil
        let manager = ImageManager(configuration: configuration)
        let context = ImageContext(thumbnailPixelSize: PixelSize(256))
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<100 {
                    group.addTask { blackHole(try await manager.loadImage(with: file, context: context)) }
                }
                try await group.waitForAll()
            }
        }
    }
}

// webimage-bench: one scenario through swift-web-image, timings as JSON on stdout.
//
//   webimage-bench store-fill   lmdb|files DIR COUNT SIZE      write COUNT values of SIZE bytes (keys k0…)
//   webimage-bench store-get    lmdb|files DIR COUNT GETS      warm gets of random keys; ns per get
//   webimage-bench manager-hit  memory|lmdb|files DIR COUNT GETS   hits through ImageManager (avoidDecode for disk)
//                               (KIND also lmdb-pooled; redis with DIR a redis:// URL; tiered with DIR "LMDBDIR|URL";
//                                s3 with DIR s3://BUCKET/PREFIX/, the endpoint in S3_ENDPOINT, the key in AWS_*)
//   webimage-bench redis-keys   COUNT                          the Redis keys of k0… (for the C peer)
//   webimage-bench s3-keys      URL COUNT                      the object keys of k0… under s3://BUCKET/PREFIX/ (for curl)
//   webimage-bench download     URLLIST CONCURRENCY            load every URL with CurlLoader; seconds
//   webimage-bench encode       FILE QUALITY REPEATS           encode FILE's pixels in every format and effort; ms and bytes each
//   webimage-bench endpoint-hit CONFIG TARGETS GETS            ImageEndpoint.respond to warm requests, no server: each request
//                               target of the file TARGETS (one per line) answered once, then GETS random ones; ns each
import Foundation
import HTTPTypes
import WebImageHTTP
import WebImageKit
import WebImage
import WebImageCurl
import WebImageLMDB
import WebImageRedis
import WebImageS3
import WebImageTurboJPEG
import WebImageVips

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("webimage-bench: \(message)\n".utf8))
    exit(2)
}

func store(_ kind: String, _ directory: String) throws -> any CacheStore {
    let url = URL(fileURLWithPath: directory)
    switch kind {
    case "lmdb": return try LMDBCacheStore(directory: url, limits: .unlimited, options: .init(mapSize: 4 << 30))
    case "lmdb-pooled": return try LMDBCacheStore(directory: url, limits: .unlimited, options: .init(mapSize: 4 << 30, readsOnCallingThread: false))
    case "files": return try FileCacheStore(directory: url, limits: .unlimited)
    case "redis": return try RedisCacheStore(configuration: .init(urls: [directory]), limits: .unlimited)
    case "s3":
        let environment = ProcessInfo.processInfo.environment
        let s3 = try S3Configuration(values: ConfigValues(["s3.endpoint": environment["S3_ENDPOINT"] ?? "", "s3.region": environment["S3_REGION"] ?? "us-east-1"])
            .scoped(to: "s3"))
        return try S3CacheStore(url: directory, configuration: s3, limits: .unlimited)
    case "tiered":
        let parts = directory.split(separator: "|").map(String.init)
        return TieredCacheStore(local: try store("lmdb", parts[0]), shared: try store("redis", parts[1]))
    default: fail("unknown store \(kind)")
    }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func printJSON(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else { fail("usage: see the comment at the top of main.swift") }
// Off the main actor: top-level code is main-actor isolated, and every await from
// it would hop threads twice, measuring the harness instead of the library.
try await Task.detached { try await runScenario(arguments) }.value

@Sendable func runScenario(_ arguments: [String]) async throws {
switch arguments[1] {
case "store-fill":
    // store-fill KIND DIR COUNT SIZE [IN-FLIGHT]: writes COUNT entries, IN-FLIGHT at once (default 1).
    guard (6...7).contains(arguments.count), let count = Int(arguments[4]), let size = Int(arguments[5]) else { fail("store-fill KIND DIR COUNT SIZE [IN-FLIGHT]") }
    let inFlight = arguments.count == 7 ? max(1, Int(arguments[6]) ?? 1) : 1
    let store = try store(arguments[2], arguments[3])
    let base = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    let started = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<count {
            if index >= inFlight { try await group.next() }
            group.addTask {
                var value = base
                value[0] = UInt8(truncatingIfNeeded: index)
                try await store.setData(value, forKey: "k\(index)")
            }
        }
        try await group.waitForAll()
    }
    printJSON(["scenario": "store-fill", "store": arguments[2], "count": count, "inFlight": inFlight, "seconds": seconds(ContinuousClock.now - started)])

case "store-get", "manager-hit":
    guard arguments.count == 6, let count = Int(arguments[4]), let gets = Int(arguments[5]) else { fail("\(arguments[1]) KIND DIR COUNT GETS") }
    var generator = SystemRandomNumberGenerator()
    let keys = (0..<gets).map { _ in "k\(Int.random(in: 0..<count, using: &generator))" }
    var bytes = 0
    // A bucket on a network endpoint: fewer warm-up gets (each is a request).
    let warm = arguments[2] == "s3" ? 50 : 1000
    let started: ContinuousClock.Instant
    // Page faults in the timed loop: a hit that returns its buffer to the kernel pays them again.
    var faultsBefore = 0
    if arguments[1] == "store-get" {
        let store = try store(arguments[2], arguments[3])
        for key in keys.prefix(warm) { bytes &+= try await store.data(forKey: key)?.count ?? 0 }  // warm
        faultsBefore = minorFaults()
        started = ContinuousClock.now
        for key in keys { bytes &+= try await store.data(forKey: key)?.count ?? 0 }
    } else {
        var configuration = ImageManager.Configuration()
        let memory = arguments[2] == "memory" || arguments[2] == "memory-sync"
        if memory {
            // Memory hits: images put in the memory cache directly, then loaded through the manager.
            let cache = MemoryImageCache()
            let pixels = PixelBuffer(size: PixelSize(64), channels: 4, bytes: [UInt8](repeating: 0, count: 64 * 64 * 4))
            for index in 0..<count { cache.setImage(Image(pixelSize: PixelSize(64), storage: pixels), forKey: "bench://x/k\(index)") }
            configuration.memoryCache = cache
        } else {
            configuration.store = try store(arguments[2], arguments[3])
            configuration.memoryCache = nil
        }
        let manager = ImageManager(configuration: configuration)
        let urls = keys.map { URL(string: memory ? "bench://x/\($0)" : $0)! }
        let options: ImageOptions = memory ? [] : [.avoidDecode, .fromCacheOnly]
        for url in urls.prefix(warm) { bytes &+= try await manager.loadImage(with: url, options: options).data?.count ?? 1 }
        if arguments[2] == "memory-sync" {
            // The synchronous lookup a server makes where the request arrives (MemoryHitFastPath).
            faultsBefore = minorFaults()
            started = ContinuousClock.now
            for url in urls {
                guard let result = manager.memoryResult(with: url, options: options) else { fail("\(url): not in memory") }
                bytes &+= result.data?.count ?? 1
            }
        } else {
            faultsBefore = minorFaults()
            started = ContinuousClock.now
            for url in urls { bytes &+= try await manager.loadImage(with: url, options: options).data?.count ?? 1 }
        }
    }
    let elapsed = seconds(ContinuousClock.now - started)
    printJSON(["scenario": arguments[1], "store": arguments[2], "gets": gets, "nsPerGet": elapsed / Double(gets) * 1e9, "bytes": bytes,
               "minorFaultsPerGet": Double(minorFaults() - faultsBefore) / Double(gets)])

case "endpoint-hit":
    guard arguments.count == 5, let gets = Int(arguments[4]) else { fail("endpoint-hit CONFIG TARGETS GETS") }
    let endpoint = try await ImageEndpoint.configured(file: arguments[2], environment: [:])
    let targets = try String(contentsOfFile: arguments[3], encoding: .utf8).split(separator: "\n").map(String.init)
    func request(_ target: String) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1", path: target,
                    headerFields: [.accept: "image/avif,image/webp,*/*", .userAgent: "webimage-bench"])
    }
    for target in targets {
        let response = await endpoint.respond(to: request(target))
        guard response.status == .ok else { fail("\(target): \(response.status)") }
    }
    var generator = SystemRandomNumberGenerator()
    let requests = (0..<gets).map { _ in request(targets[Int.random(in: 0..<targets.count, using: &generator)]) }
    var bytes = 0
    let started = ContinuousClock.now
    for request in requests { bytes &+= await endpoint.respond(to: request).body.count }
    let elapsed = seconds(ContinuousClock.now - started)
    printJSON(["scenario": "endpoint-hit", "gets": gets, "bytes": bytes, "nsPerRequest": elapsed / Double(gets) * 1e9])

case "encode":
    // encode FILE QUALITY REPEATS: one decode, then each (format, effort) REPEATS times; the median ms and the bytes.
    guard arguments.count == 5, let quality = Int(arguments[3]), let repeats = Int(arguments[4]), repeats > 0 else { fail("encode FILE QUALITY REPEATS") }
    let vips = VipsImageCoder(), turbo = TurboJPEGCoder(encodePixelLimit: .max)
    let image = try vips.decode(try Data(contentsOf: URL(fileURLWithPath: arguments[2])), options: DecodeOptions())
    var cases: [(String, any ImageCoder, ImageFormat, Int?)] = [("jpeg (libjpeg-turbo)", turbo, .jpeg, nil), ("jpeg (libvips)", vips, .jpeg, nil), ("png", vips, .png, nil)]
    cases += [0, 2, 4, 6].map { ("webp", vips, .webp, $0) }
    cases += [0, 2, 4, 6].map { ("avif", vips, .avif, $0) }
    cases += [0, 2, 4].map { ("heic", vips, .heif, $0) }
    var rows: [[String: Any]] = []
    for (name, coder, format, effort) in cases {
        let options = EncodeOptions(quality: quality, effort: effort)
        var times: [Double] = []
        var bytes = 0
        for _ in 0..<repeats {
            let started = ContinuousClock.now
            bytes = try coder.encode(image, as: format, options: options).count
            times.append(seconds(ContinuousClock.now - started) * 1000)
        }
        rows.append(["format": name, "effort": effort.map { $0 as Any } ?? NSNull(), "ms": times.sorted()[times.count / 2], "bytes": bytes])
    }
    printJSON(["scenario": "encode", "width": image.pixelSize.width, "height": image.pixelSize.height, "quality": quality, "rows": rows])

case "redis-keys":
    guard arguments.count == 3, let count = Int(arguments[2]) else { fail("redis-keys COUNT") }
    let naming = try RedisCacheStore(configuration: .init(urls: ["redis://127.0.0.1"]))
    print((0..<count).map { naming.redisKey(for: "k\($0)") }.joined(separator: "\n"))

case "s3-keys":
    guard arguments.count == 4, let count = Int(arguments[3]) else { fail("s3-keys URL COUNT") }
    let naming = try S3CacheStore(url: arguments[2], configuration: S3Configuration())
    print((0..<count).map { naming.objectKey(for: "k\($0)") }.joined(separator: "\n"))

case "download":
    guard arguments.count == 4, let concurrency = Int(arguments[3]) else { fail("download URLLIST CONCURRENCY") }
    let urls = try String(contentsOfFile: arguments[2], encoding: .utf8).split(separator: "\n").compactMap { URL(string: String($0)) }
    let loader = CurlLoader(configuration: .init(maxConcurrentDownloads: concurrency))
    let started = ContinuousClock.now
    let bytes = try await withThrowingTaskGroup(of: Int.self) { group in
        for url in urls { group.addTask { try await loader.load(LoadRequest(url: url)) { _ in }.data.count } }
        var total = 0
        for try await count in group { total += count }
        return total
    }
    printJSON(["scenario": "download", "count": urls.count, "bytes": bytes, "seconds": seconds(ContinuousClock.now - started)])

default:
    fail("unknown scenario \(arguments[1])")
}
}

/// This process's minor page faults so far (getrusage).
@Sendable func minorFaults() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_minflt
}

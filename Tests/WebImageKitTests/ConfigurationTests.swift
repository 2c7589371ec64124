import Configuration
import Foundation
import Synchronization
import Testing
import WebImageTestSupport
@_spi(WebImageInternal) import WebImage
import WebImageConfiguration
import WebImageCurl
import WebImageKit
import WebImageHTTP
import WebImageLMDB
import WebImageTurboJPEG
import WebImageVips

func temporaryDirectory() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-kit-\(UUID().uuidString.prefix(8))")
    try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func configuration(flags: [String: String] = [:], file: [String: Any]? = nil, environment: [String: String] = [:], in directory: URL) async throws -> ImageManager.Configuration {
    var path: String?
    if let file {
        let url = directory.appendingPathComponent("config-\(UUID().uuidString.prefix(6)).json")
        try JSONSerialization.data(withJSONObject: file).write(to: url)
        path = url.path
    }
    let reader = try await ConfigLayers.reader(flags: flags, file: path, environment: environment)
    return try ImageManager.Configuration(config: reader, catalog: .standard, defaultStorePath: directory.appendingPathComponent("default"))
}

@Suite("Configuration")
struct ConfigurationTests {
    @Test("defaults: LMDB in the default directory, turbojpeg then vips, curl, s3 and file")
    func defaults() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = try await configuration(in: directory)
        let store = try #require(configuration.store as? LMDBCacheStore)
        #expect(store.directory.lastPathComponent == "default")
        #expect(configuration.coders.names == ["turbojpeg", "vips"], "newest first: turbojpeg is asked first")
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0x00, 0x01])
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52])
        #expect(configuration.coders.decoder(for: jpeg) is TurboJPEGCoder)
        #expect(configuration.coders.decoder(for: png) is VipsImageCoder)
        #expect(configuration.coders.encoder(for: .jpeg) is TurboJPEGCoder, "small JPEG thumbnails are written by libjpeg-turbo")
        #expect(configuration.coders.encoder(for: .png) is VipsImageCoder)
        #expect((configuration.coders.decoder(for: jpeg) as? TurboJPEGCoder)?.fallback == nil, "what it hands on goes to the vips coder after it")
        let alone = try await WebImageKitTests.configuration(flags: ["coders": "turbojpeg"], in: directory)
        #expect((alone.coders.decoder(for: jpeg) as? TurboJPEGCoder)?.fallback != nil, "coders = turbojpeg alone: a libvips fallback of its own")
        #expect((configuration.coders.decoder(for: jpeg) as? TurboJPEGCoder)?.reuse == nil, "no scaled decodes kept by default")
        let reusing = try await WebImageKitTests.configuration(flags: ["turbojpeg.reuse": "8MiB", "turbojpeg.reuseWindow": "3s"], in: directory)
        let reuse = (reusing.coders.decoder(for: jpeg) as? TurboJPEGCoder)?.reuse
        #expect(reuse?.maxBytes == 8 << 20 && reuse?.window == .seconds(3))
        let service = try await ConfigLayers.reader(flags: [:], file: nil, environment: [:], defaults: ImageEndpoint.Settings.serviceDefaults)
        let served = try ImageManager.Configuration(config: service, catalog: .standard, defaultStorePath: directory.appendingPathComponent("served"))
        #expect((served.coders.decoder(for: jpeg) as? TurboJPEGCoder)?.reuse?.maxBytes == 8 << 20, "a service keeps 8 MiB")
        for (key, value) in [("turbojpeg.reuse", "lots"), ("turbojpeg.reuseWindow", "0s"), ("turbojpeg.reuseWindow", "soon")] {
            let error = await #expect(throws: WebImageError.self) { _ = try await WebImageKitTests.configuration(flags: [key: value], in: directory) }
            #expect(error?.message.contains(key) == true, "\(key)=\(value): \(String(describing: error))")
        }
        #expect(Set(configuration.loaders.names) == ["curl", "s3", "file"])
        #expect(configuration.loaders.loader(for: URL(string: "https://x.com/a.png")!) != nil)
        #expect(configuration.loaders.loader(for: URL(string: "s3://photos/a.png")!) != nil, "s3:// has the s3 loader")
    }

    @Test("each backend is selectable by file, by environment and by flag")
    func backends() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("s").path
        let byFile = try await configuration(file: ["store": ["kind": "filesystem", "path": path]], in: directory)
        #expect(byFile.store is FileCacheStore)
        let byEnvironment = try await configuration(environment: ["WEBIMAGE_STORE_KIND": "memory"], in: directory)
        #expect(byEnvironment.store is MemoryCacheStore)
        let byFlag = try await configuration(flags: ["store.kind": "none"], in: directory)
        #expect(byFlag.store == nil)
        let lmdb = try await configuration(flags: ["store.kind": "lmdb", "store.path": path + "-lmdb", "store.lmdb.mapSize": "8MiB"], in: directory)
        #expect((lmdb.store as? LMDBCacheStore)?.mapSize == 8 << 20)
    }

    @Test("precedence: flags over environment over file over defaults")
    func precedence() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file: [String: Any] = ["store": ["kind": "filesystem", "path": directory.appendingPathComponent("f").path], "loader": ["timeout": "9s"], "decode": ["pixelLimit": 1234]]
        let fileOnly = try await configuration(file: file, in: directory)
        #expect(fileOnly.store is FileCacheStore && fileOnly.timeout == .seconds(9) && fileOnly.decodeOptions.pixelLimit == 1234)
        let environment = try await configuration(file: file, environment: ["WEBIMAGE_STORE_KIND": "memory", "WEBIMAGE_LOADER_TIMEOUT": "7s"], in: directory)
        #expect(environment.store is MemoryCacheStore && environment.timeout == .seconds(7) && environment.decodeOptions.pixelLimit == 1234)
        let flags = try await configuration(flags: ["store.kind": "none", "loader.timeout": "500ms"], file: file, environment: ["WEBIMAGE_STORE_KIND": "memory"], in: directory)
        #expect(flags.store == nil && flags.timeout == .milliseconds(500))
        let unprefixed = try await configuration(environment: ["STORE_KIND": "memory"], in: directory)
        #expect(unprefixed.store is LMDBCacheStore, "only WEBIMAGE_* variables count")
    }

    @Test("a service's defaults sit below the environment and the file")
    func serviceDefaults() async throws {
        let defaults = ["loader.timeout": "3s", "store.kind": "memory", "decode.pixelLimit": "99"]
        let alone = ConfigValues(try await ConfigLayers.reader(flags: [:], file: nil, environment: [:], defaults: defaults))
        let aloneTimeout = try alone.duration("loader.timeout")
        #expect(aloneTimeout == .seconds(3) && alone.text("store.kind") == "memory")
        let over = ConfigValues(try await ConfigLayers.reader(flags: ["store.kind": "none"], file: nil,
                                                              environment: ["WEBIMAGE_LOADER_TIMEOUT": "8s"], defaults: defaults))
        let overTimeout = try over.duration("loader.timeout"), limit = try over.int("decode.pixelLimit")
        #expect(overTimeout == .seconds(8) && over.text("store.kind") == "none" && limit == 99)
    }

    @Test("sizes, durations and lists parse in their usual spellings")
    func parsing() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = try await configuration(flags: [
            "store.kind": "memory", "memory.costLimit": "64MiB", "memory.countLimit": "100",
            "loader.maxResponseSize": "2MB", "blocklist.ttl": "2m", "coders": "vips", "loaders": "file",
            "decode.memoryLimit": "64MiB", "loader.originalsBudget": "1GiB",
        ], in: directory)
        #expect(configuration.decodeOptions.memoryLimit == 64 << 20 && configuration.originalsBudget == 1 << 30)
        #expect(configuration.memoryCache?.limits.costLimit == 64 << 20 && configuration.memoryCache?.limits.countLimit == 100)
        #expect(configuration.maxResponseSize == 2 << 20)
        #expect(configuration.blocklist.ttl == .seconds(120))
        #expect(configuration.loaders.names == ["file"])
    }

    @Test("loader.maxConcurrentPerHost reaches the curl loader; unset, there is no per-origin limit")
    func perHostKey() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let limited = try await configuration(flags: ["store.kind": "none", "loader.maxConcurrentPerHost": "3"], in: directory)
        let curl = try #require(limited.loaders.loader(for: URL(string: "https://example.com/a.jpg")!) as? CurlLoader)
        #expect(curl.configuration.maxConcurrentDownloadsPerHost == 3)
        let plain = try await configuration(flags: ["store.kind": "none"], in: directory)
        #expect((plain.loaders.loader(for: URL(string: "https://example.com/a.jpg")!) as? CurlLoader)?.configuration.maxConcurrentDownloadsPerHost == nil)
    }

    @Test("loader.circuitBreaker.* makes an origin breaker; unset or failures 0, there is none; a zero cooldown names its key")
    func breakerKeys() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try await configuration(flags: ["store.kind": "none"], in: directory).originBreaker == nil)
        let both = try #require(try await configuration(flags: ["store.kind": "none", "loader.circuitBreaker.failures": "3",
                                                               "loader.circuitBreaker.cooldown": "10m"], in: directory).originBreaker)
        #expect(both.failureThreshold == 3 && both.cooldown == .seconds(600) && both.maxCooldown == .seconds(600))
        let file = try #require(try await configuration(file: ["loader": ["circuitBreaker": ["cooldown": "15s"]]], in: directory).originBreaker)
        #expect(file.failureThreshold == 5 && file.cooldown == .seconds(15) && file.maxCooldown == .seconds(300))
        #expect(try await configuration(flags: ["store.kind": "none", "loader.circuitBreaker.failures": "0",
                                                "loader.circuitBreaker.cooldown": "15s"], in: directory).originBreaker == nil)
        for (key, value) in [("loader.circuitBreaker.cooldown", "0s"), ("loader.circuitBreaker.failures", "-1"), ("loader.circuitBreaker.failures", "many")] {
            let error = await #expect(throws: WebImageError.self) { try await configuration(flags: ["store.kind": "none", key: value], in: directory) }
            #expect(error?.code == .invalidArgument && error?.message.contains(key) == true, "\(key)=\(value): \(String(describing: error))")
        }
    }

    @Test("encode.* keys set the manager's encode options, from a file and from the environment")
    func encodeKeys() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = try await configuration(in: directory)
        #expect(plain.encodeOptions == .derivedDefault)
        let file = try await configuration(file: ["encode": ["quality": 70, "effort": 4, "progressive": true, "keepColorProfile": true,
                                                              "background": "#000", "chromaSubsampling": "off", "lossless": false]], in: directory)
        #expect(file.encodeOptions == EncodeOptions(quality: 70, progressive: true, keepColorProfile: true, effort: 4, chromaSubsampling: .off, background: .black))
        let environment = try await configuration(environment: ["WEBIMAGE_ENCODE_QUALITY": "55", "WEBIMAGE_ENCODE_KEEP_COLOR_PROFILE": "true"], in: directory)
        #expect(environment.encodeOptions.quality == 55 && environment.encodeOptions.keepColorProfile)
    }

    @Test("unknown names and invalid values are errors that name the key", arguments: [
        (["store.kind": "redis"], "store.kind"),
        (["store.maxSize": "-5"], "store.maxSize"),
        (["store.maxAge": "forever"], "store.maxAge"),
        (["store.maxSize": "0"], "store.maxSize: less than 1 byte would remove every entry"), (["store.maxAge": "0s"], "store.maxAge: less than 1s would remove every entry"),
        (["store.maxAge": "0.0000000001s"], "store.maxAge: less than 1s"), (["store.sweepInterval": "0s"], "store.sweepInterval: less than 1s would sweep the store without a pause"),
        (["store.sweepInterval": "0.0000000001s"], "store.sweepInterval: less than 1s"), (["loader.maxResponseSize": "0"], "loader.maxResponseSize: 0 would refuse every response"),
        (["loader.timeout": "soon"], "loader.timeout"),
        (["loader.maxConcurrent": "0"], "loader.maxConcurrent"),
        (["loader.maxConcurrentPerHost": "0"], "loader.maxConcurrentPerHost"),
        (["loader.order": "random"], "loader.order"),
        (["loader.proxy": "http://puser:ProxySecret@127.0.0.1:99999"], "loader.proxy: 'http://***@127.0.0.1:99999' is not a proxy URL"),
        (["loader.proxy": "proxy.internal"], "loader.proxy"),
        (["loader.blockPrivateAddresses": "maybe"], "loader.blockPrivateAddresses"),
        (["loader.exemptAddresses": "10.0.0.0/33"], "loader.exemptAddresses"),
        (["loader.exemptAddresses": "intranet"], "loader.exemptAddresses"),
        (["coders": "vips,heic2000"], "coders"),
        (["loaders": "gopher"], "loaders"),
        (["coders": ""], "coders"), (["loaders": ","], "loaders"), (["loader.timeout": "0"], "loader.timeout: '0'"),
        (["decode.pixelLimit": "lots"], "decode.pixelLimit"),
        (["vips.allowUntrusted": "sure"], "vips.allowUntrusted"),
        (["vips.vector": "fast"], "vips.vector"),
        (["decode.memoryLimit": "0"], "decode.memoryLimit"),
        (["decode.memoryLimit": "much"], "decode.memoryLimit"),
        (["loader.originalsBudget": "0"], "loader.originalsBudget"),
        (["store.kind": "lmdb", "store.lmdb.mapSize": "huge"], "lmdb.mapSize"),
        (["store.kind": "lmdb", "store.lmdb.readsOnCallingThread": "sometimes"], "lmdb.readsOnCallingThread"),
        (["store.kind": "filesystem", "store.filesystem.readsOnCallingThread": "maybe"], "filesystem.readsOnCallingThread"),
        (["encode.quality": "0"], "encode.quality: '0' is not a quality from 1 to 100"), (["encode.effort": "-1"], "an effort from 0 to 9"),
        (["encode.quality": "101"], "encode.quality"),
        (["encode.effort": "10"], "encode.effort"),
        (["encode.effort": "-1"], "encode.effort"),
        (["encode.background": "purple"], "encode.background"),
        (["encode.chromaSubsampling": "4:2:0"], "encode.chromaSubsampling"),
        (["encode.keepColorProfile": "perhaps"], "encode.keepColorProfile"),
        (["encode.qualty": "80"], "encode.qualty"),
        (["store.lmdb.mapSize": "1"], "store.lmdb.mapSize: '1'"),
        (["store.lmdb.mapSize": "64MiB", "store.lmdb.maxMapSize": "32MiB"], "store.lmdb.maxMapSize"),
        (["store.path": " "], "store.path"),
        (["store.shared.kind": "bogus"], "store.shared.kind"),
        (["store.shared.kind": "redis", "store.shared.url": "redis://127.0.0.1:1", "store.shared.timeout": "0"], "store.shared.timeout"),
        (["store.shared.kind": "s3", "store.shared.url": "s3://bucket/p/", "s3.endpoint": "not a url"], "s3.endpoint"),
        (["store.shared.kind": "s3", "store.shared.url": "s3://bucket/p/", "s3.pathStyle": "maybe"], "s3.pathStyle"),
    ])
    func errors(flags: [String: String], key: String) async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let error = await #expect(throws: WebImageError.self) { try await configuration(flags: flags, in: directory) }
        #expect(error?.code == .invalidArgument && error?.message.contains(key) == true, "\(String(describing: error))")
        // Judged before the disk tier opens: a refused configuration leaves no store files.
        let made = (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("default").path)) ?? []
        #expect(made.isEmpty, "\(flags) left \(made)")
    }

    @Test("a list in a JSON file where one value is read is refused by its key, not read as unset")
    func listsWhereOneValueIsRead() async throws {
        for (file, key) in [(["store": ["kind": ["bogus"]]], "store.kind"), (["store": ["lmdb": ["mapSize": ["-5"]]]], "store.lmdb.mapSize"),
                            (["decode": ["pixelLimit": [5]]], "decode.pixelLimit")] as [([String: Any], String)] {
            let directory = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let error = await #expect(throws: WebImageError.self) { try await configuration(file: file, in: directory) }
            #expect(error?.code == .invalidArgument && error?.message.contains(key) == true && error?.message.contains("[") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a JSON file's values are read as their text: a boolean where a number goes, a number where a boolean goes, 64.0 and 1e2 for a count are refused by key; digits, strings of digits, 0.5 seconds and null pass")
    func jsonValuesAsText() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        func read(_ json: String) async throws -> ImageManager.Configuration {
            let url = directory.appendingPathComponent("config-\(UUID().uuidString.prefix(6)).json")
            try Data(json.utf8).write(to: url)
            let reader = try await ConfigLayers.reader(flags: [:], file: url.path, environment: [:])
            return try ImageManager.Configuration(config: reader, catalog: .standard, defaultStorePath: directory.appendingPathComponent("default"))
        }
        for (json, key, shown) in [
            (#"{"memory": {"countLimit": true}}"#, "memory.countLimit", "'true'"),
            (#"{"memory": {"countLimit": 64.0}}"#, "memory.countLimit", "'64.0'"),
            (#"{"memory": {"countLimit": 1e2}}"#, "memory.countLimit", "'100.0'"),
            (#"{"encode": {"progressive": 2}}"#, "encode.progressive", "'2'"),
            (#"{"loaders": ["file", {"name": "curl"}]}"#, "loaders[1]", "an array or object"),
            (#"{"loaders": ["file", null]}"#, "loaders[1]", "null"),
            (#"{"store": {"kindd": null}}"#, "store.kindd", "no setting reads it"),
            (#"{"loaders": []}"#, "loaders", "at least one"),
            (#"{"loader": {"maxConcurrent": {}}}"#, "loader.maxConcurrent", "'{}'"),
            // One key two ways: refused every time, not won by dictionary order.
            (#"{"store.kind": "memory", "store": {"kind": "bogus"}}"#, "store.kind", "set twice"),
        ] {
            let error = await #expect(throws: WebImageError.self, "\(json)") { try await read(json) }
            #expect(error?.code == .invalidArgument && error?.message.contains(key) == true && error?.message.contains(shown) == true,
                    "\(json): \(error?.message ?? "")")
        }
        let plain = try await read(#"{"store": {"kind": "memory"}, "memory": {"countLimit": 100, "costLimit": null}, "encode": {"progressive": true, "lossless": 0}, "loader": {"timeout": 0.5}}"#)
        #expect(plain.memoryCache?.limits.countLimit == 100 && plain.encodeOptions.progressive && !plain.encodeOptions.lossless)
        #expect(plain.memoryCache?.limits.costLimit == ImageManager.Configuration().memoryCache?.limits.costLimit, "null is no value: the default")
        #expect(plain.timeout == .milliseconds(500))
        let strings = try await read(#"{"store": {"kind": "memory"}, "memory": {"countLimit": "100"}, "loaders": ["file"]}"#)
        #expect(strings.memoryCache?.limits.countLimit == 100 && strings.loaders.names == ["file"])
        // A dotted name is the nested one; an empty object under a namespace is nothing.
        let dotted = try await read(#"{"store.kind": "memory", "memory.countLimit": 7, "store": {"lmdb": {}}}"#)
        #expect(dotted.memoryCache?.limits.countLimit == 7)
    }

    @Test("a missing or malformed configuration file is a clear error")
    func badFiles() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = await #expect(throws: WebImageError.self) { try await ConfigLayers.reader(flags: [:], file: "/nonexistent/webimage.json") }
        #expect(missing?.message.contains("--config") == true)
        let bad = directory.appendingPathComponent("bad.json")
        try Data("{ not json".utf8).write(to: bad)
        await #expect(throws: WebImageError.self) { try await ConfigLayers.reader(flags: [:], file: bad.path) }
        // Where the text goes wrong, by line and column; a top that is no object, named as what it is.
        try Data("{\n  \"store\": {\n    \"kind\": tru\n  }\n}".utf8).write(to: bad)
        let located = await #expect(throws: WebImageError.self) { try await ConfigLayers.reader(flags: [:], file: bad.path) }
        #expect(located?.message.contains("not valid JSON") == true && located?.message.contains("line 3") == true, "\(String(describing: located))")
        // What Foundation's parser takes but RFC 8259 does not, or takes silently.
        for (text, problem) in [("{\"store\": {\"kind\": \"lmdb\",},}", "a comma before } (line 1, column 27)"),
                                ("{\"a\": [1, 2,]}", "a comma before ]"),
                                ("{\"store\": {\"kind\": \"lmdb\", \"kind\": \"filesystem\"}}", "\"kind\" is given twice in one object"),
                                ("{\"store\": {\"kind\": \"lmdb\"},\n \"store\": {\"path\": \"/x\"}}", "\"store\" is given twice in one object (line 2, column 2)"),
                                ("{\"store.kind\": \"lmdb\", \"store.kind\": \"memory\"}", "\"store.kind\" is given twice"),
                                ("{\"store\": {\"kind\": \"filesystem\", \"k\\u0069nd\": \"lmdb\"}}", "\"kind\" is given twice")] {
            try Data(text.utf8).write(to: bad)
            let error = await #expect(throws: WebImageError.self) { try await ConfigLayers.reader(flags: [:], file: bad.path) }
            #expect(error?.message.contains("not valid JSON: \(problem)") == true, "\(text): \(String(describing: error))")
        }
        // The same names in different objects, and commas inside strings, are fine.
        try Data("{\"thumbnail\": {\"fallbackImage\": \"a,}.png\"}, \"store\": {\"kind\": \"lmdb\", \"path\": \"/tmp/x,]\"}}".utf8).write(to: bad)
        _ = try await ConfigLayers.reader(flags: [:], file: bad.path)
        for (text, kind) in [("null", "null"), ("[1]", "an array"), ("\"x\"", "a string"), ("7", "a number")] {
            try Data(text.utf8).write(to: bad)
            let error = await #expect(throws: WebImageError.self) { try await ConfigLayers.reader(flags: [:], file: bad.path) }
            #expect(error?.message.contains("must hold a JSON object") == true && error?.message.contains("not \(kind)") == true, "\(text): \(String(describing: error))")
        }
    }
}

@Suite("Progress bar and transform specs", .offCooperativePool)
struct ProgressBarTests {
    @Test("never wider than the terminal, never a newline")
    func widths() {
        var counts = ProgressBar.Counts(total: 100_000)
        counts.done = 4_321
        counts.disk = 4_000
        counts.network = 300
        counts.failed = 21
        for width in 0...200 {
            let line = ProgressBar.render(counts, elapsed: .seconds(12), width: width)
            #expect(line.count <= width, "width \(width): \(line.count)")
            #expect(!line.contains("\n") && !line.contains("\r"))
        }
        let line = ProgressBar.render(counts, elapsed: .seconds(12), width: 100)
        #expect(line.hasPrefix("[") && line.contains("4321/100000") && line.contains("ETA") && line.contains("fail 21"))
        let unknown = ProgressBar.render(ProgressBar.Counts(total: nil), elapsed: .seconds(1), width: 80)
        #expect(!unknown.contains("[") && !unknown.contains("ETA"))
    }

    @Test("transform specs parse, and bad ones say what was expected")
    func specs() throws {
        #expect(try TransformSpec.parse("resize:256x256:fill").key == "resize(256x256,fill)")
        #expect(try TransformSpec.parse("resize:64;blur:1.5;round:8").key == "resize(64x64,fit)|blur(1.5)|round(8)")
        #expect(try TransformSpec.parse("crop:1,2,3,4").key == "crop(1,2,3x4)")
        #expect(try TransformSpec.parse("tint:255,0,0,0.25").key == "tint(255,0,0,0.25)")
        for bad in ["", "resize", "resize:0x5", "resize:10x10:squash", "crop:1,2,3", "flip:x", "blur:-1", "tint:300,0,0", "explode:1"] {
            let error = #expect(throws: WebImageError.self, "\(bad)") { try TransformSpec.parse(bad) }
            #expect(error?.code == .invalidArgument)
        }
    }

    @Test("the image-service specs: smart crop, sharpen, flatten, pad, trim, grey, DPR; each with its key")
    func serviceSpecs() throws {
        let keys: [(String, String)] = [
            ("resize:256x256:fill:attention", "resize(256x256,fill,attention)"),
            ("resize:256x256:fill:entropy", "resize(256x256,fill,entropy)"),
            ("resize:256x256:fill:centre", "resize(256x256,fill)"),
            ("resize:256x256:fill:fp:0.25:0.75", "resize(256x256,fill,fp:0.25:0.75)"), ("resize:10x10:fill:FP:1:0", "resize(10x10,fill,fp:1:0)"),
            ("sharpen", "sharpen(0.75)"), ("sharpen:1.5", "sharpen(1.5)"),
            ("flatten", "flatten(ffffff)"), ("flatten:#000", "flatten(000000)"), ("flatten:255,0,0", "flatten(ff0000)"),
            ("pad:300x200", "pad(300x200,ffffff,c)"), ("pad:300x200:none:north", "pad(300x200,none,n)"), ("pad:30x20:black:se", "pad(30x20,000000,se)"),
            ("trim", "trim(10.0)"), ("trim:40", "trim(40.0)"), ("grey", "grey"), ("grayscale", "grey"),
            ("resize:100x50;dpr:2", "resize(200x100,fit)"), ("dpr:1.5;pad:100x100;round:10", "pad(150x150,ffffff,c)|round(15)"),
        ]
        for (spec, key) in keys { #expect(try TransformSpec.parse(spec).key == key, "\(spec)") }
    }

    @Test("absurd or malformed service specs are typed errors naming what was expected", arguments: [
        "resize:100000x10", "resize:5000x10;dpr:2", "resize:10x10:fit:attention", "resize:10x10:fill:faces", "dpr:0", "dpr:100", "dpr:2",
        "dpr:nan", "sharpen:-1", "sharpen:0", "sharpen:11", "trim:300", "trim:-1", "pad:0x5", "pad:10x10:zzz", "pad:10x10:fff:middle",
        "flatten:12345", "flatten:300,0,0", "grey:1", "watermark", "watermark:logo.png", "pad:9000x9000",
        "resize:10x10:fill:fp:1.5:0", "resize:10x10:fill:fp:-0.1:0.5", "resize:10x10:fill:fp:0.5", "resize:10x10:fill:fp:nan:0.5",
        "resize:10x10:fit:fp:0.5:0.5", "resize:10x10:fill:attention:0.5:0.5",
    ])
    func badServiceSpecs(spec: String) {
        let error = #expect(throws: WebImageError.self, "\(spec)") { try TransformSpec.parse(spec) }
        #expect(error?.code == .invalidArgument, "\(spec)")
        let named = ["expected", "dpr", "not enabled"].contains { error?.message.contains($0) == true }
        #expect(named, "\(spec): the message says what was wanted: \(error?.message ?? "")")
    }

    @Test("t= numbers are plain decimals: blur:0x10, blur:1e1, sharpen:+1, dpr:0x2 and inf are refused naming the step; blur:10 and -5 pass")
    func plainTransformNumbers() throws {
        for spec in ["blur:0x10", "blur:1e1", "sharpen:+1", "brightness:0x1p0", "rotate:inf", "dpr:0x2;resize:10x10", "resize:10x10:fill:fp:0x1:0"] {
            let error = #expect(throws: WebImageError.self, "\(spec)") { _ = try TransformSpec.parse(spec) }
            #expect(error?.code == .invalidArgument && error?.message.contains("transform '") == true, "\(spec): \(String(describing: error))")
        }
        #expect(try TransformSpec.parse("blur:10").key == TransformSpec.parse("blur:10.0").key)
        #expect(throws: Never.self) { _ = try TransformSpec.parse("rotate:-5;dpr:1.5;resize:10x10") }
    }

    @Test("watermark files (the tool's paths, a service's directory): a FIFO, a device, a directory or a missing file is refused with a plain message, never read")
    func watermarkFiles() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let fifo = directory.appendingPathComponent("pipe.png")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        for (path, reason) in [(fifo.path, "not a regular file"), ("/dev/zero", "not a regular file"), (directory.path, "not a regular file"),
                               (directory.appendingPathComponent("none.png").path, "no such file")] {
            let error = #expect(throws: WebImageError.self, "\(path)") { _ = try TransformSpec.watermarkFile(path) }
            #expect(error?.message.contains(reason) == true && error?.message.contains("permission") == false
                    && error?.message.contains("Domain=") == false, "\(path): \(String(describing: error))")
        }
        // A service's directory holding a FIFO named like a PNG: start-up says which file and why.
        let config = try await ConfigLayers.service(file: nil, flags: ["thumbnail.watermarks": directory.path]).config
        let error = #expect(throws: WebImageError.self) { _ = try ImageEndpoint.Settings.standard(config: config) }
        #expect(error?.message.contains("pipe.png") == true && error?.message.contains("not a regular file") == true
                && error?.message.contains("Domain=") == false, "\(String(describing: error))")
    }

    @Test("thumbnail.fonts: a family fontconfig does not have stops start-up naming it; installed families (any case) and generic ones pass")
    func fonts() async throws {
        for bad in ["Nonexistent", "DejaVu Sans,Comic Sanss"] {
            let config = try await ConfigLayers.service(file: nil, flags: ["thumbnail.fonts": bad]).config
            let error = #expect(throws: WebImageError.self, "\(bad)") { _ = try ImageEndpoint.Settings.standard(config: config) }
            #expect(error?.code == .invalidArgument && error?.message.contains("thumbnail.fonts") == true && error?.message.contains("installed") == true,
                    "\(String(describing: error))")
        }
        // DejaVu Sans comes with fontconfig on Debian (the default font of text:).
        let good = try await ConfigLayers.service(file: nil, flags: ["thumbnail.fonts": "dejavu sans,serif,Monospace"]).config
        #expect(throws: Never.self) { _ = try ImageEndpoint.Settings.standard(config: good) }
        #expect(ImageTransformers.TextWatermark.isInstalled("DejaVu Sans") == true && ImageTransformers.TextWatermark.isInstalled("Nonexistent-12") == false)
    }

    @Test("watermark specs resolve names through the caller; opacity and margin are bounded")
    func watermarkSpecs() throws {
        let coder = VipsImageCoder()
        let logo = try coder.encode(Image(pixelSize: PixelSize(8), hasAlpha: true, storage: PixelBuffer(size: PixelSize(8), channels: 4, bytes: [UInt8](repeating: 200, count: 256))),
                                    as: .png, options: EncodeOptions())
        let resolve: (String) throws -> Data = { name in
            guard name == "logo" else { throw WebImageError(.invalidArgument, "no watermark '\(name)'") }
            return logo
        }
        let key = try TransformSpec.parse("watermark:logo:nw:0.25:4", watermark: resolve).key
        #expect(key.hasPrefix("watermark(") && key.hasSuffix(",nw,0.25,4)"))
        #expect(try TransformSpec.parse("watermark:logo", watermark: resolve).key.hasSuffix(",se,0.5,10)"))
        #expect(try TransformSpec.parse("watermark:logo", watermark: resolve).key == TransformSpec.parse("watermark:logo:se:0.5:10", watermark: resolve).key)
        for bad in ["watermark:logo:nw:2", "watermark:logo:nw:0.5:-3", "watermark:logo:up", "watermark:other"] {
            #expect(throws: WebImageError.self, "\(bad)") { try TransformSpec.parse(bad, watermark: resolve) }
        }

        // A server's overlays, decoded once: the same keys as from bytes, and the
        // resolver is all that runs per parse.
        let overlay = try ImageTransformers.Watermark.Overlay(data: logo)
        let asked = Lock(0)
        let decoded: (String) throws -> ImageTransformers.Watermark.Overlay = { name in
            asked.withLock { $0 += 1 }
            guard name == "logo" else { throw WebImageError(.invalidArgument, "no watermark '\(name)'") }
            return overlay
        }
        #expect(try TransformSpec.parse("watermark:logo:nw:0.25:4", watermarkOverlay: decoded).key == key)
        #expect(try TransformSpec.parse("dpr:2;watermark:logo:nw:0.25:4", watermarkOverlay: decoded).key.hasSuffix(",nw,0.25,8)"))
        for bad in ["watermark:logo:nw:2", "watermark:other"] {
            #expect(throws: WebImageError.self, "\(bad)") { try TransformSpec.parse(bad, watermarkOverlay: decoded) }
        }
        #expect(asked.withLock { $0 } >= 3)
    }
}

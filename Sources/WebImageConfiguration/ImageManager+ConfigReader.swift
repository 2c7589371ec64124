public import Configuration
public import Foundation
public import WebImage

extension ImageManager.Configuration {
    /// The keys ``init(config:catalog:defaultStorePath:)`` reads itself; plugins
    /// add theirs (``PluginCatalog/knownKeys``).
    public static let configurationKeys: Set<String> = [
        "memory.costLimit", "memory.countLimit",
        "store.kind", "store.path", "store.maxSize", "store.maxAge", "store.sweepInterval",
        "store.shared.kind", "store.shared.url", "store.shared.prefix", "store.shared.timeout",
        "coders", "loaders", "loader.timeout", "loader.maxResponseSize", "loader.originalsBudget",
        "decode.pixelLimit", "decode.memoryLimit", "blocklist.ttl", "blocklist.shared",
        "loader.circuitBreaker.failures", "loader.circuitBreaker.cooldown",
        "encode.quality", "encode.effort", "encode.progressive", "encode.lossless", "encode.keepMetadata",
        "encode.keepColorProfile", "encode.background", "encode.chromaSubsampling",
    ]

    /// Builds a whole pipeline from configuration, choosing every part by name.
    ///
    /// ```swift
    /// let config = ConfigReader(providers: [
    ///     EnvironmentVariablesProvider().prefixKeys(with: "webimage"),   // WEBIMAGE_STORE_KIND=lmdb
    ///     try await FileProvider<JSONSnapshot>(filePath: "/etc/webimage.json"),
    /// ])
    /// let manager = ImageManager(configuration: try .init(config: config, catalog: .standard))
    /// ```
    ///
    /// Keys (docs/configuration.md has the full reference):
    /// `store.kind` (`lmdb`, `filesystem`, `memory`, `none`, or a registered name),
    /// `store.path`, `store.maxSize`, `store.maxAge`, `store.sweepInterval`,
    /// `store.shared.kind` (`none`, or `redis` or `s3` for a shared tier behind the store:
    /// a ``TieredCacheStore``), `store.shared.url`, `store.shared.prefix`, `store.shared.timeout`,
    /// `memory.costLimit`, `memory.countLimit`, `coders` (names, first asked first),
    /// `loaders`, `loader.maxConcurrent`, `loader.timeout`, `loader.maxResponseSize`,
    /// `loader.originalsBudget` (``originalsBudget``),
    /// `loader.order`, `loader.circuitBreaker.failures` and `loader.circuitBreaker.cooldown`
    /// (an ``OriginCircuitBreaker`` when either is set; failures 0 turns it off),
    /// `decode.pixelLimit`, `decode.memoryLimit` (bytes one decode or one step of
    /// a transform chain may take), `blocklist.ttl`, `blocklist.shared` (share
    /// the failed-URL blocklist through the shared tier's Redis), `encode.quality`,
    /// `encode.effort`, `encode.progressive`, `encode.lossless`, `encode.keepMetadata`,
    /// `encode.keepColorProfile`, `encode.background`, `encode.chromaSubsampling`
    /// (``encodeOptions``), and each plugin's own
    /// keys (`vips.allowUntrusted`, `loader.blockPrivateAddresses`, `loader.exemptAddresses`).
    ///
    /// - Parameter defaultStorePath: where a store goes when `store.path` is not set.
    /// - Throws: ``WebImageError/Code/invalidArgument`` naming the key, for an
    ///   unknown name or a value that does not parse. Nothing is half-built.
    public init(config: ConfigReader, catalog: PluginCatalog, defaultStorePath: URL? = nil) throws {
        self.init()
        let values = ConfigValues(config)

        // Memory tier.
        var memory = MemoryImageCache.Limits()
        if let cost = try values.bytes("memory.costLimit") { memory = .init(costLimit: cost, countLimit: memory.countLimit) }
        if let count = try values.int("memory.countLimit", minimum: 0) { memory.countLimit = count }
        memoryCache = MemoryImageCache(limits: memory)

        // Disk tier.
        var limits = CacheLimits()
        if let size = try values.bytes("store.maxSize") { limits.maxSize = size }
        if let age = try values.duration("store.maxAge") { limits.maxAge = age }
        if let interval = try values.duration("store.sweepInterval") { limits.sweepInterval = interval }
        let kind = values.text("store.kind")?.lowercased() ?? "lmdb"
        if kind != "none" {
            guard catalog.stores.names.contains(kind) else {
                throw WebImageError(.invalidArgument, "store.kind: unknown store '\(kind)'; known: \((catalog.stores.names + ["none"]).joined(separator: ", "))")
            }
            let path = values.text("store.path").map { URL(fileURLWithPath: ($0 as NSString).expandingTildeInPath) } ?? defaultStorePath
            var extra: [String: String] = [:]
            for key in catalog.stores.extraKeys(forStoreNamed: kind) { extra[key] = values.text(catalog.configurationKey(forStoreSetting: key)) }
            do {
                store = try catalog.stores.makeStore(named: kind, settings: CacheStoreSettings(directory: path, limits: limits, extra: extra))
            } catch let error as WebImageError {
                throw WebImageError(error.code, "store.kind (\(kind)): \(error.message)", isTransient: false, underlying: error)
            }
        }

        // Shared tier.
        var sharedFailures: (any SharedFailureStore)?
        let sharedKind = values.text("store.shared.kind")?.lowercased() ?? "none"
        if sharedKind != "none" {
            guard catalog.stores.names.contains(sharedKind) else {
                throw WebImageError(.invalidArgument, "store.shared.kind: unknown store '\(sharedKind)'; known: \((catalog.stores.names + ["none"]).joined(separator: ", "))")
            }
            var extra: [String: String] = [:]
            for key in catalog.stores.extraKeys(forStoreNamed: sharedKind) { extra[key] = values.text(catalog.configurationKey(forStoreSetting: key)) }
            extra["url"] = values.list("store.shared.url")?.joined(separator: ",")
            extra["prefix"] = values.text("store.shared.prefix")
            if let timeout = try values.duration("store.shared.timeout") {
                guard timeout > .zero else { throw WebImageError(.invalidArgument, "store.shared.timeout: must be positive") }
                extra["timeoutMilliseconds"] = String(max(1, timeout.wholeMilliseconds))
            }
            let shared: any CacheStore
            do {
                shared = try catalog.stores.makeStore(named: sharedKind, settings: CacheStoreSettings(limits: limits, extra: extra))
            } catch let error as WebImageError {
                throw WebImageError(error.code, "store.shared (\(sharedKind)): \(error.message)", isTransient: false, underlying: error)
            }
            store = TieredCacheStore(local: store, shared: shared)
            sharedFailures = shared as? any SharedFailureStore
        } else if values.text("store.shared.url") != nil {
            throw WebImageError(.invalidArgument, "store.shared.url is set but store.shared.kind is none; set store.shared.kind = redis or s3")
        }

        // Coders, first listed asked first.
        let coderNames = values.list("coders") ?? catalog.coders.map(\.name)
        let coderRegistry = CoderRegistry()
        for name in coderNames.reversed() {
            guard let entry = catalog.coders.first(where: { $0.name == name.lowercased() }) else {
                throw WebImageError(.invalidArgument, "coders: unknown coder '\(name)'; known: \(catalog.coders.map(\.name).joined(separator: ", "))")
            }
            coderRegistry.register(try entry.make(config), name: entry.name)
        }
        coders = coderRegistry

        // Loaders.
        let loaderNames = values.list("loaders") ?? catalog.loaders.map(\.name)
        let loaderRegistry = LoaderRegistry()
        for name in loaderNames.reversed() {
            guard let entry = catalog.loaders.first(where: { $0.name == name.lowercased() }) else {
                throw WebImageError(.invalidArgument, "loaders: unknown loader '\(name)'; known: \(catalog.loaders.map(\.name).joined(separator: ", "))")
            }
            loaderRegistry.register(try entry.make(config), name: entry.name, schemes: entry.schemes)
        }
        loaders = loaderRegistry

        if let timeout = try values.loaderTimeout() { self.timeout = timeout }
        if let size = try values.loaderMaxResponseSize() { maxResponseSize = size }
        if let budget = try values.bytes("loader.originalsBudget") {
            guard budget > 0 else { throw values.invalid("loader.originalsBudget", "\(budget)", "a size above zero") }
            originalsBudget = budget
        }
        if let pixels = try values.int("decode.pixelLimit", minimum: 1) { decodeOptions.pixelLimit = pixels }
        if let bytes = try values.bytes("decode.memoryLimit") {
            guard bytes > 0 else { throw values.invalid("decode.memoryLimit", "\(bytes)", "a size above zero") }
            decodeOptions.memoryLimit = bytes
        }
        let blocklistTTL = try values.duration("blocklist.ttl")
        var blocklistShared: (any SharedFailureStore)?
        if try values.bool("blocklist.shared") == true {
            guard sharedKind != "none" else {
                throw WebImageError(.invalidArgument, "blocklist.shared needs a shared tier to keep the failures in; set store.shared.kind = redis and store.shared.url")
            }
            guard let sharedFailures else {
                throw WebImageError(.invalidArgument, "blocklist.shared: the '\(sharedKind)' store cannot keep failed URLs (it is no SharedFailureStore)")
            }
            blocklistShared = sharedFailures
        }
        if blocklistTTL != nil || blocklistShared != nil {
            blocklist = FailedURLBlocklist(ttl: blocklistTTL ?? blocklist.ttl, shared: blocklistShared)
        }
        let breakerFailures = try values.int("loader.circuitBreaker.failures", minimum: 0)
        let breakerCooldown = try values.duration("loader.circuitBreaker.cooldown")
        if let breakerCooldown, breakerCooldown <= .zero {
            throw WebImageError(.invalidArgument, "loader.circuitBreaker.cooldown must be longer than zero, not \(breakerCooldown)")
        }
        if breakerFailures != nil || breakerCooldown != nil, breakerFailures != 0 {
            originBreaker = OriginCircuitBreaker(failureThreshold: breakerFailures ?? OriginCircuitBreaker.defaultFailureThreshold,
                                                 cooldown: breakerCooldown ?? OriginCircuitBreaker.defaultCooldown, logger: logger)
        }
        encodeOptions = try values.encodeOptions(prefix: "encode", base: encodeOptions)
    }
}

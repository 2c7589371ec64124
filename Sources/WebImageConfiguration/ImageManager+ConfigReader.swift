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
        try configureMemory(values)
        let limits = try Self.cacheLimits(values)
        let shared = try Self.sharedTier(values, catalog, limits: limits)
        try configurePlugins(config, values, catalog)
        try configureLoads(values)
        try configureBlocklist(values, shared: (shared.kind, shared.store as? any SharedFailureStore))
        try configureBreaker(values)
        encodeOptions = try values.encodeOptions(prefix: "encode", base: encodeOptions)
        // The disk tier last: an LMDB store makes its files when it opens, so every
        // other value is judged first and a refused configuration leaves none behind.
        try configureStore(values, catalog, limits: limits, defaultStorePath: defaultStorePath)
        if let sharedStore = shared.store { store = TieredCacheStore(local: store, shared: sharedStore) }
    }

    /// The memory tier: `memory.costLimit`, `memory.countLimit`.
    private mutating func configureMemory(_ values: ConfigValues) throws {
        var memory = MemoryImageCache.Limits()
        if let cost = try values.bytes("memory.costLimit") { memory = .init(costLimit: cost, countLimit: memory.countLimit) }
        if let count = try values.int("memory.countLimit", minimum: 0) { memory.countLimit = count }
        memoryCache = MemoryImageCache(limits: memory)
    }

    /// `store.maxSize`, `store.maxAge`, `store.sweepInterval`.
    private static func cacheLimits(_ values: ConfigValues) throws -> CacheLimits {
        var limits = CacheLimits()
        // Zero is refused, not read as "off": a size or an age of 0 empties the
        // store at every sweep, and an interval of 0 sweeps without a pause. The
        // durations take a second at least (1e-10s is more than 0, and as bad).
        func atLeast(_ key: String, _ isEnough: Bool, _ least: String, _ what: String) throws {
            guard isEnough else { throw WebImageError(.invalidArgument, "\(key): less than \(least) would \(what); give \(least) or more") }
        }
        if let size = try values.bytes("store.maxSize") {
            try atLeast("store.maxSize", size > 0, "1 byte", "remove every entry at each sweep")
            limits.maxSize = size
        }
        if let age = try values.duration("store.maxAge") {
            try atLeast("store.maxAge", age >= .seconds(1), "1s", "remove every entry at each sweep")
            limits.maxAge = age
        }
        if let interval = try values.duration("store.sweepInterval") {
            try atLeast("store.sweepInterval", interval >= .seconds(1), "1s", "sweep the store without a pause")
            limits.sweepInterval = interval
        }
        return limits
    }

    /// A store the catalog makes: `kind` checked, its own keys read by its
    /// factory from its scope, a factory's error prefixed with `what`.
    private static func makeStore(_ kind: String, key: String, what: String, _ catalog: PluginCatalog,
                                  settings: CacheStoreSettings) throws -> any CacheStore {
        guard catalog.stores.names.contains(kind) else {
            throw WebImageError(.invalidArgument, "\(key): unknown store '\(kind)'; known: \((catalog.stores.names + ["none"]).joined(separator: ", "))")
        }
        do {
            return try catalog.stores.makeStore(named: kind, settings: settings)
        } catch let error as WebImageError {
            throw WebImageError(error.code, "\(what) (\(kind)): \(error.message)", isTransient: false, underlying: error)
        }
    }

    /// The disk tier: `store.kind` (LMDB unless `none`), `store.path`.
    private mutating func configureStore(_ values: ConfigValues, _ catalog: PluginCatalog, limits: CacheLimits, defaultStorePath: URL?) throws {
        let kind = values.text("store.kind")?.lowercased() ?? "lmdb"
        guard kind != "none" else { return }
        if let text = values.text("store.path"), text.trimmingCharacters(in: .whitespaces).isEmpty {
            throw values.invalid("store.path", text, "a directory (leave it unset for the default)")
        }
        let path = values.text("store.path").map { URL(fileURLWithPath: expandingHome($0)) } ?? defaultStorePath
        do {
            store = try Self.makeStore(kind, key: "store.kind", what: "store.kind", catalog,
                                       settings: CacheStoreSettings(directory: path, limits: limits, values: values))
        } catch let error as WebImageError where error.code != .invalidArgument {
            // A store that could not open where it was put: its path, not its kind, is at fault.
            let message = (error.underlying as? WebImageError)?.message ?? error.message
            throw WebImageError(error.code, "\(values.text("store.path") != nil ? "store.path" : "store") (\(kind)): \(message)", isTransient: false, underlying: error.underlying)
        }
    }

    /// The shared tier behind the disk tier: `store.shared.kind`, `.url`, `.prefix`,
    /// `.timeout`. Returns its kind and store (nil for none).
    private static func sharedTier(_ values: ConfigValues, _ catalog: PluginCatalog,
                                   limits: CacheLimits) throws -> (kind: String, store: (any CacheStore)?) {
        let kind = values.text("store.shared.kind")?.lowercased() ?? "none"
        guard kind != "none" else {
            if values.text("store.shared.url") != nil {
                throw WebImageError(.invalidArgument, "store.shared.url is set but store.shared.kind is none; set store.shared.kind = redis or s3")
            }
            return (kind, nil)
        }
        let timeout = try values.duration("store.shared.timeout")
        if let timeout, timeout <= .zero { throw values.invalid("store.shared.timeout", values.text("store.shared.timeout") ?? "", "a positive duration such as 500ms or 2s") }
        let settings = CacheStoreSettings(limits: limits, urls: values.list("store.shared.url") ?? [], prefix: values.text("store.shared.prefix"),
                                          timeout: timeout, values: values)
        return (kind, try Self.makeStore(kind, key: "store.shared.kind", what: "store.shared", catalog, settings: settings))
    }

    /// The coders and loaders, first listed asked first: `coders`, `loaders`.
    /// An empty list (`loaders=`, `"coders": []`) is refused: a manager without
    /// them fails every load, which is a mistake in a template, not a choice.
    private mutating func configurePlugins(_ config: ConfigReader, _ values: ConfigValues, _ catalog: PluginCatalog) throws {
        for (key, known) in [("coders", catalog.coders.map(\.name)), ("loaders", catalog.loaders.map(\.name))] where values.list(key)?.isEmpty == true {
            throw values.invalid(key, values.text(key) ?? "", "a list of at least one of \(known.joined(separator: ", "))")
        }
        let coderRegistry = CoderRegistry()
        for name in (values.list("coders") ?? catalog.coders.map(\.name)).reversed() {
            guard let entry = catalog.coders.first(where: { $0.name == name.lowercased() }) else {
                throw WebImageError(.invalidArgument, "coders: unknown coder '\(name)'; known: \(catalog.coders.map(\.name).joined(separator: ", "))")
            }
            coderRegistry.register(try entry.make(config), name: entry.name)
        }
        coders = coderRegistry
        let loaderRegistry = LoaderRegistry()
        for name in (values.list("loaders") ?? catalog.loaders.map(\.name)).reversed() {
            guard let entry = catalog.loaders.first(where: { $0.name == name.lowercased() }) else {
                throw WebImageError(.invalidArgument, "loaders: unknown loader '\(name)'; known: \(catalog.loaders.map(\.name).joined(separator: ", "))")
            }
            loaderRegistry.register(try entry.make(config), name: entry.name, schemes: entry.schemes)
        }
        loaders = loaderRegistry
    }

    /// What bounds one load: the loader's timeout and response size, the
    /// originals' budget, the decode's pixel and memory limits.
    private mutating func configureLoads(_ values: ConfigValues) throws {
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
    }

    /// `blocklist.ttl`, and `blocklist.shared` through the shared tier.
    private mutating func configureBlocklist(_ values: ConfigValues, shared: (kind: String, failures: (any SharedFailureStore)?)) throws {
        let ttl = try values.duration("blocklist.ttl")
        var sharedFailures: (any SharedFailureStore)?
        if try values.bool("blocklist.shared") == true {
            guard shared.kind != "none" else {
                throw WebImageError(.invalidArgument, "blocklist.shared needs a shared tier to keep the failures in; set store.shared.kind = redis and store.shared.url")
            }
            guard let failures = shared.failures else {
                throw WebImageError(.invalidArgument, "blocklist.shared: the '\(shared.kind)' store cannot keep failed URLs (it is no SharedFailureStore)")
            }
            sharedFailures = failures
        }
        if ttl != nil || sharedFailures != nil {
            blocklist = FailedURLBlocklist(ttl: ttl ?? blocklist.ttl, shared: sharedFailures)
        }
    }

    /// `loader.circuitBreaker.failures` (0 turns it off) and `.cooldown`.
    private mutating func configureBreaker(_ values: ConfigValues) throws {
        let failures = try values.int("loader.circuitBreaker.failures", minimum: 0)
        let cooldown = try values.duration("loader.circuitBreaker.cooldown")
        if let cooldown, cooldown <= .zero {
            throw WebImageError(.invalidArgument, "loader.circuitBreaker.cooldown must be longer than zero, not \(cooldown)")
        }
        if failures != nil || cooldown != nil, failures != 0 {
            originBreaker = OriginCircuitBreaker(failureThreshold: failures ?? OriginCircuitBreaker.defaultFailureThreshold,
                                                 cooldown: cooldown ?? OriginCircuitBreaker.defaultCooldown, logger: logger)
        }
    }
}

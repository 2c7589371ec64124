public import Foundation

/// Factories for cache stores, by name, so that configuration can choose a
/// backend (`store.kind = lmdb`) without code changes.
///
/// Built in: `memory` (``MemoryCacheStore``) and `filesystem` (``FileCacheStore``).
/// Plugins add theirs (`lmdb`); a third-party store registers its own name.
public final class CacheStoreRegistry: Sendable {
    /// Makes a store from settings. Throws ``WebImageError`` with code
    /// ``WebImageError/Code/invalidArgument`` for settings it cannot use.
    public typealias Factory = @Sendable (CacheStoreSettings) throws -> any CacheStore

    private struct Entry: Sendable {
        let factory: Factory
        let scope: String
        let keys: [String]
    }

    private let registry = Registry<Entry>()

    public init() {}

    /// A registry with the built-in `memory` and `filesystem` stores.
    public static var standard: CacheStoreRegistry {
        let registry = CacheStoreRegistry()
        registry.register(name: "memory") { settings in
            MemoryCacheStore(limits: settings.limits)
        }
        registry.register(name: "filesystem", keys: ["readsOnCallingThread"]) { settings in
            try FileCacheStore(directory: settings.requireDirectory(), limits: settings.limits,
                               readsOnCallingThread: settings.values.bool("readsOnCallingThread") ?? true)
        }
        return registry
    }

    /// Registers a factory under a name.
    /// - Parameters:
    ///   - name: the name configuration selects it by (`store.kind`).
    ///   - scope: where its own settings live in configuration; `store.<name>` unless given.
    ///   - keys: the settings it reads, relative to `scope` (`mapSize` for
    ///     `store.lmdb.mapSize`), so that configuration knows them and refuses a misspelling.
    ///   - factory: makes the store; its ``CacheStoreSettings/values`` are scoped to `scope`.
    @discardableResult
    public func register(name: String, scope: String? = nil, keys: [String] = [], factory: @escaping Factory) -> RegistrationToken {
        registry.register(Entry(factory: factory, scope: scope ?? "store.\(name)", keys: keys), names: [name])
    }

    /// The full configuration keys the store registered under `name` reads (`store.lmdb.mapSize`).
    public func configurationKeys(forStoreNamed name: String) -> [String] {
        guard let entry = registry.value(named: name) else { return [] }
        return entry.keys.map { "\(entry.scope).\($0)" }
    }

    @discardableResult
    public func unregister(_ token: RegistrationToken) -> Bool { registry.unregister(token) }

    /// Makes a store with the factory registered under `name`, its settings'
    /// ``CacheStoreSettings/values`` scoped to the store's own keys.
    /// - Throws: ``WebImageError/Code/invalidArgument`` naming the unknown store and the known ones.
    public func makeStore(named name: String, settings: CacheStoreSettings) throws -> any CacheStore {
        guard let entry = registry.value(named: name) else {
            throw WebImageError(.invalidArgument, "unknown store '\(name)'; registered: \(names.joined(separator: ", "))")
        }
        var scoped = settings
        scoped.values = settings.values.scoped(to: entry.scope)
        return try entry.factory(scoped)
    }

    /// Registered names, newest first.
    public var names: [String] { registry.names }
}

/// What a store factory is given: where to keep data, the limits, a shared
/// tier's address, and the store's own settings, typed and scoped.
///
/// ```swift
/// let registry = CacheStoreRegistry.standard
/// let store = try registry.makeStore(named: "filesystem", settings: CacheStoreSettings(
///     directory: URL(fileURLWithPath: "/var/cache/images"),
///     values: ConfigValues(["store.filesystem.readsOnCallingThread": "false"])))
/// ```
public struct CacheStoreSettings: Sendable {
    public var directory: URL?
    public var limits: CacheLimits
    /// A shared tier's address: one URL, or a cluster's seed URLs (`store.shared.url`).
    public var urls: [String]
    /// A shared tier's key prefix (`store.shared.prefix`).
    public var prefix: String?
    /// A shared tier's connect and command timeout (`store.shared.timeout`).
    public var timeout: Duration?
    /// The configuration; a factory sees it scoped to its own keys (`mapSize`
    /// for `store.lmdb.mapSize`), and its errors name the full key.
    public var values: ConfigValues

    public init(directory: URL? = nil, limits: CacheLimits = CacheLimits(), urls: [String] = [], prefix: String? = nil,
                timeout: Duration? = nil, values: ConfigValues = ConfigValues([:])) {
        self.directory = directory
        self.limits = limits
        self.urls = urls
        self.prefix = prefix
        self.timeout = timeout
        self.values = values
    }

    /// The directory, or an error saying the store needs one.
    public func requireDirectory() throws -> URL {
        guard let directory else { throw WebImageError(.invalidArgument, "store.path: this store needs a directory") }
        return directory
    }
}

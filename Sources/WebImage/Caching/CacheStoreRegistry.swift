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
        let extraKeys: [String]
    }

    private let registry = Registry<Entry>()

    public init() {}

    /// A registry with the built-in `memory` and `filesystem` stores.
    public static var standard: CacheStoreRegistry {
        let registry = CacheStoreRegistry()
        registry.register(name: "memory") { settings in
            MemoryCacheStore(limits: settings.limits)
        }
        registry.register(name: "filesystem", extraKeys: ["filesystem.readsOnCallingThread"]) { settings in
            try FileCacheStore(directory: settings.requireDirectory(), limits: settings.limits,
                               readsOnCallingThread: settings.flag("filesystem.readsOnCallingThread") ?? true)
        }
        return registry
    }

    /// Registers a factory under a name.
    /// - Parameters:
    ///   - name: the name configuration selects it by (`store.kind`).
    ///   - extraKeys: store-specific settings the factory reads from
    ///     ``CacheStoreSettings/extra`` (configuration reads them as `store.<key>`).
    ///   - factory: makes the store from its settings.
    @discardableResult
    public func register(name: String, extraKeys: [String] = [], factory: @escaping Factory) -> RegistrationToken {
        registry.register(Entry(factory: factory, extraKeys: extraKeys), names: [name])
    }

    /// The store-specific settings the store registered under `name` reads.
    public func extraKeys(forStoreNamed name: String) -> [String] {
        registry.value(named: name)?.extraKeys ?? []
    }

    @discardableResult
    public func unregister(_ token: RegistrationToken) -> Bool { registry.unregister(token) }

    /// Makes a store with the factory registered under `name`.
    /// - Throws: ``WebImageError/Code/invalidArgument`` naming the unknown store and the known ones.
    public func makeStore(named name: String, settings: CacheStoreSettings) throws -> any CacheStore {
        guard let factory = registry.value(named: name)?.factory else {
            throw WebImageError(.invalidArgument, "unknown store '\(name)'; registered: \(names.joined(separator: ", "))")
        }
        return try factory(settings)
    }

    /// Registered names, newest first.
    public var names: [String] { registry.names }
}

/// What a store factory is given: where to keep data, the limits, and any
/// store-specific settings as strings (for example `lmdb.mapSize`).
public struct CacheStoreSettings: Sendable {
    public var directory: URL?
    public var limits: CacheLimits
    public var extra: [String: String]

    public init(directory: URL? = nil, limits: CacheLimits = CacheLimits(), extra: [String: String] = [:]) {
        self.directory = directory
        self.limits = limits
        self.extra = extra
    }

    /// A true/false setting from ``extra`` (`true`, `yes`, `1`, `on`, `false`, `no`,
    /// `0`, `off`, any case), nil when unset.
    /// - Throws: ``WebImageError/Code/invalidArgument`` naming the key for any other text.
    public func flag(_ key: String) throws -> Bool? {
        guard let text = extra[key] else { return nil }
        guard let flag = Bool(setting: text) else {
            throw WebImageError(.invalidArgument, "\(key): '\(text)' is not \(Bool.settingWords)")
        }
        return flag
    }

    /// The directory, or an error saying the store needs one.
    public func requireDirectory() throws -> URL {
        guard let directory else { throw WebImageError(.invalidArgument, "store.path: this store needs a directory") }
        return directory
    }
}

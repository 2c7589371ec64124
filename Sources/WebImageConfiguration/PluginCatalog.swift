public import Configuration
import Foundation
public import WebImage

/// What configuration can choose from by name: store factories, and coder and
/// loader factories that read their own settings.
///
/// ```swift
/// var catalog = PluginCatalog.core
/// catalog.registerCoder(name: "qoi") { _ in QOICoder() }
/// let configuration = try ImageManager.Configuration(config: reader, catalog: catalog)
/// ```
/// `WebImageKit` offers `PluginCatalog.standard`: the core plus the coders `turbojpeg`
/// and `vips`, the stores `lmdb` and `redis` (the shared tier), and the loader `curl`.
public struct PluginCatalog: Sendable {
    /// Makes a coder; `config` is the whole configuration (read `<name>.…` keys).
    public typealias CoderFactory = @Sendable (_ config: ConfigReader) throws -> any ImageCoder
    /// Makes a loader; `config` is the whole configuration (read `loader.…` keys).
    public typealias LoaderFactory = @Sendable (_ config: ConfigReader) throws -> any Loader

    public var stores: CacheStoreRegistry
    public private(set) var coders: [(name: String, make: CoderFactory)] = []
    public private(set) var loaders: [(name: String, schemes: [String], make: LoaderFactory)] = []
    /// Keys the plugins' factories read, declared when they are registered.
    public private(set) var pluginKeys: Set<String> = []

    /// Every configuration key a pipeline built from this catalog reads: the
    /// manager's own, each registered store's (`store.lmdb.mapSize`) and each
    /// plugin's. ``ConfigKeyCheck`` refuses the others.
    public var knownKeys: Set<String> {
        var keys = ImageManager.Configuration.configurationKeys.union(pluginKeys)
        for name in stores.names { keys.formUnion(stores.configurationKeys(forStoreNamed: name)) }
        return keys
    }

    public init(stores: CacheStoreRegistry = .standard) {
        self.stores = stores
    }

    /// The core alone: stores `memory` and `filesystem`, loader `file`, no coder.
    public static var core: PluginCatalog {
        var catalog = PluginCatalog()
        catalog.registerLoader(name: "file", schemes: ["file"],
                               keys: ["loader.fileRoot", "loader.blockPrivateAddresses", "loader.maxResponseSize", "loader.timeout"]) { config in
            let values = ConfigValues(config)
            // In the untrusted-URL mode (the SSRF guard on), files are refused unless
            // a root confines them; a root confines them in any mode.
            var access = FileLoader.Access.unrestricted
            if let root = values.text("loader.fileRoot"), !root.isEmpty {
                access = .within(URL(fileURLWithPath: expandingHome(root)))
            } else if try values.bool("loader.blockPrivateAddresses") == true {
                access = .refused
            }
            return FileLoader(maxFileSize: try values.loaderMaxResponseSize() ?? LoadRequest.defaultMaxResponseSize, access: access,
                              timeout: try values.loaderTimeout() ?? LoadRequest.defaultTimeout)
        }
        return catalog
    }

    /// Adds (or replaces) a coder factory under a name.
    /// - Parameter keys: the configuration keys the factory reads (`qoi.effort`).
    public mutating func registerCoder(name: String, keys: Set<String> = [], factory: @escaping CoderFactory) {
        pluginKeys.formUnion(keys)
        coders.removeAll { $0.name == name.lowercased() }
        coders.append((name.lowercased(), factory))
    }

    /// Adds (or replaces) a loader factory under a name, for URL schemes.
    /// - Parameter keys: the configuration keys the factory reads (`loader.proxy`).
    public mutating func registerLoader(name: String, schemes: [String], keys: Set<String> = [], factory: @escaping LoaderFactory) {
        pluginKeys.formUnion(keys)
        loaders.removeAll { $0.name == name.lowercased() }
        loaders.append((name.lowercased(), schemes, factory))
    }
}

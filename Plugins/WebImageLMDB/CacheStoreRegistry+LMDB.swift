public import WebImage

extension CacheStoreRegistry {
    /// Registers ``LMDBCacheStore`` under `lmdb`. Settings: the directory and limits;
    /// `store.lmdb.mapSize` and `store.lmdb.maxMapSize` (bytes: `1073741824`, `1GiB`)
    /// and `store.lmdb.readsOnCallingThread`.
    @discardableResult
    public func registerLMDB(name: String = "lmdb") -> RegistrationToken {
        register(name: name, scope: "store.lmdb", keys: ["mapSize", "maxMapSize", "readsOnCallingThread"]) { settings in
            let values = settings.values
            var options = LMDBCacheStore.Options()
            if let flag = try values.bool("readsOnCallingThread") { options.readsOnCallingThread = flag }
            if let size = try mapSize(values, "mapSize") { options.mapSize = size }
            if let size = try mapSize(values, "maxMapSize") {
                guard size >= options.mapSize else {
                    throw values.invalid("maxMapSize", String(size), "at least store.lmdb.mapSize (\(options.mapSize))")
                }
                options.maxMapSize = size
            }
            return try LMDBCacheStore(directory: settings.requireDirectory(), limits: settings.limits, options: options)
        }
    }
}

/// A map size: at least 1 MiB, under which LMDB cannot hold its own pages and the
/// store would fail when it opens, after making its files.
private func mapSize(_ values: ConfigValues, _ key: String) throws -> Int? {
    guard let size = try values.bytes(key) else { return nil }
    guard size >= 1 << 20 else { throw values.invalid(key, values.text(key) ?? String(size), "a size of at least 1MiB such as 268435456 or 1GiB") }
    return size
}

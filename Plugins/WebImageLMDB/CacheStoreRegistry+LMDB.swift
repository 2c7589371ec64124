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
            if let size = try positiveSize(values, "mapSize") { options.mapSize = size }
            if let size = try positiveSize(values, "maxMapSize") { options.maxMapSize = size }
            return try LMDBCacheStore(directory: settings.requireDirectory(), limits: settings.limits, options: options)
        }
    }
}

private func positiveSize(_ values: ConfigValues, _ key: String) throws -> Int? {
    guard let size = try values.bytes(key) else { return nil }
    guard size > 0 else { throw values.invalid(key, String(size), "a positive size such as 1073741824 or 1GiB") }
    return size
}

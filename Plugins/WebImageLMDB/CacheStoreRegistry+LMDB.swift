public import WebImage

extension CacheStoreRegistry {
    /// Registers ``LMDBCacheStore`` under `lmdb`. Settings: the directory and limits;
    /// `extra["lmdb.mapSize"]` and `extra["lmdb.maxMapSize"]` in bytes.
    @discardableResult
    public func registerLMDB(name: String = "lmdb") -> RegistrationToken {
        register(name: name, extraKeys: ["lmdb.mapSize", "lmdb.maxMapSize", "lmdb.readsOnCallingThread"]) { settings in
            var options = LMDBCacheStore.Options()
            if let flag = try settings.flag("lmdb.readsOnCallingThread") { options.readsOnCallingThread = flag }
            for (key, apply) in [("lmdb.mapSize", { (v: Int) in options.mapSize = v }), ("lmdb.maxMapSize", { options.maxMapSize = $0 })] {
                guard let text = settings.extra[key] else { continue }
                guard let value = ByteCount.parse(text), value > 0 else {
                    throw WebImageError(.invalidArgument, "\(key): '\(text)' is not a positive size such as 1073741824 or 1GiB")
                }
                apply(value)
            }
            return try LMDBCacheStore(directory: settings.requireDirectory(), limits: settings.limits, options: options)
        }
    }
}

import Foundation
public import WebImage

extension CacheStoreRegistry {
    /// Registers ``RedisCacheStore`` under `redis`, for the shared tier
    /// (`store.shared.kind = redis`). Settings: the limits (their maximum age is
    /// the sliding TTL); `CacheStoreSettings.urls` (one URL, or several seed URLs),
    /// `CacheStoreSettings.prefix` and `CacheStoreSettings.timeout` (connect and
    /// command timeout), which configuration fills from `store.shared.url`,
    /// `store.shared.prefix` and `store.shared.timeout`.
    @discardableResult
    public func registerRedis(name: String = "redis") -> RegistrationToken {
        register(name: name) { settings in
            guard !settings.urls.isEmpty else {
                throw WebImageError(.invalidArgument, "store.shared.url: the redis store is a shared tier and needs a URL such as redis://127.0.0.1:6379 (store.shared.kind = redis, store.shared.url = …)")
            }
            var configuration = RedisCacheStore.Configuration(urls: settings.urls)
            if let prefix = settings.prefix { configuration.prefix = prefix }
            if let timeout = settings.timeout {
                guard timeout > .zero else { throw WebImageError(.invalidArgument, "store.shared.timeout: must be positive") }
                configuration.connectTimeout = timeout
                configuration.commandTimeout = timeout
            }
            do {
                return try RedisCacheStore(configuration: configuration, limits: settings.limits)
            } catch let error as WebImageError {
                throw WebImageError(.invalidArgument, "store.shared.url: \(error.message)")
            }
        }
    }
}

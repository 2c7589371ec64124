import Foundation
public import WebImage

extension CacheStoreRegistry {
    /// Registers ``RedisCacheStore`` under `redis`, for the shared tier
    /// (`store.shared.kind = redis`). Settings: the limits (their maximum age is
    /// the sliding TTL); `extra["url"]` (one URL, or several seed URLs separated by
    /// commas), `extra["prefix"]`, and `extra["timeoutMilliseconds"]` (connect and
    /// command timeout), which configuration fills from `store.shared.url`,
    /// `store.shared.prefix` and `store.shared.timeout`.
    @discardableResult
    public func registerRedis(name: String = "redis") -> RegistrationToken {
        register(name: name) { settings in
            guard let urls = settings.extra["url"]?.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }).filter({ !$0.isEmpty }),
                  !urls.isEmpty else {
                throw WebImageError(.invalidArgument, "store.shared.url: the redis store is a shared tier and needs a URL such as redis://127.0.0.1:6379 (store.shared.kind = redis, store.shared.url = …)")
            }
            var configuration = RedisCacheStore.Configuration(urls: urls)
            if let prefix = settings.extra["prefix"] { configuration.prefix = prefix }
            if let text = settings.extra["timeoutMilliseconds"] {
                guard let milliseconds = Int(text), milliseconds > 0 else {
                    throw WebImageError(.invalidArgument, "store.shared.timeout: must be positive")
                }
                configuration.connectTimeout = .milliseconds(milliseconds)
                configuration.commandTimeout = .milliseconds(milliseconds)
            }
            do {
                return try RedisCacheStore(configuration: configuration, limits: settings.limits)
            } catch let error as WebImageError {
                throw WebImageError(.invalidArgument, "store.shared.url: \(error.message)")
            }
        }
    }
}

public import Foundation
import Synchronization
@_spi(WebImageInternal) public import WebImage

/// A `CacheStore` in Redis (or Valkey), standalone or Cluster: the shared tier
/// of a fleet, behind each host's local store (`TieredCacheStore`).
///
/// ```swift
/// let shared = try RedisCacheStore(configuration: .init(
///     urls: ["redis://:secret@cache-1:6379", "redis://cache-2:6379"],   // seeds of a cluster
///     prefix: "thumbs:"))
/// configuration.store = TieredCacheStore(local: try LMDBCacheStore(directory: dir), shared: shared)
/// ```
///
/// - **One key per entry**, `prefix + SHA-256(key)` in hex, holding the bytes, the
///   full key (checked on read: a collision is a miss) and the metadata in one
///   value (`CacheEntryCodec`'s layout, the file store's).
/// - **Expiry by last access**: written with `EX maxAge`; a hit is `GETEX … EX
///   maxAge`, which slides the TTL. Without a maximum age, keys do not expire.
/// - **Size** is Redis's business: set `maxmemory` and `maxmemory-policy
///   allkeys-lru` (or `volatile-lru`) on the server. ``removeExpired()`` does
///   nothing; ``totalSize`` and ``count`` `SCAN` the prefix on every primary
///   (slow on a big keyspace: for dashboards, not for requests).
/// - **Connections**: a pool per server, at most
///   ``Configuration/maxConnections`` busy at once, on threads of the store's own
///   (never Swift's cooperative pool, and not the I/O pool, so that a stalled Redis
///   never holds up disk hits). Connect and command timeouts bound every call. A
///   failure marks the server down for ``Configuration/retryDelay``, during which
///   calls fail at once; then the next call reconnects (a restarted server is
///   picked up again by itself).
/// - **AUTH** with a password or an ACL user and password, and `SELECT db`, from
///   the URL (`redis://user:password@host:port/db`).
/// - **Cluster**: see `RedisClient`: keys routed by hash slot; MOVED and ASK
///   followed; the slot map refreshed after a redirection or a failure.
/// - **Pipelining**: ``entries(forKeys:)`` and ``setData(_:)`` send a batch in one
///   round trip per server.
/// - **Shared blocklist**: it is also a `SharedFailureStore`, keeping failed URLs
///   under `prefix + "failed:" + SHA-256(url)` with their TTL
///   (`FailedURLBlocklist(shared: store)`, or `blocklist.shared = true`).
public final class RedisCacheStore: CacheStore {
    /// Where and how to connect.
    public struct Configuration: Sendable {
        /// `redis://[user:password@]host[:port][/db]`; several for the seeds of a cluster.
        public var urls: [String]
        /// Put before every key, so that deployments (and other data) share a server apart.
        public var prefix: String
        /// The longest a connection may take. Default 1 s.
        public var connectTimeout: Duration
        /// The longest a command may wait for its reply. Default 1 s.
        public var commandTimeout: Duration
        /// How long a server that failed is left alone. Default 1 s.
        public var retryDelay: Duration
        /// Connections (and threads) in use at once. Default 16.
        public var maxConnections: Int

        public init(urls: [String], prefix: String = "webimage:", connectTimeout: Duration = .seconds(1),
                    commandTimeout: Duration = .seconds(1), retryDelay: Duration = .seconds(1), maxConnections: Int = 16) {
            self.urls = urls
            self.prefix = prefix
            self.connectTimeout = connectTimeout
            self.commandTimeout = commandTimeout
            self.retryDelay = retryDelay
            self.maxConnections = maxConnections
        }
    }

    public let configuration: Configuration
    let client: RedisClient
    let prefix: Data
    /// Whole seconds of the TTL, nil for no expiry.
    private let ttl: Int?
    private let clock: @Sendable () -> Date
    /// Values that failed their checksum, counted and logged as they are removed.
    private let damaged = DamagedEntryReport(store: "redis")

    /// Makes the store; connects only when first used, so a Redis that is down at
    /// start-up fails no start-up (the tier is then a miss until it is back).
    /// - Parameters:
    ///   - configuration: the URLs, prefix, timeouts and pool size.
    ///   - limits: `maxAge` is the sliding TTL; the size limit is not used (Redis'
    ///     `maxmemory` is).
    ///   - clock: the date reported as a hit's access date.
    /// - Throws: `WebImageError` `.invalidArgument` for a URL it cannot use.
    public init(configuration: Configuration, limits: CacheLimits = CacheLimits(), clock: @escaping @Sendable () -> Date = { Date() }) throws {
        guard !configuration.urls.isEmpty else { throw WebImageError(.invalidArgument, "redis: no URL given") }
        let parsed = try configuration.urls.map(Self.parse)
        let credentials = parsed[0].credentials
        guard parsed.allSatisfy({ $0.credentials == credentials }) else {
            throw WebImageError(.invalidArgument, "redis: the seed URLs disagree on user, password or database")
        }
        guard configuration.maxConnections > 0 else { throw WebImageError(.invalidArgument, "redis: maxConnections must be at least 1") }
        if parsed.count > 1, credentials.database != 0 {
            throw WebImageError(.invalidArgument, "redis: a cluster has only database 0")
        }
        self.configuration = configuration
        self.prefix = Data(configuration.prefix.utf8)
        self.ttl = limits.maxAge.map { max(1, Int($0.timeInterval.rounded(.up))) }
        self.clock = clock
        client = RedisClient(settings: .init(seeds: parsed.map(\.address), credentials: credentials, configuration: configuration))
    }

    /// The parts of one URL.
    static func parse(_ text: String) throws -> (address: RedisAddress, credentials: RedisCredentials) {
        guard let components = URLComponents(string: text.trimmingCharacters(in: .whitespaces)) else {
            throw WebImageError(.invalidArgument, "redis: '\(WebImageError.hidingCredentials(text))' is not a URL")
        }
        guard components.scheme?.lowercased() == "redis" else {
            let scheme = components.scheme.map { "'\($0)'" } ?? "no scheme"
            throw WebImageError(.invalidArgument, "redis: '\(WebImageError.hidingCredentials(text))' has \(scheme); expected redis://host:port (TLS, rediss://, is not supported)")
        }
        guard let host = components.host, !host.isEmpty else { throw WebImageError(.invalidArgument, "redis: '\(WebImageError.hidingCredentials(text))' has no host") }
        let port = components.port ?? 6379
        guard (1...65535).contains(port) else { throw WebImageError(.invalidArgument, "redis: '\(WebImageError.hidingCredentials(text))' has port \(port)") }
        var database = 0
        let path = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        if !path.isEmpty {
            guard let number = Int(path), (0...1_000_000).contains(number) else {
                throw WebImageError(.invalidArgument, "redis: '\(WebImageError.hidingCredentials(text))': the path must be a database number, not '\(path)'")
            }
            database = number
        }
        let user = components.percentEncodedUser.flatMap { $0.removingPercentEncoding }.flatMap { $0.isEmpty ? nil : $0 }
        let password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
        if user != nil, password == nil { throw WebImageError(.invalidArgument, "redis: '\(WebImageError.hidingCredentials(text))' names a user without a password") }
        var bareHost = host
        if bareHost.hasPrefix("["), bareHost.hasSuffix("]") { bareHost = String(bareHost.dropFirst().dropLast()) }
        return (RedisAddress(host: bareHost, port: port), RedisCredentials(user: user, password: password, database: database))
    }

    /// The Redis key of a cache key, as the bytes a command sends.
    func redisKey(_ key: String) -> Data { Data(redisKey(for: key).utf8) }

    /// The Redis key an entry is stored under: the prefix and the key's SHA-256 in
    /// hex (for operators: `redis-cli GET "$(…)"`, `TTL`, `DEL`).
    public func redisKey(for key: String) -> String { configuration.prefix + SHA256Digest.hex(key) }

    private func expiry() -> [Data] { ttl.map { [Data("EX".utf8), Data(String($0).utf8)] } ?? [] }

    func storeError(_ error: any Error, _ what: String) -> WebImageError {
        WebImageError.wrap(error, as: .storeFailed, "redis \(what)")
    }

    // MARK: CacheStore

    public func entry(forKey key: String) async throws -> CacheEntry? {
        let redisKey = redisKey(key)
        let command = ttl == nil ? [Data("GET".utf8), redisKey] : [Data("GETEX".utf8), redisKey] + expiry()
        let reply: RedisValue
        do { reply = try await client.run(command, key: redisKey) } catch { throw storeError(error, "GET") }
        return try decode(reply, key: key, touched: true)
    }

    public func metadata(forKey key: String) async throws -> CacheMetadata? {
        let redisKey = redisKey(key)
        let reply: RedisValue
        do { reply = try await client.run([Data("GET".utf8), redisKey], key: redisKey) } catch { throw storeError(error, "GET") }
        return try decode(reply, key: key, touched: false)?.metadata
    }

    private func decode(_ reply: RedisValue, key: String, touched: Bool) throws -> CacheEntry? {
        switch reply {
        case .null: return nil
        case .error(let message): throw WebImageError(.storeFailed, "redis: \(message)")
        case .string(let blob):
            switch CacheEntryCodec.decode(blob, key: key) {
            case .entry(var entry):
                if touched { entry.metadata.accessedAt = clock() }
                return entry
            case .otherKey:
                return nil  // another key's: not ours
            case .damaged(let reason):
                // Never served as wrong bytes: removed (in the background), so that the load fetches it again.
                damaged.report(key: key, reason: reason)
                let redisKey = redisKey(key)
                Task { [client] in _ = try? await client.run([Data("DEL".utf8), redisKey], key: redisKey) }
                return nil
            }
        default: throw WebImageError(.storeFailed, "redis: unexpected reply \(reply)")
        }
    }

    public func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        try await setData([(key, data, metadata)])
    }

    /// Stores several entries in one round trip per server.
    public func setData(_ entries: [(key: String, data: Data, metadata: CacheMetadata)]) async throws {
        let now = clock()
        let commands = entries.map { entry in
            var metadata = entry.metadata
            metadata.storedAt = now
            let redisKey = redisKey(entry.key)
            return (redisKey, [Data("SET".utf8), redisKey, CacheEntryCodec.encode(entry.data, key: entry.key, metadata: metadata)] + expiry())
        }
        let replies: [RedisValue]
        do { replies = try await client.pipeline(commands) } catch { throw storeError(error, "SET") }
        if let message = replies.lazy.compactMap(\.errorMessage).first {
            throw WebImageError(.storeFailed, "redis SET: \(message)")  // an OOM under maxmemory noeviction, for one
        }
    }

    /// Reads several entries in one round trip per server (sliding their TTLs).
    public func entries(forKeys keys: [String]) async throws -> [String: CacheEntry] {
        let commands = keys.map { key in
            let redisKey = redisKey(key)
            return (redisKey, ttl == nil ? [Data("GET".utf8), redisKey] : [Data("GETEX".utf8), redisKey] + expiry())
        }
        let replies: [RedisValue]
        do { replies = try await client.pipeline(commands) } catch { throw storeError(error, "GET") }
        var found: [String: CacheEntry] = [:]
        for (key, reply) in zip(keys, replies) {
            if let entry = try decode(reply, key: key, touched: true) { found[key] = entry }
        }
        return found
    }

    public func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {
        guard let old = try await metadataAndData(forKey: key) else { return }
        var updated = metadata
        updated.storedAt = old.metadata.storedAt
        let redisKey = redisKey(key)
        let command = [Data("SET".utf8), redisKey, CacheEntryCodec.encode(old.data, key: key, metadata: updated), Data("KEEPTTL".utf8)]
        do { _ = try await client.run(command, key: redisKey) } catch { throw storeError(error, "SET") }
    }

    private func metadataAndData(forKey key: String) async throws -> CacheEntry? {
        let redisKey = redisKey(key)
        do { return try decode(try await client.run([Data("GET".utf8), redisKey], key: redisKey), key: key, touched: false) } catch {
            throw storeError(error, "GET")
        }
    }

    public func removeData(forKey key: String) async throws {
        let redisKey = redisKey(key)
        do { _ = try await client.run([Data("UNLINK".utf8), redisKey], key: redisKey) } catch { throw storeError(error, "UNLINK") }
    }

    /// Removes every key under the prefix, on every primary (`SCAN` + `UNLINK`):
    /// the entries, and the shared blocklist's failures if it keeps them here.
    public func removeAll() async throws {
        try await scan { connection, keys in
            // One UNLINK per key, pipelined: a cluster refuses keys of several slots in one command.
            let replies = try connection.pipeline(keys.map { [Data("UNLINK".utf8), $0] })
            if let message = replies.lazy.compactMap(\.errorMessage).first {
                throw WebImageError(.storeFailed, "redis UNLINK: \(message)")
            }
        }
    }

    /// Nothing: Redis expires keys by their TTL and evicts by `maxmemory`.
    public func removeExpired() async throws {}

    /// The bytes of every entry's data under the prefix (`SCAN`, then each value's
    /// length and footer, pipelined).
    public var totalSize: Int {
        get async throws {
            let total = Totals()
            try await scan { connection, keys in
                let footer = Data(String(-CacheEntryCodec.footerSize).utf8)
                var commands: [[Data]] = []
                for key in keys {
                    commands.append([Data("STRLEN".utf8), key])
                    commands.append([Data("GETRANGE".utf8), key, footer, Data("-1".utf8)])
                }
                let replies = try connection.pipeline(commands)
                for index in stride(from: 0, to: replies.count, by: 2) {
                    guard case .integer(let length) = replies[index], let tail = replies[index + 1].data else { continue }
                    let recordLength = tail.withUnsafeBytes { CacheEntryCodec.recordLength(footer: $0, fileSize: length) }
                    if let recordLength { total.add(length - CacheEntryCodec.footerSize - recordLength) }
                }
            }
            return total.value
        }
    }

    /// The number of entries under the prefix (keys of the shared blocklist, if
    /// any, are not entries and not counted).
    public var count: Int {
        get async throws {
            let total = Totals()
            let entryKeyLength = prefix.count + 64
            try await scan { _, keys in total.add(keys.count(where: { $0.count == entryKeyLength })) }
            return total.value
        }
    }

    /// Closes the idle connections.
    public func close() async { client.close() }

    /// Calls `body` with each batch of keys under the prefix, on every primary.
    func scan(under keyPrefix: Data? = nil, _ body: @escaping @Sendable (RedisConnection, [Data]) throws -> Void) async throws {
        let pattern = Self.globEscaped(keyPrefix ?? prefix) + Data("*".utf8)
        do {
            try await client.onEveryPrimary { connection in
                var cursor = Data("0".utf8)
                repeat {
                    let reply = try connection.command([Data("SCAN".utf8), cursor, Data("MATCH".utf8), pattern, Data("COUNT".utf8), Data("1000".utf8)])
                    guard case .array(let parts) = reply, parts.count == 2, let next = parts[0].data, case .array(let keys) = parts[1] else {
                        throw WebImageError(.storeFailed, "redis SCAN: unexpected reply \(reply)")
                    }
                    let batch = keys.compactMap(\.data)
                    if !batch.isEmpty { try body(connection, batch) }
                    cursor = next
                } while cursor != Data("0".utf8)
            }
        } catch { throw storeError(error, "SCAN") }
    }

    /// A glob pattern matching `bytes` literally.
    static func globEscaped(_ bytes: Data) -> Data {
        var escaped = Data()
        for byte in bytes {
            if [UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "\\")].contains(byte) {
                escaped.append(UInt8(ascii: "\\"))
            }
            escaped.append(byte)
        }
        return escaped
    }
}

/// A running sum that `@Sendable` closures add to.
private final class Totals: Sendable {
    private let sum = Lock(0)
    func add(_ value: Int) { sum.withLock { $0 += value } }
    var value: Int { sum.withLock { $0 } }
}

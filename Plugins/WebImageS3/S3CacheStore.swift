public import Foundation
import Synchronization
@_spi(WebImageInternal) public import WebImage
import WebImageCurl

/// A `CacheStore` in an S3 bucket (AWS S3, MinIO, Cloudflare R2, Google Cloud
/// Storage's XML API): the shared tier of a fleet, behind each host's local store.
///
/// ```swift
/// let s3 = S3Configuration(region: "eu-west-1", credentials: try S3Credentials.fromEnvironment())
/// let bucket = try S3CacheStore(url: "s3://thumbs-cache/v1/", configuration: s3,
///                               limits: CacheLimits(maxAge: .seconds(30 * 86_400)))
/// configuration.store = TieredCacheStore(local: try LMDBCacheStore(directory: dir), shared: bucket)
/// ```
///
/// - **One object per entry**, `PREFIX + SHA-256(key)` in hex, holding the bytes,
///   the full key (checked on read: a collision is a miss), the metadata and the
///   payload's checksum (`CacheEntryCodec`'s layout, the file and Redis stores').
///   A damaged object is deleted and read as a miss.
/// - **Expiry** is the bucket's: a lifecycle rule that expires objects under the
///   prefix after N days (docs/object-storage.md). Every read also checks the
///   entry's age against `maxAge`, counted from when it was written (a bucket
///   keeps no access dates), so an entry past it is a miss even before the rule
///   runs. ``removeExpired()`` does nothing: listing a bucket on every host's
///   sweep would cost more than the rule.
/// - **Size** is the bucket's too. ``totalSize`` and ``count`` list the prefix
///   (ListObjectsV2, 1000 a page): for dashboards, not for requests. The size
///   counts whole objects, the record of each included.
/// - Requests go over a `CurlLoader` of the store's own (``Configuration``): a
///   slow bucket holds its slots, never the origin loader's.
public final class S3CacheStore: CacheStore {
    /// The store's transfers.
    public struct Configuration: Sendable {
        /// Requests in flight at once. Default 32.
        public var maxConcurrentRequests: Int
        /// The longest one request may take. Default 5 s.
        public var timeout: Duration

        public init(maxConcurrentRequests: Int = 32, timeout: Duration = .seconds(5)) {
            self.maxConcurrentRequests = maxConcurrentRequests
            self.timeout = timeout
        }
    }

    /// The bucket.
    public let bucket: String
    /// Put before every object name (`v1/`); may be empty.
    public let prefix: String
    public let s3: S3Configuration
    private let client: S3Client
    private let limits: CacheLimits
    private let timeout: Duration
    private let clock: @Sendable () -> Date
    private let damaged = DamagedEntryReport(store: "s3")

    /// - Parameters:
    ///   - url: `s3://BUCKET/` or `s3://BUCKET/PREFIX/`.
    ///   - configuration: endpoint, region and credentials.
    ///   - limits: `maxAge` is checked on every read; the size limit is not used.
    ///   - store: the store's own transfers.
    ///   - clock: the time ages are measured against.
    /// - Throws: `WebImageError` `.invalidArgument` for a URL, region or endpoint it cannot use.
    public init(url: String, configuration: S3Configuration, limits: CacheLimits = CacheLimits(),
                store: Configuration = Configuration(), clock: @escaping @Sendable () -> Date = { Date() }) throws {
        guard let parsed = URL(string: url), parsed.scheme?.lowercased() == "s3",
              let components = URLComponents(url: parsed, resolvingAgainstBaseURL: false),
              let bucket = components.host, components.query == nil, components.port == nil, components.user == nil else {
            throw WebImageError(.invalidArgument, "'\(url)' is not a bucket URL such as s3://BUCKET/ or s3://BUCKET/PREFIX/")
        }
        do { try S3Location.validate(bucket: bucket) } catch let error as WebImageError {
            throw WebImageError(.invalidArgument, "'\(url)': \(error.message)")
        }
        guard let prefix = components.percentEncodedPath.removingPercentEncoding, prefix.utf8.count <= 512 else {
            throw WebImageError(.invalidArgument, "'\(url)': the prefix is not valid percent-encoded UTF-8 of at most 512 bytes")
        }
        self.bucket = bucket
        self.prefix = String(prefix.drop(while: { $0 == "/" }))
        self.s3 = configuration
        self.limits = limits
        self.timeout = store.timeout
        self.clock = clock
        var curl = CurlLoader.Configuration(maxConcurrentDownloads: store.maxConcurrentRequests, timeout: store.timeout,
                                            maxResponseSize: LoadRequest.defaultMaxResponseSize + (1 << 20))
        curl.connectTimeout = store.timeout
        do { client = try S3Client(configuration: configuration, curl: CurlLoader(configuration: curl)) } catch let error as WebImageError {
            throw WebImageError(.invalidArgument, error.message)
        }
    }

    /// The object an entry is stored in: the prefix and the key's SHA-256 in hex
    /// (for operators: `aws s3 cp s3://BUCKET/$(…) -`).
    public func objectKey(for key: String) -> String { prefix + SHA256Digest.hex(key) }

    private func request(_ method: String, _ objectKey: String, body: Data? = nil) -> S3Request {
        S3Request(method: method, bucket: bucket, key: objectKey, body: body, configuration: s3)
    }

    /// Sends a request, and maps an answer outside 2xx (but `allowed`) to a `storeFailed` error.
    private func send(_ request: S3Request, _ what: String, allowing allowed: Set<Int> = []) async throws -> LoadResponse {
        let response: LoadResponse
        do {
            response = try await client.send(request, what: what, base: LoadRequest(url: request.url, timeout: timeout))
        } catch {
            throw WebImageError.wrap(error, as: .storeFailed, "s3 \(what)").asStoreFailure("s3 \(what)")
        }
        guard (200..<300).contains(response.statusCode) || allowed.contains(response.statusCode) else {
            let error = S3Answer.error(status: response.statusCode, body: response.data, headers: response.headers, what: "s3 \(what)")
            throw error.asStoreFailure("s3 \(what)")
        }
        return response
    }

    // MARK: CacheStore

    public func entry(forKey key: String) async throws -> CacheEntry? {
        let name = objectKey(for: key)
        let response = try await send(request("GET", name), "GET s3://\(bucket)/\(name)", allowing: [404])
        guard response.statusCode != 404 else { return nil }
        switch CacheEntryCodec.decode(response.data, key: key) {
        case .entry(var entry):
            if let maxAge = limits.maxAge, clock().timeIntervalSince(entry.metadata.storedAt) > maxAge.timeInterval { return nil }
            entry.metadata.accessedAt = clock()
            return entry
        case .otherKey:
            return nil
        case .damaged(let reason):
            // Never served as wrong bytes: deleted, so that the load fetches it again.
            damaged.report(key: key, reason: reason)
            _ = try? await send(request("DELETE", name), "DELETE s3://\(bucket)/\(name)", allowing: [404])
            return nil
        }
    }

    public func metadata(forKey key: String) async throws -> CacheMetadata? {
        try await entry(forKey: key)?.metadata
    }

    public func setData(_ data: Data, forKey key: String, metadata: CacheMetadata) async throws {
        var metadata = metadata
        metadata.storedAt = clock()
        let name = objectKey(for: key)
        _ = try await send(request("PUT", name, body: CacheEntryCodec.encode(data, key: key, metadata: metadata)), "PUT s3://\(bucket)/\(name)")
    }

    public func updateMetadata(_ metadata: CacheMetadata, forKey key: String) async throws {
        guard let old = try await entry(forKey: key) else { return }
        var updated = metadata
        updated.storedAt = old.metadata.storedAt
        let name = objectKey(for: key)
        _ = try await send(request("PUT", name, body: CacheEntryCodec.encode(old.data, key: key, metadata: updated)), "PUT s3://\(bucket)/\(name)")
    }

    public func removeData(forKey key: String) async throws {
        let name = objectKey(for: key)
        _ = try await send(request("DELETE", name), "DELETE s3://\(bucket)/\(name)", allowing: [404])
    }

    /// Deletes every object under the prefix, eight at a time.
    public func removeAll() async throws {
        try await list { objects in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, object) in objects.enumerated() {
                    if index >= 8 { try await group.next() }
                    group.addTask { _ = try await self.send(self.request("DELETE", object.key), "DELETE s3://\(self.bucket)/\(object.key)", allowing: [404]) }
                }
                try await group.waitForAll()
            }
        }
    }

    /// Nothing: the bucket's lifecycle rule expires objects, and every read checks the age.
    public func removeExpired() async throws {}

    /// The bytes of every entry's data under the prefix: a listing, then each
    /// object's 16-byte footer (a ranged GET each, sixteen at a time), since the
    /// record's length is in it. For dashboards: it reads every object's tail.
    public var totalSize: Int {
        get async throws {
            let total = Lock(0)
            try await list { objects in
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for (index, object) in objects.enumerated() {
                        if index >= 16, let size = try await group.next() { total.withLock { $0 += size } }
                        group.addTask { try await self.payloadSize(of: object) }
                    }
                    for try await size in group { total.withLock { $0 += size } }
                }
            }
            return total.withLock { $0 }
        }
    }

    /// An object's payload size from its footer; 0 for one without a readable footer.
    private func payloadSize(of object: Object) async throws -> Int {
        var tail = request("GET", object.key)
        tail.headers["Range"] = "bytes=-\(CacheEntryCodec.footerSize)"
        let response = try await send(tail, "GET s3://\(bucket)/\(object.key) (footer)", allowing: [404, 416])
        guard response.statusCode == 206 || response.statusCode == 200, response.data.count >= CacheEntryCodec.footerSize else { return 0 }
        let footer = response.data.suffix(CacheEntryCodec.footerSize)
        let length = footer.withUnsafeBytes { CacheEntryCodec.recordLength(footer: $0, fileSize: object.size) }
        return length.map { object.size - CacheEntryCodec.footerSize - $0 } ?? 0
    }

    /// The number of entries under the prefix.
    public var count: Int {
        get async throws {
            let total = Lock(0)
            try await list { objects in total.withLock { $0 += objects.count } }
            return total.withLock { $0 }
        }
    }

    // MARK: Listing

    struct Object: Sendable { let key: String; let size: Int }

    /// Calls `body` with each page of this store's entry objects (ListObjectsV2,
    /// paged by `start-after`). The listing's `prefix` parameter is the store's
    /// prefix up to its first byte that needs percent-encoding (`v1/` lists `v1`):
    /// S3 wants `/` encoded in a query value and some S3 stand-ins (moto) check
    /// signatures against the decoded value; names are then filtered here.
    func list(_ body: @Sendable ([Object]) async throws -> Void) async throws {
        let stem = String(prefix.prefix(while: { S3Request.encode(String($0), keepingSlash: false) == String($0) }))
        var after: String?
        for _ in 0..<1_000_000 {
            var query = [("list-type", "2"), ("max-keys", "1000")]
            if !stem.isEmpty { query.append(("prefix", stem)) }
            if let after { query.append(("start-after", after)) }
            let what = "LIST s3://\(bucket)/\(prefix)"
            let response = try await send(S3Request(method: "GET", bucket: bucket, key: nil, query: query, configuration: s3), what)
            let page = S3ListPage(response.data)
            let objects = page.objects.compactMap { object -> Object? in
                guard object.key.hasPrefix(prefix), Self.isEntryName(object.key.dropFirst(prefix.count)) else { return nil }
                return Object(key: object.key, size: object.size)
            }
            if !objects.isEmpty { try await body(objects) }
            guard page.isTruncated, let last = page.objects.last?.key, last != after else { return }
            after = last
        }
    }

    /// Whether a name after the prefix is an entry's: 64 lower-case hex digits.
    static func isEntryName(_ name: Substring) -> Bool {
        name.utf8.count == 64 && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

extension WebImageError {
    /// The error as a store's failure (the tiered store degrades on those), its
    /// message kept; cancellation stays cancellation.
    func asStoreFailure(_ context: String) -> WebImageError {
        guard code != .storeFailed, code != .cancelled else { return self }
        return WebImageError(.storeFailed, message.hasPrefix(context) ? message : "\(context): \(message)", isTransient: true,
                             statusCode: statusCode, underlying: self, retryAfter: retryAfter)
    }
}

extension CacheStoreRegistry {
    /// Registers ``S3CacheStore`` under `s3`, for the shared tier
    /// (`store.shared.kind = s3`, `store.shared.url = s3://BUCKET/PREFIX/`, given as
    /// `CacheStoreSettings.urls`). The endpoint, region and credentials come from the
    /// `s3` scope (``S3Configuration/settingKeys``: `s3.endpoint`, `s3.region`, …),
    /// else from the `AWS_*` variables; the timeout from `CacheStoreSettings.timeout`
    /// (`store.shared.timeout`).
    @discardableResult
    public func registerS3(name: String = "s3") -> RegistrationToken {
        register(name: name, scope: "s3", keys: S3Configuration.settingKeys) { settings in
            guard let url = settings.urls.first, settings.urls.count == 1 else {
                throw WebImageError(.invalidArgument, settings.urls.isEmpty
                    ? "store.shared.url: the s3 store is a shared tier and needs a bucket URL such as s3://BUCKET/PREFIX/"
                    : "store.shared.url: the s3 store takes one bucket URL, not \(settings.urls.count)")
            }
            var store = S3CacheStore.Configuration()
            if let timeout = settings.timeout {
                guard timeout > .zero else { throw WebImageError(.invalidArgument, "store.shared.timeout: must be positive") }
                store.timeout = timeout
            }
            let configuration = try S3Configuration(values: settings.values)
            do {
                return try S3CacheStore(url: url, configuration: configuration, limits: settings.limits, store: store)
            } catch let error as WebImageError {
                throw WebImageError(.invalidArgument, "store.shared.url: \(error.message)")
            }
        }
    }
}

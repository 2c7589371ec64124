internal import CCurl
internal import CCurlOps
public import Foundation
import Synchronization
@_spi(WebImageInternal) public import WebImage

/// Loads `http` and `https` URLs with libcurl: one multi handle driven by one
/// thread of its own, connections reused across requests, HTTP/2 multiplexed
/// when the server offers it, gzip/brotli/zstd accepted.
///
/// ```swift
/// let loader = CurlLoader(configuration: .init(maxConcurrentDownloads: 6))
/// configuration.loaders.register(loader, name: "curl", schemes: ["http", "https"])
/// ```
///
/// Limits (see ``Configuration``): concurrent transfers, a total timeout and a
/// connect timeout, the response size (checked against `Content-Length` and while
/// receiving), at most 5 redirects and never to another scheme, TLS verification.
/// Cancelling the calling task removes the transfer at once and frees its
/// connection; no progress is reported after that.
public final class CurlLoader: Loader {
    /// Order of queued transfers of equal priority.
    public enum Order: String, Sendable { case fifo, lifo }

    public struct Configuration: Sendable {
        /// Transfers running at once; the rest wait in the queue. Default 6 (SDWebImage).
        public var maxConcurrentDownloads = 6
        /// Transfers to one origin (scheme, host and port) running at once; nil
        /// (the default) for no limit beyond ``maxConcurrentDownloads``. Set it for a
        /// server that loads URLs its users choose: an origin that accepts
        /// connections and never answers then holds this many slots until their
        /// timeouts, not every slot, and other origins' loads go on. Transfers
        /// over the limit wait in their origin's own queue, and fail as `timedOut`
        /// without reaching it when the origin finishes none of its transfers for a
        /// waiting one's whole timeout, or after four of its timeouts in all. A
        /// burst of one site's images that drains within that is served whole.
        public var maxConcurrentDownloadsPerHost: Int?
        /// The whole transfer, unless the request says otherwise. Default 15 s.
        public var timeout: Duration = LoadRequest.defaultTimeout
        /// Connecting (DNS, TCP, TLS). Default 15 s, bounded by ``timeout``.
        public var connectTimeout: Duration = LoadRequest.defaultTimeout
        /// Which queued transfer starts next among equal priorities. Default FIFO.
        public var order: Order = .fifo
        /// Responses over this many bytes are refused. Default 64 MiB.
        public var maxResponseSize: Int64 = LoadRequest.defaultMaxResponseSize
        /// Redirects followed, never to another scheme. Default 5.
        public var maxRedirects = 5
        /// Refuse loopback, private, link-local (cloud metadata) and other internal
        /// addresses after DNS resolution. Off by default for the library; turn it
        /// on for any server that loads URLs its users give it.
        public var blockPrivateAddresses = false
        /// Ranges the guard lets through though they are internal: an origin on a
        /// private network the deployment means to reach. Empty by default.
        public var exemptAddresses: [AddressRange] = []
        /// A proxy for every request (`http://proxy.internal:3128`, `socks5h://…`).
        /// Nil by default. With the guard off, nil leaves curl to the environment's
        /// proxies (`http_proxy`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`); with the guard
        /// on, nil means no proxy at all, since through a proxy the guard would see
        /// only the proxy's address. With the guard on and a proxy set, the loader
        /// resolves and checks each target itself, redirect hops included, before
        /// handing the request to the proxy.
        public var proxy: String?
        /// The guard's rules with this configuration's exemptions.
        public var addressPolicy: AddressPolicy { AddressPolicy(exempt: exemptAddresses) }
        /// Skip TLS certificate verification. For tests only.
        public var allowInsecureTLS = false
        /// The least time between two progress reports of one transfer.
        public var progressInterval: Duration = .milliseconds(50)
        public var userAgent = "swift-web-image"

        public init(maxConcurrentDownloads: Int = 6, timeout: Duration = LoadRequest.defaultTimeout, order: Order = .fifo,
                    maxResponseSize: Int64 = LoadRequest.defaultMaxResponseSize, blockPrivateAddresses: Bool = false) {
            self.maxConcurrentDownloads = max(1, maxConcurrentDownloads)
            self.timeout = timeout
            self.order = order
            self.maxResponseSize = maxResponseSize
            self.blockPrivateAddresses = blockPrivateAddresses
        }
    }

    public let configuration: Configuration
    /// Made by the first transfer: a process that never loads a URL (a batch of
    /// files, a cache-only service) starts no driver thread and never runs
    /// `curl_global_init`, which initialises OpenSSL (a few milliseconds and a few
    /// MiB of resident library pages per process).
    private let startedDriver = Lock<CurlDriver?>(nil)

    /// Why libcurl could not be loaded (once, at the first transfer), or nil.
    private static let libraryFailure: String? = CCurl_load_library().map { String(cString: $0) }

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    deinit { startedDriver.withLock { $0 }?.shutdown() }

    private var driver: CurlDriver {
        startedDriver.withLock { started in
            if let started { return started }
            let driver = CurlDriver(maxConcurrent: configuration.maxConcurrentDownloads,
                                    maxPerHost: configuration.maxConcurrentDownloadsPerHost, order: configuration.order)
            started = driver
            return driver
        }
    }

    /// Whether a transfer has started the driver (its thread and libcurl's global state).
    package var isStarted: Bool { startedDriver.withLock { $0 != nil } }

    /// The longest one step of the driver thread's loop has taken (its sleep in
    /// `curl_multi_poll` ends within a second), and what the step was: every
    /// transfer waits meanwhile. For tests and diagnosis; zero before the first transfer.
    package var longestDriverStep: (duration: Duration, step: String) {
        startedDriver.withLock { $0 }?.longestStep.withLock { $0 } ?? (.zero, "")
    }

    /// Transfers waiting for a slot, and transfers running: for metrics and tests.
    public var statistics: (queued: Int, active: Int) { startedDriver.withLock { $0 }?.counts.withLock { $0 } ?? (0, 0) }

    public func canLoad(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased() else { return false }
        return (scheme == "http" || scheme == "https") && url.host != nil
    }

    public func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        guard canLoad(request.url) else {
            throw WebImageError(.invalidURL, "CurlLoader loads http and https URLs with a host, not \(request.url.absoluteString)")
        }
        let resolvesTargets = (configuration.blockPrivateAddresses || request.refusesPrivateAddresses) && configuration.proxy != nil
        if resolvesTargets || request.urlPolicy != nil {
            return try await loadFollowingRedirects(request, resolvingTargets: resolvesTargets, progress: progress)
        }
        return try await transfer(request, followsRedirects: true, progress: progress)
    }

    /// Follows redirects here rather than in curl, judging each hop first: by the
    /// request's `LoadRequest.urlPolicy` (a service's allow-list), and behind a
    /// proxy by the SSRF guard, since the open-socket check sees only the proxy.
    /// (The proxy resolves the name again: a name whose answers change between
    /// the two lookups is the one gap left; deny internal ranges at the proxy too.)
    private func loadFollowingRedirects(_ request: LoadRequest, resolvingTargets: Bool,
                                        progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        let scheme = request.url.scheme?.lowercased()
        var current = request
        for hop in 0...configuration.maxRedirects {
            if let policy = request.urlPolicy, let reason = policy(current.url) {
                let what = hop == 0 ? current.url.absoluteString : "\(request.url.absoluteString) redirected to \(current.url.absoluteString), which"
                throw WebImageError(.forbidden, "\(what) \(reason)", isTransient: false)
            }
            if resolvingTargets { try await checkTarget(current.url, original: hop == 0 ? nil : request.url) }
            let response = try await transfer(current, followsRedirects: false, progress: progress)
            guard (300..<400).contains(response.statusCode), response.statusCode != 304 else { return response }
            guard let location = response.headers["location"] else {
                // As curl reports it on the direct path: a redirect with nowhere to go.
                throw WebImageError.httpStatus(response.statusCode, url: current.url.absoluteString, retryAfter: response.headers["retry-after"])
            }
            guard let next = URL(string: location, relativeTo: current.url)?.absoluteURL else {
                throw WebImageError(.badStatus, "\(current.url.absoluteString) redirected to '\(location)', which is not a URL", isTransient: false)
            }
            // Another scheme first: file:///etc/passwd has no host, and is a refusal, not a bad answer.
            guard next.scheme?.lowercased() == scheme else {
                throw WebImageError(.forbidden, "\(request.url.absoluteString) redirected to \(next.absoluteString), another scheme, which is refused")
            }
            guard next.host != nil else {
                throw WebImageError(.badStatus, "\(current.url.absoluteString) redirected to '\(location)', which names no host", isTransient: false)
            }
            // Credentials in a Location would be sent to its host, and what they
            // open kept under the URL that was asked for, which names none.
            guard next.user(percentEncoded: true) == nil, next.password(percentEncoded: true) == nil else {
                throw WebImageError(.forbidden, "\(request.url.absoluteString) redirected to a URL that names a user (user@host), which is refused", isTransient: false)
            }
            current.url = next
        }
        throw WebImageError(.badStatus, "\(request.url.absoluteString) redirected more than \(configuration.maxRedirects) times", isTransient: false)
    }

    /// Resolves the URL's host (on the I/O pool: DNS waits) and refuses it if
    /// any of its addresses is one the guard refuses.
    private func checkTarget(_ url: URL, original: URL?) async throws {
        guard let host = url.host else { throw WebImageError(.invalidURL, "\(url.absoluteString) has no host") }
        let policy = configuration.addressPolicy
        let refusal = try await BlockingThreadPool.io.run { () throws -> (String, String)? in
            let addresses = try AddressPolicy.resolve(host)
            for address in addresses {
                if let reason = policy.refusal(for: address) { return (AddressPolicy.text(of: address), reason) }
            }
            return nil
        }
        if let (address, reason) = refusal {
            let hop = original.map { "\($0.absoluteString) redirected to \(url.absoluteString), which" } ?? url.absoluteString
            throw WebImageError(.forbidden, "\(hop) resolves to \(address), which the SSRF guard refuses (\(reason))")
        }
    }

    /// One request of another shape (a method, a body, an AWS signature) on this
    /// loader's transfers: its limits, its SSRF guard and its queue. Redirects are
    /// not followed. For the S3 client.
    package func perform(_ request: LoadRequest, call: CurlCall,
                         progress: @escaping @Sendable (LoadProgress) -> Void = { _ in }) async throws -> LoadResponse {
        if (configuration.blockPrivateAddresses || request.refusesPrivateAddresses) && configuration.proxy != nil {
            try await checkTarget(request.url, original: nil)
        }
        return try await transfer(request, followsRedirects: false, call: call, progress: progress)
    }

    private func transfer(_ request: LoadRequest, followsRedirects: Bool, call: CurlCall = CurlCall(),
                          progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        try Task.checkCancellation()
        // libcurl is loaded here, not at start (Package.swift, `curlLinking`).
        if let reason = Self.libraryFailure { throw WebImageError(.libraryUnavailable, "libcurl cannot be loaded: \(reason)") }
        let driver = self.driver  // first: curl_global_init runs before any easy handle is made
        let transfer = CurlTransfer(request: request, configuration: configuration, followsRedirects: followsRedirects, call: call, progress: progress)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.attach(continuation)
                // Cancelled already (the handler below ran first, and the driver may
                // have taken its cancellation before this transfer existed for it):
                // ended here, never started.
                guard !transfer.isCancelled else {
                    transfer.finish(.failure(WebImageError(.cancelled, "cancelled")))
                    return
                }
                driver.submit(transfer)
            }
        } onCancel: {
            driver.cancel(transfer)
        }
    }
}

extension LoaderRegistry {
    /// Registers a ``CurlLoader`` for `http` and `https` under `curl`.
    @discardableResult
    public func registerCurl(_ loader: CurlLoader = CurlLoader(), name: String = "curl") -> RegistrationToken {
        register(loader, name: name, schemes: ["http", "https"])
    }
}

internal import CCurl
public import Foundation
import Synchronization
public import WebImage

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
        /// The whole transfer, unless the request says otherwise. Default 15 s.
        public var timeout: Duration = .seconds(15)
        /// Connecting (DNS, TCP, TLS). Default 15 s, bounded by ``timeout``.
        public var connectTimeout: Duration = .seconds(15)
        /// Which queued transfer starts next among equal priorities. Default FIFO.
        public var order: Order = .fifo
        /// Responses over this many bytes are refused. Default 64 MiB.
        public var maxResponseSize: Int64 = 64 << 20
        /// Redirects followed, never to another scheme. Default 5.
        public var maxRedirects = 5
        /// Refuse loopback, private, link-local (cloud metadata) and other internal
        /// addresses after DNS resolution. Off by default for the library; turn it
        /// on for any server that loads URLs its users give it.
        public var blockPrivateAddresses = false
        /// Ranges the guard lets through though they are internal: an origin on a
        /// private network the deployment means to reach (at most 16). Empty by default.
        public var exemptAddresses: [AddressRange] = []
        /// Skip TLS certificate verification. For tests only.
        public var allowInsecureTLS = false
        /// The least time between two progress reports of one transfer.
        public var progressInterval: Duration = .milliseconds(50)
        public var userAgent = "swift-web-image"

        public init(maxConcurrentDownloads: Int = 6, timeout: Duration = .seconds(15), order: Order = .fifo,
                    maxResponseSize: Int64 = 64 << 20, blockPrivateAddresses: Bool = false) {
            self.maxConcurrentDownloads = max(1, maxConcurrentDownloads)
            self.timeout = timeout
            self.order = order
            self.maxResponseSize = maxResponseSize
            self.blockPrivateAddresses = blockPrivateAddresses
        }
    }

    public let configuration: Configuration
    private let driver: CurlDriver

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.driver = CurlDriver(maxConcurrent: configuration.maxConcurrentDownloads, order: configuration.order)
    }

    deinit { driver.shutdown() }

    /// Transfers waiting for a slot, and transfers running: for metrics and tests.
    public var statistics: (queued: Int, active: Int) { driver.counts.withLock { $0 } }

    public func canLoad(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased() else { return false }
        return (scheme == "http" || scheme == "https") && url.host != nil
    }

    public func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        guard canLoad(request.url) else {
            throw WebImageError(.invalidURL, "CurlLoader loads http and https URLs with a host, not \(request.url.absoluteString)")
        }
        try Task.checkCancellation()
        let transfer = CurlTransfer(request: request, configuration: configuration, progress: progress)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.attach(continuation)
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

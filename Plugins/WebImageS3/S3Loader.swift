public import Foundation
public import WebImage
public import WebImageCurl

/// Loads `s3://BUCKET/KEY` URLs from a private bucket: each request signed with
/// AWS Signature V4 by libcurl, sent over a `CurlLoader`'s
/// transfers (its concurrency, timeouts, size limit and SSRF guard, which judges
/// the endpoint's address).
///
/// ```swift
/// let s3 = S3Configuration(region: "eu-west-1", credentials: try S3Credentials.fromEnvironment())
/// configuration.loaders.registerS3(try S3Loader(configuration: s3))
/// let image = try await manager.loadImage(with: URL(string: "s3://photos/2026/cat.jpg")!)
/// ```
///
/// - Revalidation: a stored entry's `ETag` and `Last-Modified` go out as
///   `If-None-Match` and `If-Modified-Since`; S3's 304 keeps the entry.
/// - A service's allow-list (`LoadRequest.urlPolicy`) is asked about the
///   `s3://` URL, whose host is the bucket.
/// - Failures: see ``S3Answer``. A wrong key fails as `forbidden` and never
///   blocklists the URL; `NoSuchKey` is `notFound`; `SlowDown` feeds the origin
///   breaker with its `Retry-After`.
/// - Presigned `https://` URLs need no S3 loader: the curl loader fetches them
///   (with a cache-key filter that drops the signature).
public final class S3Loader: Loader {
    public let configuration: S3Configuration
    let client: S3Client

    /// - Parameters:
    ///   - configuration: endpoint, region and credentials.
    ///   - curl: the transfers to send on. Pass the pipeline's `http` loader to
    ///     share its limits and guard; by default one of its own, with the guard off.
    /// - Throws: `WebImageError` `.invalidArgument` for a region or endpoint it cannot use.
    public init(configuration: S3Configuration, curl: CurlLoader = CurlLoader()) throws {
        self.configuration = configuration
        self.client = try S3Client(configuration: configuration, curl: curl)
    }

    public func canLoad(_ url: URL) -> Bool { url.scheme?.lowercased() == "s3" && url.host != nil }

    public func load(_ request: LoadRequest, progress: @escaping @Sendable (LoadProgress) -> Void) async throws -> LoadResponse {
        let location = try S3Location(url: request.url)
        if let policy = request.urlPolicy, let reason = policy(request.url) {
            throw WebImageError(.forbidden, "\(request.url.absoluteString) \(reason)", isTransient: false)
        }
        let what = "GET \(location)"
        let s3 = S3Request(method: "GET", bucket: location.bucket, key: location.key, configuration: configuration)
        let response = try await client.send(s3, what: what, base: request, progress: progress)
        guard (200..<300).contains(response.statusCode) || response.statusCode == 304 else {
            throw S3Answer.error(status: response.statusCode, body: response.data, headers: response.headers, what: what)
        }
        return LoadResponse(data: response.data, statusCode: response.statusCode, headers: response.headers, url: request.url)
    }
}

extension LoaderRegistry {
    /// Registers an ``S3Loader`` for `s3` URLs under `s3`.
    @discardableResult
    public func registerS3(_ loader: S3Loader, name: String = "s3") -> RegistrationToken {
        register(loader, name: name, schemes: ["s3"])
    }
}

import Foundation
import WebImage
import WebImageCurl

/// Sends signed S3 requests over a `CurlLoader`'s transfers (its queue, limits
/// and SSRF guard), libcurl computing the signature. Answers outside 2xx come
/// back as responses, for the caller to map (``S3Answer``).
final class S3Client: Sendable {
    let configuration: S3Configuration
    let curl: CurlLoader
    private let signing: String

    init(configuration: S3Configuration, curl: CurlLoader) throws {
        try configuration.validate()
        self.configuration = configuration
        self.curl = curl
        signing = "aws:amz:\(configuration.region):s3"
    }

    /// Sends `request`; `base` carries the load's limits, validators, priority and
    /// admission check (its URL and headers are replaced by the request's).
    func send(_ request: S3Request, what: String, base: LoadRequest? = nil,
              progress: @escaping @Sendable (LoadProgress) -> Void = { _ in }) async throws -> LoadResponse {
        guard let credentials = configuration.credentials else {
            throw WebImageError(.forbidden, "\(what): no S3 credentials: set s3.accessKeyID and s3.secretAccessKey, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                                isTransient: true)
        }
        var load = base ?? LoadRequest(url: request.url)
        load.url = request.url
        // The bucket's endpoint is the operator's, not a stranger's choice: the loader's own guard judges it.
        load.refusesPrivateAddresses = false
        load.headers = load.headers.merging(request.headers) { _, s3 in s3 }
        let call = CurlCall(method: request.method, body: request.body, awsSigV4: signing,
                            credentials: (credentials.accessKeyID, credentials.secretAccessKey), acceptsAnyStatus: true)
        return try await curl.perform(load, call: call, progress: progress)
    }
}

import HTTPTypes
import WebImage

extension WebImageError {
    /// The HTTP status a thumbnail service answers with for this failure:
    ///
    /// | code | status |
    /// | --- | --- |
    /// | `invalidURL`, `invalidArgument` | 400 Bad Request |
    /// | `forbidden` (allow-list, SSRF guard) | 403 Forbidden |
    /// | `notFound` (upstream 404/410) | 404 Not Found |
    /// | `tooLarge`, `pixelLimitExceeded` | 413 Content Too Large |
    /// | `unsupportedFormat`, `decodeFailed` | 415 Unsupported Media Type |
    /// | `badStatus`, `loadFailed` (upstream errors, refused connections) | 502 Bad Gateway |
    /// | `timedOut` | 504 Gateway Timeout |
    /// | `originUnavailable` (the origin's circuit is open) | 503 Service Unavailable, with `Retry-After` |
    /// | `shutDown` (the server is stopping; its grace period ended) | 503 Service Unavailable |
    /// | `blockedURL` | the status of the failure that blocked it |
    /// | anything else | 500 Internal Server Error |
    public var httpStatus: HTTPResponse.Status {
        switch code {
        case .invalidURL, .invalidArgument: .badRequest
        case .forbidden: .forbidden
        case .notFound: .notFound
        case .tooLarge, .pixelLimitExceeded: .contentTooLarge
        case .unsupportedFormat, .decodeFailed: .unsupportedMediaType
        case .badStatus, .loadFailed: .badGateway
        case .timedOut: .gatewayTimeout
        case .originUnavailable, .shutDown: .serviceUnavailable
        case .blockedURL: (underlying as? WebImageError)?.httpStatus ?? .badGateway
        case .cancelled: .init(code: 499, reasonPhrase: "Client Closed Request")
        default: .internalServerError
        }
    }

    /// `Retry-After` in whole seconds (rounded up, at least 1), when the failure
    /// knows how long it lasts (``WebImageError/retryAfter``).
    public var retryAfterSeconds: Int? {
        guard let retryAfter, retryAfter > .zero else { return nil }
        let (seconds, attoseconds) = retryAfter.components
        return max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0))
    }
}

import Foundation
public import HTTPTypes
public import WebImage

extension WebImageError {
    /// The status an image service answers with for this failure (the other
    /// direction from `WebImageError.httpStatus(_:url:)`, which makes an error
    /// from an origin's status):
    ///
    /// | code | status |
    /// | --- | --- |
    /// | `invalidURL`, `invalidArgument` | 400 Bad Request |
    /// | `forbidden` (allow-list, SSRF guard, signature) | 403 Forbidden |
    /// | `notFound` (the origin's 404 or 410) | 404 Not Found |
    /// | `stepDoesNotFit` (a crop outside the image, a margin larger than it) | 422 Unprocessable Content |
    /// | `tooLarge`, `pixelLimitExceeded`, `costLimitExceeded` | 413 Content Too Large |
    /// | `unsupportedFormat`, `decodeFailed` | 415 Unsupported Media Type |
    /// | `badStatus`, `loadFailed` (the origin's errors, refused connections) | 502 Bad Gateway |
    /// | `timedOut` | 504 Gateway Timeout |
    /// | `originUnavailable` (the origin's circuit is open), `overloaded`, `shutDown`, `workTimedOut` (the deadline passed in the service's own work) | 503 Service Unavailable |
    /// | `blockedURL` | the status of the failure that blocked it |
    /// | `cancelled` | 499 (the client went away) |
    /// | anything else | 500 Internal Server Error |
    public var responseStatus: HTTPResponse.Status {
        switch code {
        case .invalidURL, .invalidArgument: .badRequest
        case .forbidden: .forbidden
        case .notFound: .notFound
        case .stepDoesNotFit: .unprocessableContent
        case .tooLarge, .pixelLimitExceeded, .costLimitExceeded: .contentTooLarge
        case .unsupportedFormat, .decodeFailed: .unsupportedMediaType
        case .badStatus, .loadFailed: .badGateway
        case .timedOut: .gatewayTimeout
        case .originUnavailable, .shutDown, .overloaded, .workTimedOut: .serviceUnavailable
        case .blockedURL: (underlying as? WebImageError)?.responseStatus ?? .badGateway
        case .cancelled: .init(code: 499, reasonPhrase: "Client Closed Request")
        default: .internalServerError
        }
    }

    /// What a client may be told about this failure: what went wrong in its terms,
    /// never the operator's detail (internal addresses, the SSRF rule that
    /// matched, configuration keys, advice such as `.retryFailed`). The full
    /// message belongs in the service's log. A `stepDoesNotFit`
    /// is the exception: its message names the request's step and parameter and
    /// the image's size, which the client needs to correct it, and is answered as
    /// it is (a transformer that throws it writes nothing else into it).
    public var clientMessage: String {
        switch code {
        case .invalidURL: "the image URL is not valid"
        case .invalidArgument: "the request is not valid"
        case .stepDoesNotFit: message
        case .forbidden: "fetching this image is not allowed"
        case .notFound: "the origin has no image at this URL"
        case .tooLarge: "the image is larger than this service accepts"
        case .pixelLimitExceeded: "the image or the result asked for has more pixels than this service handles"
        case .costLimitExceeded: "the work asked for is more than this service does for one request"
        case .unsupportedFormat: "the origin's response is not an image format this service reads"
        case .decodeFailed: "the origin's image could not be decoded"
        case .badStatus: statusCode.map { "the origin answered HTTP \($0)" } ?? "the origin answered with an error"
        case .loadFailed: "the image could not be loaded from its origin"
        case .timedOut: "the image's origin did not answer in time"
        case .workTimedOut: "the service is busy and did not finish this image in time; try again shortly"
        case .originUnavailable: "the image's origin is failing; try again later"
        case .overloaded: "the service is busy; try again shortly"
        case .shutDown: "the service is restarting; try again"
        case .cancelled: "the request was cancelled"
        case .blockedURL: ((underlying as? WebImageError)?.clientMessage ?? "the image could not be loaded") + " (a recent failure, not retried yet)"
        default: "the service failed to make this image"
        }
    }

    /// `Retry-After` in whole seconds (rounded up, at least 1), when the failure
    /// knows how long it lasts (`WebImageError.retryAfter`).
    public var retryAfterSeconds: Int? {
        guard let retryAfter, retryAfter > .zero else { return nil }
        let (seconds, attoseconds) = retryAfter.components
        return max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0))
    }
}

extension WebImageError.Code {
    /// The service is answering as many requests as it may (`thumbnail.maxInFlight`).
    public static let overloaded = WebImageError.Code("overloaded")
}

extension ImageResponse {
    /// An error as a response: `WebImageError.responseStatus`, a JSON body
    /// `{"error": CODE, "message": …}`, `Cache-Control: no-store`, and
    /// `Retry-After` when the failure knows when to retry.
    /// - Parameter message: what the client is told; `WebImageError.clientMessage`
    ///   unless the caller knows the error's own message is the client's to see
    ///   (its query's mistakes).
    public static func error(_ error: WebImageError, message: String? = nil) -> ImageResponse {
        let body: [String: String] = ["error": error.code.rawValue, "message": message ?? error.clientMessage]
        let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        var headers: HTTPFields = [.contentType: "application/json", .cacheControl: "no-store", .contentLength: String(data.count)]
        if let seconds = error.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        return ImageResponse(status: error.responseStatus, headerFields: headers, body: data)
    }
}

public import Foundation
public import HTTPTypes

/// What ``ImageEndpoint`` answers: a status, header fields and the body's bytes.
///
/// A framework adapter copies the three into its own response type. For a
/// `HEAD` request the body is empty and `Content-Length` is still the length of
/// the body a `GET` would get.
public struct ImageResponse: Sendable {
    public var status: HTTPResponse.Status
    public var headerFields: HTTPFields
    public var body: Data

    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: Data = Data()) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
    }

    /// The status and header fields as swift-http-types' response head.
    public var head: HTTPResponse { HTTPResponse(status: status, headerFields: headerFields) }
}

extension HTTPField.Name {
    /// `Server-Timing: SOURCE;dur=MILLISECONDS`: where the answer came from and how long it took.
    public static let serverTiming = HTTPField.Name("Server-Timing")!
    /// `X-Image-Source`: `memory`, `disk` or `shared` when the finished image, or
    /// the original it was made from now, came from that tier; `network` when the
    /// original was downloaded for this request.
    public static let imageSource = HTTPField.Name("X-Image-Source")!
    /// `X-Image-Size`: the thumbnail's size in pixels, `WxH`, when the endpoint decoded it.
    public static let imageSize = HTTPField.Name("X-Image-Size")!
    /// `X-Image-Fallback: 1` on a fallback image answered for a failed origin.
    public static let imageFallback = HTTPField.Name("X-Image-Fallback")!
}

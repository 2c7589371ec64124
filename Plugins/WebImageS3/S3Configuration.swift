public import Foundation
public import WebImage

/// Where a bucket is and how to sign requests to it: the endpoint, the region and
/// the credentials that ``S3Loader`` and ``S3CacheStore`` share.
///
/// ```swift
/// var s3 = S3Configuration(region: "eu-west-1")              // AWS, virtual-hosted URLs
/// s3.credentials = try S3Credentials.fromEnvironment()       // AWS_ACCESS_KEY_ID, …
/// let minio = S3Configuration(endpoint: URL(string: "http://minio.internal:9000")!, region: "us-east-1")
/// ```
public struct S3Configuration: Sendable, CustomStringConvertible {
    /// The service's base URL. Nil (the default) for AWS in ``region``:
    /// `https://s3.REGION.amazonaws.com`. MinIO, Cloudflare R2, Google Cloud
    /// Storage and other S3-compatible services name theirs (docs/object-storage.md).
    public var endpoint: URL?
    /// The region requests are signed for (`us-east-1`, `eu-west-1`; `auto` for R2
    /// and Google Cloud Storage). Default `us-east-1`.
    public var region: String
    /// Path-style URLs (`ENDPOINT/BUCKET/KEY`) rather than virtual-hosted ones
    /// (`BUCKET.ENDPOINT/KEY`). Default false; an endpoint that is an IP address or
    /// `localhost` always gets path-style URLs, since no bucket name can go before it.
    public var pathStyle: Bool
    /// The key that signs every request; nil for none (every request then fails
    /// with `WebImageError` `.forbidden` before it is sent).
    public var credentials: S3Credentials?

    public init(endpoint: URL? = nil, region: String = "us-east-1", pathStyle: Bool = false, credentials: S3Credentials? = nil) {
        self.endpoint = endpoint
        self.region = region
        self.pathStyle = pathStyle
        self.credentials = credentials
    }

    /// The endpoint in use: ``endpoint``, or AWS's regional one.
    public var resolvedEndpoint: URL {
        endpoint ?? URL(string: "https://s3.\(region).amazonaws.com")!
    }

    /// Checks what a request needs: a region of letters, digits and dashes, and an
    /// endpoint with an http(s) scheme, a host and no query.
    /// - Throws: `WebImageError` `.invalidArgument` naming the setting.
    public func validate() throws {
        guard !region.isEmpty, region.utf8.count <= 64,
              region.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || $0 == "-" }) else {
            throw WebImageError(.invalidArgument, "s3.region: '\(region)' is not a region name such as us-east-1 (or auto)")
        }
        if let endpoint {
            guard let scheme = endpoint.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  let host = endpoint.host, !host.isEmpty, endpoint.query == nil else {
                throw WebImageError(.invalidArgument, "s3.endpoint: '\(endpoint.absoluteString)' is not an http(s) URL with a host, such as https://s3.eu-west-1.amazonaws.com")
            }
        }
    }

    /// The endpoint, region and addressing; the credentials only by key ID.
    public var description: String {
        "S3Configuration(endpoint: \(resolvedEndpoint.absoluteString), region: \(region), pathStyle: \(pathStyle), credentials: \(credentials.map(\.description) ?? "none"))"
    }
}

/// An access key that signs S3 requests (AWS Signature V4, computed by libcurl).
///
/// Its ``description`` names the key ID only: the secret and the session token
/// never reach a log line or an error message.
public struct S3Credentials: Sendable, Hashable, CustomStringConvertible {
    public var accessKeyID: String
    public var secretAccessKey: String
    /// A temporary credential's token (STS, an instance role), sent as
    /// `x-amz-security-token`; nil for a long-lived key.
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The key from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// `AWS_SESSION_TOKEN`; nil when neither of the first two is set.
    /// - Throws: `WebImageError` `.invalidArgument` when one of the two is set without the other.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> S3Credentials? {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let id = value("AWS_ACCESS_KEY_ID"), secret = value("AWS_SECRET_ACCESS_KEY")
        switch (id, secret) {
        case (nil, nil): return nil
        case (let id?, let secret?): return S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: value("AWS_SESSION_TOKEN"))
        case (nil, _): throw WebImageError(.invalidArgument, "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not")
        case (_, nil): throw WebImageError(.invalidArgument, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
        }
    }

    /// `S3Credentials(accessKeyID: AKIA…, secret: hidden)`.
    public var description: String {
        "S3Credentials(accessKeyID: \(accessKeyID), secret: hidden\(sessionToken == nil ? "" : ", session token: hidden"))"
    }
}

extension S3Configuration {
    /// The settings of the `s3` scope, which the loader and the bucket store
    /// share: `s3.endpoint`, `s3.region`, `s3.pathStyle`, `s3.accessKeyID`,
    /// `s3.secretAccessKey`, `s3.sessionToken`.
    public static let settingKeys = ["endpoint", "region", "pathStyle", "accessKeyID", "secretAccessKey", "sessionToken"]

    /// A configuration from those settings (absent ones: defaults), read from
    /// `values` scoped to `s3`, the credentials from `s3.accessKeyID` and
    /// `s3.secretAccessKey` or else the `AWS_*` variables of `environment`.
    /// - Throws: `WebImageError` `.invalidArgument` naming the key whose value is wrong.
    public init(values: ConfigValues, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.init()
        func value(_ key: String) -> String? { values.text(key).flatMap { $0.isEmpty ? nil : $0 } }
        if let text = value("endpoint") {
            guard let url = URL(string: text) else { throw values.invalid("endpoint", text, "a URL") }
            endpoint = url
        }
        if let region = value("region") ?? environment["AWS_REGION"].flatMap({ $0.isEmpty ? nil : $0 }) { self.region = region }
        if let flag = try values.bool("pathStyle") { pathStyle = flag }
        switch (value("accessKeyID"), value("secretAccessKey")) {
        case (let id?, let secret?): credentials = S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: value("sessionToken"))
        case (nil, nil): credentials = try S3Credentials.fromEnvironment(environment)
        case (nil, _): throw WebImageError(.invalidArgument, "\(values.name("secretAccessKey")) is set but \(values.name("accessKeyID")) is not")
        case (_, nil): throw WebImageError(.invalidArgument, "\(values.name("accessKeyID")) is set but \(values.name("secretAccessKey")) is not")
        }
        do { try validate() } catch let error as WebImageError { throw WebImageError(.invalidArgument, error.message) }
    }
}

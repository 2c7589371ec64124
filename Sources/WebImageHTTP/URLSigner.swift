import CWebImageCrypto
import Foundation

/// Signed request URLs, this project's own scheme: with `thumbnail.signingKey`
/// set, the endpoint answers only requests whose `s` parameter is the
/// HMAC-SHA256, under that key, of the path and the rest of the query exactly as
/// sent, base64url without padding. (It is neither thumbor's, which signs with
/// HMAC-SHA1, nor imgproxy's, which signs the path with a key and a salt: URLs
/// signed for those services do not verify here.)
///
/// ```
/// /thumbnail?url=https%3A%2F%2Fimg.example.com%2Fa.jpg&w=256&h=256&s=Vx7…
///            └──────────────── signed: "/thumbnail?url=…&w=256&h=256" ─┘
/// ```
///
/// A page that embeds thumbnails signs each URL where it renders the page
/// (``sign(_:)``); a shell can sign one with
/// `printf %s "$PATH_AND_QUERY" | openssl dgst -sha256 -hmac "$KEY" -binary | basenc --base64url | tr -d =`.
/// Without signatures anyone may ask the service for any size, transform and
/// format of any allowed image: each is a decode and an encode, and a cache entry.
public struct URLSigner: Sendable {
    private let key: [UInt8]

    /// The shortest key accepted, in bytes: shorter ones are guessable.
    public static let minimumKeyLength = 16

    /// - Returns: nil for a key shorter than ``minimumKeyLength`` bytes.
    public init?(key: String) {
        guard key.utf8.count >= Self.minimumKeyLength else { return nil }
        self.key = Array(key.utf8)
    }

    /// The signature of a path and query (`/thumbnail?url=…&w=256`).
    public func signature(of pathAndQuery: String) -> String {
        var mac = [UInt8](repeating: 0, count: 32)
        let text = Array(pathAndQuery.utf8)
        // Fails only when OpenSSL cannot allocate; the zeroed MAC then matches no
        // signature a client could have been given (verify compares with it).
        _ = CWI_hmac_sha256(key, key.count, text, text.count, &mac)
        return Data(mac).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// The path and query with its signature appended (`…&s=…`).
    public func sign(_ pathAndQuery: String) -> String {
        pathAndQuery + (pathAndQuery.contains("?") ? "&" : "?") + "s=" + signature(of: pathAndQuery)
    }

    /// Whether a request's query carries the right signature for its path. The
    /// signed text is the path, `?`, and the query's other parameters as sent;
    /// exactly one `s` must be present. Compared in constant time.
    public func verify(path: String, query: String?) -> Bool {
        var signatures: [Substring] = []
        var rest: [Substring] = []
        for part in (query ?? "").split(separator: "&", omittingEmptySubsequences: false) {
            if part.hasPrefix("s=") { signatures.append(part.dropFirst(2)) } else { rest.append(part) }
        }
        guard signatures.count == 1 else { return false }
        let expected = Array(signature(of: path + (rest.isEmpty ? "" : "?" + rest.joined(separator: "&"))).utf8)
        let given = Array(signatures[0].utf8)
        guard given.count == expected.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(given, expected) { difference |= a ^ b }
        return difference == 0
    }
}

import CWebImageCrypto
import Foundation

/// AWS Signature V4 as AWS documents it ("Create a signed AWS API request"),
/// written apart from the code under test: it rebuilds the canonical request from
/// what a server received (the path and query decoded and encoded again by
/// Foundation, the query sorted) and says whether the `Authorization` header's
/// signature is the one the secret makes.
enum SigV4Check {
    struct Verdict {
        let valid: Bool
        let canonicalRequest: String
        let signedHeaders: [String]
    }

    static func verify(method: String, uri: String, headers: [String: String], secret: String, region: String) -> Verdict? {
        guard let authorization = headers["authorization"], authorization.hasPrefix("AWS4-HMAC-SHA256 "),
              let date = headers["x-amz-date"], let payload = headers["x-amz-content-sha256"] else { return nil }
        func field(_ name: String) -> String? {
            authorization.components(separatedBy: ", ").map { $0.replacingOccurrences(of: "AWS4-HMAC-SHA256 ", with: "") }
                .first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) }
        }
        guard let credential = field("Credential"), let signed = field("SignedHeaders"), let signature = field("Signature") else { return nil }
        let scope = credential.split(separator: "/").dropFirst().joined(separator: "/")
        guard scope == "\(date.prefix(8))/\(region)/s3/aws4_request" else { return nil }

        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        func encode(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved)! }
        let parts = uri.split(separator: "?", maxSplits: 1).map(String.init)
        let path = parts[0].split(separator: "/", omittingEmptySubsequences: false)
            .map { encode(String($0).removingPercentEncoding!) }.joined(separator: "/")
        var pairs: [(name: String, value: String)] = []
        if parts.count > 1 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding! }
                pairs.append((encode(kv[0]), encode(kv.count > 1 ? kv[1] : "")))
            }
        }
        pairs.sort { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        let query = pairs.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
        let names = signed.split(separator: ";").map(String.init)
        let canonicalHeaders = names.map { "\($0):\((headers[$0] ?? "").trimmingCharacters(in: .whitespaces))\n" }.joined()
        let canonical = [method, path, query, canonicalHeaders, signed, payload].joined(separator: "\n")
        let toSign = ["AWS4-HMAC-SHA256", date, scope, hex(sha256(Array(canonical.utf8)))].joined(separator: "\n")
        var key = Array("AWS4\(secret)".utf8)
        for part in [String(date.prefix(8)), region, "s3", "aws4_request"] {
            key = hmac(key, Array(part.utf8))
        }
        let expected = hex(hmac(key, Array(toSign.utf8)))
        return Verdict(valid: expected == signature, canonicalRequest: canonical, signedHeaders: names)
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        precondition(CWI_sha256(bytes, bytes.count, &out) == 1)
        return out
    }

    static func hmac(_ key: [UInt8], _ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        precondition(CWI_hmac_sha256(key, key.count, bytes, bytes.count, &out) == 1)
        return out
    }

    static func hex<D: Sequence>(_ bytes: D) -> String where D.Element == UInt8 { bytes.map { String(format: "%02x", $0) }.joined() }
}

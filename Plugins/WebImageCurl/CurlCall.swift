internal import CCurl
package import Foundation
import WebImage

/// What a request sends beyond a plain GET: another method, a body, an AWS
/// Signature V4 made by libcurl, and whether a status outside 2xx is the caller's
/// to read. The S3 client's requests go through the loader's transfers with one.
package struct CurlCall: Sendable {
    /// `GET`, `HEAD`, `PUT`, `DELETE` or `POST`.
    package var method: String
    /// The request's body; curl copies it when the transfer is prepared.
    package var body: Data?
    /// libcurl's `CURLOPT_AWS_SIGV4` provider string, `aws:amz:REGION:SERVICE`.
    package var awsSigV4: String?
    /// The access key and secret, as curl's `user:password`. Never logged.
    package var credentials: (accessKeyID: String, secretAccessKey: String)?
    /// Answers outside 2xx come back as responses, not errors.
    package var acceptsAnyStatus: Bool

    package init(method: String = "GET", body: Data? = nil, awsSigV4: String? = nil,
                 credentials: (accessKeyID: String, secretAccessKey: String)? = nil, acceptsAnyStatus: Bool = false) {
        self.method = method
        self.body = body
        self.awsSigV4 = awsSigV4
        self.credentials = credentials
        self.acceptsAnyStatus = acceptsAnyStatus
    }

    /// Sets the method, body and signing options on a prepared handle.
    func apply(to easy: UnsafeMutableRawPointer) throws {
        var codes: [CURLcode] = []
        if let body {
            // The size first, so that curl copies bytes with NULs in them whole.
            codes.append(CCurl_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            // curl asks `Expect: 100-continue` before a body over 1 MiB; a server
            // that never answers it would cost a second per upload.
            codes.append(CCurl_setopt_long(easy, CURLOPT_EXPECT_100_TIMEOUT_MS, 200))
            codes.append(body.withUnsafeBytes { bytes in
                // An empty body still needs a pointer curl can copy from.
                bytes.baseAddress.map { CCurl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0)) }
                    ?? CCurl_setopt_string(easy, CURLOPT_COPYPOSTFIELDS, "")
            })
        }
        switch method {
        case "GET": break
        case "HEAD": codes.append(CCurl_setopt_long(easy, CURLOPT_NOBODY, 1))
        default: codes.append(CCurl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method))
        }
        if let awsSigV4, let credentials {
            guard !credentials.accessKeyID.contains(":") else {
                throw WebImageError(.invalidArgument, "the access key ID contains ':', which no access key ID does")
            }
            codes.append(CCurl_setopt_string(easy, CURLOPT_AWS_SIGV4, awsSigV4))
            codes.append(CCurl_setopt_string(easy, CURLOPT_USERPWD, "\(credentials.accessKeyID):\(credentials.secretAccessKey)"))
        }
        if let failed = codes.first(where: { $0 != CURLE_OK }) {
            // The message names the option's failure, never the credentials.
            throw WebImageError(.loadFailed, "configuring curl for \(method): \(String(cString: curl_easy_strerror(failed)))")
        }
    }
}

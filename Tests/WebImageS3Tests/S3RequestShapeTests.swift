import Foundation
import Synchronization
import Testing
@_spi(WebImageInternal) import WebImage
import WebImageCurl
@testable import WebImageS3
import WebImageTestSupport

@Suite("S3: request shapes, URLs and answers")
struct S3RequestShapeTests {
    let aws = S3Configuration(region: "eu-west-1", credentials: S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"))

    @Test("keys are encoded as SigV4 says: unreserved bytes kept, '/' kept in paths, everything else %XX upper-case")
    func encoding() {
        #expect(S3Request.encodePath("photos/2026/a b+c(1)~é*.jpg") == "photos/2026/a%20b%2Bc%281%29~%C3%A9%2A.jpg")
        #expect(S3Request.encodePath("A-Z_a.z~0/9") == "A-Z_a.z~0/9")
        #expect(S3Request.canonicalQuery([("prefix", "v1/"), ("list-type", "2"), ("start-after", "a=b&c"), ("max-keys", "1000")])
            == "list-type=2&max-keys=1000&prefix=v1%2F&start-after=a%3Db%26c")
    }

    @Test("virtual-hosted URLs on AWS, path-style when asked, for IP and localhost endpoints, dotted buckets over TLS")
    func addressing() {
        #expect(S3Request(method: "GET", bucket: "photos", key: "a b.jpg", configuration: aws).url.absoluteString
            == "https://photos.s3.eu-west-1.amazonaws.com/a%20b.jpg")
        var pathStyle = aws
        pathStyle.pathStyle = true
        #expect(S3Request(method: "GET", bucket: "photos", key: "k", configuration: pathStyle).url.absoluteString
            == "https://s3.eu-west-1.amazonaws.com/photos/k")
        let minio = S3Configuration(endpoint: URL(string: "http://127.0.0.1:9000")!)
        #expect(S3Request(method: "GET", bucket: "photos", key: "k", configuration: minio).url.absoluteString == "http://127.0.0.1:9000/photos/k")
        #expect(S3Request(method: "GET", bucket: "photos", key: "k", configuration: S3Configuration(endpoint: URL(string: "http://localhost:9000/base/")!)).url.absoluteString
            == "http://localhost:9000/base/photos/k")
        #expect(S3Request(method: "GET", bucket: "my.photos", key: "k", configuration: aws).url.absoluteString
            == "https://s3.eu-west-1.amazonaws.com/my.photos/k")
        let list = S3Request(method: "GET", bucket: "photos", key: nil, query: [("prefix", "v1/"), ("list-type", "2")], configuration: aws)
        #expect(list.url.absoluteString == "https://photos.s3.eu-west-1.amazonaws.com/?list-type=2&prefix=v1%2F")
    }

    @Test("every request carries its payload's SHA-256 (curl 7.88 adds none, and S3 refuses a signed request without it); a session token goes along")
    func headers() {
        let get = S3Request(method: "GET", bucket: "b12", key: "k", configuration: aws)
        #expect(get.headers["x-amz-content-sha256"] == S3Request.emptyPayloadHash)
        #expect(get.headers["x-amz-security-token"] == nil)
        let put = S3Request(method: "PUT", bucket: "b12", key: "k", body: Data("hello".utf8), configuration: aws)
        #expect(put.headers["x-amz-content-sha256"] == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
        #expect(S3Request.sha256Hex(Data()) == S3Request.emptyPayloadHash, "an empty body's digest is the constant S3 documents")
        #expect(put.headers["Content-Type"] == "application/octet-stream")
        var temporary = aws
        temporary.credentials?.sessionToken = "FwoGZXIvYXdzEXAMPLE"
        #expect(S3Request(method: "GET", bucket: "b12", key: "k", configuration: temporary).headers["x-amz-security-token"] == "FwoGZXIvYXdzEXAMPLE")
    }

    @Test("s3:// URLs: bucket and decoded key; bad ones are typed errors that say what is wrong")
    func locations() throws {
        let location = try S3Location(url: URL(string: "s3://photos/2026/a%20b.jpg")!)
        #expect(location.bucket == "photos" && location.key == "2026/a b.jpg")
        #expect(location.url.absoluteString == "s3://photos/2026/a%20b.jpg")
        for (bad, words) in [("s3://photos/", "no object key"), ("s3://Photos/k", "not a bucket name"), ("s3://ab/k", "not a bucket name"),
                             ("s3://photos/k?versionId=1", "no port, user, query"), ("https://photos/k", "not an s3:// URL"),
                             ("s3://-photos/k", "not a bucket name"), ("s3://photos:9000/k", "no port")] {
            let error = #expect(throws: WebImageError.self, "\(bad)") { try S3Location(url: URL(string: bad)!) }
            #expect(error?.code == .invalidURL && error?.message.contains(words) == true, "\(bad): \(error?.message ?? "")")
        }
        #expect(throws: WebImageError.self) { try S3Location(bucket: "photos", key: String(repeating: "k", count: 1025)) }
    }

    @Test("credentials never print their secret or token; the environment's are read whole or refused")
    func credentials() throws {
        let key = S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/SECRET", sessionToken: "TOKEN123")
        for text in [key.description, "\(key)", S3Configuration(credentials: key).description] {
            #expect(text.contains("AKIDEXAMPLE") && !text.contains("SECRET") && !text.contains("TOKEN123"), "\(text)")
        }
        let read = try S3Credentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "T"])
        #expect(read == S3Credentials(accessKeyID: "AK", secretAccessKey: "SK", sessionToken: "T"))
        #expect(try S3Credentials.fromEnvironment([:]) == nil)
        #expect(throws: WebImageError.self) { try S3Credentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "AK"]) }
        #expect(throws: WebImageError.self) { try S3Credentials.fromEnvironment(["AWS_SECRET_ACCESS_KEY": "SK"]) }
    }

    @Test("settings: s3.* keys over the AWS_* variables; bad values name their key")
    func settings() throws {
        func s3(_ settings: [String: String]) -> ConfigValues { ConfigValues(settings).scoped(to: "s3") }
        let configured = try S3Configuration(values: s3(["s3.endpoint": "http://minio:9000", "s3.region": "auto", "s3.pathStyle": "true",
                                                         "s3.accessKeyID": "A", "s3.secretAccessKey": "S"]),
                                             environment: ["AWS_ACCESS_KEY_ID": "envA", "AWS_SECRET_ACCESS_KEY": "envS"])
        #expect(configured.endpoint?.absoluteString == "http://minio:9000" && configured.region == "auto" && configured.pathStyle)
        #expect(configured.credentials?.accessKeyID == "A")
        let fromEnvironment = try S3Configuration(values: s3([:]), environment: ["AWS_ACCESS_KEY_ID": "envA", "AWS_SECRET_ACCESS_KEY": "envS", "AWS_REGION": "ap-south-1"])
        #expect(fromEnvironment.credentials?.accessKeyID == "envA" && fromEnvironment.region == "ap-south-1")
        for (settings, key) in [(["s3.pathStyle": "maybe"], "s3.pathStyle"), (["s3.endpoint": "ftp://x"], "s3.endpoint"),
                                (["s3.region": "eu west"], "s3.region"), (["s3.accessKeyID": "A"], "s3.secretAccessKey")] {
            let error = #expect(throws: WebImageError.self) { try S3Configuration(values: s3(settings), environment: [:]) }
            #expect(error?.code == .invalidArgument && error?.message.contains(key) == true, "\(settings): \(error?.message ?? "")")
        }
    }

    @Test("answers: credentials and policy refusals are forbidden and never blocklist; NoSuchKey is notFound; SlowDown carries Retry-After")
    func answers() {
        func document(_ code: String) -> Data { Data("<?xml version=\"1.0\"?><Error><Code>\(code)</Code><Message>m &amp; n</Message></Error>".utf8) }
        let signature = S3Answer.error(status: 403, body: document("SignatureDoesNotMatch"), headers: [:], what: "GET s3://b/k")
        #expect(signature.code == .forbidden && signature.isTransient && signature.message.contains("SignatureDoesNotMatch") && signature.message.contains("s3.secretAccessKey"))
        let denied = S3Answer.error(status: 403, body: document("AccessDenied"), headers: [:], what: "GET s3://b/k")
        #expect(denied.code == .forbidden && denied.isTransient && denied.message.contains("s3:GetObject"))
        let missing = S3Answer.error(status: 404, body: document("NoSuchKey"), headers: [:], what: "GET s3://b/k")
        #expect(missing.code == .notFound && !missing.isTransient)
        let bucket = S3Answer.error(status: 404, body: document("NoSuchBucket"), headers: [:], what: "GET s3://b/k")
        #expect(bucket.code == .notFound && bucket.isTransient)
        let slow = S3Answer.error(status: 503, body: document("SlowDown"), headers: ["retry-after": "7"], what: "GET s3://b/k")
        #expect(slow.isTransient && slow.retryAfter == .seconds(7) && slow.message.contains("SlowDown"))
        #expect(OriginCircuitBreaker.outcome(of: slow) == .backOff(.seconds(7)))
        let region = S3Answer.error(status: 301, body: document("PermanentRedirect"), headers: ["x-amz-bucket-region": "us-west-2"], what: "GET s3://b/k")
        #expect(region.isTransient && region.message.contains("us-west-2") && region.message.contains("s3.region"))
        let empty = S3Answer.error(status: 500, body: Data(), headers: [:], what: "GET s3://b/k")
        #expect(empty.isTransient && empty.statusCode == 500)
        #expect(S3XML.unescape("a &amp; b &lt;c&gt; &#233;&#x41; &bogus; &") == "a & b <c> éA &bogus; &")
    }

    @Test("what curl sends is signed as AWS documents it: an independent SigV4 over the received request matches, for odd keys and listing queries")
    func signedAsAWSDocuments() async throws {
        let server = try await TestHTTPServer.start()
        defer { Task { await server.shutdown() } }
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
        var configuration = S3Configuration(endpoint: server.url("/"), region: "eu-west-1",
                                            credentials: S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: secret, sessionToken: "TOKEN"))
        configuration.pathStyle = true
        let client = try S3Client(configuration: configuration, curl: CurlLoader())
        let shapes = [
            S3Request(method: "GET", bucket: "etag", key: "photos/a b+c(1)é~*.jpg", configuration: configuration),
            S3Request(method: "GET", bucket: "etag", key: nil, query: [("prefix", "v1/x y"), ("list-type", "2"), ("start-after", "v1/a+b=c"), ("max-keys", "1000")],
                      configuration: configuration),
            S3Request(method: "PUT", bucket: "etag", key: "v1/0123", body: Data(repeating: 7, count: 3000), configuration: configuration),
            S3Request(method: "DELETE", bucket: "etag", key: "v1/0123", configuration: configuration),
        ]
        for shape in shapes {
            _ = try await client.send(shape, what: "\(shape.method) \(shape.url)")
        }
        let received = server.stats.withLock { $0.requests }
        #expect(received.count == shapes.count)
        for ((uri, headers), shape) in zip(received, shapes) {
            let verdict = try #require(SigV4Check.verify(method: shape.method, uri: uri, headers: headers, secret: secret, region: "eu-west-1"), "\(uri): \(headers)")
            #expect(verdict.valid, "\(shape.method) \(uri) is not signed as AWS documents:\n\(verdict.canonicalRequest)")
            #expect(Set(["host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"]).isSubset(of: verdict.signedHeaders), "\(verdict.signedHeaders)")
            #expect(headers["x-amz-security-token"] == "TOKEN")
            #expect(!headers.values.contains { $0.contains(secret) }, "the secret went out in a header")
        }
        #expect(SigV4Check.verify(method: "GET", uri: received[0].0, headers: received[0].1, secret: "wrong", region: "eu-west-1")?.valid == false,
                "the check tells a wrong secret apart")
        #expect(received[2].1["x-amz-content-sha256"] == S3Request.sha256Hex(Data(repeating: 7, count: 3000)))
        #expect(received[2].1["content-length"] == "3000")
    }
}

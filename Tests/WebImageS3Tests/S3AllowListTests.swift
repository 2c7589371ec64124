import Foundation
import Testing
import WebImageHTTP
import WebImage
import WebImageS3

@Suite("The service's allow-list and s3:// sources")
struct S3AllowListTests {
    @Test("s3://BUCKET entries allow that bucket's s3:// URLs only; host entries and * never allow a bucket; s3://* allows any")
    func buckets() throws {
        let list = try #require(HostAllowList(["s3://photos", "images.example.com"]))
        #expect(list.allows(URL(string: "s3://photos/a.jpg")!))
        #expect(!list.allows(URL(string: "s3://other/a.jpg")!))
        #expect(!list.allows(URL(string: "http://photos/a.jpg")!), "a bucket entry is no host entry")
        #expect(!list.allows(URL(string: "s3://images.example.com/a.jpg")!), "a host entry is no bucket entry")
        #expect(list.allows(URL(string: "https://images.example.com/a.jpg")!))
        #expect(list.namesBuckets)
        #expect(!(try #require(HostAllowList(["*"]))).allows(URL(string: "s3://photos/a.jpg")!))
        #expect((try #require(HostAllowList(["s3://*"]))).allows(URL(string: "s3://anything/a.jpg")!))
        #expect(HostAllowList(["s3://"]) == nil && HostAllowList(["s3://Bad!"]) == nil && HostAllowList(["s3://a/b"]) == nil)
        // The allow-list and the S3 plugin read a bucket's name by one rule: what one refuses, so does the other.
        for name in ["ab", "-photos", "photos-", String(repeating: "a", count: 64), "pho tos"] {
            #expect(HostAllowList(["s3://\(name)"]) == nil, "s3://\(name)")
            #expect(throws: WebImageError.self, "s3://\(name)") { try S3Location.validate(bucket: name) }
        }
        for name in ["abc", "my.photos-2", "gcs_bucket", String(repeating: "a", count: 63)] {
            #expect(HostAllowList(["s3://\(name)"]) != nil, "s3://\(name)")
            #expect(throws: Never.self, "s3://\(name)") { try S3Location.validate(bucket: name) }
        }
    }

    @Test("url=s3://… is accepted only when the allow-list names a bucket")
    func schemes() throws {
        var settings = ImageEndpoint.Settings()
        #expect(settings.sourceSchemes == ["http", "https"])
        settings.allowedHosts = try #require(HostAllowList(["s3://photos"]))
        #expect(settings.sourceSchemes == ["http", "https", "s3"])
        let parameters = QueryParameters("url=s3%3A%2F%2Fphotos%2Fa.jpg")
        #expect(try ThumbnailQuery.sourceURL(parameters, schemes: settings.sourceSchemes).absoluteString == "s3://photos/a.jpg")
        #expect(throws: (any Error).self) { try ThumbnailQuery.sourceURL(parameters) }
    }
}

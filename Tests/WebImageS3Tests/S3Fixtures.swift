import Foundation
import WebImage
import WebImageCurl
@testable import WebImageS3
import WebImageSamples
import WebImageTestSupport

/// What the S3 tests share: moto's endpoint as a configuration, objects put
/// with the full key, and a real photo.
enum S3Fixtures {
    static func configuration(_ moto: MotoServer, key: MotoServer.Key? = nil, secret: String? = nil) -> S3Configuration {
        let key = key ?? moto.full
        return S3Configuration(endpoint: moto.endpoint, region: "us-east-1",
                               credentials: S3Credentials(accessKeyID: key.accessKeyID, secretAccessKey: secret ?? key.secretAccessKey))
    }

    /// Puts an object with the full key (a signed PUT that moto checks).
    static func put(_ moto: MotoServer, _ key: String, _ data: Data, contentType: String = "image/jpeg") async throws {
        let client = try S3Client(configuration: configuration(moto), curl: CurlLoader())
        let response = try await client.send(S3Request(method: "PUT", bucket: moto.bucket, key: key, body: data, contentType: contentType,
                                                       configuration: configuration(moto)), what: "PUT \(key)")
        guard response.statusCode == 200 else {
            throw PeerError(message: "PUT \(key): HTTP \(response.statusCode) \(String(decoding: response.data, as: UTF8.self))")
        }
    }

    /// The status and body of a signed GET of an object, as moto has it now.
    static func get(_ moto: MotoServer, bucket: String? = nil, _ key: String) async throws -> (status: Int, data: Data) {
        let client = try S3Client(configuration: configuration(moto), curl: CurlLoader())
        let response = try await client.send(S3Request(method: "GET", bucket: bucket ?? moto.bucket, key: key, configuration: configuration(moto)), what: "GET \(key)")
        return (response.statusCode, response.data)
    }

    /// The demo's JPEG photos (libvips-made), written once per process, on a
    /// thread of their own (libvips blocks; the cooperative pool has two threads).
    static func photos() async throws -> [Data] { try await madePhotos.value }

    private static let madePhotos = Task {
        try await onThread { () throws -> [Data] in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("s3-samples-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let names = try SampleImages.write(to: directory)
            return try names.filter { $0.hasSuffix(".jpg") }.sorted().map { try Data(contentsOf: directory.appendingPathComponent($0)) }
        }
    }

    /// A name no other test uses.
    static func unique(_ stem: String) -> String { "\(stem)-\(UUID().uuidString.prefix(8).lowercased())" }
}

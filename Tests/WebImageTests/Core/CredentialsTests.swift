import Foundation
import Testing
import WebImage

@Suite("Credentials in quoted URLs")
struct CredentialsTests {
    @Test("hidingCredentials replaces a URL's user information, and leaves text without any as it is", arguments: [
        ("redis://admin:s3cret@cache:6379/0", "redis://***@cache:6379/0"),
        ("http://u:p@127.0.0.1:8099/a@b.jpg", "http://***@127.0.0.1:8099/a@b.jpg"),
        ("http://:only-password@proxy:3128", "http://***@proxy:3128"),
        ("http://user@host/x", "http://***@host/x"),
        ("http://a:b@c:d@host/x?e@f", "http://***@host/x?e@f"),
        ("https://images.example.com/a.jpg?mail=a@b", "https://images.example.com/a.jpg?mail=a@b"),
        ("not a url @ all", "not a url @ all"),
    ])
    func hidden(text: String, shown: String) {
        #expect(WebImageError.hidingCredentials(text) == shown)
    }

    @Test("a manager asked for a URL with a password refuses it without quoting the password")
    func managerMessage() async throws {
        let manager = ImageManager(configuration: ImageManager.Configuration())
        let error = await #expect(throws: WebImageError.self) {
            try await manager.loadImage(with: URL(string: "file://alice:S3cret@localhost/tmp/x.jpg")!, options: .avoidDecode)
        }
        #expect(error.map { !$0.message.contains("S3cret") } == true, "\(String(describing: error))")
    }
}

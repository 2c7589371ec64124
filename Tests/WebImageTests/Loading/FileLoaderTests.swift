import Foundation
import Testing
@testable import WebImage
import WebImageTesting

@Suite("FileLoader")
struct FileLoaderTests {
    @Test("passes LoaderConformance")
    func conformance() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = TestCoder.encode(width: 40, height: 30)
        let file = directory.appendingPathComponent("a.timg")
        try data.write(to: file)
        try await LoaderConformance(loader: FileLoader(), fixtures: .init(
            existing: file, existingData: data, missing: directory.appendingPathComponent("missing.png")
        )).run()
    }

    @Test("plain paths, directories, size limit, unreadable files")
    func limits() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("b c.png")
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 1, count: 100))
        try png.write(to: file)
        let loader = FileLoader(maxFileSize: 1000)

        let plain = try await loader.load(LoadRequest(url: URL(fileURLWithPath: file.path))) { _ in }
        #expect(plain.data == png && plain.contentType == "image/png" && plain.lastModified != nil)

        // file://localhost/… is this machine; file://otherhost/… is another's, refused, never read from here.
        let local = try await loader.load(LoadRequest(url: URL(string: "file://localhost" + file.path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!)!)) { _ in }
        #expect(local.data == png)
        for host in ["otherhost", "127.0.0.1", "LOCALHOST.example"] {
            let remote = URL(string: "file://\(host)" + file.path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!)!
            let refused = await #expect(throws: WebImageError.self) { try await loader.load(LoadRequest(url: remote)) { _ in } }
            #expect(refused?.code == .invalidURL && refused?.message.contains("names the host '\(host)'") == true, "\(String(describing: refused))")
        }

        let directoryError = await #expect(throws: WebImageError.self) { try await loader.load(LoadRequest(url: directory)) { _ in } }
        #expect(directoryError?.code == .invalidURL && directoryError?.message.contains("directory") == true)

        try Data(count: 1001).write(to: directory.appendingPathComponent("big"))
        let big = await #expect(throws: WebImageError.self) {
            try await loader.load(LoadRequest(url: directory.appendingPathComponent("big"))) { _ in }
        }
        #expect(big?.code == .tooLarge && big?.isTransient == false)

        let unreadable = directory.appendingPathComponent("secret")
        try Data([1]).write(to: unreadable)
        try FileManager.default.setAttributes([.posixPermissions: 0], ofItemAtPath: unreadable.path)
        if getuid() != 0 {  // root reads mode-0 files; the immutable trick does not stop reads
            let denied = await #expect(throws: WebImageError.self) { try await loader.load(LoadRequest(url: unreadable)) { _ in } }
            #expect(denied?.code == .forbidden)
        }
    }

    @Test("a FIFO, a device and a symlink to a FIFO are refused at once; a symlink to a file loads")
    func nonRegularFiles() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("pipe.jpg")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let link = directory.appendingPathComponent("link.jpg")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: fifo.path)
        // Nobody ever writes to the FIFO: opening it for reading in blocking mode
        // would wait forever. The loader must answer at once, with a typed error.
        let loader = FileLoader(timeout: .seconds(600))
        for url in [fifo, link, URL(fileURLWithPath: "/dev/zero")] {
            let error = await #expect(throws: WebImageError.self) { try await loader.load(LoadRequest(url: url)) { _ in } }
            #expect(error?.code == .invalidURL && error?.message.contains("not a regular file") == true, "\(url.path)")
        }
        let file = directory.appendingPathComponent("real.timg")
        try TestCoder.encode(width: 2, height: 2).write(to: file)
        let fileLink = directory.appendingPathComponent("to-real.timg")
        try FileManager.default.createSymbolicLink(atPath: fileLink.path, withDestinationPath: file.path)
        #expect(try await loader.load(LoadRequest(url: fileLink)) { _ in }.data == TestCoder.encode(width: 2, height: 2))
    }

    @Test("access: refused refuses every file; within(root) allows the root and nothing outside it")
    func access() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("sub"), withIntermediateDirectories: true)
        let inside = root.appendingPathComponent("sub/in.timg"), outside = directory.appendingPathComponent("secret.timg")
        try TestCoder.encode(width: 3, height: 3).write(to: inside)
        try TestCoder.encode(width: 4, height: 4).write(to: outside)
        let escape = root.appendingPathComponent("escape.timg")
        try FileManager.default.createSymbolicLink(atPath: escape.path, withDestinationPath: outside.path)

        let refused = await #expect(throws: WebImageError.self) {
            try await FileLoader(access: .refused).load(LoadRequest(url: inside)) { _ in }
        }
        #expect(refused?.code == .forbidden && refused?.message.contains("loader.fileRoot") == true)

        let confined = FileLoader(access: .within(root))
        #expect(try await confined.load(LoadRequest(url: inside)) { _ in }.data == TestCoder.encode(width: 3, height: 3))
        let dotted = URL(fileURLWithPath: root.path + "/sub/../../secret.timg")
        for url in [outside, escape, dotted] {
            let error = await #expect(throws: WebImageError.self) { try await confined.load(LoadRequest(url: url)) { _ in } }
            #expect(error?.code == .forbidden && error?.message.contains("outside the file root") == true, "\(url.path)")
        }
        let missing = await #expect(throws: WebImageError.self) {
            try await confined.load(LoadRequest(url: root.appendingPathComponent("nope.timg"))) { _ in }
        }
        #expect(missing?.code == .notFound)
    }

    @Test("If-Modified-Since with the file's date is answered 304")
    func notModified() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("a.timg")
        try TestCoder.encode(width: 2, height: 2).write(to: file)
        let loader = FileLoader()
        let first = try await loader.load(LoadRequest(url: file)) { _ in }
        let again = try await loader.load(LoadRequest(url: file, ifModifiedSince: first.lastModified)) { _ in }
        #expect(again.isNotModified && again.data.isEmpty)
        let stale = try await loader.load(LoadRequest(url: file, ifModifiedSince: "Mon, 01 Jan 2001 00:00:00 GMT")) { _ in }
        #expect(stale.statusCode == 200 && !stale.data.isEmpty)
    }
}

import ArgumentParser
import Foundation
import Testing
@testable import webimage
import WebImageConfiguration

@Suite("webimage load: inputs in flight")
struct LoadLimitsTests {
    @Test("paths and file:// URLs are local files; http(s):// and s3:// inputs are downloads")
    func kinds() {
        #expect(LoadLimits.isLocalFile("photo.jpg"))
        #expect(LoadLimits.isLocalFile("/srv/images/a b.png"))
        #expect(LoadLimits.isLocalFile("file:///srv/images/a.png"))
        #expect(LoadLimits.isLocalFile("FILE:///srv/images/a.png"))
        #expect(!LoadLimits.isLocalFile("https://images.example.com/a.jpg"))
        #expect(!LoadLimits.isLocalFile("http://127.0.0.1:8080/a.jpg"))
        #expect(!LoadLimits.isLocalFile("s3://bucket/a.jpg"))
    }

    @Test("by default 8 in flight, of which one more than the cores are local files; --concurrency N bounds every input alike")
    func limits() throws {
        let standard = try LoadCommand.parse(["a.jpg"]).limits
        #expect(standard == LoadLimits(total: 8, files: min(8, ProcessInfo.processInfo.activeProcessorCount + 1)))
        #expect(standard.files < standard.total || ProcessInfo.processInfo.activeProcessorCount >= 7)
        #expect(try LoadCommand.parse(["--concurrency", "5", "a.jpg"]).limits == LoadLimits(total: 5, files: 5))
        #expect(try LoadCommand.parse(["--concurrency", "1", "a.jpg"]).limits == LoadLimits(total: 1, files: 1))
    }

    @Test("--concurrency takes 1 to 1024: zero, negative, huge and not numbers are refused with a message")
    func bad() throws {
        for value in ["0", "-3", "many", "1025", "1000000000", "3000000000000000000", "9223372036854775807"] {
            let error = #expect(throws: (any Error).self) { try LoadCommand.parse(["--concurrency", value, "a.jpg"]) }
            #expect(LoadCommand.message(for: error!).contains("concurrency"), "\(value): \(LoadCommand.message(for: error!))")
        }
        #expect(try LoadCommand.parse(["--concurrency", "1024", "a.jpg"]).limits == LoadLimits(total: 1024, files: 1024))
    }

    @Test("--thumbnail: WxH or N with sides 1 to 65535 in plain digits; a larger box, zero, a sign, a leading zero or words are refused naming it")
    func thumbnailBox() throws {
        for value in ["9223372036854775807", "65536", "100x65536", "0", "-5", "big", "10x", "+100", "0100", "100x+5"] {
            let error = #expect(throws: (any Error).self, "\(value)") { try LoadCommand.parse(["--thumbnail", value, "a.jpg"]) }
            #expect(LoadCommand.message(for: error!).contains("--thumbnail"), "\(value)")
        }
        #expect(try LoadCommand.parse(["--thumbnail", "65535x1", "a.jpg"]).thumbnail == "65535x1")
    }
}

@Suite("Paths with ~")
struct HomePathTests {
    @Test("an input that starts with ~ is a path as written (the shell expands ~ where it should); ~ in a setting is $HOME, as a shell reads it")
    func tilde() throws {
        let here = FileManager.default.currentDirectoryPath
        #expect(inputURL("~/x.png")?.path == here + "/~/x.png")
        #expect(inputURL("~")?.path == here + "/~")
        #expect(inputURL("/abs/~/x.png")?.path == "/abs/~/x.png")
        #expect(expandingHome("~/cache", environment: ["HOME": "/srv/app"]) == "/srv/app/cache")
        #expect(expandingHome("~", environment: ["HOME": "/srv/app"]) == "/srv/app")
        #expect(expandingHome("~other/cache", environment: ["HOME": "/srv/app"]) == "~other/cache")
        #expect(expandingHome("/var/~/x", environment: ["HOME": "/srv/app"]) == "/var/~/x")
        let account = FileManager.default.homeDirectoryForCurrentUser.path
        #expect(expandingHome("~/x", environment: [:]) == account + "/x" && expandingHome("~/x", environment: ["HOME": ""]) == account + "/x")
    }
}

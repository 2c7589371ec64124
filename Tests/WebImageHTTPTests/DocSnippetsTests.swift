import Foundation
import Testing
import WebImage
import WebImageConfiguration
import WebImageDocSnippets
import WebImageHTTP
import WebImageKit

/// docs/serving.md shows its Swift snippets as Tests/DocSnippets compiles them:
/// a page's example that does not build is a new user's first error.
@Suite("serving.md's, writing-plugins.md's and the doc comments' snippets are the compiled ones")
struct DocSnippetsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The regions of a snippet file, by name: the lines between `snippet-begin: NAME`
    /// and `snippet-end`, without those between `snippet-pause` and `snippet-resume`,
    /// each line's first four spaces of function indentation removed.
    static func snippets(in file: URL) throws -> [String: String] {
        var found: [String: String] = [:]
        var name: String?
        var paused = false
        var lines: [String] = []
        for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("// snippet-begin: ") {
                name = String(text.dropFirst("// snippet-begin: ".count))
                lines = []
            } else if text == "// snippet-end", let current = name {
                found[current] = lines.joined(separator: "\n").trimmingCharacters(in: .newlines)
                name = nil
            } else if text == "// snippet-pause" {
                paused = true
            } else if text == "// snippet-resume" {
                paused = false
            } else if name != nil, !paused {
                lines.append(line.hasPrefix("    ") ? String(line.dropFirst(4)) : String(line))
            }
        }
        return found
    }

    /// The bodies of a page's ```swift blocks.
    static func swiftBlocks(in page: URL) throws -> [String] {
        let text = try String(contentsOf: page, encoding: .utf8)
        return text.components(separatedBy: "```swift\n").dropFirst().compactMap {
            $0.components(separatedBy: "\n```").first
        }
    }

    @Test("the Hummingbird app (routes, presets, fallback, metrics, graceful stop) is on the page as compiled, in at most 30 lines")
    func hummingbirdApp() throws {
        let snippets = try Self.snippets(in: Self.root.appendingPathComponent("Tests/DocSnippets/ServingSnippets.swift"))
        let app = try #require(snippets["hummingbird-app"])
        let blocks = try Self.swiftBlocks(in: Self.root.appendingPathComponent("docs/serving.md"))
        #expect(blocks.contains(app), "serving.md shows Tests/DocSnippets/ServingSnippets.swift's hummingbird-app region verbatim")
        let code = app.split(separator: "\n").filter {
            let line = $0.trimmingCharacters(in: .whitespaces)
            return !line.isEmpty && !line.hasPrefix("//")
        }
        #expect(code.count <= 30, "a new user's whole app is at most 30 lines of Swift; it is \(code.count)")
        // Referenced, so that the compiled function is the one this test reads.
        _ = hummingbirdApp as () async throws -> Void
    }

    /// The bodies of the ```swift blocks in a source file's doc comments.
    static func docCommentBlocks(in source: URL) throws -> [String] {
        var blocks: [String] = []
        var lines: [String]?
        for line in try String(contentsOf: source, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("///") else { continue }
            let body = text.dropFirst(3).hasPrefix(" ") ? String(text.dropFirst(4)) : String(text.dropFirst(3))
            if body == "```swift" {
                lines = []
            } else if body == "```", let block = lines {
                blocks.append(block.joined(separator: "\n"))
                lines = nil
            } else if lines != nil {
                lines?.append(body)
            }
        }
        return blocks
    }

    /// Every region of the files in Tests/DocSnippets.
    static func compiledRegions() throws -> Set<String> {
        let folder = root.appendingPathComponent("Tests/DocSnippets")
        var regions = Set<String>()
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where name.hasSuffix(".swift") {
            regions.formUnion(try snippets(in: folder.appendingPathComponent(name)).values)
        }
        return regions
    }

    /// The Swift files under `top` (Sources, Plugins), or its Markdown pages.
    static func files(under top: String, suffix: String) -> [String] {
        let base = root.appendingPathComponent(top)
        return (FileManager.default.enumerator(atPath: base.path)?.compactMap { $0 as? String } ?? [])
            .filter { $0.hasSuffix(suffix) && !$0.contains(".build/") }.sorted().map { "\(top)/\($0)" }
    }

    @Test("every ```swift example in a doc comment of Sources/ and Plugins/ is a region of Tests/DocSnippets, which the tests compile")
    func docCommentExamples() throws {
        let regions = try Self.compiledRegions()
        var examples = 0
        for file in Self.files(under: "Sources", suffix: ".swift") + Self.files(under: "Plugins", suffix: ".swift") {
            for block in try Self.docCommentBlocks(in: Self.root.appendingPathComponent(file)) {
                examples += 1
                let compiled = regions.contains(block)
                #expect(compiled, "\(file): its example is not a compiled region of Tests/DocSnippets:\n\(block)")
            }
        }
        #expect(examples >= 45, "the examples were found (\(examples))")
        _ = memoryHitFastPathApp  // a compiled function of the regions this test reads
    }

    /// The pages' Swift blocks that are not compiled here, by their first lines, and why.
    static let notCompiled: [(page: String, start: String, why: String)] = [
        ("docs/serving.md", "// Package.swift", "a manifest's lines"),
        ("Sources/WebImage/WebImage.docc/GettingStarted.md", "// swift-tools-version:6.1", "a whole manifest"),
        ("docs/serving.md", "import HTTPTypes\nimport Vapor", "Vapor is not a dependency of the package"),
        ("docs/serving.md", "import OTel", "swift-otel is not a dependency of the package"),
        ("docs/writing-plugins.md", "import WebImage\n\nstruct QOICoder", "a sketch: `...` stands for the decoder"),
        ("docs/writing-plugins.md", "@Test func conforms() async throws {\n    try await ImageCoderConformance", "the sketch's conformance test"),
        ("docs/testing.md", "let box: Box", "a data race on purpose, for ThreadSanitizer"),
    ]

    @Test("every ```swift block of README.md, docs/ and the DocC articles is a compiled region, or one named as not compilable here with its reason")
    func pageExamples() throws {
        let regions = try Self.compiledRegions()
        let pages = ["README.md"] + Self.files(under: "docs", suffix: ".md")
            + Self.files(under: "Sources", suffix: ".md").filter { $0.contains(".docc/") }
            + Self.files(under: "Plugins", suffix: ".md").filter { $0.contains(".docc/") }
        var blocks = 0
        var exempted = Set<Int>()
        for page in pages {
            for block in try Self.swiftBlocks(in: Self.root.appendingPathComponent(page)) {
                blocks += 1
                if regions.contains(block) { continue }
                if let index = Self.notCompiled.firstIndex(where: { $0.page == page && block.hasPrefix($0.start) }) {
                    exempted.insert(index)
                    continue
                }
                Issue.record("\(page): a Swift block that is not a compiled region of Tests/DocSnippets:\n\(block)")
            }
        }
        #expect(blocks >= 25, "the pages' blocks were found (\(blocks))")
        for (index, entry) in Self.notCompiled.enumerated() where !exempted.contains(index) {
            Issue.record("\(entry.page): no block starts with \"\(entry.start)\" any more: take it off the list")
        }
    }

    @Test("ImageEndpoint.configured(file:) reads the file's presets, the flags over the file, and names the key of a bad value")
    func configuredFromFile() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("configured-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("images.json")
        try Data("""
            {"store": {"kind": "none"}, "thumbnail": {"allowedHosts": "images.example.com",
             "presets": {"avatar": "w=64&h=64&crop=centre", "card": "w=320"}}}
            """.utf8).write(to: file)
        let endpoint = try await ImageEndpoint.configured(file: file.path, flags: ["thumbnail.maxDimension": "1000"], environment: [:])
        #expect(endpoint.settings.presets.keys.sorted() == ["avatar", "card"])
        #expect(endpoint.settings.allowedHosts.patterns == ["images.example.com"])
        #expect(endpoint.manager.store == nil, "store.kind none in the file")
        #expect(endpoint.settings.maxDimension == 1000, "a flag over the file")
        await #expect(throws: WebImageError.self) {
            _ = try await ImageEndpoint.configured(file: file.path, flags: ["thumbnail.presetz.x": "w=1"], environment: [:])
        }
        do {
            _ = try await ImageEndpoint.configured(file: file.path, flags: ["thumbnail.fallbackImage": folder.appendingPathComponent("none.png").path],
                                                   environment: [:])
            Issue.record("a missing fallback image is refused at start")
        } catch let error as WebImageError {
            #expect(error.code == .invalidArgument && error.message.contains("thumbnail.fallbackImage"), "\(error)")
        }
    }

    @Test("writing-plugins.md's store: on the page as compiled; chosen by configuration; its own key typed, scoped and checked")
    func storeRegistration() async throws {
        let snippets = try Self.snippets(in: Self.root.appendingPathComponent("Tests/DocSnippets/StoreSnippets.swift"))
        let registration = try #require(snippets["store-registration"])
        let blocks = try Self.swiftBlocks(in: Self.root.appendingPathComponent("docs/writing-plugins.md"))
        #expect(blocks.contains(registration), "writing-plugins.md shows Tests/DocSnippets/StoreSnippets.swift's store-registration region verbatim")

        let folder = "webimage-snippet-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: "/dev/shm/\(folder)") }
        let manager = try await sharedMemoryStoreManager(flags: ["store.kind": "shm", "store.shm.folder": folder])
        let store = try #require(manager.store as? FileCacheStore, "store.kind = shm makes the registered store")
        try await store.setData(Data("x".utf8), forKey: "k")
        #expect(try await store.data(forKey: "k") == Data("x".utf8))
        #expect(FileManager.default.fileExists(atPath: "/dev/shm/\(folder)"), "store.shm.folder reaches the factory through its scope")

        for (flags, named) in [(["store.kind": "shm", "store.shm.folder": "../etc"], "store.shm.folder: '../etc' is not a folder name"),
                               (["store.kind": "shm", "store.shm.foldr": "x"], "store.shm.foldr")] {
            do {
                _ = try await sharedMemoryStoreManager(flags: flags)
                Issue.record("\(flags) is refused")
            } catch let error as WebImageError {
                #expect(error.code == .invalidArgument && error.message.contains(named), "\(error.message)")
            }
        }
    }
}

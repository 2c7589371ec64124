import Foundation
import Testing
@testable import WebImage

@Suite("Registries")
struct RegistryTests {
    struct NamedCoder: ImageCoder {
        let name: String
        let accepts: Bool
        func canDecode(_ data: Data) -> Bool { accepts }
        func decode(_ data: Data, options: DecodeOptions) throws -> Image {
            Image(pixelSize: PixelSize(1), format: ImageFormat(rawValue: name), storage: PixelBuffer(size: PixelSize(1), channels: 1, bytes: [0]))
        }
        func canEncode(_ format: ImageFormat) -> Bool { format.rawValue == name }
        func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data { Data(name.utf8) }
    }

    @Test("coders are asked newest first; unregistering restores the older one")
    func newestFirst() throws {
        let registry = CoderRegistry()
        registry.register(NamedCoder(name: "builtin", accepts: true), name: "builtin")
        let token = registry.register(NamedCoder(name: "mine", accepts: true), name: "mine")
        registry.register(NamedCoder(name: "picky", accepts: false), name: "picky")
        #expect((registry.decoder(for: Data([1])) as? NamedCoder)?.name == "mine")
        #expect(registry.names == ["picky", "mine", "builtin"])
        #expect(registry.unregister(token))
        #expect(!registry.unregister(token))
        #expect((registry.decoder(for: Data([1])) as? NamedCoder)?.name == "builtin")
        #expect((registry.coder(named: "PICKY") as? NamedCoder)?.name == "picky")
        #expect(registry.encoder(for: ImageFormat(rawValue: "builtin")) != nil)
        #expect(registry.encoder(for: .png) == nil)
    }

    @Test("loaders by scheme, plain paths as file")
    func loaders() {
        let registry = LoaderRegistry.standard
        #expect(registry.loader(for: URL(fileURLWithPath: "/tmp/x.png")) is FileLoader)
        #expect(registry.loader(for: URL(string: "relative/x.png")!) is FileLoader)
        #expect(registry.loader(for: URL(string: "https://example.com/x.png")!) == nil)
        let test = TestLoader()
        let token = registry.register(test, name: "test", schemes: ["test"])
        #expect(registry.loader(for: URL(string: "test://a")!) is TestLoader)
        #expect(registry.loader(named: "test") is TestLoader)
        #expect(registry.names == ["test", "file"])
        registry.unregister(token)
        #expect(registry.loader(for: URL(string: "test://a")!) == nil)
    }

    @Test("stores by name; an unknown name lists the known ones")
    func stores() throws {
        let registry = CacheStoreRegistry.standard
        #expect(try registry.makeStore(named: "memory", settings: CacheStoreSettings()) is MemoryCacheStore)
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try registry.makeStore(named: "filesystem", settings: CacheStoreSettings(directory: directory)) is FileCacheStore)
        let error = #expect(throws: WebImageError.self) { try registry.makeStore(named: "redis", settings: CacheStoreSettings()) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("redis") == true && error?.message.contains("filesystem") == true)
        #expect(throws: WebImageError.self) { try registry.makeStore(named: "filesystem", settings: CacheStoreSettings()) }
    }

    @Test("registration is safe from many threads")
    func concurrentRegistration() async {
        let registry = CoderRegistry()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let token = registry.register(NamedCoder(name: "c\(index)", accepts: true), name: "c\(index)")
                    _ = registry.decoder(for: Data([0]))
                    if index % 2 == 0 { registry.unregister(token) }
                }
            }
        }
        #expect(registry.coders.count == 100)
    }
}

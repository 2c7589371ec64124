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

    /// A coder that takes only thumbnails and small encodes, and hands the rest on.
    struct ThumbnailsOnly: ImageCoder {
        func canDecode(_ data: Data) -> Bool { true }
        func decode(_ data: Data, options: DecodeOptions) throws -> Image { throw WebImageError(.unsupportedFormat, "called directly") }
        func decodeIfHandled(_ data: Data, options: DecodeOptions) throws -> Image? {
            guard options.thumbnailPixelSize != nil else { return nil }
            return Image(pixelSize: PixelSize(1), format: ImageFormat(rawValue: "thumbs"), storage: PixelBuffer(size: PixelSize(1), channels: 1, bytes: [0]))
        }
        func canEncode(_ format: ImageFormat) -> Bool { true }
        func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data { Data("thumbs".utf8) }
        func encodeIfHandled(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data? {
            image.pixelSize.area <= 1 ? Data("thumbs".utf8) : nil
        }
        func infoIfHandled(_ data: Data) throws -> ImageInfo? { nil }
    }

    @Test("the registry decodes, encodes and describes with the newest coder that takes the work; one that hands it on passes it to the next")
    func handOn() throws {
        let registry = CoderRegistry()
        registry.register(NamedCoder(name: "builtin", accepts: true), name: "builtin")
        registry.register(ThumbnailsOnly(), name: "thumbs")
        #expect(try registry.decode(Data([1]), options: DecodeOptions(thumbnailPixelSize: PixelSize(8))).format?.rawValue == "thumbs")
        #expect(try registry.decode(Data([1]), options: DecodeOptions()).format?.rawValue == "builtin", "a full decode handed on")
        let small = Image(pixelSize: PixelSize(1), storage: PixelBuffer(size: PixelSize(1), channels: 1, bytes: [0]))
        let large = Image(pixelSize: PixelSize(4), storage: PixelBuffer(size: PixelSize(4), channels: 1, bytes: [UInt8](repeating: 0, count: 16)))
        let builtin = ImageFormat(rawValue: "builtin")
        #expect(try registry.encode(small, as: builtin, options: EncodeOptions()) == Data("thumbs".utf8))
        #expect(try registry.encode(large, as: builtin, options: EncodeOptions()) == Data("builtin".utf8), "a large encode handed on")
        let nobody = CoderRegistry()
        nobody.register(ThumbnailsOnly(), name: "thumbs")
        let error = #expect(throws: WebImageError.self) { try nobody.decode(Data([1]), options: DecodeOptions()) }
        #expect(error?.code == .unsupportedFormat && error?.message.contains("thumbs") == true, "\(String(describing: error))")
        #expect(throws: WebImageError.self) { try nobody.info(Data([1])) }
        #expect(throws: WebImageError.self) { try nobody.encode(large, as: .png, options: EncodeOptions()) }
    }

    /// A coder whose library could not be loaded: it accepts nothing.
    struct Unavailable: ImageCoder {
        func canDecode(_ data: Data) -> Bool { false }
        func decode(_ data: Data, options: DecodeOptions) throws -> Image { throw WebImageError(.decodeFailed, "unreachable") }
        func canEncode(_ format: ImageFormat) -> Bool { false }
        func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data { throw WebImageError(.encodeFailed, "unreachable") }
        var unavailability: WebImageError? { WebImageError(.libraryUnavailable, "libfoo cannot be loaded: no such file") }
    }

    @Test("bytes or a format no coder takes are unsupportedFormat, or libraryUnavailable (transient, naming the coder and its library) while a registered coder is unavailable")
    func unavailableCoder() throws {
        let registry = CoderRegistry()
        registry.register(NamedCoder(name: "picky", accepts: false), name: "picky")
        let plain = #expect(throws: WebImageError.self) { try registry.decode(Data([1]), options: DecodeOptions()) }
        #expect(plain?.code == .unsupportedFormat && plain?.isTransient == false)
        registry.register(Unavailable(), name: "foo")
        let image = Image(pixelSize: PixelSize(1), storage: PixelBuffer(size: PixelSize(1), channels: 1, bytes: [0]))
        let failures = [
            #expect(throws: WebImageError.self) { try registry.decode(Data([1]), options: DecodeOptions()) },
            #expect(throws: WebImageError.self) { try registry.info(Data([1])) },
            #expect(throws: WebImageError.self) { try registry.encode(image, as: .png, options: EncodeOptions()) },
        ]
        for failure in failures {
            #expect(failure?.code == .libraryUnavailable && failure?.isTransient == true, "\(String(describing: failure))")
            #expect(failure?.message.contains("the foo coder cannot be used: libfoo cannot be loaded") == true, "\(String(describing: failure))")
        }
        #expect(FailedURLBlocklist(capacity: 10).record(failures[0]!, for: "https://a.example/x.png") == false, "never blocks a URL")
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

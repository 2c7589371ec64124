import Configuration
import Foundation
import PPMCoder
import Testing
import WebImage
import WebImageConfiguration
import WebImageKit
import WebImageTesting

func ppm(width: Int, height: Int, grey: Bool = false, comment: Bool = false) -> Data {
    var data = Data("\(grey ? "P5" : "P6")\n\(comment ? "# made by a test\n" : "")\(width) \(height)\n255\n".utf8)
    for y in 0..<height { for x in 0..<width { for c in 0..<(grey ? 1 : 3) { data.append(UInt8((x * 7 + y * 13 + c * 50) % 256)) } } }
    return data
}

@Suite("PPMCoder")
struct PPMCoderTests {
    @Test("passes ImageCoderConformance")
    func conformance() async throws {
        try await ImageCoderConformance(coder: PPMCoder(), samples: [
            .init(name: "P6", data: ppm(width: 60, height: 40, comment: true), pixelSize: PixelSize(width: 60, height: 40), format: .ppm),
            .init(name: "P5", data: ppm(width: 33, height: 21, grey: true), pixelSize: PixelSize(width: 33, height: 21), format: .ppm),
        ]).run()
    }

    @Test("bad headers are typed errors")
    func badHeaders() {
        for bad in ["P6\n", "P6\n10\n", "P6\n0 10\n255\n", "P6\n10 10\n70000\n", "P6\nx y\n255\n"] {
            let error = #expect(throws: WebImageError.self, "\(bad.debugDescription)") { try PPMCoder().decode(Data(bad.utf8), options: DecodeOptions()) }
            #expect(error?.code == .decodeFailed)
        }
    }

    @Test("through the manager, registered ahead of libvips, with a round trip")
    func manager() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ppm-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("photo@2x.ppm")
        try ppm(width: 80, height: 60).write(to: file)

        var configuration = ImageManager.Configuration()
        configuration.coders.registerVips()
        configuration.coders.register(PPMCoder(), name: "ppm")
        configuration.store = MemoryCacheStore(limits: .unlimited)
        let manager = ImageManager(configuration: configuration)
        let result = try await manager.loadImage(with: file, options: .waitStoreCache, context: ImageContext(thumbnailPixelSize: PixelSize(40)))
        let image = try #require(result.image)
        #expect(image.format == .ppm && image.storage(as: PixelBuffer.self) != nil, "decoded by PPMCoder")
        #expect(image.pixelSize == PixelSize(width: 40, height: 30) && image.scale == 2)
        // The derived result was re-encoded by the newest coder that writes its format.
        let stored = try #require(try await configuration.store!.data(forKey: result.key))
        #expect(PPMCoder().canDecode(stored))
        let again = try PPMCoder().decode(try PPMCoder().encode(image, as: .ppm, options: EncodeOptions()), options: DecodeOptions())
        #expect(again.pixelSize == image.pixelSize)
    }

    @Test("selected by configuration, first in the coders list")
    func configuration() async throws {
        var catalog = PluginCatalog.standard
        catalog.registerCoder(name: "ppm") { _ in PPMCoder() }
        let reader = ConfigReader(provider: InMemoryProvider(values: ["coders": "ppm,vips", "store.kind": "none"]))
        let configuration = try ImageManager.Configuration(config: reader, catalog: catalog)
        #expect(configuration.coders.names == ["ppm", "vips"])
        #expect(configuration.coders.decoder(for: ppm(width: 2, height: 2)) is PPMCoder)
        let unknown = ConfigReader(provider: InMemoryProvider(values: ["coders": "ppm,qoi"]))
        #expect(throws: WebImageError.self) { try ImageManager.Configuration(config: unknown, catalog: catalog) }
    }
}

import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTurboJPEG
import WebImageVips

extension VipsTests {
@Suite("Vips transformers", .offCooperativePool)
struct VipsTransformerTests {
    let coder = VipsImageCoder()

    func quadrantImage() throws -> Image {
        try coder.decode(try Fixtures.encode(Fixtures.quadrants(width: 80, height: 40), as: .png), options: DecodeOptions())
    }

    func corner(_ image: Image, _ x: Int, _ y: Int) throws -> [Int] {
        let pixels = try Fixtures.pixels(image)
        let i = (y * pixels.size.width + x) * pixels.channels
        return (0..<pixels.channels).map { Int(pixels.bytes[i + $0]) }
    }

    @Test("resize: fit, fill and stretch")
    func resize() throws {
        let image = try quadrantImage()
        #expect(try ImageTransformers.Resize(PixelSize(40), mode: .fit).transform(image).pixelSize == PixelSize(width: 40, height: 20))
        #expect(try ImageTransformers.Resize(PixelSize(40), mode: .fill).transform(image).pixelSize == PixelSize(40))
        #expect(try ImageTransformers.Resize(PixelSize(width: 10, height: 30), mode: .stretch).transform(image).pixelSize == PixelSize(width: 10, height: 30))
        #expect(ImageTransformers.Resize(PixelSize(40), mode: .fill).key == "resize(40x40,fill)")
    }

    @Test("crop, and a crop outside the image is stepDoesNotFit naming the parameter that passes it")
    func crop() throws {
        let image = try quadrantImage()
        let cropped = try ImageTransformers.Crop(x: 40, y: 0, width: 40, height: 20).transform(image)
        #expect(cropped.pixelSize == PixelSize(width: 40, height: 20))
        #expect(try corner(cropped, 5, 5) == [0, 255, 0], "the top-right quadrant is green")
        let whole = try ImageTransformers.Crop(x: 0, y: 0, width: 80, height: 40).transform(image)
        #expect(whole.pixelSize == image.pixelSize, "a crop of the whole image fits")
        let cases: [(ImageTransformers.Crop, String)] = [
            (.init(x: 70, y: 0, width: 20, height: 10), "x + width (90) is past its width 80"),
            (.init(x: 0, y: 35, width: 10, height: 10), "y + height (45) is past its height 40"),
            (.init(x: 80, y: 0, width: 1, height: 1), "x 80 is past its width 80"),
            (.init(x: 0, y: 40, width: 1, height: 1), "y 40 is past its height 40"),
            (.init(x: -1, y: 0, width: 5, height: 5), "x and y must be 0 or more"),
            (.init(x: 0, y: 0, width: 0, height: 5), "width and height must be positive"),
            (.init(x: Int.max - 1, y: 0, width: Int.max, height: 1), "x \(Int.max - 1) is past its width 80"),
            (.init(x: 1, y: 0, width: Int.max, height: 1), "x + width"),
        ]
        for (crop, why) in cases {
            let error = #expect(throws: WebImageError.self) { try crop.transform(image) }
            #expect(error?.code == .stepDoesNotFit, "\(crop.key)")
            #expect(error?.message.contains("crop:\(crop.x),\(crop.y),\(crop.width),\(crop.height)") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("80x40") == true && error?.message.contains(why) == true, "\(error?.message ?? "")")
        }
    }

    @Test("rotate by quarter turns and by any angle; flip both ways")
    func rotateAndFlip() throws {
        let image = try quadrantImage()
        let quarter = try ImageTransformers.Rotate(degrees: 90).transform(image)
        #expect(quarter.pixelSize == PixelSize(width: 40, height: 80))
        #expect(try corner(quarter, 2, 2) == [0, 0, 255], "after 90° clockwise, the old bottom-left (blue) is top-left")
        #expect(try ImageTransformers.Rotate(degrees: -90).transform(image).pixelSize == PixelSize(width: 40, height: 80))
        let half = try ImageTransformers.Rotate(degrees: 180).transform(image)
        #expect(try corner(half, 2, 2) == [255, 255, 255])
        let tilted = try ImageTransformers.Rotate(degrees: 30).transform(image)
        #expect(tilted.pixelSize.width > 80 && tilted.hasAlpha, "any angle grows a transparent canvas")

        #expect(try corner(try ImageTransformers.Flip().transform(image), 2, 2) == [0, 255, 0])
        #expect(try corner(try ImageTransformers.Flip(vertical: true).transform(image), 2, 2) == [0, 0, 255])
    }

    @Test("round corners make the corners transparent and keep the middle")
    func roundCorners() throws {
        let rounded = try ImageTransformers.RoundCorners(radius: 10).transform(try quadrantImage())
        #expect(rounded.hasAlpha)
        #expect(try corner(rounded, 0, 0)[3] == 0)
        #expect(try corner(rounded, 79, 39)[3] == 0)
        #expect(try corner(rounded, 20, 10) == [255, 0, 0, 255])
    }

    @Test("blur softens edges; tint blends a colour; bad parameters are typed errors")
    func blurAndTint() throws {
        let image = try quadrantImage()
        let blurred = try ImageTransformers.Blur(sigma: 4).transform(image)
        let edge = try corner(blurred, 40, 10)
        #expect(edge[0] > 20 && edge[0] < 235, "the red/green seam is blended: \(edge)")
        #expect(throws: WebImageError.self) { try ImageTransformers.Blur(sigma: 0).transform(image) }
        let tinted = try ImageTransformers.Tint(red: 0, green: 0, blue: 255, amount: 0.5).transform(image)
        let pixel = try corner(tinted, 5, 5)
        #expect(abs(pixel[0] - 128) <= 2 && pixel[1] == 0 && abs(pixel[2] - 128) <= 2, "\(pixel)")
    }

    @Test("every frame of an animation is transformed; the pipeline chains keys")
    func animatedPipeline() throws {
        let animated = try coder.decode(try Fixtures.animated(.gif, delays: [100, 200, 300], loop: 0, size: 40), options: DecodeOptions())
        let pipeline = ImageTransformers.Pipeline([
            ImageTransformers.Resize(PixelSize(20), mode: .fit),
            ImageTransformers.Crop(x: 0, y: 0, width: 10, height: 20),
        ])
        #expect(pipeline.key == "resize(20x20,fit)|crop(0,0,10x20)")
        let result = try pipeline.transform(animated)
        #expect(result.frameCount == 3 && result.pixelSize == PixelSize(width: 10, height: 20))
        #expect(result.frames.map(\.duration) == animated.frames.map(\.duration))
        let pixels = try Fixtures.pixels(result)
        for frame in 0..<3 {
            let mean = Fixtures.mean(pixels, x: 0..<10, y: frame * 20..<frame * 20 + 20)[0]
            #expect(abs(mean - Double(frame * 60)) < 4, "frame \(frame) keeps its own content: \(mean)")
        }
        let again = try coder.decode(try coder.encode(result, as: .gif, options: EncodeOptions()), options: DecodeOptions())
        #expect(again.frameCount == 3 && again.pixelSize == PixelSize(width: 10, height: 20))
    }

    @Test("transformers accept PixelBuffer images from other coders")
    func pixelBuffers() throws {
        let image = Fixtures.image(Fixtures.quadrants(width: 8, height: 4))
        #expect(try ImageTransformers.Flip().transform(image).pixelSize == PixelSize(width: 8, height: 4))
    }
}
}

extension VipsTests {
@Suite("Vips through the manager", .offCooperativePool)
struct VipsManagerTests {
    func manager(store: (any CacheStore)? = MemoryCacheStore(limits: .unlimited)) -> ImageManager {
        var configuration = ImageManager.Configuration()
        configuration.coders.registerVips()
        configuration.store = store
        return ImageManager(configuration: configuration)
    }

    @Test("@2x and @3x files get scale 2 and 3 and the matching point size")
    func scaleFromKey() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-vips-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let png = try Fixtures.encode(Fixtures.quadrants(width: 60, height: 30), as: .png)
        for (name, scale) in [("icon@2x.png", 2.0), ("icon@3x.png", 3.0), ("icon.png", 1.0)] {
            let file = directory.appendingPathComponent(name)
            try png.write(to: file)
            let image = try #require(try await manager().loadImage(with: file).image)
            #expect(image.scale == scale && image.width == 60 / scale && image.height == 30 / scale, "\(name)")
        }
    }

    @Test("a thumbnail through the manager is stored on disk under its derived key, encoded")
    func derivedThumbnail() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-vips-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("photo.jpg")
        try Fixtures.photoJPEG(width: 1200, height: 800).write(to: file)
        let store = MemoryCacheStore(limits: .unlimited)
        let manager = manager(store: store)
        let context = ImageContext(thumbnailPixelSize: PixelSize(150), transformer: ImageTransformers.RoundCorners(radius: 8), encodeFormat: .webp)
        let result = try await manager.loadImage(with: file, options: .waitStoreCache, context: context)
        #expect(result.image?.pixelSize == PixelSize(width: 150, height: 100) && result.image?.hasAlpha == true)
        let stored = try #require(try await store.data(forKey: result.key))
        #expect(ImageFormat.sniff(stored) == .webp)
        manager.memoryCache?.removeAll()
        let fromDisk = try await manager.loadImage(with: file, context: context)
        #expect(fromDisk.cacheType == .disk && fromDisk.image?.pixelSize == PixelSize(width: 150, height: 100))
    }

    @Test("without original bytes, images with alpha are stored as PNG and others as JPEG")
    func serializer() throws {
        let coders = CoderRegistry()
        coders.registerVips()
        let serializer = CacheSerializer.encoding(as: nil)
        let opaque = Image(pixelSize: PixelSize(4), storage: Fixtures.quadrants(width: 4, height: 4))
        let alpha = Image(pixelSize: PixelSize(2), hasAlpha: true, storage: PixelBuffer(size: PixelSize(2), channels: 4, bytes: [UInt8](repeating: 128, count: 16)))
        #expect(serializer.serialize(opaque, "k", coders).flatMap(ImageFormat.sniff) == .jpeg)
        #expect(serializer.serialize(alpha, "k", coders).flatMap(ImageFormat.sniff) == .png)
    }

    /// The corner and centre pixels (RGBA) of an image with alpha.
    func cornerAndCentre(_ image: Image) throws -> (corner: [Int], centre: [Int]) {
        let pixels = try Fixtures.pixels(image)
        #expect(pixels.channels == 4)
        func at(_ x: Int, _ y: Int) -> [Int] { (0..<pixels.channels).map { Int(pixels.bytes[(y * pixels.size.width + x) * pixels.channels + $0]) } }
        return (at(0, 0), at(pixels.size.width / 2, pixels.size.height / 2))
    }

    @Test("round corners on a JPEG: PNG on disk, transparent corners from memory and from disk alike, in every store", arguments: ["memory", "file"])
    func roundedJPEG(storeKind: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-vips-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("green.jpg")
        let green = PixelBuffer(size: PixelSize(width: 200, height: 120), channels: 3, bytes: [UInt8]((0..<(200 * 120)).flatMap { _ in [40, 160, 90] as [UInt8] }))
        try Fixtures.encode(green, as: .jpeg).write(to: file)
        let store: any CacheStore = storeKind == "memory" ? MemoryCacheStore(limits: .unlimited) : try FileCacheStore(directory: directory.appendingPathComponent("cache"))
        let manager = manager(store: store)
        let context = ImageContext(transformer: ImageTransformers.RoundCorners(radius: 60))
        let loaded = try await manager.loadImage(with: file, options: .waitStoreCache, context: context)
        #expect(loaded.data.flatMap(ImageFormat.sniff) == .png, "the derived bytes gained alpha, so they are PNG")
        let fromMemory = try await manager.loadImage(with: file, context: context)
        #expect(fromMemory.cacheType == .memory)
        manager.memoryCache?.removeAll()
        let fromDisk = try await manager.loadImage(with: file, context: context)
        #expect(fromDisk.cacheType == .disk)
        for (name, result) in [("memory", fromMemory), ("disk", fromDisk)] {
            let image = try #require(result.image)
            #expect(image.hasAlpha, "\(name)")
            let (corner, centre) = try cornerAndCentre(image)
            #expect(corner[3] == 0, "\(name): the corner is transparent")
            #expect(zip(centre, [40, 160, 90, 255]).allSatisfy { abs($0 - $1) <= 3 }, "\(name): the centre is the photo: \(centre)")
        }
        // Bytes only (a service's path) give the same PNG.
        manager.memoryCache?.removeAll()
        let bytes = try await manager.loadImage(with: file, options: .avoidDecode, context: context)
        #expect(bytes.data.flatMap(ImageFormat.sniff) == .png)
        await manager.shutdown()
    }

    @Test("acceptedFormats picks each result's format: AVIF or WebP when accepted, PNG for alpha, WebP or GIF for animations")
    func negotiatedThroughTheManager() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-vips-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let photo = directory.appendingPathComponent("photo.jpg"), gif = directory.appendingPathComponent("anim.gif")
        try Fixtures.photoJPEG(width: 300, height: 200).write(to: photo)
        try Fixtures.animated(.gif, delays: [100, 200, 300], loop: 0, size: 32).write(to: gif)
        let allowed: Set<ImageFormat> = [.avif, .webp, .jpeg, .png, .gif]
        let modern = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", old = "image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
        let webpOnly = "image/webp,*/*"
        let cases: [(URL, String, (any ImageTransformer)?, ImageFormat)] = [
            (photo, modern, nil, .avif), (photo, old, nil, .jpeg), (photo, webpOnly, nil, .webp),
            (photo, old, ImageTransformers.RoundCorners(radius: 20), .png), (photo, modern, ImageTransformers.RoundCorners(radius: 20), .avif),
            (gif, modern, nil, .webp), (gif, old, nil, .gif),
        ]
        let manager = manager()
        for (url, accept, transformer, expected) in cases {
            var context = ImageContext(thumbnailPixelSize: PixelSize(100), transformer: transformer)
            context.acceptedFormats = AcceptedFormats(accept: accept, allowed: allowed)
            let result = try await manager.loadImage(with: url, options: .avoidDecode, context: context)
            let data = try #require(result.data)
            #expect(ImageFormat.sniff(data) == expected, "\(url.lastPathComponent) \(accept.prefix(12)) \(transformer?.key ?? "")")
            if url == gif { #expect(try VipsImageCoder().info(data).frameCount == 3, "the animation survives as \(expected)") }
        }
        await manager.shutdown()
    }

    @Test("JPEG asked for an image with alpha: PNG from the pipeline; flattened onto white (or the background) only when encoded as JPEG directly")
    func alphaAndJPEG() throws {
        let coders = CoderRegistry()
        coders.registerVips()
        let disc = try ImageTransformers.RoundCorners(radius: 20).transform(Fixtures.image(Fixtures.quadrants(width: 40, height: 40)))
        #expect(ImageFormat.output(for: disc, requested: .jpeg, canEncode: { coders.encoder(for: $0) != nil }) == .png)
        #expect(ImageFormat.output(for: disc, requested: .webp, canEncode: { coders.encoder(for: $0) != nil }) == .webp)
        #expect(CacheSerializer.encoding(as: .jpeg).serialize(disc, "k", coders).flatMap(ImageFormat.sniff) == .png)
        let coder = VipsImageCoder()
        for (background, expected) in [(RGBColor.white, [255, 255, 255]), (RGBColor(red: 0, green: 0, blue: 255), [0, 0, 255])] {
            let jpeg = try coder.encode(disc, as: .jpeg, options: EncodeOptions(quality: 95, background: background))
            let decoded = try Fixtures.pixels(try coder.decode(jpeg, options: DecodeOptions()))
            let corner = (0..<3).map { Int(decoded.bytes[$0]) }
            #expect(zip(corner, expected).allSatisfy { abs($0 - $1) <= 12 }, "the corner is the background (JPEG rings a little beside the red quadrant), never black: \(corner)")
        }
        // Flattened first, the image has no alpha and JPEG stays JPEG.
        let flat = try ImageTransformers.Flatten(background: .white).transform(disc)
        #expect(!flat.hasAlpha)
        #expect(CacheSerializer.encoding(as: .jpeg).serialize(flat, "k", coders).flatMap(ImageFormat.sniff) == .jpeg)
    }
}
}

/// The real images in ../shared/corpus, when the checkout has them beside it
/// (CI does; a user's fresh clone does not, and the fixtures above cover the same
/// properties there).
extension VipsTests {
@Suite("Shared corpus", .offCooperativePool, .enabled(if: SharedCorpus.directory != nil))
struct SharedCorpusTests {
    let coder = VipsImageCoder()

    func load(_ path: String, _ options: DecodeOptions = DecodeOptions()) throws -> Image {
        let data = try Data(contentsOf: SharedCorpus.directory!.appendingPathComponent(path))
        return try coder.decode(data, options: options)
    }

    @Test("EXIF orientation set: every file upright at 1800x1200 and alike")
    func exif() throws {
        let reference = try Fixtures.pixels(try load("exif/Landscape_1.jpg", DecodeOptions(thumbnailPixelSize: PixelSize(180))))
        for index in 0...8 {
            let full = try load("exif/Landscape_\(index).jpg")
            #expect(full.pixelSize == PixelSize(width: 1800, height: 1200), "Landscape_\(index)")
            let small = try Fixtures.pixels(try load("exif/Landscape_\(index).jpg", DecodeOptions(thumbnailPixelSize: PixelSize(180))))
            let difference = zip(small.bytes, reference.bytes).reduce(0.0) { $0 + abs(Double($1.0) - Double($1.1)) } / Double(reference.bytes.count)
            #expect(difference < 12, "Landscape_\(index) differs from Landscape_1 by \(difference) per byte")
        }
    }

    @Test("TurboJPEGCoder on the corpus JPEGs: the vips path's size and orientation, pixels within a small tolerance")
    func turboJPEG() throws {
        let turbo = TurboJPEGCoder()
        let names = (0...8).map { "exif/Landscape_\($0).jpg" } + ["sdwebimage/TestImageLarge.jpg", "sdwebimage/MonochromeTestImage.jpg", "sdwebimage/TestImage.jpg"]
        for name in names {
            let data = try Data(contentsOf: SharedCorpus.directory!.appendingPathComponent(name))
            for options in [DecodeOptions(thumbnailPixelSize: PixelSize(180)), DecodeOptions(thumbnailPixelSize: PixelSize(width: 40, height: 90), preserveAspectRatio: false)] {
                let ours = try turbo.decode(data, options: options)
                let theirs = try coder.decode(data, options: options)
                #expect(ours.pixelSize == theirs.pixelSize && ours.storedOrientation == theirs.storedOrientation, "\(name)")
                let a = try Fixtures.pixels(ours), b = try Fixtures.pixels(theirs)
                guard a.bytes.count == b.bytes.count else { Issue.record("\(name): \(a.size)x\(a.channels) against \(b.size)x\(b.channels)"); continue }
                let mean = zip(a.bytes, b.bytes).reduce(0.0) { $0 + abs(Double($1.0) - Double($1.1)) } / Double(a.bytes.count)
                let bias = zip(a.bytes, b.bytes).reduce(0.0) { $0 + Double($1.0) - Double($1.1) } / Double(a.bytes.count)
                // TestImageLarge is progressive: ours decodes its DC scans alone, which
                // differs from a full 1/8 decode at edges (3.1 on average here) but not in tone.
                #expect(mean < (name.contains("Large") ? 4 : 2.5), "\(name) \(ours.pixelSize): mean difference \(mean) from the vips path")
                #expect(abs(bias) < 1, "\(name) \(ours.pixelSize): a tone shift of \(bias) against the vips path")
            }
        }
    }

    @Test("SDWebImage's images decode with their listed properties")
    func sdwebimage() throws {
        let gif = try load("sdwebimage/TestImage.gif")
        #expect(gif.pixelSize == PixelSize(50) && gif.frameCount == 5 && gif.loopCount == 0)
        #expect(gif.frames.allSatisfy { $0.duration == .milliseconds(120) })
        #expect(try load("sdwebimage/TestImage.jpg").pixelSize == PixelSize(width: 80, height: 60))
        let png = try load("sdwebimage/TestImage.png")
        #expect(png.pixelSize == PixelSize(300) && png.hasAlpha)
        #expect(try load("sdwebimage/IndexedPNG.png").pixelSize == PixelSize(width: 687, height: 123))
        #expect(try load("sdwebimage/RGBA16PNG.png").pixelSize == PixelSize(width: 126, height: 135))
        #expect(try load("sdwebimage/MonochromeTestImage.jpg").pixelSize == PixelSize(width: 165, height: 121))
        #expect(try load("sdwebimage/TestImageStatic.webp").pixelSize == PixelSize(width: 550, height: 368))
        let webp = try load("sdwebimage/TestAnimatedImageMemory.webp")
        #expect(webp.pixelSize == PixelSize(600) && webp.frameCount == 16)
        let large = try load("sdwebimage/TestImageLarge.jpg", DecodeOptions(thumbnailPixelSize: PixelSize(256)))
        #expect(large.pixelSize.width == 256 && (large.storage(as: VipsStorage.self)?.loadShrink ?? 0) >= 8)
        if VipsImageCoder.decodableFormats.contains(.heif) {
            #expect(try load("sdwebimage/TestImage.heic").pixelSize == PixelSize(width: 1440, height: 960))
        }
        for vector in ["sdwebimage/TestImage.svg", "sdwebimage/TestImage.pdf"] {
            let error = #expect(throws: WebImageError.self, "\(vector)") { try load(vector) }
            let key = vector.hasSuffix(".svg") ? "vips.svg" : "vips.pdf"
            #expect(error?.code == .unsupportedFormat && error?.message.contains(key) == true, "\(vector): \(String(describing: error))")
        }
    }
}
}

enum SharedCorpus {
    static let directory: URL? = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let corpus = root.deletingLastPathComponent().appendingPathComponent("shared/corpus")
        return FileManager.default.fileExists(atPath: corpus.appendingPathComponent("README.md").path) ? corpus : nil
    }()
}

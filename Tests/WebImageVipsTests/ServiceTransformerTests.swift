import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTurboJPEG
import WebImageVips

extension VipsTests {
/// The operations image services offer, checked on pixels.
@Suite("Image-service transformers", .offCooperativePool)
struct ServiceTransformerTests {
    let coder = VipsImageCoder()

    /// A `width`x`height` image of one colour, with `patch` painted over a rectangle.
    func canvas(_ width: Int, _ height: Int, _ colour: [UInt8], patch: (x: Range<Int>, y: Range<Int>, paint: (Int, Int) -> [UInt8])? = nil) -> Image {
        let channels = colour.count
        var bytes = [UInt8](repeating: 0, count: width * height * channels)
        for y in 0..<height {
            for x in 0..<width {
                var value = colour
                if let patch, patch.x.contains(x), patch.y.contains(y) { value = patch.paint(x, y) }
                for c in 0..<channels { bytes[(y * width + x) * channels + c] = value[c] }
            }
        }
        return Image(pixelSize: PixelSize(width: width, height: height), hasAlpha: channels == 4 || channels == 2,
                     storage: PixelBuffer(size: PixelSize(width: width, height: height), channels: channels, bytes: bytes))
    }

    /// One pixel's bands; empty when the image's pixels cannot be read (which fails the comparison).
    func pixel(_ image: Image, _ x: Int, _ y: Int) -> [Int] {
        guard let pixels = try? Fixtures.pixels(image) else { return [] }
        let i = (y * pixels.size.width + x) * pixels.channels
        return (0..<pixels.channels).map { Int(pixels.bytes[i + $0]) }
    }

    func near(_ a: [Int], _ b: [Int], _ tolerance: Int = 3) -> Bool { a.count == b.count && zip(a, b).allSatisfy { abs($0 - $1) <= tolerance } }

    @Test("smart crop keeps the subject a centre crop cuts off")
    func smartCrop() throws {
        // A flat grey strip with a busy, saturated subject at its right end.
        var generator = SystemRandomNumberGenerator()
        let noise = (0..<(80 * 80)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let image = canvas(300, 100, [128, 128, 128], patch: (210..<290, 10..<90, { x, y in [230, noise[(y - 10) * 80 + (x - 210)] / 3, 40] }))
        func redness(_ result: Image) throws -> Double {
            let pixels = try Fixtures.pixels(result)
            return Fixtures.mean(pixels, x: 0..<pixels.size.width, y: 0..<pixels.size.height)[0]
        }
        let centre = try ImageTransformers.Resize(PixelSize(100), mode: .fill).transform(image)
        #expect(centre.pixelSize == PixelSize(100))
        let centreRedness = try redness(centre)
        #expect(centreRedness < 135, "the centre third is plain grey")
        for focus in [ImageTransformers.CropFocus.attention, .entropy] {
            let smart = try ImageTransformers.Resize(PixelSize(100), mode: .fill, focus: focus).transform(image)
            #expect(smart.pixelSize == PixelSize(100))
            let smartRedness = try redness(smart)
            #expect(smartRedness > 180, "\(focus) finds the subject: \(smartRedness)")
        }
    }

    @Test("fill thumbnails smart-crop at decode, through libvips and libjpeg-turbo, JPEG and PNG")
    func smartCropThumbnail() throws {
        var generator = SystemRandomNumberGenerator()
        let noise = (0..<(160 * 160)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let strip = canvas(600, 200, [128, 128, 128], patch: (420..<580, 20..<180, { x, y in [230, noise[(y - 20) * 160 + (x - 420)] / 3, 40] }))
        for format in [ImageFormat.jpeg, .png] {
            let data = try coder.encode(strip, as: format, options: EncodeOptions(quality: 95))
            for decoder in [coder as any ImageCoder, TurboJPEGCoder()] {
                func red(_ focus: CropFocus) throws -> Double {
                    var options = DecodeOptions(thumbnailPixelSize: PixelSize(50), preserveAspectRatio: false)
                    options.cropFocus = focus
                    let thumbnail = try decoder.decode(data, options: options)
                    #expect(thumbnail.pixelSize == PixelSize(50))
                    let pixels = try Fixtures.pixels(thumbnail)
                    return Fixtures.mean(pixels, x: 0..<50, y: 0..<50)[0]
                }
                let centre = try red(.centre), attention = try red(.attention)
                #expect(centre < 140 && attention > 180, "\(format) \(type(of: decoder)): centre \(centre), attention \(attention)")
            }
        }
        var context = ImageContext(thumbnailPixelSize: PixelSize(50))
        context.preserveAspectRatio = false
        context.cropFocus = .attention
        let manager = ImageManager(configuration: ImageManager.Configuration())
        #expect(manager.resultKey(for: URL(string: "https://x/a.jpg")!, context: context) == "https://x/a.jpg#webimage(thumb=50x50,fill,attention)")
    }

    @Test("a fill that needs no shrink still cuts its box (never upscaled): JPEG, PNG, GIF, WebP, by either coder, at its focus")
    func fillWithoutShrink() throws {
        let strip = canvas(200, 100, [128, 128, 128], patch: (150..<200, 0..<100, { _, _ in [230, 20, 20] }))
        for format in [ImageFormat.jpeg, .png, .gif, .webp] {
            let data = try coder.encode(strip, as: format, options: EncodeOptions(quality: 95))
            for decoder in [coder as any ImageCoder, TurboJPEGCoder()] {
                for (box, expected) in [(PixelSize(width: 100, height: 100), PixelSize(width: 100, height: 100)),
                                        (PixelSize(width: 200, height: 40), PixelSize(width: 200, height: 40)),
                                        (PixelSize(width: 400, height: 50), PixelSize(width: 200, height: 50))] {
                    var options = DecodeOptions(thumbnailPixelSize: box, preserveAspectRatio: false)
                    options.cropFocus = .point(x: 1, y: 0.5)
                    let thumbnail = try decoder.decode(data, options: options)
                    #expect(thumbnail.pixelSize == expected, "\(format) \(type(of: decoder)) \(box)")
                    if box.width == 100 {
                        let right = Fixtures.mean(try Fixtures.pixels(thumbnail), x: 90..<100, y: 0..<100)[0]
                        #expect(right > 180, "\(format) \(type(of: decoder)): the focus at the right edge keeps the red band")
                    }
                }
            }
        }
    }

    @Test("a focal point keeps the part of a fill it names, clamped to the image: as a transformer and at decode, JPEG, PNG and GIF")
    func focalPoint() throws {
        // Left third red, middle grey, right third blue: which third a 100x100 fill of a 300x100 strip keeps is its colour.
        let strip = canvas(300, 100, [128, 128, 128], patch: (0..<100, 0..<100, { _, _ in [220, 30, 30] }))
        let image = canvas(300, 100, [128, 128, 128], patch: (200..<300, 0..<100, { _, _ in [30, 30, 220] }))
        func colour(_ result: Image) throws -> [Double] {
            let pixels = try Fixtures.pixels(result)
            return Fixtures.mean(pixels, x: 0..<pixels.size.width, y: 0..<pixels.size.height)
        }
        let left = try ImageTransformers.Resize(PixelSize(100), mode: .fill, focus: .point(x: 0.1, y: 0.5)).transform(strip)
        let leftColour = try colour(left)
        #expect(left.pixelSize == PixelSize(100) && leftColour[0] > 200, "fp:0.1 keeps the red left third")
        let right = try ImageTransformers.Resize(PixelSize(100), mode: .fill, focus: .point(x: 1, y: 0)).transform(image)
        let rightColour = try colour(right)
        #expect(right.pixelSize == PixelSize(100) && rightColour[2] > 200, "fp:1 is clamped to the right edge")
        #expect(try ImageTransformers.Resize(PixelSize(100), mode: .fill, focus: .point(x: 0.9, y: 0.5)).key == "resize(100x100,fill,fp:0.9:0.5)")

        // At decode: libvips (JPEG, PNG, an animated GIF frame by frame) and libjpeg-turbo.
        let wide = canvas(600, 200, [128, 128, 128], patch: (0..<200, 0..<200, { _, _ in [220, 30, 30] }))
        for format in [ImageFormat.jpeg, .png, .gif] {
            var source = wide
            if format == .gif {
                // Two frames stacked, each with the red left third.
                source = canvas(600, 400, [128, 128, 128], patch: (0..<200, 0..<400, { _, _ in [220, 30, 30] }))
                source.pixelSize = wide.pixelSize
                source.frames = [.init(duration: .milliseconds(100)), .init(duration: .milliseconds(100))]
                source.loopCount = 0
            }
            let data = try coder.encode(source, as: format, options: EncodeOptions(quality: 95))
            for decoder in format == .jpeg ? [coder as any ImageCoder, TurboJPEGCoder()] : [coder] {
                var options = DecodeOptions(thumbnailPixelSize: PixelSize(50), preserveAspectRatio: false)
                options.cropFocus = .point(x: 0.05, y: 0.5)
                let thumbnail = try decoder.decode(data, options: options)
                #expect(thumbnail.pixelSize == PixelSize(50), "\(format) \(type(of: decoder))")
                #expect(thumbnail.frameCount == (format == .gif ? 2 : 1), "\(format): every frame is cropped")
                let pixels = try Fixtures.pixels(thumbnail)
                let red = Fixtures.mean(pixels, x: 0..<50, y: 0..<pixels.size.height)[0]
                #expect(red > 190, "\(format) \(type(of: decoder)): the focal point's third, red \(red)")
            }
        }
        var context = ImageContext(thumbnailPixelSize: PixelSize(50))
        context.preserveAspectRatio = false
        context.cropFocus = .point(x: 0.25, y: 1.0 / 3)
        let manager = ImageManager(configuration: ImageManager.Configuration())
        #expect(manager.resultKey(for: URL(string: "https://x/a.jpg")!, context: context) == "https://x/a.jpg#webimage(thumb=50x50,fill,fp:0.25:0.3333)")
    }

    @Test("sharpen steepens an edge a downscale softened")
    func sharpen() throws {
        let edge = canvas(64, 16, [40, 40, 40], patch: (32..<64, 0..<16, { _, _ in [220, 220, 220] }))
        let soft = try ImageTransformers.Blur(sigma: 1.5).transform(edge)
        let sharp = try ImageTransformers.Sharpen(sigma: 1).transform(soft)
        #expect(sharp.pixelSize == soft.pixelSize && !sharp.hasAlpha)
        func step(_ image: Image) -> Int { pixel(image, 33, 8)[0] - pixel(image, 30, 8)[0] }
        #expect(step(sharp) > step(soft) + 10, "the edge is steeper: \(step(soft)) → \(step(sharp))")
        #expect(throws: WebImageError.self) { try ImageTransformers.Sharpen(sigma: -1).transform(soft) }
    }

    @Test("flatten blends alpha onto the colour and removes it; an opaque image is unchanged")
    func flatten() throws {
        let half = canvas(8, 8, [255, 0, 0, 128])
        let flat = try ImageTransformers.Flatten(background: RGBColor(red: 0, green: 0, blue: 255)).transform(half)
        #expect(!flat.hasAlpha)
        #expect(near(pixel(flat, 4, 4), [128, 0, 127], 2))
        let opaque = canvas(8, 8, [1, 2, 3])
        let unchanged = try ImageTransformers.Flatten().transform(opaque)
        #expect(unchanged.storage(as: PixelBuffer.self) == opaque.storage(as: PixelBuffer.self))
    }

    @Test("pad letterboxes to the box at a gravity, on a colour or on transparency; larger images are fitted first")
    func pad() throws {
        let image = canvas(40, 20, [0, 200, 0])
        let centred = try ImageTransformers.Pad(PixelSize(60), background: RGBColor(red: 255, green: 0, blue: 0)).transform(image)
        #expect(centred.pixelSize == PixelSize(60) && !centred.hasAlpha)
        #expect(pixel(centred, 0, 0) == [255, 0, 0] && pixel(centred, 30, 30) == [0, 200, 0])
        let north = try ImageTransformers.Pad(PixelSize(60), background: .white, gravity: .north).transform(image)
        #expect(pixel(north, 30, 5) == [0, 200, 0] && pixel(north, 30, 55) == [255, 255, 255])
        let clear = try ImageTransformers.Pad(PixelSize(60), background: nil).transform(image)
        #expect(clear.hasAlpha && (pixel(clear, 0, 0))[3] == 0 && (pixel(clear, 30, 30)) == [0, 200, 0, 255])
        let large = try ImageTransformers.Pad(PixelSize(20), background: .black).transform(canvas(400, 100, [9, 9, 9]))
        #expect(large.pixelSize == PixelSize(20))
        #expect(pixel(large, 10, 10) == [9, 9, 9] && pixel(large, 10, 0) == [0, 0, 0], "fitted to 20x5 and letterboxed")
        let grey = try ImageTransformers.Pad(PixelSize(10), background: .white).transform(canvas(4, 4, [50]))
        #expect(pixel(grey, 0, 0) == [255] && pixel(grey, 5, 5) == [50])
    }

    @Test("trim cuts uniform borders of the corner's colour, and leaves an all-border image alone")
    func trim() throws {
        let image = canvas(100, 80, [250, 250, 250], patch: (30..<50, 40..<50, { _, _ in [0, 0, 0] }))
        let trimmed = try ImageTransformers.Trim().transform(image)
        #expect(trimmed.pixelSize == PixelSize(width: 20, height: 10))
        #expect(pixel(trimmed, 10, 5) == [0, 0, 0])
        let blackBorder = canvas(50, 50, [0, 0, 0], patch: (10..<40, 5..<45, { _, _ in [200, 100, 0] }))
        let trimmedBorder = try ImageTransformers.Trim().transform(blackBorder)
        #expect(trimmedBorder.pixelSize == PixelSize(width: 30, height: 40))
        let blank = try ImageTransformers.Trim().transform(canvas(30, 30, [7, 7, 7]))
        #expect(blank.pixelSize == PixelSize(30))
        #expect(throws: WebImageError.self) { try ImageTransformers.Trim(threshold: 400).transform(image) }
        // Thinner than the search's 3x3 neighbourhood (libvips' rank filter fails
        // there with "window too large"): all border, returned as it is.
        for size in [PixelSize(1), PixelSize(width: 2, height: 40), PixelSize(width: 40, height: 1)] {
            let thin = try ImageTransformers.Trim().transform(canvas(size.width, size.height, [9, 9, 9]))
            #expect(thin.pixelSize == size)
        }
    }

    @Test("greyscale gives one band (two with alpha), white stays white and colours become their lightness")
    func greyscale() throws {
        let grey = try ImageTransformers.Greyscale().transform(Image(pixelSize: PixelSize(width: 80, height: 40), storage: Fixtures.quadrants(width: 80, height: 40)))
        let greyBands = try #require(grey.storage(as: VipsStorage.self)).bands
        #expect(greyBands == 1)
        #expect(pixel(grey, 70, 30) == [255])
        let red = pixel(grey, 5, 5)[0], green = pixel(grey, 50, 5)[0], blue = pixel(grey, 5, 30)[0]
        #expect(green > red && red > blue, "lightness order of pure green, red, blue: \(green) \(red) \(blue)")
        let withAlpha = try ImageTransformers.Greyscale().transform(canvas(4, 4, [255, 0, 0, 100]))
        #expect(withAlpha.hasAlpha && (pixel(withAlpha, 1, 1)).count == 2 && (pixel(withAlpha, 1, 1))[1] == 100)
    }

    @Test("a watermark lands at its gravity with its opacity; one larger than the image is scaled down; an opaque image stays opaque")
    func watermark() throws {
        let base = canvas(100, 80, [0, 200, 0])
        let logo = try coder.encode(canvas(20, 20, [255, 0, 0, 255]), as: .png, options: EncodeOptions())
        let full = try ImageTransformers.Watermark(data: logo, gravity: .southEast, opacity: 1, margin: 10).transform(base)
        #expect(full.pixelSize == base.pixelSize && !full.hasAlpha)
        #expect(near(pixel(full, 80, 60), [255, 0, 0]) && pixel(full, 5, 5) == [0, 200, 0] && pixel(full, 92, 72) == [0, 200, 0])
        let faint = try ImageTransformers.Watermark(data: logo, gravity: .northWest, opacity: 0.5, margin: 0).transform(base)
        #expect(near(pixel(faint, 10, 10), [128, 100, 0], 3))
        let huge = try coder.encode(canvas(400, 400, [255, 0, 0, 255]), as: .png, options: EncodeOptions())
        let scaled = try ImageTransformers.Watermark(data: huge, gravity: .centre, opacity: 1, margin: 10).transform(base)
        #expect(near(pixel(scaled, 50, 40), [255, 0, 0]) && pixel(scaled, 5, 40) == [0, 200, 0], "fitted inside the margins")
        let key = try ImageTransformers.Watermark(data: logo).key
        let again = try ImageTransformers.Watermark(data: logo).key, other = try ImageTransformers.Watermark(data: huge).key
        #expect(key == again && key != other, "the key follows the overlay's bytes")
        #expect(throws: WebImageError.self) { try ImageTransformers.Watermark(data: Data("not an image".utf8)) }
        #expect(throws: WebImageError.self) { try ImageTransformers.Watermark(data: logo, opacity: 1.5) }
        // A margin that leaves no room is the request's mistake, named with the image's size.
        let misfit = #expect(throws: WebImageError.self) { try ImageTransformers.Watermark(data: logo, margin: 40).transform(base) }
        #expect(misfit?.code == .stepDoesNotFit && misfit?.message.contains("margin 40") == true && misfit?.message.contains("100x80") == true)

        // Decoded once, used many times: the same key and pixels as from the bytes.
        let overlay = try ImageTransformers.Watermark.Overlay(data: logo)
        let reused = try ImageTransformers.Watermark(overlay: overlay, gravity: .southEast, opacity: 1, margin: 10)
        #expect(reused.key == (try ImageTransformers.Watermark(data: logo, gravity: .southEast, opacity: 1, margin: 10)).key)
        let drawn = try reused.transform(base)
        #expect(near(pixel(drawn, 80, 60), [255, 0, 0]) && pixel(drawn, 5, 5) == [0, 200, 0] && pixel(drawn, 92, 72) == [0, 200, 0])
        #expect(throws: WebImageError.self) { try ImageTransformers.Watermark(overlay: overlay, opacity: -0.1) }
        #expect(throws: WebImageError.self) { try ImageTransformers.Watermark.Overlay(data: Data([0x89, 0x50, 0x4E, 0x47])) }
    }

    @Test("placeholders of an image: mean colour kept by both hashes, from a large image, an animation and through the manager")
    func placeholders() async throws {
        let large = canvas(900, 600, [200, 60, 30])
        let hashes = try large.placeholders()
        let blur = try BlurHash.averageColor(hashes.blurHash)
        #expect(abs(Int(blur.red) - 200) <= 2 && abs(Int(blur.green) - 60) <= 2 && abs(Int(blur.blue) - 30) <= 2, "\(blur)")
        let thumb = try ThumbHash.averageRGBA(hashes.thumbHash)
        #expect(abs(thumb.red * 255 - 200) < 8 && abs(thumb.green * 255 - 60) < 8 && abs(thumb.blue * 255 - 30) < 8)
        #expect(abs(try ThumbHash.approximateAspectRatio(hashes.thumbHash) - 1.5) < 0.3)
        let clear = try canvas(40, 40, [0, 0, 255, 0]).placeholders()
        #expect(try ThumbHash.averageRGBA(clear.thumbHash).alpha < 0.1)
        #expect(try BlurHash.averageColor(clear.blurHash) == .white, "BlurHash sees transparency over white")
        let gif = try coder.decode(try Fixtures.animated(.gif, delays: [100, 100], loop: 0, size: 32), options: DecodeOptions())
        #expect(try BlurHash.averageColor(gif.placeholders().blurHash) == .black, "the first frame")

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webimage-vips-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("large.png")
        try coder.encode(large, as: .png, options: EncodeOptions()).write(to: file)
        let configuration = ImageManager.Configuration()
        configuration.coders.registerVips()
        let manager = ImageManager(configuration: configuration)
        #expect(try await manager.placeholders(for: file) == hashes)
        let key = manager.resultKey(for: file, context: ImageContext(thumbnailPixelSize: PixelSize(100)))
        #expect(manager.memoryCache?.data(forKey: key) != nil, "made from a cached 100x100 thumbnail's bytes")
        await manager.shutdown()

        // A photo's hashes are the same whether its thumbnail was just made or read
        // back from the store (as after a restart): both come from its stored bytes.
        let photo = directory.appendingPathComponent("photo.jpg")
        try Fixtures.photoJPEG(width: 640, height: 427).write(to: photo)
        let store = MemoryCacheStore(limits: .unlimited)
        var stored = ImageManager.Configuration()
        stored.coders.registerVips()
        stored.store = store
        let first = ImageManager(configuration: stored)
        let fresh = try await first.placeholders(for: photo, options: .waitStoreCache)
        await first.shutdown()
        let second = ImageManager(configuration: stored)
        #expect(try await second.placeholders(for: photo) == fresh, "read back from the store")
        await second.shutdown()
    }

    @Test("the new transformers apply to every frame of an animation")
    func animated() throws {
        let gif = try coder.decode(try Fixtures.animated(.gif, delays: [100, 100, 100], loop: 0, size: 32), options: DecodeOptions())
        for transformer in [ImageTransformers.Pad(PixelSize(40), background: .black), ImageTransformers.Greyscale(), ImageTransformers.Sharpen()] as [any ImageTransformer] {
            let result = try transformer.transform(gif)
            #expect(result.frameCount == 3, "\(transformer.key)")
        }
    }
}
}

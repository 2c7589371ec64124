import CVips
import CVipsOps
import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTurboJPEG
import WebImageVips

extension VipsTests {
/// Colour management: what leaves the pipeline is 8-bit sRGB (or grey), unless
/// `keepColorProfile`. Every check is on pixels.
@Suite("Colour management", .offCooperativePool)
struct ColourTests {
    let coder = VipsImageCoder()

    /// A flat `width`x`height` RGB image of one colour, as libvips holds it.
    static func flat(_ rgb: [UInt8], width: Int = 48, height: Int = 32) throws -> OpaquePointerBox {
        Fixtures.ready()
        let bytes = [UInt8]((0..<(width * height)).flatMap { _ in rgb })
        guard let pointer = bytes.withUnsafeBytes({ CVips_from_memory($0.baseAddress, $0.count, Int32(width), Int32(height), Int32(rgb.count)) }) else {
            throw Fixtures.Failure("from_memory")
        }
        return OpaquePointerBox(pointer)
    }

    /// Owns a VipsImage made by a fixture.
    final class OpaquePointerBox {
        let pointer: UnsafeMutablePointer<VipsImage>
        init(_ pointer: UnsafeMutablePointer<VipsImage>) { self.pointer = pointer }
        deinit { CVips_unref(pointer) }

        func make(_ call: (UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32) throws -> OpaquePointerBox {
            var out: UnsafeMutablePointer<VipsImage>?
            guard call(&out) == 0, let out else { throw Fixtures.Failure("vips call") }
            return OpaquePointerBox(out)
        }

        /// Saved with its metadata (the profile) kept.
        func save(_ format: ImageFormat, quality: Int32 = 100) throws -> Data {
            var buffer: UnsafeMutableRawPointer?
            var length = 0
            let status: Int32 = switch format {
            case .jpeg: CVips_jpegsave(pointer, &buffer, &length, quality, 0, 0, 2)
            case .png: CVips_pngsave(pointer, &buffer, &length, 0, 0)
            default: -1
            }
            guard status == 0, let buffer else { throw Fixtures.Failure("save \(format)") }
            defer { CVips_free(buffer) }
            return Data(bytes: buffer, count: length)
        }
    }

    /// sRGB red stored as Display P3: the file holds (234, 51, 35) and a P3 profile.
    static func p3Red() throws -> Data {
        let red = try flat([255, 0, 0])
        let p3 = try red.make { CVips_to_profile(red.pointer, $0, "p3") }
        return try p3.save(.jpeg)
    }

    func centre(_ image: Image) throws -> [Int] {
        let pixels = try Fixtures.pixels(image)
        let i = ((pixels.size.height / 2) * pixels.size.width + pixels.size.width / 2) * pixels.channels
        return (0..<pixels.channels).map { Int(pixels.bytes[i + $0]) }
    }

    func close(_ a: [Int], _ b: [Int], within tolerance: Int) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { abs($0 - $1) <= tolerance }
    }

    func hasProfile(_ data: Data) throws -> Bool { try coder.info(data).hasColorProfile }

    @Test("a Display P3 red becomes sRGB red, decoded full or as a thumbnail, by either coder")
    func p3ToSRGB() throws {
        let file = try Self.p3Red()
        #expect(try hasProfile(file))
        let stored = try centre(coder.decode(file, options: DecodeOptions(keepColorProfile: true)))
        #expect(close(stored, [234, 51, 35], within: 3), "the file holds P3 values: \(stored)")
        let turbo = TurboJPEGCoder()
        for (name, candidate) in [("vips", coder as any ImageCoder), ("turbojpeg", turbo)] {
            for box in [nil, PixelSize(16)] {
                let image = try candidate.decode(file, options: DecodeOptions(thumbnailPixelSize: box))
                let rgb = try centre(image)
                // vipsthumbnail --export-profile srgb gives (255, 0, 3).
                #expect(close(rgb, [255, 0, 3], within: 4), "\(name) \(box.map(\.description) ?? "full"): \(rgb)")
            }
        }
    }

    @Test("a P3 JPEG thumbnail takes libjpeg-turbo's path and agrees with the vips path; keepColorProfile keeps its profile there too")
    func p3OnTheFastPath() throws {
        // A photo-like P3 file: noise converted to P3, so that the two paths' resampling is compared too.
        Fixtures.ready()
        var noise: UnsafeMutablePointer<VipsImage>?
        #expect(CVips_noise_rgb(&noise, 640, 480) == 0)
        let photo = OpaquePointerBox(try #require(noise))
        let p3 = try photo.make { CVips_to_profile(photo.pointer, $0, "p3") }
        let file = try p3.save(.jpeg, quality: 90)
        let options = DecodeOptions(thumbnailPixelSize: PixelSize(120))
        let path = try file.withUnsafeBytes { raw in try JPEGThumbnailDecoder(bytes: raw, options: options, box: PixelSize(120)).attempt() }
        guard case .success(let decoded) = path else { Issue.record("declined: \(path)"); return }
        let viaVips = try coder.decode(file, options: options)
        #expect(decoded.image.pixelSize == viaVips.pixelSize)
        let a = try Fixtures.pixels(decoded.image), b = try Fixtures.pixels(viaVips)
        let meanA = Fixtures.mean(a, x: 0..<a.size.width, y: 0..<a.size.height), meanB = Fixtures.mean(b, x: 0..<b.size.width, y: 0..<b.size.height)
        #expect(zip(meanA, meanB).allSatisfy { abs($0 - $1) < 1.5 }, "converted alike: \(meanA) vs \(meanB)")
        var keep = options
        keep.keepColorProfile = true
        let kept = try TurboJPEGCoder().decode(file, options: keep)
        let encoded = try coder.encode(kept, as: .png, options: EncodeOptions(keepColorProfile: true))
        #expect(try hasProfile(encoded))
    }

    @Test("re-encoded output is sRGB without a profile in every format, the same pixels in each")
    func everyFormatAgrees() throws {
        let image = try coder.decode(try Self.p3Red(), options: DecodeOptions())
        for format in [ImageFormat.jpeg, .png, .webp, .avif, .heif, .tiff] where coder.canEncode(format) {
            let data = try coder.encode(image, as: format, options: EncodeOptions(quality: 95))
            #expect(try !hasProfile(data), "\(format) carries no profile")
            let again = try centre(coder.decode(data, options: DecodeOptions()))
            #expect(close(again, [255, 0, 3], within: 8), "\(format): \(again)")
        }
    }

    @Test("keepColorProfile keeps the P3 values and the profile, in every format that carries one")
    func keepProfile() throws {
        let image = try coder.decode(try Self.p3Red(), options: DecodeOptions(keepColorProfile: true))
        for format in [ImageFormat.jpeg, .png, .webp, .avif, .heif] where coder.canEncode(format) {
            let data = try coder.encode(image, as: format, options: EncodeOptions(quality: 95, keepColorProfile: true))
            #expect(try hasProfile(data), "\(format) keeps the profile")
            let kept = try centre(coder.decode(data, options: DecodeOptions(keepColorProfile: true)))
            #expect(close(kept, [234, 51, 35], within: 8), "\(format) keeps the P3 values: \(kept)")
            let shown = try centre(coder.decode(data, options: DecodeOptions()))
            #expect(close(shown, [255, 0, 3], within: 8), "\(format) shows as sRGB red: \(shown)")
        }
        // The same image encoded without keepColorProfile is converted, never written as P3 values labelled sRGB.
        let converted = try coder.encode(image, as: .png, options: EncodeOptions())
        #expect(try !hasProfile(converted))
        #expect(close(try centre(coder.decode(converted, options: DecodeOptions())), [255, 0, 3], within: 4))
    }

    @Test("a CMYK JPEG comes out 8-bit RGB close to its RGB original")
    func cmyk() throws {
        let original: [UInt8] = [200, 120, 40]
        let rgb = try Self.flat(original)
        let cmyk = try rgb.make { CVips_to_profile(rgb.pointer, $0, "cmyk") }
        #expect(CVips_bands(cmyk.pointer) == 4)
        let file = try cmyk.save(.jpeg)
        for box in [nil, PixelSize(16)] {
            let image = try coder.decode(file, options: DecodeOptions(thumbnailPixelSize: box))
            let storage = try #require(image.storage(as: VipsStorage.self))
            #expect(storage.bands == 3)
            #expect(storage.byteCount == image.pixelSize.area * 3, "8 bits per sample")
            let centre = try centre(image)
            #expect(close(centre, original.map(Int.init), within: 12), "\(box.map(\.description) ?? "full"): \(centre)")
            // As PNG it is 8-bit RGB, not 16-bit.
            let png = try coder.encode(image, as: .png, options: EncodeOptions())
            #expect(png[24] == 8 && png[25] == 2, "IHDR: bit depth 8, colour type RGB")
        }
    }

    @Test("a 16-bit PNG becomes 8-bit with the same colour")
    func sixteenBit() throws {
        let rgb = try Self.flat([10, 128, 250])
        let deep = try rgb.make { CVips_to_16bit(rgb.pointer, $0) }
        let file = try deep.save(.png)
        #expect(file[24] == 16, "the fixture is 16-bit")
        for box in [nil, PixelSize(16)] {
            let image = try coder.decode(file, options: DecodeOptions(thumbnailPixelSize: box))
            let storage = try #require(image.storage(as: VipsStorage.self))
            #expect(storage.byteCount == image.pixelSize.area * 3, "8 bits per sample")
            #expect(close(try centre(image), [10, 128, 250], within: 1))
            let png = try coder.encode(image, as: .png, options: EncodeOptions())
            #expect(png[24] == 8)
        }
    }

    @Test("a grey JPEG stays one 8-bit grey band; a 16-bit grey PNG becomes one")
    func grey() throws {
        let grey = try Self.flat([77])
        let jpeg = try grey.save(.jpeg)
        let image = try coder.decode(jpeg, options: DecodeOptions(thumbnailPixelSize: PixelSize(16)))
        #expect(try #require(image.storage(as: VipsStorage.self)).bands == 1)
        #expect(close(try centre(image), [77], within: 1))
        let deep = try grey.make { CVips_to_16bit(grey.pointer, $0) }
        let decoded = try coder.decode(try deep.save(.png), options: DecodeOptions())
        let storage = try #require(decoded.storage(as: VipsStorage.self))
        #expect(storage.bands == 1 && storage.byteCount == decoded.pixelSize.area)
        #expect(close(try centre(decoded), [77], within: 1))
    }

    @Test("a corrupt profile, or one that does not fit the image, is ignored: the pixels are taken as sRGB")
    func badProfiles() throws {
        // An RGB (Display P3) profile on grey pixels, and garbage where a profile should be.
        let red = try Self.flat([255, 0, 0])
        let p3 = try red.make { CVips_to_profile(red.pointer, $0, "p3") }
        var length = 0
        guard let raw = Optional(CVips_profile(p3.pointer, &length)) as UnsafeRawPointer?, length > 0 else { throw Fixtures.Failure("no P3 profile") }
        let p3Profile = [UInt8](UnsafeRawBufferPointer(start: raw, count: length))
        let garbage = [UInt8](repeating: 0x5A, count: 300)
        // libvips' savers drop a profile that does not fit, so the files are patched.
        for (name, profile, colour) in [("RGB profile on grey", p3Profile, [UInt8(100)]), ("garbage profile", garbage, [30, 140, 220])] {
            let rgb = try Self.flat(colour)
            for format in [ImageFormat.jpeg, .png] {
                let file = format == .jpeg ? Self.withJPEGProfile(try rgb.save(.jpeg), profile) : Self.withPNGProfile(try rgb.save(.png), profile)
                // libpng drops such a profile itself (with a warning); libjpeg passes it on.
                if format == .jpeg { #expect(try hasProfile(file), "\(name) \(format): the fixture carries it") }
                for box in [nil, PixelSize(16)] {
                    let image = try coder.decode(file, options: DecodeOptions(thumbnailPixelSize: box))
                    #expect(close(try centre(image), colour.map(Int.init), within: 3), "\(name) \(format)")
                    let out = try coder.encode(image, as: .png, options: EncodeOptions())
                    #expect(try !hasProfile(out), "\(name): the bad profile is not passed on")
                }
            }
        }
    }

    /// The JPEG with `profile` in an APP2 ICC_PROFILE segment after SOI.
    static func withJPEGProfile(_ jpeg: Data, _ profile: [UInt8]) -> Data {
        let payload = Array("ICC_PROFILE".utf8) + [0, 1, 1] + profile
        let length = payload.count + 2
        var out = Data(jpeg.prefix(2))
        out.append(contentsOf: [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)] + payload)
        out.append(jpeg.dropFirst(2))
        return out
    }

    /// The PNG with `profile` in an iCCP chunk after IHDR (zlib with stored blocks).
    static func withPNGProfile(_ png: Data, _ profile: [UInt8]) -> Data {
        var zlib: [UInt8] = [0x78, 0x01]
        var chunks = stride(from: 0, to: profile.count, by: 65535).map { Array(profile[$0..<min(profile.count, $0 + 65535)]) }
        if chunks.isEmpty { chunks = [[]] }
        for (index, block) in chunks.enumerated() {
            let n = UInt16(block.count)
            zlib += [index == chunks.count - 1 ? 1 : 0, UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8(~n >> 8)] + block
        }
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in profile { a = (a + UInt32(byte)) % 65521; b = (b + a) % 65521 }
        let adler = b << 16 | a
        zlib += [UInt8(adler >> 24), UInt8(adler >> 16 & 0xFF), UInt8(adler >> 8 & 0xFF), UInt8(adler & 0xFF)]
        let body = Array("iCCP".utf8) + Array("icc".utf8) + [0, 0] + zlib
        func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        let chunk = be(UInt32(body.count - 4)) + body + be(SyntheticImages.crc32(body))
        var out = Data(png.prefix(33))   // signature (8) + IHDR (25)
        out.append(contentsOf: chunk)
        out.append(png.dropFirst(33))
        return out
    }
}
}

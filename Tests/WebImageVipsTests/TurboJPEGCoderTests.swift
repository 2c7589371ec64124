import CVips
import CVipsOps
import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTesting
import WebImageTurboJPEG
import WebImageVips

@Suite("TurboJPEGCoder", .offCooperativePool)
struct TurboJPEGCoderTests {
    let turbo = TurboJPEGCoder()
    let vips = VipsImageCoder()

    /// A smooth photo-like image: gradients and a soft pattern, so that two
    /// resamplings of it can be compared pixel by pixel.
    static func smooth(width: Int, height: Int, channels: Int = 3) -> PixelBuffer {
        var bytes = [UInt8](repeating: 0, count: width * height * channels)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * channels
                let wave = 128 + 100 * sin(Double(x) / 37) * cos(Double(y) / 23)
                let values = [Double(x) * 255 / Double(width), Double(y) * 255 / Double(height), wave]
                for c in 0..<channels { bytes[i + c] = UInt8(max(0, min(255, channels == 1 ? wave : values[c]))) }
            }
        }
        return PixelBuffer(size: PixelSize(width: width, height: height), channels: channels, bytes: bytes)
    }

    static func jpeg(_ buffer: PixelBuffer, progressive: Bool = false) throws -> Data {
        try Fixtures.coder.encode(Fixtures.image(buffer), as: .jpeg, options: EncodeOptions(quality: 90, progressive: progressive))
    }

    /// Which path a thumbnail takes: nil when libjpeg-turbo decodes it, else why it was declined.
    static func decline(_ data: Data, _ options: DecodeOptions) throws -> JPEGThumbnailDecoder.Decline? {
        try data.withUnsafeBytes { raw in
            switch try JPEGThumbnailDecoder(bytes: raw, options: options, box: options.thumbnailPixelSize!).attempt() {
            case .success: nil
            case .failure(let declined): declined.reason
            }
        }
    }

    /// Mean and largest absolute difference over every band of two same-sized images.
    static func difference(_ a: Image, _ b: Image) throws -> (mean: Double, max: Int) {
        let pa = try Fixtures.pixels(a), pb = try Fixtures.pixels(b)
        #expect(pa.size == pb.size && pa.channels == pb.channels)
        guard pa.bytes.count == pb.bytes.count, !pa.bytes.isEmpty else { return (.infinity, .max) }
        var sum = 0, largest = 0
        for i in pa.bytes.indices {
            let d = abs(Int(pa.bytes[i]) - Int(pb.bytes[i]))
            sum += d
            largest = max(largest, d)
        }
        return (Double(sum) / Double(pa.bytes.count), largest)
    }

    /// The offset of the frame header (SOF0...SOF3 and the rest), walking the segments.
    static func frameHeader(_ data: Data) -> Int? {
        var i = 2
        while i + 4 <= data.count, data[i] == 0xFF {
            let marker = data[i + 1]
            if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) { return i }
            i += 2 + (Int(data[i + 2]) << 8 | Int(data[i + 3]))
        }
        return nil
    }

    @Test("passes ImageCoderConformance")
    func conformance() async throws {
        try await ImageCoderConformance(coder: turbo, samples: [
            .init(name: "jpeg", data: try Fixtures.encode(Fixtures.quadrants(width: 60, height: 40), as: .jpeg), pixelSize: PixelSize(width: 60, height: 40)),
            .init(name: "photo-like jpeg", data: try Self.jpeg(Self.smooth(width: 640, height: 480)), pixelSize: PixelSize(width: 640, height: 480)),
            .init(name: "progressive jpeg", data: try Self.jpeg(Self.smooth(width: 480, height: 640), progressive: true), pixelSize: PixelSize(width: 480, height: 640)),
        ]).run()
    }

    @Test("thumbnails: libjpeg-turbo's scaled decode, the vips path's size, pixels within a small tolerance",
          arguments: [false, true], [(256, 256, false), (100, 100, true), (300, 120, false), (517, 517, false), (64, 200, true), (1000, 1000, false)])
    func agreesWithVips(progressive: Bool, box: (Int, Int, Bool)) throws {
        let data = try Self.jpeg(Self.smooth(width: 1600, height: 1200), progressive: progressive)
        let options = DecodeOptions(thumbnailPixelSize: PixelSize(width: box.0, height: box.1), preserveAspectRatio: !box.2)
        #expect(try Self.decline(data, options) == nil, "libjpeg-turbo should decode this one")
        let ours = try turbo.decode(data, options: options)
        let theirs = try vips.decode(data, options: options)
        #expect(ours.pixelSize == theirs.pixelSize)
        #expect(ours.format == .jpeg && !ours.hasAlpha && ours.storedOrientation == .up && ours.orientation == .up)
        let (mean, largest) = try Self.difference(ours, theirs)
        #expect(mean < 1.5 && largest < 48, "mean difference \(mean), largest \(largest)")
        #expect(ours.storage(as: PixelBuffer.self) != nil, "finished on the direct path, without libvips")
        let attempt = try data.withUnsafeBytes { try JPEGThumbnailDecoder(bytes: $0, options: options, box: options.thumbnailPixelSize!).attempt() }
        let decoded = try attempt.get()
        #expect(decoded.finish == .direct)
        // At 1/8 (the 100 and the 300x120 boxes) every file is read by the DC decoder;
        // progressive files at 2/8 to 4/8 skip their refinement scans (5/8 for the
        // 1000 box reads them all).
        let eighth = box.0 == 100 || box.0 == 300
        let expected: JPEGThumbnailDecoder.Path = eighth ? .dcCoefficients : progressive && box.0 < 1000 ? .firstPasses : .whole
        #expect(decoded.path == expected, "took \(decoded.path)")
    }

    @Test("the direct finish agrees with libvips' finish of the same scaled decode: fit and fill, every orientation, a point focus",
          arguments: 1...8)
    func directAgreesWithVipsFinish(_ tag: Int) throws {
        let data = try Fixtures.orientedJPEG(tag, width: 1200, height: 800)
        for (box, fill, focus) in [(PixelSize(256), false, CropFocus.centre), (PixelSize(width: 200, height: 120), true, .centre),
                                   (PixelSize(150), true, .point(x: 0.2, y: 0.8))] {
            var options = DecodeOptions(thumbnailPixelSize: box, preserveAspectRatio: !fill)
            options.cropFocus = focus
            let (direct, viaVips) = try data.withUnsafeBytes { raw in
                (try JPEGThumbnailDecoder(bytes: raw, options: options, box: box).attempt().get(),
                 try JPEGThumbnailDecoder(bytes: raw, options: options, box: box, directPixelLimit: 0).attempt().get())
            }
            #expect(direct.finish == .direct && viaVips.finish == .vips)
            #expect(direct.image.pixelSize == viaVips.image.pixelSize, "\(box) fill \(fill): \(direct.image.pixelSize) against \(viaVips.image.pixelSize)")
            #expect(direct.image.orientation == viaVips.image.orientation && direct.image.storedOrientation == viaVips.image.storedOrientation)
            let (mean, _) = try Self.difference(direct.image, viaVips.image)
            #expect(mean < 1, "tag \(tag) \(box) fill \(fill) \(focus): mean difference \(mean) from libvips' finish")
            // No tone shift: the averages agree to a fraction of a level.
            let a = try Fixtures.pixels(direct.image), b = try Fixtures.pixels(viaVips.image)
            let meanA = Fixtures.mean(a, x: 0..<a.size.width, y: 0..<a.size.height), meanB = Fixtures.mean(b, x: 0..<b.size.width, y: 0..<b.size.height)
            #expect(zip(meanA, meanB).allSatisfy { abs($0 - $1) < 0.5 }, "averages \(meanA) against \(meanB)")
        }
    }

    @Test("handed to libvips' finish: results over the direct limit, smart crops, kept profiles")
    func directDeclines() throws {
        let data = try Self.jpeg(Self.smooth(width: 1600, height: 1200))
        func finish(_ options: DecodeOptions, limit: Int = TurboJPEGCoder.defaultDirectPixelLimit) throws -> JPEGThumbnailDecoder.Finish {
            try data.withUnsafeBytes { try JPEGThumbnailDecoder(bytes: $0, options: options, box: options.thumbnailPixelSize!, directPixelLimit: limit).attempt().get().finish }
        }
        #expect(try finish(DecodeOptions(thumbnailPixelSize: PixelSize(256))) == .direct)
        #expect(try finish(DecodeOptions(thumbnailPixelSize: PixelSize(256)), limit: 256 * 191) == .vips)
        var smart = DecodeOptions(thumbnailPixelSize: PixelSize(256), preserveAspectRatio: false)
        smart.cropFocus = .attention
        #expect(try finish(smart) == .vips)
        #expect(try finish(DecodeOptions(thumbnailPixelSize: PixelSize(256), keepColorProfile: true)) == .vips)
        let image = try TurboJPEGCoder(directPixelLimit: 0).decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(256)))
        #expect(image.storage(as: VipsStorage.self) != nil)
    }

    @Test("progressive at 1/4 and 1/2: the AC refinement scans are dropped, the result stays close to the full file's")
    func firstPasses() throws {
        let progressive = try Self.jpeg(Self.smooth(width: 1600, height: 1200), progressive: true)
        let baseline = try Self.jpeg(Self.smooth(width: 1600, height: 1200))
        let stream = try #require(progressive.withUnsafeBytes { JPEGThumbnailDecoder.scanFiltered($0, keepFirstAC: true) })
        let dcOnly = try #require(progressive.withUnsafeBytes { JPEGThumbnailDecoder.dcOnlyStream($0) })
        #expect(stream.count < progressive.count && stream.count > dcOnly.count, "\(stream.count) of \(progressive.count) bytes kept, DC alone \(dcOnly.count)")
        #expect(baseline.withUnsafeBytes { JPEGThumbnailDecoder.scanFiltered($0, keepFirstAC: true) } == nil, "a baseline file is decoded whole")
        #expect(progressive.prefix(progressive.count - 100).withUnsafeBytes { JPEGThumbnailDecoder.scanFiltered(UnsafeRawBufferPointer(rebasing: $0[...]), keepFirstAC: true) } == nil,
                "a truncated file is decoded whole, so that truncation is reported")
        for box in [PixelSize(400), PixelSize(800)] {  // 2/8 and 4/8 of 1600 x 1200
            let options = DecodeOptions(thumbnailPixelSize: box)
            let decoded = try progressive.withUnsafeBytes { try JPEGThumbnailDecoder(bytes: $0, options: options, box: box).attempt().get() }
            #expect(decoded.path == .firstPasses)
            let full = try vips.decode(progressive, options: options)
            let (mean, _) = try Self.difference(decoded.image, full)
            #expect(mean < 1.5, "\(box): mean difference \(mean) from libvips' decode of every scan")
        }
    }

    @Test("each EXIF orientation: upright thumbnails, the same as the vips path's; keepOrientation keeps them as stored", arguments: 1...8)
    func orientation(_ tag: Int) throws {
        let data = try Fixtures.orientedJPEG(tag, width: 640, height: 320)
        let options = DecodeOptions(thumbnailPixelSize: PixelSize(64))
        #expect(try Self.decline(data, options) == nil)
        let ours = try turbo.decode(data, options: options)
        let theirs = try vips.decode(data, options: options)
        #expect(ours.storedOrientation.rawValue == tag && ours.orientation == .up)
        #expect(ours.pixelSize == (tag >= 5 ? PixelSize(width: 32, height: 64) : PixelSize(width: 64, height: 32)))
        #expect(ours.pixelSize == theirs.pixelSize)
        let (mean, _) = try Self.difference(ours, theirs)
        #expect(mean < 2, "mean difference \(mean) from the vips path")

        var keep = options
        keep.keepOrientation = true
        let stored = try turbo.decode(data, options: keep)
        #expect(stored.pixelSize == PixelSize(width: 64, height: 32))
        #expect(stored.orientation.rawValue == tag && stored.storedOrientation.rawValue == tag)
        // The stored top-left quadrant is red whatever the tag says.
        let pixels = try Fixtures.pixels(stored)
        let corner = Fixtures.mean(pixels, x: 2..<14, y: 2..<12)
        #expect(corner[0] > 200 && corner[1] < 60 && corner[2] < 60, "stored top-left is \(corner)")
    }

    @Test("progressive at 1/8: the AC scans are dropped before decoding, and the result matches the full file's")
    func dcOnly() throws {
        let progressive = try Self.jpeg(Self.smooth(width: 2400, height: 1600), progressive: true)
        let baseline = try Self.jpeg(Self.smooth(width: 2400, height: 1600))
        let stream = try #require(progressive.withUnsafeBytes { JPEGThumbnailDecoder.dcOnlyStream($0) })
        #expect(stream.count < progressive.count / 2, "\(stream.count) of \(progressive.count) bytes kept")
        #expect(baseline.withUnsafeBytes { JPEGThumbnailDecoder.dcOnlyStream($0) } == nil, "a baseline file has no AC scans to drop")
        #expect(progressive.prefix(progressive.count - 100).withUnsafeBytes { JPEGThumbnailDecoder.dcOnlyStream(UnsafeRawBufferPointer(rebasing: $0[...])) } == nil,
                "a truncated file is decoded whole, so that truncation is reported")

        let options = DecodeOptions(thumbnailPixelSize: PixelSize(256))
        let fromFile = try turbo.decode(progressive, options: options)
        let fromStream = try turbo.decode(Data(stream), options: options)
        #expect(try Self.difference(fromFile, fromStream).mean == 0, "the coder decoded the DC scans alone")
        let full = try vips.decode(progressive, options: options)
        let (mean, largest) = try Self.difference(fromFile, full)
        #expect(mean < 1.5 && largest < 48, "against libvips' full decode: mean \(mean), largest \(largest)")

        // A box that needs more than 1/8 decodes every scan.
        let larger = try turbo.decode(progressive, options: DecodeOptions(thumbnailPixelSize: PixelSize(800)))
        let largerFromStream = try turbo.decode(Data(stream), options: DecodeOptions(thumbnailPixelSize: PixelSize(800)))
        #expect(try Self.difference(larger, largerFromStream).mean > 0.5, "at 3/8 the AC coefficients matter and are used")
    }

    /// The layouts the DC decoder takes, and two it hands on: each with an odd
    /// size so that partial MCUs and blocks are on the edges.
    static let dcLayouts: [(name: String, channels: Int, encode: TurboJPEGEncode)] = [
        ("4:2:0", 3, TurboJPEGEncode(progressive: true, subsampling: .both)),
        ("4:4:4", 3, TurboJPEGEncode(progressive: true, subsampling: .none)),
        ("grey", 1, TurboJPEGEncode(progressive: true)),
        ("4:2:0, restart every 3 MCUs", 3, TurboJPEGEncode(progressive: true, subsampling: .both, restartInterval: 3)),
        ("4:2:0, one DC scan per component, refinements after the AC scans", 3, TurboJPEGEncode(progressive: true, subsampling: .both, separateDCScans: true)),
        ("grey, restart every MCU, separate DC scans", 1, TurboJPEGEncode(progressive: true, restartInterval: 1, separateDCScans: true)),
        ("4:4:4, one DC scan per component, restart every 7", 3, TurboJPEGEncode(progressive: true, subsampling: .none, restartInterval: 7, separateDCScans: true)),
        ("4:2:2 (libjpeg's fancy upsampling: handed on)", 3, TurboJPEGEncode(progressive: true, subsampling: .horizontal)),
        ("baseline 4:2:0", 3, TurboJPEGEncode(subsampling: .both)),
        ("baseline 4:4:4", 3, TurboJPEGEncode(subsampling: .none)),
        ("baseline grey", 1, TurboJPEGEncode()),
        ("baseline 4:2:0, restart every 5 MCUs", 3, TurboJPEGEncode(subsampling: .both, restartInterval: 5)),
        ("baseline grey, restart every MCU", 1, TurboJPEGEncode(restartInterval: 1)),
        ("baseline 4:2:2 (handed on)", 3, TurboJPEGEncode(subsampling: .horizontal)),
    ]

    @Test("the DC decoder gives libjpeg-turbo's own 1/8 decode (byte for byte on the DC coefficients), without libjpeg's whole-image buffer", arguments: dcLayouts.indices)
    func dcDecoder(_ index: Int) throws {
        let layout = Self.dcLayouts[index]
        let data = try layout.encode.encode(Self.smooth(width: 1001, height: 667, channels: layout.channels))
        let progressive = layout.encode.progressive
        let ours = data.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .dcCoefficients) }
        let libjpegWhole = try #require(data.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .whole) })
        #expect(libjpegWhole.size == PixelSize(width: 126, height: 84) && libjpegWhole.bands == layout.channels)
        let box = DecodeOptions(thumbnailPixelSize: PixelSize(100))
        let path = try data.withUnsafeBytes { raw -> JPEGThumbnailDecoder.Path? in
            guard case .success(let decoded) = try JPEGThumbnailDecoder(bytes: raw, options: box, box: PixelSize(100)).attempt() else { return nil }
            return decoded.path
        }
        if layout.encode.subsampling == .horizontal && layout.channels == 3 {
            #expect(ours == nil, "4:2:2 needs libjpeg's fancy upsampling, which the DC decoder does not copy")
            #expect(path == (progressive ? .dcScans : .whole))
            return
        }
        let decoded = try #require(ours, "\(layout.name): the DC decoder declined")
        #expect(path == .dcCoefficients)
        #expect(decoded.size == libjpegWhole.size && decoded.bands == libjpegWhole.bands)
        func differing(_ a: [UInt8], _ b: [UInt8]) -> Int { a.count == b.count ? zip(a, b).count { $0 != $1 } : max(a.count, b.count) }
        if progressive {
            let libjpegDC = try #require(data.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .dcScans) })
            #expect(differing(decoded.bytes, libjpegDC.bytes) == 0, "\(layout.name): bytes that differ from libjpeg's on the DC scans")
        }
        if layout.encode.subsampling == .none || layout.channels == 1 {
            // Without subsampling every component uses the 1x1 IDCT, which reads only the DC.
            #expect(differing(decoded.bytes, libjpegWhole.bytes) == 0, "\(layout.name): bytes that differ from libjpeg's decode of the whole file")
        } else {
            // 4:2:0: on the whole file libjpeg scales chroma up with a 2x2 IDCT that
            // uses the lowest AC coefficients; from the DC alone (as here) that is
            // the DC repeated, so chroma is softer (this test image changes colour
            // fast: 3.5/255 on average at 1/8 scale; the thumbnails after the resize
            // agree with libvips' full decode, see agreesWithVips).
            let total = zip(decoded.bytes, libjpegWhole.bytes).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) }
            let mean = Double(total) / Double(decoded.bytes.count)
            #expect(mean < 4.5, "\(layout.name): mean difference \(mean) from libjpeg's decode of the whole file")
        }
    }

    @Test("the DC decoder hands unusual and broken progressive files back to libjpeg, which reports them")
    func dcDecoderDeclines() throws {
        let data = try TurboJPEGEncode(progressive: true).encode(Self.smooth(width: 640, height: 480))
        func ours(_ bytes: Data) -> [UInt8]? { bytes.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .dcCoefficients)?.bytes } }
        #expect(ours(data) != nil)
        #expect(ours(data.prefix(data.count - 2)) == nil, "no EOI: truncated")
        // Cut inside the first (DC) scan, and right after it.
        let sos = try #require(data.firstRange(of: Data([0xFF, 0xDA]))).lowerBound
        for cut in [sos + 20, sos + 400] { #expect(ours(data.prefix(cut) + Data([0xFF, 0xD9])) == nil, "cut at \(cut)") }
        // A DC scan that references a Huffman table nobody defined.
        var table = data
        table[sos + 6] = 0x30
        #expect(ours(table) == nil)
        try expectNoCrash(data, broken: [data.prefix(sos + 400) + Data([0xFF, 0xD9]), table, data.prefix(data.count / 3)], seed: 7)
    }

    /// Each broken file through the coder is a `decodeFailed` error or a
    /// picture, never a crash; then the DC decoder on copies of `data` with
    /// random bytes after its first scan header, for any crash the fuzzer has not met.
    func expectNoCrash(_ data: Data, broken: [Data], seed: UInt64) throws {
        let box = DecodeOptions(thumbnailPixelSize: PixelSize(64))
        for file in broken {
            do { _ = try turbo.decode(Data(file), options: box) } catch let error as WebImageError { #expect(error.code == .decodeFailed, "\(error)") }
        }
        let sos = try #require(data.firstRange(of: Data([0xFF, 0xDA]))).lowerBound
        let entropy = sos + 2 + (Int(data[sos + 2]) << 8 | Int(data[sos + 3]))
        var generator = SplitMix(seed: seed)
        for _ in 0..<200 {
            var copy = data
            for _ in 0..<8 { copy[entropy + Int(generator.next() % UInt64(data.count - entropy - 2))] = UInt8(truncatingIfNeeded: generator.next()) }
            _ = copy.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .dcCoefficients) }
        }
    }

    /// Random pixels at quality 100: long Huffman codes and large magnitudes,
    /// which take the DC decoder's bit-by-bit paths rather than its lookups.
    @Test("the DC decoder skips a baseline file's long codes and large magnitudes exactly", arguments: [1, 3])
    func dcDecoderBaselineNoise(channels: Int) throws {
        var generator = SplitMix(seed: UInt64(channels))
        let (width, height) = (515, 389)
        let noise = PixelBuffer(size: PixelSize(width: width, height: height), channels: channels,
                                bytes: (0..<width * height * channels).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
        for restartInterval in [0, 4] {
            let data = try TurboJPEGEncode(quality: 100, subsampling: .none, restartInterval: restartInterval).encode(noise)
            let ours = try #require(data.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .dcCoefficients) })
            let libjpeg = try #require(data.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .whole) })
            #expect(ours.size == PixelSize(width: 65, height: 49) && ours.bands == channels)
            #expect(ours.bytes == libjpeg.bytes, "restart interval \(restartInterval)")
        }
    }

    @Test("the DC decoder hands broken baseline files back to libjpeg, which reports them")
    func dcDecoderDeclinesBaseline() throws {
        let data = try TurboJPEGEncode(subsampling: .both, restartInterval: 6).encode(Self.smooth(width: 640, height: 480))
        func ours(_ bytes: Data) -> [UInt8]? { bytes.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .dcCoefficients)?.bytes } }
        #expect(ours(data) != nil)
        #expect(ours(data.prefix(data.count - 2)) == nil, "no EOI: truncated")
        let sos = try #require(data.firstRange(of: Data([0xFF, 0xDA]))).lowerBound
        for cut in [sos + 20, sos + 400, data.count / 2] { #expect(ours(data.prefix(cut) + Data([0xFF, 0xD9])) == nil, "cut at \(cut)") }
        // The first component's AC table, then its DC table, that no DHT defined.
        var acTable = data, dcTable = data
        acTable[sos + 6] = 0x03
        dcTable[sos + 6] = 0x30
        #expect(ours(acTable) == nil && ours(dcTable) == nil)
        // A restart marker out of sequence.
        let restart = try #require(data.firstRange(of: Data([0xFF, 0xD0]), in: sos..<data.count)).lowerBound
        var outOfSequence = data
        outOfSequence[restart + 1] = 0xD3
        #expect(ours(outOfSequence) == nil)
        // A second scan of the same components.
        let scan = data[sos..<(data.count - 2)]
        #expect(ours(data.prefix(data.count - 2) + scan + Data([0xFF, 0xD9])) == nil)
        try expectNoCrash(data, broken: [data.prefix(sos + 400) + Data([0xFF, 0xD9]), acTable, dcTable, outOfSequence, data.prefix(data.count / 3)], seed: 11)
    }

    /// The sampling factors of the first component and the frame marker.
    static func frame(_ data: Data) throws -> (marker: UInt8, lumaSampling: UInt8) {
        let sof = try #require(frameHeader(data))
        return (data[sof + 1], data[sof + 11])
    }

    @Test("writes small 8-bit thumbnails itself, with jpegsave's settings and pixels")
    func encodes() throws {
        let source = try Self.jpeg(Self.smooth(width: 1600, height: 1200))
        let thumbnail = try turbo.decode(source, options: DecodeOptions(thumbnailPixelSize: PixelSize(256)))
        for (quality, progressive) in [(85, false), (95, false), (80, true)] {
            let options = EncodeOptions(quality: quality, progressive: progressive)
            let ours = try turbo.encode(thumbnail, as: .jpeg, options: options)
            let theirs = try vips.encode(thumbnail, as: .jpeg, options: options)
            #expect(ours != theirs, "written by libjpeg-turbo directly, not by jpegsave")
            let frame = try Self.frame(ours), theirFrame = try Self.frame(theirs)
            #expect(frame.marker == (progressive ? 0xC2 : 0xC0))
            #expect(frame.lumaSampling == theirFrame.lumaSampling, "chroma subsampling as jpegsave chooses it at quality \(quality)")
            #expect(frame.lumaSampling == (quality >= 90 ? 0x11 : 0x22))
            try expectClose(ours, theirs, to: thumbnail, sizeWithin: 0.15, meanUnder: 1, peer: "jpegsave")
        }
    }

    /// Our encoder's file against libvips' for the same pixels: sizes within
    /// `sizeWithin` of each other, both decoding to the thumbnail's size and
    /// within `meanUnder` levels of each other on average. Returns our pixels.
    @discardableResult
    func expectClose(_ ours: Data, _ theirs: Data, to thumbnail: Image, sizeWithin: Double, meanUnder: Double, peer: String) throws -> Image {
        let size = Double(ours.count) / Double(theirs.count)
        #expect(abs(size - 1) < sizeWithin, "\(ours.count) bytes against \(peer)'s \(theirs.count)")
        let a = try vips.decode(ours, options: DecodeOptions()), b = try vips.decode(theirs, options: DecodeOptions())
        #expect(a.pixelSize == thumbnail.pixelSize && b.pixelSize == thumbnail.pixelSize)
        let (mean, _) = try Self.difference(a, b)
        #expect(mean < meanUnder, "mean difference \(mean) from \(peer)'s output")
        return a
    }

    @Test("writes small 8-bit thumbnails as WebP with libwebp, configured as webpsave: the same pixels and size",
          arguments: [(80, false, nil, false, 3), (90, false, 6, true, 3), (75, true, 4, false, 3), (80, false, nil, false, 1)] as [(Int, Bool, Int?, Bool, Int)])
    func encodesWebP(quality: Int, lossless: Bool, effort: Int?, sharp: Bool, channels: Int) throws {
        let thumbnail = try turbo.decode(try Self.jpeg(Self.smooth(width: 1600, height: 1200, channels: channels)),
                                         options: DecodeOptions(thumbnailPixelSize: PixelSize(256)))
        #expect(thumbnail.storage(as: PixelBuffer.self) != nil, "the direct path's result")
        let options = EncodeOptions(quality: quality, lossless: lossless, effort: effort, chromaSubsampling: sharp ? .off : .auto)
        let ours = try turbo.encode(thumbnail, as: .webp, options: options)
        let theirs = try vips.encode(thumbnail, as: .webp, options: options)
        #expect(ImageFormat.sniff(ours) == .webp)
        let decoded = try expectClose(ours, theirs, to: thumbnail, sizeWithin: 0.03, meanUnder: 0.5, peer: "webpsave")
        if lossless {
            let (exact, _) = try Self.difference(decoded, thumbnail)
            #expect(exact == 0, "lossless keeps every pixel")
        }
    }

    @Test("WebP bad input: a side over libwebp's 16383 is a typed error, never a crash")
    func webPBadInput() throws {
        let strip = Fixtures.image(PixelBuffer(size: PixelSize(width: 20_000, height: 2), channels: 3, bytes: [UInt8](repeating: 90, count: 20_000 * 2 * 3)))
        let error = #expect(throws: WebImageError.self) { try turbo.encode(strip, as: .webp, options: EncodeOptions()) }
        #expect(error?.code == .encodeFailed)
        #expect(error?.message.contains("16383") == true, "\(String(describing: error?.message))")
    }

    @Test("hands every other encode to libvips, byte for byte: alpha, metadata, large, animated, other formats")
    func encodeDeclines() throws {
        let thumbnail = try turbo.decode(try Self.jpeg(Self.smooth(width: 800, height: 600)), options: DecodeOptions(thumbnailPixelSize: PixelSize(200)))
        let small = TurboJPEGCoder(encodePixelLimit: 100)
        #expect(try small.encode(thumbnail, as: .jpeg, options: EncodeOptions()) == vips.encode(thumbnail, as: .jpeg, options: EncodeOptions()))
        var keep = EncodeOptions()
        keep.keepMetadata = true
        #expect(try turbo.encode(thumbnail, as: .jpeg, options: keep) == vips.encode(thumbnail, as: .jpeg, options: keep))
        #expect(try turbo.encode(thumbnail, as: .png, options: EncodeOptions()) == vips.encode(thumbnail, as: .png, options: EncodeOptions()))
        #expect(try turbo.encode(thumbnail, as: .webp, options: keep) == vips.encode(thumbnail, as: .webp, options: keep), "WebP with metadata: webpsave")
        let rgba = PixelBuffer(size: PixelSize(width: 60, height: 40), channels: 4, bytes: [UInt8](repeating: 128, count: 60 * 40 * 4))
        let alpha = try vips.decode(try Fixtures.encode(rgba, as: .png), options: DecodeOptions())
        #expect(alpha.hasAlpha)
        #expect(try turbo.encode(alpha, as: .jpeg, options: EncodeOptions()) == vips.encode(alpha, as: .jpeg, options: EncodeOptions()))
        let grey = try turbo.decode(try Self.jpeg(Self.smooth(width: 800, height: 600, channels: 1)), options: DecodeOptions(thumbnailPixelSize: PixelSize(200)))
        let greyJPEG = try turbo.encode(grey, as: .jpeg, options: EncodeOptions())
        #expect(try #require(Self.frameHeader(greyJPEG)) > 0 && greyJPEG[try #require(Self.frameHeader(greyJPEG)) + 9] == 1, "grey stays one component")
    }

    @Test("a grey JPEG stays one band")
    func grey() throws {
        let data = try Self.jpeg(Self.smooth(width: 800, height: 600, channels: 1))
        let options = DecodeOptions(thumbnailPixelSize: PixelSize(200))
        #expect(try Self.decline(data, options) == nil)
        let image = try turbo.decode(data, options: options)
        #expect(try Fixtures.pixels(image).channels == 1)
        #expect(image.pixelSize == PixelSize(width: 200, height: 150))
    }

    @Test("handed to libvips: full decodes, no shrink, CMYK, over the pixel limit; a corrupt ICC profile stays on the fast path and is ignored")
    func declines() throws {
        let photo = try Self.jpeg(Self.smooth(width: 800, height: 600))
        let full = try turbo.decode(photo, options: DecodeOptions())
        #expect(full.pixelSize == PixelSize(width: 800, height: 600), "a full decode goes to the fallback")
        #expect(try Self.decline(photo, DecodeOptions(thumbnailPixelSize: PixelSize(2000))) == .noShrink)
        #expect(try turbo.decode(photo, options: DecodeOptions(thumbnailPixelSize: PixelSize(2000))).pixelSize == PixelSize(width: 800, height: 600))

        // CMYK: four components; the vips path decodes it.
        var rgb: UnsafeMutablePointer<VipsImage>?
        let source = Self.smooth(width: 400, height: 300)
        Fixtures.ready()
        rgb = source.bytes.withUnsafeBytes { CVips_from_memory($0.baseAddress, $0.count, 400, 300, 3) }
        let rgbImage = try #require(rgb)
        defer { CVips_unref(rgbImage) }
        var cmyk: UnsafeMutablePointer<VipsImage>?
        #expect(CVips_naive_cmyk(rgbImage, &cmyk) == 0)
        let cmykImage = try #require(cmyk)
        defer { CVips_unref(cmykImage) }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        #expect(CVips_jpegsave(cmykImage, &buffer, &length, 90, 0, 1, 0) == 0)
        let cmykData = Data(bytes: try #require(buffer), count: length)
        CVips_free(buffer)
        let box = DecodeOptions(thumbnailPixelSize: PixelSize(100))
        #expect(try Self.decline(cmykData, box) == .colourSpace)
        let viaFallback = try turbo.decode(cmykData, options: box)
        let direct = try vips.decode(cmykData, options: box)
        #expect(viaFallback.pixelSize == direct.pixelSize)
        #expect(try Self.difference(viaFallback, direct).mean == 0, "the fallback's result is the vips path's")

        // A corrupt ICC profile (APP2 ICC_PROFILE right after SOI): decoded here, the
        // profile ignored as the vips path ignores it, so both give the plain file's pixels.
        let payload = Data("ICC_PROFILE\0".utf8) + Data([1, 1]) + Data(repeating: 0x42, count: 128)
        let segment = Data([0xFF, 0xE2, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)]) + payload
        let withProfile = Data(photo.prefix(2) + segment + photo.dropFirst(2))
        #expect(try Self.decline(withProfile, box) == nil)
        let ignored = try turbo.decode(withProfile, options: box)
        #expect(ignored.pixelSize == PixelSize(width: 100, height: 75))
        #expect(try Self.difference(ignored, turbo.decode(photo, options: box)).max == 0, "the bad profile changes nothing")

        // Over the pixel limit: the fallback's typed error, or its scaled-down decode.
        let limited = DecodeOptions(thumbnailPixelSize: PixelSize(100), pixelLimit: 1000)
        #expect(try Self.decline(photo, limited) == .overPixelLimit)
        #expect(throws: WebImageError.self) { try turbo.decode(photo, options: limited) }
        do {
            _ = try turbo.decode(photo, options: limited)
        } catch let error as WebImageError {
            #expect(error.code == .pixelLimitExceeded)
        }
    }

    @Test("bad input: truncated, corrupt entropy data, 12-bit, lossless, arithmetic, zero size, a huge header — typed errors, never a crash")
    func badInput() throws {
        let photo = try Self.jpeg(Self.smooth(width: 800, height: 600))
        let box = DecodeOptions(thumbnailPixelSize: PixelSize(100))

        let half = photo.prefix(photo.count / 2)
        do {
            _ = try turbo.decode(Data(half), options: box)
            Issue.record("decoded half a file")
        } catch let error as WebImageError {
            #expect(error.code == .decodeFailed && error.message.contains("truncated"), "\(error)")
        }
        var tolerant = box
        tolerant.allowTruncated = true
        #expect(try turbo.decode(Data(half), options: tolerant).pixelSize == PixelSize(width: 100, height: 75))

        // Corrupt entropy-coded data: libjpeg warns and goes on, or fails; either way no crash.
        var corrupt = photo
        let start = corrupt.count * 6 / 10
        for i in start..<(start + 64) { corrupt[i] ^= 0x5A }
        do {
            let image = try turbo.decode(corrupt, options: box)
            #expect(image.pixelSize == PixelSize(width: 100, height: 75))
        } catch is WebImageError {}

        let sof = try #require(Self.frameHeader(photo))
        func patched(_ edit: (inout Data) -> Void) -> Data {
            var copy = photo
            edit(&copy)
            return copy
        }
        let variants: [(String, Data)] = [
            ("12-bit", patched { $0[sof + 4] = 12 }),
            ("lossless (SOF3)", patched { $0[sof + 1] = 0xC3 }),
            ("arithmetic (SOF9) over Huffman data", patched { $0[sof + 1] = 0xC9 }),
            ("zero width", patched { $0[sof + 7] = 0; $0[sof + 8] = 0 }),
            ("zero height", patched { $0[sof + 5] = 0; $0[sof + 6] = 0 }),
            ("65000x65000 header", patched { $0[sof + 5] = 0xFD; $0[sof + 6] = 0xE8; $0[sof + 7] = 0xFD; $0[sof + 8] = 0xE8 }),
            ("only the markers", photo.prefix(sof + 20)),
            ("SOI alone", Data([0xFF, 0xD8, 0xFF])),
        ]
        for (name, data) in variants {
            do {
                let image = try turbo.decode(data, options: box)
                // Only the arithmetic variant may decode (libjpeg-turbo reads arithmetic coding; the data is garbage to it).
                #expect(name.hasPrefix("arithmetic") && image.pixelSize == PixelSize(width: 100, height: 75), "\(name) decoded to \(image.pixelSize)")
            } catch let error as WebImageError {
                #expect([.decodeFailed, .pixelLimitExceeded, .unsupportedFormat].contains(error.code), "\(name): \(error)")
                if name.hasPrefix("65000") { #expect(error.code == .pixelLimitExceeded, "\(name): \(error)") }
            }
        }
    }

    @Test("in a registry it has no fallback of its own: full decodes, headers, PNG and large encodes go to the vips coder registered before it; alone and without a fallback it says what it takes")
    func throughTheRegistry() throws {
        let coders = CoderRegistry()
        coders.registerVips()
        coders.registerTurboJPEG()
        let registered = try #require(coders.coder(named: "turbojpeg") as? TurboJPEGCoder)
        #expect(registered.fallback == nil)
        let jpeg = try vips.encode(Image(pixelSize: PixelSize(width: 64, height: 48), storage: Self.smooth(width: 64, height: 48)),
                                   as: .jpeg, options: EncodeOptions())
        let thumbnail = try coders.decode(jpeg, options: DecodeOptions(thumbnailPixelSize: PixelSize(16)))
        #expect(thumbnail.storage(as: PixelBuffer.self) != nil, "the direct path's thumbnail")
        let full = try coders.decode(jpeg, options: DecodeOptions())
        #expect(full.storage(as: VipsStorage.self) != nil && full.pixelSize == PixelSize(width: 64, height: 48), "a full decode, by libvips")
        #expect(try coders.info(jpeg).pixelSize == PixelSize(width: 64, height: 48))
        #expect(ImageFormat.sniff(try coders.encode(full, as: .png, options: EncodeOptions())) == .png)
        let alone = TurboJPEGCoder(fallback: nil)
        let error = #expect(throws: WebImageError.self) { try alone.decode(jpeg, options: DecodeOptions()) }
        #expect(error?.code == .unsupportedFormat && error?.message.contains("thumbnails only") == true, "\(String(describing: error))")
        #expect(try alone.decode(jpeg, options: DecodeOptions(thumbnailPixelSize: PixelSize(16))).pixelSize.width <= 16)
    }
}

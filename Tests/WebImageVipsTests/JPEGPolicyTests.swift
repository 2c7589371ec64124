import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageTesting
@_spi(Internals) import WebImageTurboJPEG
@_spi(Internals) import WebImageVips

/// One answer per JPEG (docs/coder.md): every path that decodes a JPEG (the DC
/// decoder, libjpeg on the file or on a copy without some scans, libvips'
/// loader) accepts and refuses the same files, whatever size is asked for.
@Suite("JPEG decode policy", .offCooperativePool)
struct JPEGPolicyTests {
    let turbo = TurboJPEGCoder()
    let vips = VipsImageCoder()

    /// Every layout the paths take apart: progressive and baseline, 4:2:0, 4:4:4,
    /// 4:2:2 and grey, restart intervals, one DC scan per component.
    static let layouts: [(channels: Int, encode: TurboJPEGEncode)] = [
        (3, TurboJPEGEncode(progressive: true, subsampling: .both)),
        (3, TurboJPEGEncode(progressive: true, subsampling: .none, restartInterval: 2)),
        (3, TurboJPEGEncode(progressive: true, subsampling: .both, restartInterval: 3, separateDCScans: true)),
        (3, TurboJPEGEncode(progressive: true, subsampling: .horizontal)),
        (1, TurboJPEGEncode(progressive: true, restartInterval: 1, separateDCScans: true)),
        (3, TurboJPEGEncode(subsampling: .both)),
        (3, TurboJPEGEncode(subsampling: .none, restartInterval: 5)),
        (3, TurboJPEGEncode(subsampling: .horizontal)),
        (1, TurboJPEGEncode(restartInterval: 1)),
    ]

    /// A file of layout `index`; `large` ones are big enough for a 64-pixel
    /// thumbnail to take the DC decoder.
    static func fixture(_ index: Int, large: Bool = false) throws -> Data {
        let layout = layouts[index]
        let width = (large ? 600 : 131) + 16 * index, height = (large ? 520 : 97) + 8 * index
        return try layout.encode.encode(TurboJPEGCoderTests.smooth(width: width, height: height, channels: layout.channels))
    }

    /// Offsets of every marker (0xFF then neither 0x00, a fill byte nor a restart marker).
    static func markers(_ data: Data, _ code: UInt8? = nil) -> [Int] {
        let bytes = [UInt8](data)
        return (2..<max(2, bytes.count - 1)).filter {
            bytes[$0] == 0xFF && bytes[$0 + 1] != 0 && bytes[$0 + 1] != 0xFF && !(0xD0...0xD7).contains(bytes[$0 + 1])
                && (code == nil || bytes[$0 + 1] == code)
        }
    }

    /// A scan (its SOS segment and data) of `data`: the `index`-th.
    static func scan(_ data: Data, _ index: Int) -> Data {
        let all = markers(data)
        let sos = markers(data, 0xDA)[index]
        let end = all.first { $0 > sos } ?? data.count
        return data[sos..<end]
    }

    /// Copies of `data` broken the ways files break: bytes and bits changed in
    /// the headers and anywhere, cut short, a segment of any marker put in, a
    /// scan repeated.
    static func mutants(of data: Data, count: Int, seed: UInt64) -> [Data] {
        var random = SplitMix(seed: seed)
        func below(_ n: Int) -> Int { Int(random.next() % UInt64(max(1, n))) }
        return (0..<count).map { _ in
            var copy = data
            switch below(6) {
            case 0: for _ in 0...below(3) { copy[below(min(copy.count, 700))] = UInt8(truncatingIfNeeded: random.next()) }
            case 1: for _ in 0...below(3) { copy[below(copy.count)] = UInt8(truncatingIfNeeded: random.next()) }
            case 2: for _ in 0...below(2) { copy[below(copy.count)] ^= 1 << UInt8(below(8)) }
            case 3: copy = copy.prefix(2 + below(copy.count - 2)) + Data([0xFF, 0xD9])
            case 4:
                let at = markers(copy).randomElement(using: &random) ?? 2
                let marker = UInt8(1 + below(254))
                let segment: [UInt8] = below(2) == 0 ? [0xFF, marker] : [0xFF, marker, 0, 6] + (0..<4).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                copy.insert(contentsOf: segment, at: at)
            default:
                let scans = markers(copy, 0xDA)
                let scan = scan(copy, below(scans.count))
                copy.insert(contentsOf: scan, at: scan.endIndex)
            }
            return copy
        }
    }

    /// Whether every component of the frame has sampling factors 1x1 (4:4:4, grey).
    static func unsubsampled(_ data: Data) -> Bool {
        guard let sof = TurboJPEGCoderTests.frameHeader(data), sof + 10 < data.count else { return false }
        let count = Int(data[data.startIndex + sof + 9])
        return (0..<count).allSatisfy { sof + 11 + 3 * $0 < data.count && data[data.startIndex + sof + 11 + 3 * $0] == 0x11 }
    }

    /// What each path makes of one file.
    struct Outcome: CustomStringConvertible {
        /// 1/8 scale by the DC decoder, libjpeg on the file, libjpeg on the copies without AC (refinement) scans.
        var dc, libjpeg, dcScans, firstPasses: (size: PixelSize, bands: Int, bytes: [UInt8], warnings: Int)?
        /// The coders: turbojpeg at 1/8 (DC decoder) and at 1/2 (libjpeg), libvips' thumbnail and full decode.
        var turboEighth, turboHalf, vipsThumbnail, vipsFull: Result<PixelSize, WebImageError>

        var description: String {
            "dc \(dc != nil), libjpeg \(libjpeg != nil), dcScans \(dcScans != nil), firstPasses \(firstPasses != nil), "
                + "turbo 1/8 \(turboEighth), turbo 1/2 \(turboHalf), vips thumbnail \(vipsThumbnail), vips \(vipsFull)"
        }
    }

    func outcome(_ data: Data) -> Outcome {
        func decode(_ coder: some ImageCoder, _ box: PixelSize?, _ source: PixelSize) -> Result<PixelSize, WebImageError> {
            do {
                return .success(try coder.decode(data, options: DecodeOptions(thumbnailPixelSize: box)).pixelSize)
            } catch let error as WebImageError {
                return .failure(error)
            } catch {
                return .failure(WebImageError(.loadFailed, "not a WebImageError: \(error)"))
            }
        }
        let size = HeaderProbe.size(of: data.withUnsafeBytes { $0 }, format: .jpeg) ?? PixelSize(width: 64, height: 64)
        let eighth = PixelSize(width: max(1, size.width / 9), height: max(1, size.height / 9))
        let half = PixelSize(width: max(1, size.width * 4 / 10), height: max(1, size.height * 4 / 10))
        return data.withUnsafeBytes { raw in
            Outcome(dc: JPEGThumbnailDecoder.eighthScale(raw, path: .dcCoefficients),
                    libjpeg: JPEGThumbnailDecoder.eighthScale(raw, path: .whole),
                    dcScans: JPEGThumbnailDecoder.eighthScale(raw, path: .dcScans),
                    firstPasses: JPEGThumbnailDecoder.eighthScale(raw, path: .firstPasses),
                    turboEighth: decode(turbo, eighth, size), turboHalf: decode(turbo, half, size),
                    vipsThumbnail: decode(vips, eighth, size), vipsFull: decode(vips, nil, size))
        }
    }

    /// The checks: no shortcut accepts what libjpeg refuses; when libjpeg saw no
    /// corrupt data, the DC decoder's pixels are libjpeg's; every coder and size
    /// gives the same answer, a refusal being `decodeFailed`.
    func expectOneAnswer(_ data: Data, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let seen = outcome(data)
        var agreed = true
        func check(_ condition: Bool, _ message: String) {
            if !condition {
                agreed = false
                Issue.record("\(what): \(message) (\(seen))", sourceLocation: sourceLocation)
            }
        }
        for (name, shortcut) in [("the DC decoder", seen.dc), ("libjpeg without the AC scans", seen.dcScans), ("libjpeg without the AC refinements", seen.firstPasses)] {
            if let shortcut {
                check(seen.libjpeg != nil, "\(name) accepts a file libjpeg refuses")
                if let whole = seen.libjpeg { check(shortcut.size == whole.size && shortcut.bands == whole.bands, "\(name) makes another size") }
            }
        }
        if let dc = seen.dc, let whole = seen.libjpeg, whole.warnings == 0 {
            if let dcScans = seen.dcScans, dcScans.warnings == 0 {
                // A progressive file: libjpeg on the DC scans reads the same coefficients.
                check(dc.bytes == dcScans.bytes, "the DC decoder's pixels are not libjpeg's on the DC scans")
            } else if Self.unsubsampled(data) {
                // Baseline 4:4:4 or grey: libjpeg's 1x1 IDCT reads the DC only. (Its
                // 2x2 IDCT of 4:2:0 chroma also reads the lowest AC coefficients.)
                check(dc.bytes == whole.bytes, "the DC decoder's pixels are not libjpeg's")
            }
        }
        let answers = [seen.turboEighth, seen.turboHalf, seen.vipsThumbnail, seen.vipsFull]
        let accepted = answers.map { if case .success = $0 { true } else { false } }
        check(Set(accepted).count == 1, "the coders disagree")
        // Every refusal has the same code: decodeFailed; unsupportedFormat for bytes
        // no longer a JPEG at all (a broken signature); pixelLimitExceeded for a
        // header that now declares a huge image.
        let codes = Set(answers.compactMap { if case .failure(let error) = $0 { error.code } else { nil } })
        check(codes.count <= 1 && codes.isSubset(of: [.decodeFailed, .unsupportedFormat, .pixelLimitExceeded]), "refused with \(codes)")
        if seen.libjpeg != nil || accepted.allSatisfy({ !$0 }) {
            check(accepted[0] == (seen.libjpeg != nil), "libjpeg's 1/8 decode and the coders disagree")
        }
        return agreed
    }

    @Test("every path gives the same answer for each of 1,350 broken JPEGs of nine layouts", arguments: layouts.indices)
    func oneAnswer(_ index: Int) throws {
        let data = try Self.fixture(index)
        #expect(expectOneAnswer(data, "layout \(index)"))
        var accepted = 0, refused = 0
        for (n, mutant) in Self.mutants(of: data, count: 150, seed: UInt64(index) &+ 42).enumerated() {
            _ = expectOneAnswer(mutant, "layout \(index), mutant \(n)")
            #expect(TurboJPEGCoder.pathDisagreement(mutant) == nil, "layout \(index), mutant \(n)")
            if (try? turbo.decode(mutant, options: DecodeOptions(thumbnailPixelSize: PixelSize(16)))) != nil { accepted += 1 } else { refused += 1 }
        }
        // Both kinds are there: the comparison is not over files all good or all refused.
        #expect(accepted > 10 && refused > 10, "\(accepted) accepted, \(refused) refused")
    }

    /// Each named break, what it is, and whether the file decodes.
    static func namedBreaks(large: Bool = false) throws -> [(name: String, data: Data, decodes: Bool)] {
        let progressive = try fixture(0, large: large), baseline = try fixture(5, large: large), restarts = try fixture(8, large: large)
        var breaks: [(String, Data, Bool)] = []
        func with(_ data: Data, _ change: (inout [UInt8]) -> Void) -> Data {
            var bytes = [UInt8](data)
            change(&bytes)
            return Data(bytes)
        }
        // The first DHT replaced by one of the same class and id whose two 1-bit
        // codes are 0 and 1: the all-ones code used, which libjpeg refuses.
        let dht = markers(progressive, 0xC4)[0]
        breaks.append(("a Huffman table that uses the all-ones code", with(progressive) { bytes in
            let length = Int(bytes[dht + 2]) << 8 | Int(bytes[dht + 3])
            let table: [UInt8] = [0xFF, 0xC4, 0, 21, bytes[dht + 4], 2] + [UInt8](repeating: 0, count: 15) + [0, 1]
            bytes.replaceSubrange(dht..<(dht + 2 + length), with: table)
        }, false))
        // An AC scan whose band runs backwards (Ss > Se): libjpeg's JERR_BAD_PROGRESSION.
        let acScan = markers(progressive, 0xDA)[1]
        breaks.append(("an AC scan with Ss > Se", with(progressive) { bytes in
            let n = Int(bytes[acScan + 4])
            bytes[acScan + 5 + 2 * n] = 40
            bytes[acScan + 6 + 2 * n] = 2
        }, false))
        breaks.append(("an AC scan naming an AC table nobody defined", with(progressive) { bytes in bytes[acScan + 6] = (bytes[acScan + 6] & 0xF0) | 3 }, false))
        breaks.append(("a scan naming the components out of the frame's order", with(progressive) { bytes in
            let first = markers(progressive, 0xDA)[0]
            // The first scan lists Y, Cb, Cr; make it Cb, Y, Cr by swapping the first two ids.
            bytes.swapAt(first + 5, first + 7)
        }, false))
        // A reserved marker (RES, 0x02) between two scans: libjpeg refuses the file.
        breaks.append(("a reserved marker between scans", with(progressive) { bytes in bytes.insert(contentsOf: [0xFF, 0x02, 0x00, 0x04, 0x00, 0x00], at: acScan) }, false))
        breaks.append(("a DAC (arithmetic conditioning) segment with a bad value", with(progressive) { bytes in bytes.insert(contentsOf: [0xFF, 0xCC, 0x00, 0x04, 0x25, 0x00], at: acScan) }, false))
        // After a baseline file's only scan, the tail is not read (libvips' reading): garbage there does not refuse it.
        let eoi = baseline.count - 2
        breaks.append(("a baseline file with a reserved marker after its scan", with(baseline) { bytes in bytes.insert(contentsOf: [0xFF, 0x02, 0x00, 0x04, 0x00, 0x00], at: eoi) }, true))
        // Without its EOI the data ends where libjpeg still reads ahead: truncated, for libvips' loader too.
        breaks.append(("a baseline file without its EOI", baseline.prefix(eoi), false))
        // More than 100 warnings (every restart marker out of sequence): decoded, as by libjpeg.
        breaks.append(("a file with every restart marker out of sequence", with(restarts) { bytes in
            var i = markers(restarts, 0xDA)[0]
            while i + 1 < bytes.count {
                if bytes[i] == 0xFF, (0xD0...0xD7).contains(bytes[i + 1]) { bytes[i + 1] = 0xD0 | ((bytes[i + 1] + 3) & 7) }
                i += 1
            }
        }, true))
        breaks.append(("a progressive file cut inside an AC scan", progressive.prefix(acScan + 60), false))
        breaks.append(("a baseline file cut inside its scan", baseline.prefix(baseline.count / 2), false))
        return breaks
    }

    @Test("named breaks: each refused or decoded alike by every path, as libjpeg reads it and libvips' loader does")
    func namedBreaksAgree() throws {
        for (name, data, decodes) in try Self.namedBreaks() {
            #expect(expectOneAnswer(data, name))
            let result = Result { try turbo.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(16))) }
            #expect(((try? result.get()) != nil) == decodes, "\(name): \(result)")
        }
    }

    @Test("the tool's load (a full decode) and serve (64-pixel thumbnails: the DC decoder, libjpeg) give the library's answer for broken JPEGs")
    func doorsAgree() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jpeg-doors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var files = try Self.namedBreaks(large: true).enumerated().map { ("break-\($0.offset).jpg", $0.element.data) }
        for layout in [0, 2, 5, 6] {
            for (n, mutant) in Self.mutants(of: try Self.fixture(layout, large: true), count: 12, seed: UInt64(layout) &+ 7).enumerated() {
                files.append(("mutant-\(layout)-\(n).jpg", mutant))
            }
        }
        // What the library says: the manifest the doors are held to.
        var manifest: [String: [String: Any]] = [:], refused = 0
        for (name, data) in files {
            try data.write(to: directory.appendingPathComponent(name))
            do {
                let size = try turbo.decode(data, options: DecodeOptions()).pixelSize
                manifest[name] = ["refused": false, "size": [size.width, size.height], "frames": 1]
            } catch {
                manifest[name] = ["refused": true]
                refused += 1
            }
        }
        #expect(refused > 5 && refused < files.count - 5, "\(refused) of \(files.count) refused")
        try JSONSerialization.data(withJSONObject: manifest).write(to: directory.appendingPathComponent("manifest.json"))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Conformance/run.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, "--tool", Tool.executable, directory.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains("conformance: \(files.count) files (\(refused) to refuse)") && text.contains(": 0 failures"), "\(text)")
    }

    @Test("the EXIF orientation reads alike on every path and size, whatever integer type and count encode it", arguments: [1, 3, 4, 6, 8, 9, 5, 7])
    func orientationEncodings(type: Int) throws {
        let plain = try TurboJPEGEncode().encode(TurboJPEGCoderTests.smooth(width: 200, height: 150))
        func tagged(type: Int, count: Int) -> Data {
            // One IFD0 entry, Orientation = 6, little-endian, its value held in the entry.
            var tiff: [UInt8] = Array("Exif".utf8) + [0, 0, 0x49, 0x49, 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01]
            tiff += [UInt8(type), 0] + withUnsafeBytes(of: UInt32(count).littleEndian, Array.init) + [6, 0, 0, 0] + [0, 0, 0, 0]
            let length = tiff.count + 2
            return plain.prefix(2) + Data([0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + tiff) + plain.dropFirst(2)
        }
        for count in [1, 0, 1000] {
            let data = tagged(type: type, count: count)
            let upright = try vips.info(data).pixelSize
            #expect(try vips.decode(data, options: DecodeOptions()).pixelSize == upright, "type \(type), count \(count)")
            for box in [PixelSize(64), PixelSize(16), PixelSize(150)] {
                for coder in [turbo as any ImageCoder, vips] {
                    let thumbnail = try coder.decode(data, options: DecodeOptions(thumbnailPixelSize: box)).pixelSize
                    // Portrait (rotated) or landscape, as info says, at every size and on every path.
                    #expect((thumbnail.width < thumbnail.height) == (upright.width < upright.height), "type \(type), count \(count), box \(box): \(thumbnail) against \(upright)")
                }
            }
        }
    }

    @Test("more than 256 scans is refused by every path before a decoder reads it; 200 decode")
    func scanLimit() throws {
        let data = try Self.fixture(0)
        let repeated = Self.scan(data, 1)  // an AC scan: repeating it is a bogus progression libjpeg only warns about
        func padded(to scans: Int) -> Data {
            let have = Self.markers(data, 0xDA).count
            let eoi = data.count - 2
            return data.prefix(eoi) + Data((0..<(scans - have)).flatMap { _ in [UInt8](repeated) }) + Data([0xFF, 0xD9])
        }
        let many = padded(to: VipsImageCoder.maxJPEGScans + 1), fine = padded(to: 200)
        #expect(many.withUnsafeBytes { HeaderProbe.jpegScanMarkers($0) } == VipsImageCoder.maxJPEGScans + 1)
        #expect(throws: WebImageError.self, "info refuses it too") { try vips.info(many) }
        for (name, coder, box) in [("turbojpeg 1/8", turbo as any ImageCoder, PixelSize(16)), ("turbojpeg 1/2", turbo, PixelSize(80)),
                                   ("vips thumbnail", vips, PixelSize(16)), ("vips", vips, nil)] {
            #expect(throws: WebImageError.self, "\(name)") { try coder.decode(many, options: DecodeOptions(thumbnailPixelSize: box)) }
            do {
                _ = try coder.decode(many, options: DecodeOptions(thumbnailPixelSize: box))
            } catch let error as WebImageError {
                #expect(error.code == .decodeFailed && error.message.contains("maxJPEGScans"), "\(name): \(error)")
            }
            #expect(throws: Never.self, "\(name)") { try coder.decode(fine, options: DecodeOptions(thumbnailPixelSize: box)) }
        }
        // The C code's own counts agree: libjpeg's progress check and the DC decoder's.
        #expect(many.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .dcCoefficients) } == nil)
        #expect(many.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .whole) } == nil)
        #expect(fine.withUnsafeBytes { JPEGThumbnailDecoder.eighthScale($0, path: .whole) } != nil)
    }

    @Test("a JPEG thinner than libvips' shrink factor is a thumbnail, not a process abort", arguments: [(1, 1000), (2, 171), (3, 400), (700, 1), (7, 7)])
    func thinJPEG(width: Int, height: Int) throws {
        let data = try TurboJPEGEncode().encode(TurboJPEGCoderTests.smooth(width: width, height: height))
        for box in [PixelSize(16), PixelSize(width: 1, height: 1), PixelSize(width: 4, height: 64)] {
            let image = try vips.decode(data, options: DecodeOptions(thumbnailPixelSize: box))
            #expect(image.pixelSize.width <= box.width && image.pixelSize.height <= box.height, "\(width)x\(height) into \(box): \(image.pixelSize)")
            #expect(try turbo.decode(data, options: DecodeOptions(thumbnailPixelSize: box)).pixelSize == image.pixelSize, "\(width)x\(height) into \(box)")
        }
    }
}

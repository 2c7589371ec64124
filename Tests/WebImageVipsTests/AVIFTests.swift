import Foundation
import Testing
import WebImage
import WebImageTestSupport
import WebImageVips

/// AVIF through libavif, with fixtures that avifenc (apt libavif-bin, `make
/// example-deps`) writes: rotation (irot), mirror (imir), clean aperture (clap)
/// and sequences.
@Suite("AVIF: irot, imir and clap applied; sequences as frames; bounded; HDR refused", .offCooperativePool)
struct AVIFTests {
    enum Colour { case red, green, blue, white }

    /// Runs avifenc on PNG frames (written from `frames`), lossless and fast.
    static func avifenc(_ frames: [PixelBuffer], _ arguments: [String], durations: [Int] = []) throws -> Data {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("avif-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var inputs: [String] = []
        for (index, frame) in frames.enumerated() {
            let file = folder.appendingPathComponent("f\(index).png")
            try Fixtures.encode(frame, as: .png).write(to: file)
            if index < durations.count { inputs += ["--duration", String(durations[index])] }
            inputs.append(file.path)
        }
        let output = folder.appendingPathComponent("out.avif")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/avifenc")
        process.arguments = ["-s", "10", "-l"] + (durations.isEmpty ? [] : ["--timescale", "1000"]) + arguments + inputs + [output.path]
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/avifenc") else {
            throw Fixtures.Failure("avifenc is missing: apt-get install libavif-bin (make example-deps)")
        }
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Fixtures.Failure("avifenc \(arguments): \(String(decoding: message, as: UTF8.self))") }
        return try Data(contentsOf: output)
    }

    /// The colour at (x, y) of frame `frame`, by its nearest primary (the encode is lossless in RGB, but YUV rounding moves a level or two).
    static func colour(_ image: Image, _ x: Int, _ y: Int, frame: Int = 0) throws -> Colour? {
        let pixels = try Fixtures.pixels(image)
        let start = ((frame * image.pixelSize.height + y) * image.pixelSize.width + x) * pixels.channels
        let (r, g, b) = (Int(pixels.bytes[start]), Int(pixels.bytes[start + 1]), Int(pixels.bytes[start + 2]))
        switch (r > 200, g > 200, b > 200) {
        case (true, false, false): return .red
        case (false, true, false): return .green
        case (false, false, true): return .blue
        case (true, true, true): return .white
        default: return nil
        }
    }

    /// Quadrant colours of a decoded image, clockwise from the top left.
    static func quadrants(_ image: Image) throws -> [Colour?] {
        let (w, h) = (image.pixelSize.width, image.pixelSize.height)
        return try [colour(image, w / 4, h / 4), colour(image, 3 * w / 4, h / 4), colour(image, 3 * w / 4, 3 * h / 4), colour(image, w / 4, 3 * h / 4)]
    }

    @Test("irot, imir and their combination come out as displayed; info reports the displayed size, and the stored one")
    func orientation() throws {
        let source = Fixtures.quadrants(width: 64, height: 32)  // red green / blue white
        let cases: [([String], PixelSize, [Colour?])] = [
            ([], PixelSize(width: 64, height: 32), [.red, .green, .white, .blue]),
            // 90° anti-clockwise: the top-right corner comes to the top left.
            (["--irot", "1"], PixelSize(width: 32, height: 64), [.green, .white, .blue, .red]),
            (["--irot", "3"], PixelSize(width: 32, height: 64), [.blue, .red, .green, .white]),
            (["--imir", "0"], PixelSize(width: 64, height: 32), [.blue, .white, .green, .red]),  // top and bottom exchanged
            (["--imir", "1"], PixelSize(width: 64, height: 32), [.green, .red, .blue, .white]),  // left and right exchanged
            // Rotated first, then mirrored top to bottom.
            (["--irot", "1", "--imir", "0"], PixelSize(width: 32, height: 64), [.red, .blue, .white, .green]),
        ]
        for (arguments, size, expected) in cases {
            let data = try Self.avifenc([source], arguments)
            let image = try Fixtures.coder.decode(data, options: DecodeOptions())
            #expect(image.pixelSize == size, "\(arguments): \(image.pixelSize)")
            #expect(try Self.quadrants(image) == expected, "\(arguments)")
            let info = try Fixtures.coder.info(data)
            #expect(info.pixelSize == size && info.storedPixelSize == PixelSize(width: 64, height: 32), "info \(arguments)")
        }
    }

    @Test("clap crops, before the rotation; a thumbnail of a rotated file fits the displayed size exactly")
    func crop() throws {
        let source = Fixtures.quadrants(width: 64, height: 32)
        // The right half: green over white.
        let croppedFile = try Self.avifenc([source], ["--crop", "32,0,32,32"])
        let cropped = try Fixtures.coder.decode(croppedFile, options: DecodeOptions())
        #expect(cropped.pixelSize == PixelSize(32))
        // info: the displayed size, and the stored (uncropped) one beside it.
        let info = try Fixtures.coder.info(croppedFile)
        #expect(info.pixelSize == PixelSize(32) && info.storedPixelSize == PixelSize(width: 64, height: 32))

        #expect(try Self.quadrants(cropped) == [.green, .green, .white, .white])
        let rotated = try Self.avifenc([source], ["--crop", "32,0,32,32", "--irot", "1"])
        #expect(try Self.quadrants(try Fixtures.coder.decode(rotated, options: DecodeOptions())) == [.green, .white, .white, .green])
        let thumbnail = try Fixtures.coder.decode(try Self.avifenc([source], ["--irot", "1"]), options: DecodeOptions(thumbnailPixelSize: PixelSize(20)))
        #expect(thumbnail.pixelSize == PixelSize(width: 10, height: 20))
    }

    @Test("a sequence decodes as frames with their durations; firstFrameOnly, thumbnails, info and the pixel limit hold")
    func sequence() throws {
        func flat(_ rgb: [UInt8]) -> PixelBuffer { PixelBuffer(size: PixelSize(width: 32, height: 16), channels: 3, bytes: [UInt8]((0..<512).flatMap { _ in rgb })) }
        let data = try Self.avifenc([flat([255, 0, 0]), flat([0, 255, 0]), flat([0, 0, 255])], [], durations: [100, 200, 300])
        let image = try Fixtures.coder.decode(data, options: DecodeOptions())
        #expect(image.frameCount == 3 && image.pixelSize == PixelSize(width: 32, height: 16) && image.loopCount == 0)
        #expect(image.frames.map(\.duration) == [.milliseconds(100), .milliseconds(200), .milliseconds(300)])
        #expect(try (0..<3).map { try Self.colour(image, 16, 8, frame: $0) } == [.red, .green, .blue])
        let info = try Fixtures.coder.info(data)
        #expect(info.frameCount == 3 && info.frameDurations == [.milliseconds(100), .milliseconds(200), .milliseconds(300)])
        #expect(try Fixtures.coder.decode(data, options: DecodeOptions(firstFrameOnly: true)).frameCount == 1)
        let thumbnail = try Fixtures.coder.decode(data, options: DecodeOptions(thumbnailPixelSize: PixelSize(8)))
        #expect(thumbnail.pixelSize == PixelSize(width: 8, height: 4) && thumbnail.frameCount == 3)
        #expect(thumbnail.frames.map(\.duration) == [.milliseconds(100), .milliseconds(200), .milliseconds(300)])
        let limited = #expect(throws: WebImageError.self) { try Fixtures.coder.decode(data, options: DecodeOptions(pixelLimit: 1000)) }
        #expect(limited?.code == .pixelLimitExceeded && limited?.message.contains("3 frames") == true, "\(limited?.message ?? "")")
    }

    @Test("bad input: truncated and garbled files are typed errors; PQ (HDR) is refused by rule")
    func badInput() throws {
        let data = try Self.avifenc([Fixtures.quadrants(width: 64, height: 32)], [])
        for cut in [20, data.count / 2, data.count - 10] {
            // info reads the header only: a file cut after it still has one.
            for call in cut == 20 ? ["decode", "info"] : ["decode"] {
                let error = #expect(throws: WebImageError.self) {
                    if call == "decode" { _ = try Fixtures.coder.decode(Data(data.prefix(cut)), options: DecodeOptions()) } else { _ = try Fixtures.coder.info(Data(data.prefix(cut))) }
                }
                // libavif's reason, never a detour through an untrusted loader's advice.
                #expect(error?.code == .decodeFailed && error?.message.contains("AVIF") == true && error?.message.contains("allowUntrusted") == false,
                        "\(call), cut at \(cut): \(error?.message ?? "")")
            }
        }
        var garbled = data
        for index in stride(from: data.count / 2, to: data.count, by: 7) { garbled[index] ^= 0x5A }
        #expect(throws: WebImageError.self) { try Fixtures.coder.decode(garbled, options: DecodeOptions()) }
        let hdr = try Self.avifenc([Fixtures.quadrants(width: 16, height: 16)], ["--cicp", "9/16/9"])
        let refused = #expect(throws: WebImageError.self) { try Fixtures.coder.decode(hdr, options: DecodeOptions()) }
        #expect(refused?.code == .unsupportedFormat && refused?.message.contains("PQ") == true, "\(refused?.message ?? "")")
    }

    @Test("an animation asked for as AVIF is an AVIF sequence with its frames and durations, alpha kept", arguments: [false, true])
    func animatedOut(alpha: Bool) throws {
        let size = PixelSize(width: 24, height: 12)
        var bytes: [UInt8] = []
        let colours: [[UInt8]] = [[255, 0, 0], [0, 255, 0], [0, 0, 255]]
        for colour in colours { bytes += (0..<size.area).flatMap { _ in alpha ? colour + [200] : colour } }
        let buffer = PixelBuffer(size: size, channels: alpha ? 4 : 3, bytes: bytes)
        let animation = Fixtures.image(buffer, frames: [.milliseconds(100), .milliseconds(250), .milliseconds(400)], loop: 0)
        let data = try Fixtures.coder.encode(animation, as: .avif, options: EncodeOptions(quality: 90))
        #expect(ImageFormat.sniff(data) == .avif)
        let decoded = try Fixtures.coder.decode(data, options: DecodeOptions())
        #expect(decoded.frameCount == 3 && decoded.pixelSize == size && decoded.hasAlpha == alpha)
        #expect(decoded.frames.map(\.duration) == [.milliseconds(100), .milliseconds(250), .milliseconds(400)])
        #expect(try (0..<3).map { try Self.colour(decoded, 12, 6, frame: $0) } == [.red, .green, .blue])
        // A GIF's frames, through the same door the tool and the service use.
        let gif = try Fixtures.animated(.gif, delays: [100, 200], loop: 0, size: 16)
        let again = try Fixtures.coder.decode(try Fixtures.coder.encode(try Fixtures.coder.decode(gif, options: DecodeOptions()), as: .avif, options: EncodeOptions()),
                                              options: DecodeOptions())
        #expect(again.frameCount == 2 && again.frames.map(\.duration) == [.milliseconds(100), .milliseconds(200)])
    }
}

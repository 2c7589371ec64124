public import Foundation
public import WebImage

/// Checks the requirements of ``ImageCoder`` against sample images.
public struct ImageCoderConformance: Sendable {
    /// An encoded image and what decoding it must give.
    public struct Sample: Sendable {
        public var name: String
        public var data: Data
        public var pixelSize: PixelSize
        public var frameCount: Int
        /// The sample's format, if the core does not sniff it (a format of your own):
        /// encode → decode is checked in it too when the coder writes it.
        public var format: ImageFormat?
        public init(name: String, data: Data, pixelSize: PixelSize, frameCount: Int = 1, format: ImageFormat? = nil) {
            self.name = name
            self.data = data
            self.pixelSize = pixelSize
            self.frameCount = frameCount
            self.format = format
        }
    }

    public let coder: any ImageCoder
    public let samples: [Sample]
    /// Whether the coder shrinks on load for ``DecodeOptions/thumbnailPixelSize``.
    public let supportsThumbnails: Bool

    public init(coder: any ImageCoder, samples: [Sample], supportsThumbnails: Bool = true) {
        self.coder = coder
        self.samples = samples
        self.supportsThumbnails = supportsThumbnails
    }

    /// Runs every check.
    /// - Throws: ``ConformanceFailure`` listing each broken requirement.
    public func run() async throws {
        var checker = Checker(suite: "ImageCoderConformance")
        await rejectsJunk(&checker)
        for sample in samples { await check(sample, &checker) }
        await encodesForeignPixels(&checker)
        try checker.finish()
    }

    /// Empty, tiny and random bytes are typed errors.
    private func rejectsJunk(_ checker: inout Checker) async {
        let coder = coder
        await checker.check("rejects empty, tiny and random bytes") {
            var generator = SplitMix(seed: 7)
            let junk: [(String, Data)] = [
                ("empty", Data()), ("1 byte", Data([0xFF])),
                ("random", Data((0..<4096).map { _ in UInt8(truncatingIfNeeded: generator.next()) })),
            ]
            for (name, data) in junk where coder.canDecode(data) {
                do {
                    _ = try coder.decode(data, options: DecodeOptions())
                    throw Expectation(message: "decoded \(name) data")
                } catch is WebImageError {}
            }
        }
    }

    /// One sample: size and frames, info, truncation, the pixel limit, thumbnails, round trips.
    private func check(_ sample: Sample, _ checker: inout Checker) async {
        let (coder, supportsThumbnails) = (coder, supportsThumbnails)
        await checker.check("\(sample.name): decodes with its size and frames") {
            try expect(coder.canDecode(sample.data), "canDecode is false")
            let image = try coder.decode(sample.data, options: DecodeOptions(scale: 2))
            try expect(image.pixelSize == sample.pixelSize, "size \(image.pixelSize), expected \(sample.pixelSize)")
            try expect(image.frameCount == sample.frameCount, "\(image.frameCount) frames, expected \(sample.frameCount)")
            try expect(image.scale == 2, "scale \(image.scale) ignores the option")
            try expect(image.cost > 0, "an image that costs 0 bytes defeats the memory cache")
        }

        await checker.check("\(sample.name): info describes it as a decode does") {
            let info = try coder.info(sample.data)
            try expect(info.pixelSize == sample.pixelSize, "info says \(info.pixelSize), expected \(sample.pixelSize)")
            try expect(info.frameCount == sample.frameCount, "info says \(info.frameCount) frames, expected \(sample.frameCount)")
        }

        await checker.check("\(sample.name): truncated data is a typed error") {
            for fraction in [0.1, 0.5, 0.9] {
                let cut = sample.data.prefix(Int(Double(sample.data.count) * fraction))
                do {
                    _ = try coder.decode(Data(cut), options: DecodeOptions())
                    throw Expectation(message: "decoded \(Int(fraction * 100))% of the file")
                } catch is WebImageError {}
            }
        }

        await checker.check("\(sample.name): the pixel limit holds") {
            do {
                _ = try coder.decode(sample.data, options: DecodeOptions(pixelLimit: max(1, sample.pixelSize.area / 4)))
                throw Expectation(message: "decoded an image over the pixel limit")
            } catch let error as WebImageError {
                try expect(error.code == .pixelLimitExceeded, "code is \(error.code), expected pixelLimitExceeded")
            }
        }

        if supportsThumbnails {
            await checker.check("\(sample.name): thumbnails fit their box") {
                let box = PixelSize(width: max(1, sample.pixelSize.width / 3), height: max(1, sample.pixelSize.height / 3))
                let image = try coder.decode(sample.data, options: DecodeOptions(thumbnailPixelSize: box))
                try expect(image.pixelSize.width <= box.width && image.pixelSize.height <= box.height,
                           "thumbnail \(image.pixelSize) is outside \(box)")
                try expect(image.pixelSize.width >= box.width - 1 || image.pixelSize.height >= box.height - 1,
                           "thumbnail \(image.pixelSize) does not fill \(box) on either side")
            }
        }

        await checker.check("\(sample.name): encode → decode keeps size and frames") {
            let image = try coder.decode(sample.data, options: DecodeOptions())
            let own = sample.format.map { [$0] } ?? []
            for format in [ImageFormat.png, .jpeg, .webp, .gif] + own where coder.canEncode(format) {
                if image.isAnimated && ![ImageFormat.gif, .webp].contains(format) { continue }
                let data = try coder.encode(image, as: format, options: EncodeOptions())
                if own.contains(format) {
                    try expect(coder.canDecode(data), "the coder does not accept the \(format) it wrote")
                } else {
                    try expect(ImageFormat.sniff(data) == format, "encoding as \(format) wrote \(ImageFormat.sniff(data)?.rawValue ?? "unrecognisable bytes")")
                }
                let again = try coder.decode(data, options: DecodeOptions())
                try expect(again.pixelSize == image.pixelSize, "\(format) round trip changed size to \(again.pixelSize)")
                try expect(again.frameCount == image.frameCount, "\(format) round trip changed frames to \(again.frameCount)")
            }
        }
    }

    /// Images the coder did not decode (a `PixelBuffer` made elsewhere) encode too.
    private func encodesForeignPixels(_ checker: inout Checker) async {
        let (coder, samples) = (coder, samples)
        await checker.check("encodes PixelBuffer images made elsewhere") {
            let size = PixelSize(width: 4, height: 3)
            let pixels = PixelBuffer(size: size, channels: 4, bytes: (0..<(4 * 3 * 4)).map { UInt8($0 * 5) })
            let image = Image(pixelSize: size, hasAlpha: true, storage: pixels)
            let formats = ([ImageFormat.png, .jpeg, .webp, .gif, .bmp, .tiff] + samples.compactMap(\.format)).filter(coder.canEncode)
            for format in Set(formats) {
                let data = try coder.encode(image, as: format, options: EncodeOptions())
                let again = try coder.decode(data, options: DecodeOptions())
                try expect(again.pixelSize == size, "\(format): a 4x3 PixelBuffer came back \(again.pixelSize)")
            }
        }
    }
}

import Foundation
import WebImage

extension ImageFormat {
    /// Netpbm's binary greymap (P5) and pixmap (P6).
    public static let ppm = ImageFormat(rawValue: "ppm")
}

/// Decodes and encodes binary PGM (P5) and PPM (P6): a whole coder in one file,
/// to copy when you add a format of your own.
///
/// ```swift
/// configuration.coders.registerVips()
/// configuration.coders.register(PPMCoder(), name: "ppm")   // registered last: asked first
/// ```
///
/// It keeps its pixels in the core's `PixelBuffer`, honours the pixel limit from
/// the header, thumbnails by box filtering while it reads, and throws
/// `WebImageError` for every kind of bad input.
public struct PPMCoder: ImageCoder {
    public init() {}

    public func canDecode(_ data: Data) -> Bool {
        data.count >= 3 && data[data.startIndex] == UInt8(ascii: "P")
            && (data[data.startIndex + 1] == UInt8(ascii: "5") || data[data.startIndex + 1] == UInt8(ascii: "6"))
            && Self.isSpace(data[data.startIndex + 2])
    }

    public func canEncode(_ format: ImageFormat) -> Bool { format == .ppm }

    public func decode(_ data: Data, options: DecodeOptions) throws -> Image {
        let bytes = [UInt8](data)
        var header = Header(bytes: bytes)
        guard canDecode(data) else { throw WebImageError(.unsupportedFormat, "not a binary PGM or PPM (P5/P6)") }
        let channels = bytes[1] == UInt8(ascii: "6") ? 3 : 1
        header.position = 2
        guard let width = header.number(), let height = header.number(), let maxValue = header.number() else {
            throw WebImageError(.decodeFailed, "the PPM header is cut short or malformed")
        }
        guard width > 0, height > 0, (1...65535).contains(maxValue) else {
            throw WebImageError(.decodeFailed, "the PPM header declares \(width)x\(height) with a maximum value of \(maxValue)")
        }
        let size = PixelSize(width: width, height: height)
        guard size.area <= options.pixelLimit || options.scaleDownLargeImages else {
            throw WebImageError(.pixelLimitExceeded, "the PPM header declares \(size) (\(size.area) pixels), over the limit of \(options.pixelLimit)")
        }
        let sampleBytes = maxValue > 255 ? 2 : 1
        let start = header.position + 1  // one whitespace byte after the maximum value
        let needed = size.area * channels * sampleBytes
        guard bytes.count - start >= needed else {
            throw WebImageError(.decodeFailed, "the PPM pixels are truncated: \(bytes.count - start) of \(needed) bytes")
        }

        var box = options.thumbnailPixelSize
        if size.area > options.pixelLimit {
            let factor = (Double(options.pixelLimit) / Double(size.area)).squareRoot()
            box = PixelSize(width: max(1, Int(Double(width) * factor)), height: max(1, Int(Double(height) * factor)))
        }
        var target = size
        if let box, box.width < width || box.height < height {
            let scale = options.preserveAspectRatio ? min(Double(box.width) / Double(width), Double(box.height) / Double(height)) : 0
            target = options.preserveAspectRatio
                ? PixelSize(width: max(1, Int((Double(width) * scale).rounded())), height: max(1, Int((Double(height) * scale).rounded())))
                : PixelSize(width: min(box.width, width), height: min(box.height, height))
        }

        // Box filter: each output pixel averages the input pixels it covers.
        var pixels = [UInt8](repeating: 0, count: target.area * channels)
        for y in 0..<target.height {
            let y0 = y * height / target.height, y1 = max(y0 + 1, (y + 1) * height / target.height)
            for x in 0..<target.width {
                let x0 = x * width / target.width, x1 = max(x0 + 1, (x + 1) * width / target.width)
                for c in 0..<channels {
                    var sum = 0
                    for sy in y0..<y1 {
                        for sx in x0..<x1 {
                            let i = start + ((sy * width + sx) * channels + c) * sampleBytes
                            sum += sampleBytes == 1 ? Int(bytes[i]) : Int(bytes[i]) << 8 | Int(bytes[i + 1])
                        }
                    }
                    let mean = sum / ((y1 - y0) * (x1 - x0))
                    pixels[(y * target.width + x) * channels + c] = UInt8(mean * 255 / maxValue)
                }
            }
        }
        return Image(pixelSize: target, scale: options.scale, format: .ppm, hasAlpha: false,
                     storage: PixelBuffer(size: target, channels: channels, bytes: pixels))
    }

    public func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data {
        guard format == .ppm else { throw WebImageError(.encodeFailed, "PPMCoder writes only ppm, not \(format)") }
        guard let buffer = image.storage(as: PixelBuffer.self) else {
            throw WebImageError(.encodeFailed, "PPMCoder encodes PixelBuffer images, not \(type(of: image.storage))")
        }
        let size = image.pixelSize
        let frame = size.area * buffer.channels
        guard buffer.bytes.count >= frame else { throw WebImageError(.encodeFailed, "the pixel buffer is smaller than one \(size) frame") }
        // Grey stays P5; colour becomes P6; alpha is dropped (PPM has none).
        let grey = buffer.channels <= 2
        var out = Data("\(grey ? "P5" : "P6")\n\(size.width) \(size.height)\n255\n".utf8)
        out.reserveCapacity(out.count + size.area * (grey ? 1 : 3))
        for i in 0..<size.area {
            let p = i * buffer.channels
            if grey { out.append(buffer.bytes[p]) } else { out.append(contentsOf: buffer.bytes[p..<p + 3]) }
        }
        return out
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    /// Reads the header's decimal fields, skipping whitespace and `#` comments.
    struct Header {
        let bytes: [UInt8]
        var position = 0

        mutating func number() -> Int? {
            while position < bytes.count {
                if isSpace(bytes[position]) { position += 1 } else if bytes[position] == UInt8(ascii: "#") {
                    while position < bytes.count, bytes[position] != 0x0A { position += 1 }
                } else { break }
            }
            var value = 0, digits = 0
            while position < bytes.count, (48...57).contains(bytes[position]), digits < 9 {
                value = value * 10 + Int(bytes[position] - 48)
                position += 1
                digits += 1
            }
            guard digits > 0, position < bytes.count, isSpace(bytes[position]) else { return nil }
            return value
        }
    }
}

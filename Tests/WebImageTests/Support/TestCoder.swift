import Foundation
import WebImage

extension ImageFormat {
    static let timg = ImageFormat(rawValue: "timg")
}

/// A coder for a trivial format, for the manager's own logic: "TIMG", width,
/// height and frame count as UInt16 little-endian, then RGBA bytes frame after
/// frame. Thumbnails subsample; the pixel limit is checked from the header.
struct TestCoder: ImageCoder {
    static func encode(width: Int, height: Int, frames: Int = 1, seed: UInt8 = 0) -> Data {
        var data = Data("TIMG".utf8)
        for value in [width, height, frames] {
            data.append(UInt8(value & 0xFF))
            data.append(UInt8(value >> 8))
        }
        data.append(contentsOf: (0..<(width * height * frames * 4)).map { UInt8(truncatingIfNeeded: $0 &+ Int(seed)) })
        return data
    }

    func canDecode(_ data: Data) -> Bool { data.starts(with: Data("TIMG".utf8)) }

    func decode(_ data: Data, options: DecodeOptions) throws -> Image {
        let bytes = [UInt8](data)
        guard bytes.count >= 10 else { throw WebImageError(.decodeFailed, "TIMG header truncated") }
        let width = Int(bytes[4]) | Int(bytes[5]) << 8
        let height = Int(bytes[6]) | Int(bytes[7]) << 8
        let frames = options.firstFrameOnly ? 1 : Int(bytes[8]) | Int(bytes[9]) << 8
        guard width > 0, height > 0, frames > 0 else { throw WebImageError(.decodeFailed, "TIMG with an empty size") }
        guard width * height * frames <= options.pixelLimit else {
            throw WebImageError(.pixelLimitExceeded, "\(width)x\(height) is over the limit of \(options.pixelLimit) pixels")
        }
        guard bytes.count - 10 >= width * height * frames * 4 else { throw WebImageError(.decodeFailed, "TIMG pixels truncated") }
        var size = PixelSize(width: width, height: height)
        if let box = options.thumbnailPixelSize {
            let ratio = min(Double(box.width) / Double(width), Double(box.height) / Double(height), 1)
            size = PixelSize(width: max(1, Int(Double(width) * ratio)), height: max(1, Int(Double(height) * ratio)))
        }
        let pixels = PixelBuffer(size: size, channels: 4, bytes: [UInt8](repeating: bytes[10], count: size.area * 4 * frames))
        return Image(pixelSize: size, scale: options.scale,
                     frames: Array(repeating: Image.Frame(duration: frames > 1 ? .milliseconds(100) : .zero), count: frames),
                     loopCount: frames > 1 ? 0 : 1, format: .timg, hasAlpha: true, storage: pixels)
    }

    func canEncode(_ format: ImageFormat) -> Bool { format == .timg }

    func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data {
        guard format == .timg else { throw WebImageError(.encodeFailed, "TestCoder writes only timg") }
        return Self.encode(width: image.pixelSize.width, height: image.pixelSize.height, frames: image.frameCount)
    }
}

/// Halves an image's size, as a stand-in for a real transformer.
struct HalvingTransformer: ImageTransformer {
    var key: String { "half" }
    func transform(_ image: Image) throws -> Image {
        var image = image
        image.pixelSize = PixelSize(width: max(1, image.pixelSize.width / 2), height: max(1, image.pixelSize.height / 2))
        return image
    }
}

/// Fails as a crop outside the image does: a failure of this request, not of the URL.
struct FailingTransformer: ImageTransformer {
    var key: String { "fail" }
    func transform(_ image: Image) throws -> Image {
        throw WebImageError(.transformFailed, "the crop lies outside the image")
    }
}

internal import CJPEGTurboOps
import Foundation
import WebImage

/// libwebp's encoder for the direct path's pixels, configured as libvips'
/// `webpsave` is for the same ``EncodeOptions``: the default preset at the
/// quality, lossless when asked, the effort as libwebp's method, and sharp YUV
/// conversion when chroma subsampling is `.off` (libvips' `smart_subsample`).
struct WebPEncoder {
    var quality: Int
    var lossless: Bool
    var effort: Int
    var sharpYUV: Bool

    init(_ options: EncodeOptions) {
        quality = options.quality
        lossless = options.lossless
        effort = options.effort(for: .webp)
        sharpYUV = options.chromaSubsampling == .off
    }

    /// Encodes grey, RGB or RGBA pixels of one frame.
    func encode(_ buffer: PixelBuffer) throws -> Data {
        var options = CJT_webp_options(quality: Int32(quality), lossless: lossless ? 1 : 0, effort: Int32(effort), sharpYUV: sharpYUV ? 1 : 0)
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = buffer.bytes.withUnsafeBufferPointer { pixels in
            CJT_webp_encode(pixels.baseAddress, Int32(buffer.size.width), Int32(buffer.size.height), Int32(buffer.channels),
                            &options, &out, &length, &message, message.count)
        }
        guard status == 0, let out else {
            throw WebImageError(.encodeFailed, String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        defer { CJT_webp_free(out) }
        return Data(bytes: out, count: length)
    }
}

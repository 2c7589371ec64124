internal import CJPEGTurbo
internal import CJPEGTurboOps
package import Foundation
package import WebImage

/// libjpeg-turbo's encoder with the layouts other encoders write: chroma
/// subsampling, restart markers, and progressive scripts with one DC scan per
/// component. `package` because it exists to make test files that libvips'
/// `jpegsave` cannot (libvips writes 4:4:4 at quality 90 and up, and always the
/// standard scan script).
package struct TurboJPEGEncode {
    package enum Subsampling: Int32, Sendable, CaseIterable { case none = 0, horizontal = 1, both = 2 }

    package var quality = 90
    package var progressive = false
    package var subsampling = Subsampling.both
    package var restartInterval = 0
    package var separateDCScans = false

    package init(quality: Int = 90, progressive: Bool = false, subsampling: Subsampling = .both, restartInterval: Int = 0, separateDCScans: Bool = false) {
        self.quality = quality
        self.progressive = progressive
        self.subsampling = subsampling
        self.restartInterval = restartInterval
        self.separateDCScans = separateDCScans
    }

    /// Encodes grey (1 channel) or RGB (3 channels) pixels.
    package func encode(_ buffer: PixelBuffer) throws -> Data {
        var options = CJT_encode_options(quality: Int32(quality), progressive: progressive ? 1 : 0, subsampling: subsampling.rawValue,
                                         restartInterval: Int32(restartInterval), separateDCScans: separateDCScans ? 1 : 0, optimize: 1)
        var out: UnsafeMutablePointer<UInt8>?
        var length: UInt = 0
        var message = [CChar](repeating: 0, count: 512)
        let status = buffer.bytes.withUnsafeBufferPointer { pixels in
            CJT_encode(pixels.baseAddress, Int32(buffer.size.width), Int32(buffer.size.height), Int32(buffer.channels), &options, &out, &length, &message, message.count)
        }
        guard status == 0, let out else {
            throw WebImageError(.encodeFailed, "libjpeg-turbo: \(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
        defer { CJT_free(out) }
        return Data(bytes: out, count: Int(length))
    }
}

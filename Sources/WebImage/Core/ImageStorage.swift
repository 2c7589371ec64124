import Foundation

/// The pixels behind an ``Image``, owned by whichever coder made them.
///
/// Storage is opaque to the core so that a coder can keep its own representation
/// (a libvips image, a pixel buffer, a GPU texture) across decode, transform and
/// encode without copying. The only thing the core needs is the exact number of
/// bytes it holds, which the memory cache charges.
///
/// Implementations must be immutable once made (or copy on write), so that one
/// image can be shared by many tasks.
public protocol ImageStorage: Sendable {
    /// The bytes this storage keeps alive, as exactly as the coder can tell.
    var byteCount: Int { get }
}

/// Plain interleaved 8-bit pixels: the storage of coders written in pure Swift.
public struct PixelBuffer: ImageStorage, Hashable {
    /// Width and height of one frame.
    public var size: PixelSize
    /// Bands per pixel: 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA.
    public var channels: Int
    /// Every frame, top to bottom, stacked vertically (as libvips stacks pages).
    public var bytes: [UInt8]

    public init(size: PixelSize, channels: Int, bytes: [UInt8]) {
        self.size = size
        self.channels = channels
        self.bytes = bytes
    }

    public var byteCount: Int { bytes.count }
}

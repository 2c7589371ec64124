internal import CJPEGTurboOps
import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage

/// The direct path's second half: what follows libjpeg-turbo's scaled decode
/// for a small result, in our C and lcms2, without a libvips image, operation,
/// thread or GObject. The orientation is applied after the resample (to the
/// fewest pixels), then a fill's crop, then the profile's conversion to sRGB, as
/// libvips' thumbnail converts after shrinking.
struct ThumbnailFinisher {
    /// The scaled decode, in the file's stored orientation.
    let pixels: UnsafeRawBufferPointer
    let size: PixelSize
    let bands: Int
    /// The upright size after the resample, and the box a fill crops it to.
    let target: PixelSize
    let box: PixelSize
    let fill: Bool
    /// The orientation to apply (`.up` keeps the pixels as stored).
    let orientation: ImageOrientation
    let focus: CropFocus
    /// Made from the file's ICC profile, or nil when it has none.
    let transform: ColourTransform?

    /// Whether this path gives what the libvips finish would, and with which
    /// conversion: `nil` means "finish with libvips" (a kept profile, a smart
    /// crop, a grey file with a profile); `.some(nil)` means no conversion (no
    /// profile, or one lcms2 cannot read as an RGB input profile, which libvips
    /// also ignores: its `vips_icc_is_compatible_profile`).
    static func transform(profile: Data?, bands: Int, focus: CropFocus, keepColorProfile: Bool) -> ColourTransform?? {
        guard !keepColorProfile, !focus.isSmart, bands == 1 || bands == 3 else { return nil }
        guard let profile else { return .some(nil) }
        guard bands == 3 else { return nil }
        return .some(ColourTransform.cached(for: profile))
    }

    func run() throws -> PixelBuffer {
        guard bands == 1 || bands == 3, pixels.count == size.area * bands, size.area > 0, target.area > 0 else {
            throw WebImageError(.decodeFailed, "\(pixels.count) bytes are not a \(size) image of \(bands) bands")
        }
        let swaps = orientation.swapsDimensions
        let stored = swaps ? PixelSize(width: target.height, height: target.width) : target
        var current = [UInt8](repeating: 0, count: stored.area * bands)
        let status = current.withUnsafeMutableBufferPointer { out in
            CJT_resample(pixels.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(size.width), Int32(size.height), Int32(bands),
                         out.baseAddress, Int32(stored.width), Int32(stored.height))
        }
        guard status == 0 else { throw WebImageError(.decodeFailed, "resampling \(size) to \(stored): out of memory") }
        var currentSize = stored
        if orientation != .up {
            var upright = [UInt8](repeating: 0, count: current.count)
            upright.withUnsafeMutableBufferPointer { out in
                current.withUnsafeBufferPointer { CJT_orient($0.baseAddress, Int32(stored.width), Int32(stored.height), Int32(bands), Int32(orientation.rawValue), out.baseAddress) }
            }
            current = upright
            currentSize = target
        }
        if fill, box.width < currentSize.width || box.height < currentSize.height {
            let crop = PixelSize(width: min(box.width, currentSize.width), height: min(box.height, currentSize.height))
            let (left, top) = focus.origin(of: crop, in: currentSize)
            var cropped = [UInt8](repeating: 0, count: crop.area * bands)
            cropped.withUnsafeMutableBufferPointer { out in
                current.withUnsafeBufferPointer {
                    CJT_crop($0.baseAddress, Int32(currentSize.width), Int32(bands), Int32(left), Int32(top), Int32(crop.width), Int32(crop.height), out.baseAddress)
                }
            }
            current = cropped
            currentSize = crop
        }
        if let transform {
            var converted = [UInt8](repeating: 0, count: current.count)
            converted.withUnsafeMutableBufferPointer { out in
                current.withUnsafeBufferPointer { CJT_icc_apply(transform.pointer, $0.baseAddress, out.baseAddress, $0.count / 3) }
            }
            current = converted
        }
        return PixelBuffer(size: currentSize, channels: bands, bytes: current)
    }
}

/// An lcms2 transform from one ICC profile to sRGB. Made with `cmsFLAGS_NOCACHE`,
/// so `cmsDoTransform` keeps no state and threads share it; that is what makes
/// the unchecked `Sendable` true.
final class ColourTransform: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer

    private init(pointer: UnsafeMutableRawPointer) { self.pointer = pointer }

    deinit { CJT_icc_free(pointer) }

    /// The transforms of the last few profiles seen, newest last: photos from one
    /// camera or phone share a profile, and making a transform costs more than
    /// applying it to a thumbnail. Bounded, so a stream of distinct profiles
    /// keeps at most `capacity` transforms.
    private static let recent = Lock<[(profile: Data, transform: ColourTransform)]>([])
    static let capacity = 8

    /// The transform for `profile`, made or reused; nil when lcms2 cannot use it.
    static func cached(for profile: Data) -> ColourTransform? {
        if let hit = recent.withLock({ list -> ColourTransform? in
            guard let index = list.firstIndex(where: { $0.profile == profile }) else { return nil }
            let entry = list.remove(at: index)
            list.append(entry)
            return entry.transform
        }) { return hit }
        guard let made = profile.withUnsafeBytes({ CJT_icc_to_srgb($0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count) }) else { return nil }
        let transform = ColourTransform(pointer: made)
        recent.withLock { list in
            list.append((profile, transform))
            if list.count > capacity { list.removeFirst(list.count - capacity) }
        }
        return transform
    }
}

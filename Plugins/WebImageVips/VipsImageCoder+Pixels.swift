internal import CVips
internal import CVipsOps
package import Foundation
package import WebImage

extension VipsImageCoder {
    /// Finishes a thumbnail another decoder started: takes 8-bit pixels already
    /// shrunk on load (in the file's stored orientation), applies `orientation`,
    /// resizes once with Lanczos to exactly `target` (upright), centre-crops a
    /// fill to `box`, and returns an image in ``VipsStorage``, as
    /// ``decode(_:options:)`` would have made it from a libvips shrink-on-load.
    ///
    /// For decoders in this package (`WebImageTurboJPEG`); not public API.
    /// - Parameters:
    ///   - pixels: `size.area * bands` interleaved bytes, copied here.
    ///   - bands: 1 (grey) or 3 (RGB).
    ///   - orientation: the orientation to apply; `.up` to keep the pixels as stored.
    ///   - storedOrientation: the file's own orientation tag, recorded on the image.
    ///   - loadShrink: the factor the other decoder shrank by, recorded on the storage.
    ///   - focus: what a fill keeps.
    ///   - colorProfile: the file's ICC profile, converted from as the vips path
    ///     converts (kept with `keepColorProfile`; ignored when it does not fit).
    package static func thumbnail(
        fromPixels pixels: UnsafeRawBufferPointer, size: PixelSize, bands: Int,
        target: PixelSize, box: PixelSize, fill: Bool,
        orientation: ImageOrientation, storedOrientation: ImageOrientation,
        format: ImageFormat, scale: Double, loadShrink: Int, focus: CropFocus = .centre,
        colorProfile: Data? = nil, keepColorProfile: Bool = false
    ) throws -> Image {
        try Vips.ensureInitialized()
        guard bands == 1 || bands == 3, pixels.count == size.area * bands, size.area > 0 else {
            throw WebImageError(.decodeFailed, "\(pixels.count) bytes are not a \(size) image of \(bands) bands")
        }
        guard let pointer = CVips_from_memory(pixels.baseAddress, pixels.count, Int32(size.width), Int32(size.height), Int32(bands)) else {
            throw Vips.error(.decodeFailed, "importing decoded pixels")
        }
        // vips_autorot reads the tag from the image; this one is fresh and ours alone.
        CVips_set_int(pointer, "orientation", Int32(orientation.rawValue))
        if let colorProfile { colorProfile.withUnsafeBytes { CVips_set_profile(pointer, $0.baseAddress, $0.count) } }
        let shrunk = try VipsDecoder.finishShrunk(VipsHandle(pointer), target: target, box: box, fill: fill, focus: focus, orientation: orientation)
        let finished = try VipsDecoder.outputColour(shrunk, keepProfile: keepColorProfile)
        return Image(
            pixelSize: PixelSize(width: finished.width, height: finished.height),
            scale: scale,
            orientation: orientation == .up ? storedOrientation : .up,
            storedOrientation: storedOrientation,
            format: format,
            hasAlpha: false,
            storage: VipsStorage(finished, loadShrink: loadShrink)
        )
    }
}

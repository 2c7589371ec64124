internal import CVips
internal import CVipsOps
import Foundation
import Logging
import WebImage

/// Animated PNG: each frame decoded by libpng as a PNG of its own
/// (``APNG/framePNG(_:)``), composited on the canvas with its blend and dispose
/// operations in 8-bit RGBA, the frames stacked as libvips holds an animation.
/// A damaged animation gives its default image with a warning, never silently.
extension VipsDecoder {
    /// The animation, nil to decode the default image: a still PNG, a first-frame
    /// decode, or a damaged animation (logged at `warning`).
    func animatedPNG() throws -> APNG? {
        guard format == .png, !options.firstFrameOnly else { return nil }
        do {
            return try APNG.parse(bytes)
        } catch let damage as APNG.Damage {
            (CoderLog.logger ?? Vips.logger).warning("APNG animation ignored, decoding its default image: \(damage)", metadata: ["format": "png"])
            return nil
        }
    }

    /// The whole animation, bounded like a GIF's (frames × canvas), thumbnailed frame by frame.
    func decode(_ apng: APNG) throws -> Image {
        let canvas = PixelSize(width: apng.width, height: apng.height)
        try ImageFootprint(size: canvas, bands: 4, bytesPerSample: 1, frames: apng.frames.count)
            .check(pixelLimit: options.pixelLimit, memoryLimit: options.memoryLimit, step: "decoding the APNG's \(apng.frames.count) frames of \(canvas)")
        let strip: VipsHandle
        do {
            strip = try composite(apng)
        } catch let damage as APNG.Damage {
            (CoderLog.logger ?? Vips.logger).warning("APNG animation ignored, decoding its default image: \(damage)", metadata: ["format": "png"])
            return try VipsDecoder(bytes: bytes, format: format, options: { var o = options; o.firstFrameOnly = true; return o }()).decode()
        }
        return try finishAnimation(strip, canvas: canvas, delays: Self.delays(apng), loop: apng.plays)
    }

    /// What follows a decode that made every frame itself (APNG, AVIF through
    /// libavif): `strip` holds the frames stacked at `canvas` size; a thumbnail
    /// resizes each frame to exactly the fit, and a fill cuts the box from each at
    /// the same place (a smart crop on an animation takes the centre).
    func finishAnimation(_ strip: VipsHandle, canvas: PixelSize, delays: [Int], loop: Int) throws -> Image {
        guard let box = options.thumbnailPixelSize else {
            return makeImage(strip, storedOrientation: .up, orientation: .up, shrink: 1)
        }
        let fill = !options.preserveAspectRatio
        let scale = fill ? max(Double(box.width) / Double(canvas.width), Double(box.height) / Double(canvas.height))
                         : min(Double(box.width) / Double(canvas.width), Double(box.height) / Double(canvas.height))
        // Never upscaled; a fill that needs no shrink still cuts its box from each frame.
        guard scale < 1 || fill else { return makeImage(strip, storedOrientation: .up, orientation: .up, shrink: 1) }
        let target = PixelSize(width: max(1, Int((Double(canvas.width) * min(1, scale)).rounded())),
                               height: max(1, Int((Double(canvas.height) * min(1, scale)).rounded())))
        var image = scale >= 1 ? strip : try Self.eachFrame(strip) { frame in
            try Vips.make(.decodeFailed, "vips_resize") {
                CVips_resize(frame.pointer, $0, Double(target.width) / Double(frame.width), Double(target.height) / Double(frame.height))
            }
        }
        if fill {
            let animated = strip.height > canvas.height
            let focus = animated && options.cropFocus.isSmart ? CropFocus.centre : options.cropFocus
            image = try Self.eachFrame(image) { try Self.crop($0, to: box, focus: focus) }
        }
        if strip.height > canvas.height { image = try image.withAnimation(pageHeight: image.pageHeight, delays: delays, loop: loop) }
        return makeImage(try image.inMemory(), storedOrientation: .up, orientation: .up, shrink: 1)
    }

    /// Frame durations in milliseconds, as the file gives them (``animation(of:pageCount:)``
    /// applies the browsers' rule for short delays).
    static func delays(_ apng: APNG) -> [Int] { apng.frames.map(\.delay) }

    /// The canvas after each frame, stacked: `frames × height` rows of RGBA.
    private func composite(_ apng: APNG) throws -> VipsHandle {
        let width = apng.width, height = apng.height
        var canvas = [UInt8](repeating: 0, count: width * height * 4)
        var strip = [UInt8]()
        strip.reserveCapacity(canvas.count * apng.frames.count)
        for (index, frame) in apng.frames.enumerated() {
            let pixels = try framePixels(apng, index)
            let saved = frame.dispose == .previous && index > 0 ? Self.region(of: canvas, width: width, frame) : nil
            Self.draw(pixels, frame, on: &canvas, width: width)
            strip += canvas
            switch frame.dispose {
            case .none: break
            case .background: Self.clear(frame, on: &canvas, width: width)
            case .previous:
                // A first frame's "previous" is the empty canvas, as browsers take it.
                if let saved { Self.restore(saved, frame, on: &canvas, width: width) } else { Self.clear(frame, on: &canvas, width: width) }
            }
        }
        let handle = try strip.withUnsafeBytes { raw -> VipsHandle in
            guard let image = CVips_from_memory(raw.baseAddress, raw.count, Int32(width), Int32(height * apng.frames.count), 4) else {
                throw Vips.error(.decodeFailed, "building the APNG's frames")
            }
            return VipsHandle(image)
        }
        return try handle.withAnimation(pageHeight: height, delays: Self.delays(apng), loop: apng.plays).inMemory()
    }

    /// Frame `index`'s own pixels as 8-bit RGBA, decoded by libpng.
    private func framePixels(_ apng: APNG, _ index: Int) throws -> [UInt8] {
        let frame = apng.frames[index]
        let png = apng.framePNG(index)
        return try png.withUnsafeBytes { raw -> [UInt8] in
            guard let loaded = CVips_new_from_buffer(raw.baseAddress, raw.count, 0, failOn, 1, 0, 0) else {
                vips_error_clear()
                throw APNG.Damage("frame \(index) does not decode as PNG")
            }
            var image = try VipsDecoder.outputColour(VipsHandle(loaded), keepProfile: false)
            if image.bands < 3 { image = try Vips.make(.decodeFailed, "vips_colourspace") { CVips_srgb(image.pointer, $0) } }
            if image.bands == 3 { image = try Vips.make(.decodeFailed, "vips_addalpha") { CVips_addalpha(image.pointer, $0) } }
            var length = 0
            guard image.width == frame.width, image.height == frame.height, image.bands == 4,
                  let buffer = CVips_write_uchar(image.pointer, &length) else {
                vips_error_clear()
                throw APNG.Damage("frame \(index) does not decode to its \(frame.width)x\(frame.height) pixels")
            }
            defer { CVips_free(buffer) }
            return [UInt8](UnsafeRawBufferPointer(start: buffer, count: length))
        }
    }

    /// Blends a frame's RGBA pixels onto the canvas: its own pixels (source), or
    /// over what is there (over, straight alpha).
    private static func draw(_ pixels: [UInt8], _ frame: APNG.Frame, on canvas: inout [UInt8], width: Int) {
        for row in 0..<frame.height {
            var from = row * frame.width * 4
            var to = ((frame.y + row) * width + frame.x) * 4
            for _ in 0..<frame.width {
                let alpha = Int(pixels[from + 3])
                if frame.blend == .source || alpha == 255 {
                    for band in 0..<4 { canvas[to + band] = pixels[from + band] }
                } else if alpha > 0 {
                    let below = Int(canvas[to + 3]) * (255 - alpha) / 255
                    let total = alpha + below
                    for band in 0..<3 {
                        canvas[to + band] = UInt8((Int(pixels[from + band]) * alpha + Int(canvas[to + band]) * below) / total)
                    }
                    canvas[to + 3] = UInt8(total)
                }
                from += 4
                to += 4
            }
        }
    }

    private static func region(of canvas: [UInt8], width: Int, _ frame: APNG.Frame) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(frame.width * frame.height * 4)
        for row in 0..<frame.height {
            let start = ((frame.y + row) * width + frame.x) * 4
            out += canvas[start..<(start + frame.width * 4)]
        }
        return out
    }

    private static func restore(_ saved: [UInt8], _ frame: APNG.Frame, on canvas: inout [UInt8], width: Int) {
        for row in 0..<frame.height {
            let start = ((frame.y + row) * width + frame.x) * 4
            canvas.replaceSubrange(start..<(start + frame.width * 4), with: saved[(row * frame.width * 4)..<((row + 1) * frame.width * 4)])
        }
    }

    private static func clear(_ frame: APNG.Frame, on canvas: inout [UInt8], width: Int) {
        for row in 0..<frame.height {
            let start = ((frame.y + row) * width + frame.x) * 4
            canvas.replaceSubrange(start..<(start + frame.width * 4), with: repeatElement(0, count: frame.width * 4))
        }
    }
}

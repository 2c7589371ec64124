public import Foundation
public import WebImage
import WebImageVips

/// The sample images of the demo, the examples and the tests, made with libvips so
/// that a fresh clone needs no image files: photo-like JPEGs, a PNG with alpha, an
/// `@2x` icon, an animated GIF, and JPEGs tagged with each EXIF orientation.
public enum SampleImages {
    /// Writes the samples into `directory` (created if missing).
    /// - Returns: the file names written, in order.
    @discardableResult
    public static func write(to directory: URL) throws -> [String] {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw WebImageError(.invalidArgument, "\(directory.path) is a file, not a directory")
        }
        do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
            throw WebImageError(.storeFailed, "cannot make the directory \(directory.path) (\(error.localizedDescription))")
        }
        let coder = VipsImageCoder()
        var names: [String] = []
        func write(_ name: String, _ image: Image, _ format: ImageFormat, _ options: EncodeOptions = EncodeOptions(quality: 90)) throws {
            let data = try coder.encode(image, as: format, options: options)
            let path = directory.appendingPathComponent(name).path
            // Written with the system's calls, so that a failure says why (strerror).
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw WebImageError(.storeFailed, "cannot write \(path): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            let written = data.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
            guard written == data.count else {
                let reason = written < 0 ? String(cString: strerror(errno)) : "a short write"
                unlink(path)
                throw WebImageError(.storeFailed, "cannot write \(path): \(reason)")
            }
            names.append(name)
        }
        for (index, size) in [PixelSize(width: 1600, height: 1200), PixelSize(width: 1200, height: 1600), PixelSize(width: 2400, height: 1350)].enumerated() {
            try write("photo-\(index + 1).jpg", Image(pixelSize: size, storage: landscape(size, seed: index)), .jpeg)
        }
        let logo = disc(PixelSize(512))
        try write("logo.png", Image(pixelSize: logo.size, hasAlpha: true, storage: logo), .png)
        let icon = disc(PixelSize(128))
        try write("icon@2x.png", Image(pixelSize: icon.size, hasAlpha: true, storage: icon), .png)
        let frames = 8
        var bytes: [UInt8] = []
        for frame in 0..<frames { bytes += landscape(PixelSize(96), seed: frame * 3).bytes }
        let spinner = PixelBuffer(size: PixelSize(96), channels: 3, bytes: bytes)
        try write("spinner.gif", Image(pixelSize: spinner.size, frames: Array(repeating: Image.Frame(duration: .milliseconds(80)), count: frames), loopCount: 0, storage: spinner), .gif)
        // Each stored so that, with its EXIF orientation applied, it shows the same
        // upright 640x400 landscape (as the usual EXIF test sets do): a viewer that
        // shows eight identical pictures handles orientation.
        let base = landscape(PixelSize(width: 640, height: 400), seed: 9)
        for orientation in 1...8 {
            let stored = storedPixels(showing: base, orientation: orientation)
            let image = Image(pixelSize: stored.size, orientation: ImageOrientation(exif: orientation), storage: stored)
            try write("oriented-\(orientation).jpg", image, .jpeg, EncodeOptions(quality: 90, keepMetadata: true))
        }
        return names
    }

    /// The pixels to store with EXIF `orientation` so that applying it shows `upright`.
    public static func storedPixels(showing upright: PixelBuffer, orientation: Int) -> PixelBuffer {
        // Orientations 6 and 8 undo each other; the others undo themselves.
        transform(upright, orientation: orientation == 6 ? 8 : orientation == 8 ? 6 : orientation)
    }

    /// `buffer` with EXIF orientation `orientation`'s display transform applied
    /// (2: mirror, 3: rotate 180°, 4: flip, 5: transpose, 6: rotate 90° clockwise,
    /// 7: transverse, 8: rotate 90° counter-clockwise).
    public static func transform(_ buffer: PixelBuffer, orientation: Int) -> PixelBuffer {
        let w = buffer.size.width, h = buffer.size.height, c = buffer.channels
        let swaps = orientation >= 5
        let out = swaps ? PixelSize(width: h, height: w) : buffer.size
        var bytes = [UInt8](repeating: 0, count: buffer.bytes.count)
        for y in 0..<out.height {
            for x in 0..<out.width {
                let (sx, sy): (Int, Int) = switch orientation {
                case 2: (w - 1 - x, y)
                case 3: (w - 1 - x, h - 1 - y)
                case 4: (x, h - 1 - y)
                case 5: (y, x)
                case 6: (y, h - 1 - x)
                case 7: (w - 1 - y, h - 1 - x)
                case 8: (w - 1 - y, x)
                default: (x, y)
                }
                let from = (sy * w + sx) * c, to = (y * out.width + x) * c
                for k in 0..<c { bytes[to + k] = buffer.bytes[from + k] }
            }
        }
        return PixelBuffer(size: out, channels: c, bytes: bytes)
    }

    /// A photo-like picture: a sky gradient, hills, and a sun (`seed` moves the sun).
    public static func landscape(_ size: PixelSize, seed: Int) -> PixelBuffer {
        let w = size.width, h = size.height
        var bytes = [UInt8](repeating: 0, count: w * h * 3)
        let sunX = Double((seed * 37) % 100) / 100 * Double(w), sunY = Double(h) * 0.3, sunR = Double(min(w, h)) * 0.08
        bytes.withUnsafeMutableBufferPointer { pixels in
            for y in 0..<h {
                let t = Double(y) / Double(h)
                for x in 0..<w {
                    let hill = Double(h) * (0.6 + 0.1 * sin(Double(x) / Double(w) * 6.28 * 2 + Double(seed)))
                    var (r, g, b): (Double, Double, Double) = Double(y) > hill ? (40 + 60 * t, 110 + 40 * t, 50) : (90 + 100 * t, 150 + 60 * t, 235)
                    let dx = Double(x) - sunX, dy = Double(y) - sunY
                    if dx * dx + dy * dy < sunR * sunR { (r, g, b) = (255, 220, 90) }
                    let noise = Double((x &* 73_856_093 ^ y &* 19_349_663 ^ seed) & 15) - 7
                    let i = (y * w + x) * 3
                    pixels[i] = UInt8(max(0, min(255, r + noise)))
                    pixels[i + 1] = UInt8(max(0, min(255, g + noise)))
                    pixels[i + 2] = UInt8(max(0, min(255, b + noise)))
                }
            }
        }
        return PixelBuffer(size: size, channels: 3, bytes: bytes)
    }

    /// A coloured disc on transparency.
    public static func disc(_ size: PixelSize) -> PixelBuffer {
        var bytes = [UInt8](repeating: 0, count: size.area * 4)
        let c = Double(size.width) / 2
        for y in 0..<size.height {
            for x in 0..<size.width {
                let d = ((Double(x) - c) * (Double(x) - c) + (Double(y) - c) * (Double(y) - c)).squareRoot()
                let i = (y * size.width + x) * 4
                bytes[i] = UInt8(Double(x) / Double(size.width) * 255)
                bytes[i + 1] = 120
                bytes[i + 2] = UInt8(Double(y) / Double(size.height) * 255)
                bytes[i + 3] = d < c - 1 ? 255 : d < c ? UInt8((c - d) * 255) : 0
            }
        }
        return PixelBuffer(size: size, channels: 4, bytes: bytes)
    }
}

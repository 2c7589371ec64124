internal import CVips
internal import CVipsOps
import Foundation
import WebImage

/// One decode: header first, limits, then either a shrink-on-load thumbnail or a
/// full decode, always ending with the pixels in memory.
struct VipsDecoder {
    let bytes: UnsafeRawBufferPointer
    let format: ImageFormat?
    let options: DecodeOptions
    /// AVIF through libavif (VipsDecoder+AVIF); false for libvips' heif loader.
    var libavif = true
    /// How long poppler may take over a PDF (VipsDecoder+PDF).
    var pdfTimeLimit: Duration = VipsImageCoder.Options.defaultPDFTimeLimit
    /// How many PDFs poppler may read or draw at once (VipsDecoder+PDF).
    var pdfConcurrency = 1
    var pdfSlots = PopplerTools.Slots()

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat?, options: DecodeOptions, libavif: Bool = true,
         pdf: VipsImageCoder.Options = VipsImageCoder.Options(), pdfSlots: PopplerTools.Slots = PopplerTools.Slots()) {
        self.bytes = bytes
        self.format = format
        self.options = options
        self.libavif = libavif
        self.pdfTimeLimit = pdf.pdfTimeLimit
        self.pdfConcurrency = pdf.pdfConcurrency
        self.pdfSlots = pdfSlots
    }

    /// Formats whose frames are an animation (TIFF pages and HEIF items are not).
    var isAnimatable: Bool { format == .gif || format == .webp }
    var failOn: Int32 { Int32(options.allowTruncated ? VIPS_FAIL_ON_NONE.rawValue : VIPS_FAIL_ON_TRUNCATED.rawValue) }
    var pages: Int32 { isAnimatable ? (options.firstFrameOnly ? 1 : -1) : 0 }

    func open(shrink: Int = 1, scale: Double = 0) throws -> VipsHandle {
        guard let image = CVips_new_from_buffer(bytes.baseAddress, bytes.count, pages, failOn, Int32(shrink), scale, format == .jpeg ? 1 : 0) else {
            throw Vips.error(.decodeFailed, "reading the \(format?.rawValue ?? "image") header")
        }
        return VipsHandle(image)
    }

    /// libvips 8.14 only warns when a PNG is cut short (at every `fail_on` level)
    /// and its GIF loader returns the frames it got, so the container's own end
    /// markers are checked first: PNG's IEND chunk, GIF's trailer byte, WebP's
    /// RIFF length. JPEG truncation is caught by libjpeg through `fail_on`.
    func checkComplete() throws {
        guard !options.allowTruncated, let format else { return }
        let count = bytes.count
        let complete: Bool
        switch format {
        case .png:
            let iend: [UInt8] = [0x49, 0x45, 0x4E, 0x44]
            let tail = bytes.suffix(64)
            // "IEND" followed by its 4-byte CRC.
            complete = tail.count >= 8 && (0...(tail.count - 8)).contains { offset in
                (0..<4).allSatisfy { tail[tail.startIndex + offset + $0] == iend[$0] }
            }
        case .gif:
            // The trailer 0x3B, possibly followed by padding some encoders add.
            complete = bytes.suffix(16).contains(0x3B)
        case .webp:
            let declared = count >= 8 ? Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24 : .max
            complete = count >= declared + 8
        default:
            complete = true
        }
        if !complete {
            throw WebImageError(.decodeFailed, "the \(format) data is truncated (\(count) bytes, its end is missing; DecodeOptions.allowTruncated decodes what is there)")
        }
    }

    func decode() throws -> Image {
        if format == .pdf { return try decodePDF() }
        try checkComplete()
        if !options.scaleDownLargeImages, let declared = HeaderProbe.size(of: bytes, format: format), declared.area > options.pixelLimit {
            throw WebImageError(.pixelLimitExceeded,
                                "the \(format!) header declares \(declared) (\(declared.area) pixels), over the limit of \(options.pixelLimit); pass .scaleDownLargeImages to decode it smaller")
        }
        if format == .jpeg { try VipsImageCoder.checkJPEGScans(bytes) }
        try checkWebPFrames()
        if format == .avif && libavif { return try decodeAVIF() }
        if let apng = try animatedPNG() { return try decode(apng) }
        if format == .jpeg, let frame = HeaderProbe.jpegFrame(bytes), frame.progressive {
            // libjpeg holds every coefficient of a progressive file, whatever the scale.
            try frame.coefficientFootprint.check(pixelLimit: .max, memoryLimit: options.memoryLimit,
                                                 step: "decoding the progressive JPEG's coefficients (\(frame.size), \(frame.components) components)")
        }
        let header = try open()
        let width = header.width, pageHeight = header.pageHeight
        let pageCount = max(1, header.height / max(1, pageHeight))
        try checkFrameCount(pageCount)
        let storedOrientation = ImageOrientation(exif: header.int("orientation") ?? 1)
        let area = PixelSize(width: width, height: header.height).area
        guard width > 0, pageHeight > 0 else { throw WebImageError(.decodeFailed, "the header declares an empty image") }
        // What a full decode costs: every band at its depth (libvips' header says
        // both), every frame. A JPEG thumbnail shrinks on load: its cost is checked
        // where the factor is chosen. Over the memory limit as over the pixel
        // limit, .scaleDownLargeImages decodes smaller instead of failing.
        let full = ImageFootprint(size: PixelSize(width: width, height: pageHeight), bands: header.bands,
                                  bytesPerSample: header.bytesPerSample, frames: pageCount)
        let shrinksOnLoad = format == .jpeg && options.thumbnailPixelSize != nil
        let memoryLimit = shrinksOnLoad ? Int.max : options.memoryLimit
        let limitPixels = min(options.pixelLimit, memoryLimit / max(1, full.bands * full.bytesPerSample))

        var box = options.thumbnailPixelSize
        var fill = !options.preserveAspectRatio && box != nil
        // A vector page (SVG, PDF) is drawn at the thumbnail's size, never at the
        // size it declares: only the box's pixels are made.
        let drawnSmall = box != nil && format == .svg
        if area > limitPixels, !drawnSmall {
            guard options.scaleDownLargeImages else {
                try full.check(pixelLimit: options.pixelLimit, memoryLimit: memoryLimit, step: "decoding \(width)x\(pageHeight)")
                throw WebImageError(.pixelLimitExceeded, "\(full) is over the limits; pass .scaleDownLargeImages to decode it smaller")
            }
            var factor = (Double(limitPixels) / Double(area)).squareRoot()
            if format == .jpeg, full.bytes > options.memoryLimit {
                // Over the bytes, a JPEG fits only through shrink-on-load: aim at the
                // smallest factor whose shrunk decode is within the limit.
                let shrink = [2, 4, 8].first { full.bytes / ($0 * $0) <= options.memoryLimit } ?? 8
                factor = min(factor, 1 / Double(shrink))
            }
            let fit = PixelSize(width: max(1, Int(Double(width) * factor)), height: max(1, Int(Double(pageHeight) * factor)))
            let oriented = storedOrientation.swapsDimensions && !options.keepOrientation ? PixelSize(width: fit.height, height: fit.width) : fit
            if let requested = box, requested.width <= oriented.width, requested.height <= oriented.height {
                box = requested
            } else {
                box = oriented
                fill = false
            }
        }

        let result: VipsHandle
        var shrink = 1
        var applied = options.keepOrientation ? storedOrientation : .up
        if let box {
            (result, shrink) = try thumbnail(header: header, box: box, fill: fill, orientation: storedOrientation)
        } else if !options.keepOrientation, storedOrientation != .up, pageCount == 1 {
            result = try Vips.make(.decodeFailed, "vips_autorot") { CVips_autorot(header.pointer, $0) }.inMemory()
        } else {
            result = try header.inMemory()
            if storedOrientation != .up && pageCount > 1 { applied = storedOrientation }
        }
        return makeImage(try Self.outputColour(result, keepProfile: options.keepColorProfile),
                         storedOrientation: storedOrientation, orientation: applied, shrink: shrink)
    }

    /// The decoded pixels as the pipeline hands them on: 8-bit sRGB or grey, from
    /// whatever profile, CMYK or depth the file had (`CVips_output_colour`). Plain
    /// 8-bit sRGB or grey without a profile, nearly every image, passes untouched.
    static func outputColour(_ image: VipsHandle, keepProfile: Bool) throws -> VipsHandle {
        if CVips_is_plain_8bit(image.pointer) != 0 || image.isPlainWithAlpha, CVips_has_profile(image.pointer) == 0 { return image }
        var ignored: Int32 = 0
        let converted = try Vips.make(.decodeFailed, "converting to sRGB") { CVips_output_colour(image.pointer, $0, keepProfile ? 1 : 0, &ignored) }
        return try converted.inMemory()
    }

    /// libvips' GIF loader stops at 4097 frames with a warning on stderr only; the
    /// file's own block structure says how many there are, and fewer is an error.
    /// Refuses an animated WebP of more than `APNG.maxFrames` (4096) frames, the
    /// GIF and APNG loaders' limit, before libvips reads its header: libwebp's
    /// demuxer took 13 s for 100 000 one-pixel frames in 5 MB, past any deadline,
    /// and the pixel limit never trips (the canvas times the frames is tiny).
    func checkWebPFrames() throws {
        guard format == .webp, let frames = HeaderProbe.webpFrameCount(bytes), frames > APNG.maxFrames else { return }
        throw WebImageError(.decodeFailed, "the animated WebP has \(frames) frames, more than the \(APNG.maxFrames) a decode reads (as for GIF and APNG)")
    }

    func checkFrameCount(_ pageCount: Int) throws {
        guard format == .gif, pages == -1, let declared = HeaderProbe.gifFrameCount(bytes), declared > pageCount else { return }
        throw WebImageError(.decodeFailed,
                            "the GIF has \(declared) frames and libvips read only \(pageCount); refusing to drop frames silently (decode the first frame only, or split the file)")
    }

    /// What the header says, without decoding pixels (libvips loads lazily).
    func info() throws -> ImageInfo {
        if format == .avif && libavif { return try avifInfo() }
        if format == .pdf { return try pdfInfo() }
        // What no decoder reads, info does not describe either (one answer per file).
        if format == .jpeg { try VipsImageCoder.checkJPEGScans(bytes) }
        try checkWebPFrames()
        let header = try open()
        let pageHeight = header.pageHeight
        let pageCount = max(1, header.height / max(1, pageHeight))
        try checkFrameCount(pageCount)
        guard header.width > 0, pageHeight > 0 else { throw WebImageError(.decodeFailed, "the header declares an empty image") }
        let stored = ImageOrientation(exif: header.int("orientation") ?? 1)
        var (frames, loop) = animation(of: header, pageCount: pageCount)
        if let apng = try animatedPNG() {
            (frames, loop) = (apng.frames.map { Image.Frame(duration: .milliseconds(Self.shownDelay($0.delay))) }, apng.plays)
        }
        let size = PixelSize(width: header.width, height: pageHeight)
        let nick = vips_enum_nick(vips_interpretation_get_type(), CVips_interpretation(header.pointer))
        var info = ImageInfo(
            format: format,
            pixelSize: stored.swapsDimensions ? PixelSize(width: size.height, height: size.width) : size,
            storedOrientation: stored,
            frameDurations: frames.map(\.duration),
            loopCount: loop,
            hasAlpha: header.hasAlpha,
            hasColorProfile: vips_image_get_typeof(header.pointer, "icc-profile-data") != 0,
            colorSpace: nick.map { String(cString: $0) }
        )
        if !isAnimatable { info.pageCount = max(1, header.int("n-pages") ?? 1) }
        return info
    }

    /// Frame durations (delays under 11 ms become 100 ms, as browsers do) and the loop count.
    func animation(of handle: VipsHandle, pageCount: Int) -> (frames: [Image.Frame], loop: Int) {
        guard pageCount > 1 else { return ([Image.Frame(duration: .zero)], 1) }
        let delays = handle.ints("delay") ?? []
        let frames = (0..<pageCount).map { index in
            return Image.Frame(duration: .milliseconds(Self.shownDelay(index < delays.count ? delays[index] : 100)))
        }
        return (frames, handle.int("loop") ?? 0)
    }

    /// A frame's delay as browsers show it: under 11 ms is 100 ms.
    static func shownDelay(_ milliseconds: Int) -> Int { milliseconds < 11 ? 100 : milliseconds }

    /// Shrink-on-load for JPEG (the factor chosen here, as sharp does), a box shrink
    /// and an 8-bit Lanczos reduce for PNG (`CVips_shrink_reduce`: libvips' own
    /// thumbnail filters PNGs with alpha in float, 9x the cost of the decode),
    /// libvips' thumbnail for the rest. Orientation is applied unless asked not to.
    private func thumbnail(header: VipsHandle, box: PixelSize, fill: Bool, orientation: ImageOrientation) throws -> (VipsHandle, Int) {
        let rotate = !options.keepOrientation && orientation.swapsDimensions
        let width = rotate ? header.pageHeight : header.width
        let height = rotate ? header.width : header.pageHeight
        let scale = fill ? max(Double(box.width) / Double(width), Double(box.height) / Double(height))
                         : min(Double(box.width) / Double(width), Double(box.height) / Double(height))
        guard scale < 1 else {
            // Never upscale: the full image already fits (or, for a fill, already
            // covers the box: the box is still cut from it, as far as it reaches).
            var image = try header.inMemory()
            if !options.keepOrientation, orientation != .up {
                image = try Vips.make(.decodeFailed, "vips_autorot") { CVips_autorot(image.pointer, $0) }
            }
            if fill { image = try Self.cropEachFrame(image, to: box, focus: options.cropFocus) }
            return (image, 1)
        }
        let target = PixelSize(width: max(1, Int((Double(width) * scale).rounded())), height: max(1, Int((Double(height) * scale).rounded())))

        if format == .jpeg {
            // libvips 8.14's JPEG loader aborts the process (a failed assertion,
            // "bad dimensions") when a side is smaller than the shrink, as in a
            // 1x1000 file in a small box: the shrink never exceeds either side.
            let shrink = [8, 4, 2].first { Double($0) <= 1 / scale && $0 <= header.width && $0 <= header.height } ?? 1
            let shrunk = ImageFootprint(size: PixelSize(width: (header.width + shrink - 1) / shrink, height: (header.height + shrink - 1) / shrink),
                                        bands: header.bands, bytesPerSample: header.bytesPerSample)
            try shrunk.check(pixelLimit: .max, memoryLimit: options.memoryLimit, step: "decoding the JPEG at 1/\(shrink)")
            let image = shrink > 1 ? try open(shrink: shrink) : header
            let finished = try Self.finishShrunk(image, target: target, box: box, fill: fill, focus: options.cropFocus,
                                                 orientation: options.keepOrientation ? .up : orientation)
            return (finished, shrink)
        }

        if format == .png {
            var image = header
            if !options.keepOrientation, orientation != .up {
                image = try Vips.make(.decodeFailed, "vips_autorot") { CVips_autorot(image.pointer, $0) }
            }
            image = try Vips.make(.decodeFailed, "resampling") { CVips_shrink_reduce(image.pointer, $0, Int32(target.width), Int32(target.height)) }
            if fill { image = try Self.crop(image, to: box, focus: options.cropFocus) }
            return (try image.inMemory(), 1)
        }

        if format == .svg {
            return (try drawnSmall(header: header, target: target, box: box, fill: fill), 1)
        }

        let loaderOptions = [isAnimatable ? "n=\(pages)" : nil, options.allowTruncated ? nil : "fail_on=truncated"].compactMap { $0 }.joined(separator: ",")
        // libvips' loaders shrink on load by a factor of their own (WebP, AVIF, HEIF),
        // and given both sides its thumbnail takes the larger shrink, which leaves the
        // other side short: 11158x2156 into 64 came out 62x12. It gets the side that
        // binds only, the other unbounded; each frame is then resized to exactly the
        // fit, and a fill cuts the box from it (at its focus, libvips' smart crop included).
        let widthBinds = fill ? Double(box.width) / Double(width) >= Double(box.height) / Double(height)
                              : Double(box.width) / Double(width) <= Double(box.height) / Double(height)
        let unbounded: Int32 = 10_000_000  // VIPS_MAX_COORD
        var image = try Vips.make(.decodeFailed, "vips_thumbnail_buffer") { out in
            CVips_thumbnail_buffer(UnsafeMutableRawPointer(mutating: bytes.baseAddress), bytes.count, out,
                                   widthBinds ? Int32(target.width) : unbounded, widthBinds ? unbounded : Int32(target.height),
                                   0, options.keepOrientation ? 1 : 0, loaderOptions)
        }
        if image.width != target.width || image.pageHeight != target.height {
            image = try Self.eachFrame(image) { frame in
                let h = Double(target.width) / Double(frame.width), v = Double(target.height) / Double(frame.height)
                return try Vips.make(.decodeFailed, "vips_resize") { CVips_resize(frame.pointer, $0, h, v) }
            }
        }
        guard fill else { return (try image.inMemory(), 1) }
        return (try Self.cropEachFrame(image, to: box, focus: options.cropFocus), 1)
    }

    /// A fill's box cut from every frame at the same place: a smart crop judged
    /// frame by frame would move the window between frames, so an animation takes the centre.
    static func cropEachFrame(_ image: VipsHandle, to box: PixelSize, focus: CropFocus) throws -> VipsHandle {
        let animated = image.height > image.pageHeight
        let focus = animated && focus.isSmart ? CropFocus.centre : focus
        return try eachFrame(image) { try crop($0, to: box, focus: focus) }
    }

    /// The smallest scale librsvg draws at, through libvips.
    static let minimumVectorScale = 0.001

    /// An SVG drawn at the scale of the thumbnail, then resized to it
    /// exactly. libvips' own thumbnail asks the loader for the scale, and one
    /// below the loader's minimum (0.001: a page that declares 100000 pixels
    /// into 64) is refused by it and drawn at full size instead, which took 74 s.
    /// Here the scale is clamped to that minimum and what it draws is checked
    /// against the limits first.
    func drawnSmall(header: VipsHandle, target: PixelSize, box: PixelSize, fill: Bool) throws -> VipsHandle {
        let scale = max(Self.minimumVectorScale, Double(target.width) / Double(header.width), Double(target.height) / Double(header.height))
        let drawn = PixelSize(width: Int((Double(header.width) * scale).rounded(.up)), height: Int((Double(header.height) * scale).rounded(.up)))
        try ImageFootprint(size: drawn, bands: 4).check(pixelLimit: options.pixelLimit, memoryLimit: options.memoryLimit,
                                                        step: "drawing the \(format?.rawValue ?? "page") at \(drawn) (its smallest scale)")
        var image = try open(scale: scale)
        image = try Self.resized(image, to: target)
        if fill { image = try Self.crop(image, to: box, focus: options.cropFocus) }
        return try image.inMemory()
    }

    /// What follows a shrink-on-load: the orientation applied (`.up` for none), one
    /// Lanczos resize to exactly `target` (upright), the centre crop of a fill, and
    /// the pixels in memory.
    static func finishShrunk(_ shrunk: VipsHandle, target: PixelSize, box: PixelSize, fill: Bool, focus: CropFocus = .centre,
                             orientation: ImageOrientation) throws -> VipsHandle {
        var image = shrunk
        if orientation != .up {
            image = try Vips.make(.decodeFailed, "vips_autorot") { CVips_autorot(image.pointer, $0) }
        }
        image = try resized(image, to: target)
        if fill { image = try crop(image, to: box, focus: focus) }
        return try image.inMemory()
    }

    /// `image` resized to exactly `target` (one Lanczos resize, each axis its own
    /// factor), or as it is when it already has that size.
    static func resized(_ image: VipsHandle, to target: PixelSize) throws -> VipsHandle {
        guard image.width != target.width || image.height != target.height else { return image }
        let h = Double(target.width) / Double(image.width), v = Double(target.height) / Double(image.height)
        return try Vips.make(.decodeFailed, "vips_resize") { CVips_resize(image.pointer, $0, h, v) }
    }

    /// The box's worth of a covering image: its centre, or what libvips' smart crop picks.
    static func crop(_ image: VipsHandle, to box: PixelSize, focus: CropFocus) throws -> VipsHandle {
        let w = min(box.width, image.width), h = min(box.height, image.height)
        if focus.isSmart {
            return try Vips.make(.decodeFailed, "vips_smartcrop") { CVips_smartcrop(image.pointer, $0, Int32(w), Int32(h), focus.interesting) }
        }
        let (left, top) = focus.origin(of: PixelSize(width: w, height: h), in: PixelSize(width: image.width, height: image.height))
        return try Vips.make(.decodeFailed, "vips_extract_area") { CVips_extract_area(image.pointer, $0, Int32(left), Int32(top), Int32(w), Int32(h)) }
    }

    /// `body` on every frame of an animation (a still image is one frame), the
    /// frames joined again with their new page height, in memory.
    static func eachFrame(_ image: VipsHandle, _ body: (VipsHandle) throws -> VipsHandle) throws -> VipsHandle {
        let pageHeight = image.pageHeight, count = max(1, image.height / pageHeight)
        guard count > 1 else { return try body(image).inMemory() }
        let frames = try (0..<count).map { index in
            let frame = try Vips.make(.decodeFailed, "vips_extract_area") {
                CVips_extract_area(image.pointer, $0, 0, Int32(index * pageHeight), Int32(image.width), Int32(pageHeight))
            }
            return try body(frame)
        }
        var pointers: [UnsafeMutablePointer<VipsImage>?] = frames.map(\.pointer)
        let joined = try Vips.make(.decodeFailed, "vips_arrayjoin") { CVips_arrayjoin(&pointers, $0, Int32(count)) }
        withExtendedLifetime(frames) {}
        let copy = try Vips.make(.decodeFailed, "vips_copy") { CVips_copy(joined.pointer, $0) }
        vips_image_set_int(copy.pointer, "page-height", Int32(frames[0].height))
        return try copy.inMemory()
    }

    func makeImage(_ handle: VipsHandle, storedOrientation: ImageOrientation, orientation: ImageOrientation, shrink: Int) -> Image {
        let pageHeight = handle.pageHeight
        let pageCount = max(1, handle.height / pageHeight)
        let (frames, loop) = animation(of: handle, pageCount: pageCount)
        return Image(
            pixelSize: PixelSize(width: handle.width, height: pageHeight),
            scale: options.scale,
            frames: frames,
            loopCount: loop,
            orientation: orientation,
            storedOrientation: storedOrientation,
            format: format,
            hasAlpha: handle.hasAlpha,
            storage: VipsStorage(handle, loadShrink: shrink)
        )
    }
}

internal import CVips
internal import CVipsOps
public import Foundation
public import WebImage

/// Decodes and encodes with libvips: JPEG, PNG (8/16-bit, palette), GIF, WebP,
/// TIFF, and HEIF/AVIF and JPEG XL where the system libvips has them.
///
/// ```swift
/// configuration.coders.register(VipsImageCoder(), name: "vips")
/// ```
///
/// - Decoded images are upright (EXIF orientation applied) unless
///   `DecodeOptions/keepOrientation`; `Image/storedOrientation` keeps the tag.
/// - Animated GIF and WebP keep every frame, their durations (delays under 11 ms
///   become 100 ms, as browsers do) and loop count (0 = forever; a GIF without a
///   loop extension plays once).
/// - Thumbnails never decode the full image: JPEGs shrink on load by the largest
///   factor (2, 4, 8) that keeps the result at least the requested size, then one
///   Lanczos resize gives the exact size; other formats use `vips_thumbnail_buffer`.
/// - The pixel limit is checked from the header, before any pixel is decoded.
/// - Truncated data is an error unless `DecodeOptions/allowTruncated`.
/// - Untrusted loaders (SVG, PDF, and the others libvips marks untrusted) are
///   refused unless ``Options/allowUntrusted``.
///
/// Calls block; the manager runs them on its blocking pool.
public struct VipsImageCoder: ImageCoder {
    public struct Options: Sendable, Hashable {
        /// Allow libvips loaders marked untrusted (SVG, PDF, JPEG XL, ...), and
        /// its JPEG XL saver, which it marks untrusted too. Off by default: they
        /// parse complex formats with large attack surfaces.
        public var allowUntrusted = false
        /// Allow SVG alone (librsvg), rasterised at the size asked for, after
        /// `SVGSanitizer` has taken out scripts, external references and
        /// entities (an SVG is sanitised with ``allowUntrusted`` too). Off by default.
        public var allowSVG = false
        /// Allow PDF alone: the first page only, drawn at the size asked for and
        /// bounded by the pixel limit like any image. Poppler reads and draws it
        /// in a child process (`pdfinfo`, `pdftocairo`: Debian's poppler-utils),
        /// killed at ``pdfTimeLimit``; it never runs in this one. Off by default.
        public var allowPDF = false
        /// The longest poppler may take to read a PDF and draw its first page;
        /// past it the child is killed and the decode fails with `decodeFailed`.
        /// Default 10 s: a page of a real document draws in well under a second.
        /// A PDF that hits it is `workTimedOut` (transient: a busy machine never
        /// gets a good PDF blocklisted). Configuration takes at most 60 s.
        public var pdfTimeLimit: Duration = Self.defaultPDFTimeLimit
        public static let defaultPDFTimeLimit: Duration = .seconds(10)
        /// How many PDFs poppler may read or draw at once for this coder. One more
        /// is refused at once with the transient code `overloaded` (503,
        /// `Retry-After: 1`) instead of taking a decode slot from other images
        /// while it waits. Default 1.
        public var pdfConcurrency = 1

        public init(allowUntrusted: Bool = false, allowSVG: Bool = false, allowPDF: Bool = false,
                    pdfTimeLimit: Duration = Self.defaultPDFTimeLimit, pdfConcurrency: Int = 1) {
            self.allowUntrusted = allowUntrusted
            self.allowSVG = allowSVG
            self.allowPDF = allowPDF
            self.pdfTimeLimit = pdfTimeLimit
            self.pdfConcurrency = max(1, pdfConcurrency)
        }

        /// Whether PDFs can be drawn on this machine: poppler-utils' `pdftocairo`
        /// and `pdfinfo` are on `PATH`. A configuration that turns `vips.pdf` on
        /// where they are missing fails at start-up.
        public static var canDrawPDF: Bool { PopplerTools.available }

        /// Whether a loader libvips marks untrusted may decode `format`.
        func allowsUntrusted(_ format: ImageFormat?) -> Bool {
            allowUntrusted || (format == .svg && allowSVG) || (format == .pdf && allowPDF)
        }
    }

    public let options: Options
    /// The PDFs this coder is reading or drawing now (``Options/pdfConcurrency``).
    let pdfSlots = PopplerTools.Slots()

    /// The most start-of-scan markers a JPEG may have; one with more is refused
    /// with `WebImageError/Code/decodeFailed` before any decoder reads it. Each
    /// scan of a progressive file is a pass over the whole image, so a file of a
    /// few kilobytes that repeats empty scans thousands of times costs minutes of
    /// CPU. Encoders write 1 (baseline) to about 20 (mozjpeg): 256 is far past
    /// any real file. The same count and limit hold in every JPEG decoder of the
    /// package (libvips' loader, the turbojpeg coder, its DC decoder), so all
    /// give the same answer (docs/coder.md, "One answer per JPEG").
    public static let maxJPEGScans = 256

    /// Refuses a JPEG with more start-of-scan markers than ``maxJPEGScans``.
    package static func checkJPEGScans(_ bytes: UnsafeRawBufferPointer) throws {
        let scans = HeaderProbe.jpegScanMarkers(bytes)
        guard scans <= maxJPEGScans else {
            throw WebImageError(.decodeFailed, "the JPEG has \(scans) start-of-scan markers, more than the \(maxJPEGScans) a decode reads (VipsImageCoder.maxJPEGScans): each scan is a pass over the whole image")
        }
    }

    public init(options: Options = Options()) {
        self.options = options
        // Only a coder that opts in starts libvips here; others leave it to the
        // first image that needs it, so that a JPEG-only process (the tool's
        // batch, a JPEG service) never loads libvips' modules (about 10 MiB).
        if options.allowUntrusted || options.allowSVG || options.allowPDF, (try? Vips.ensureInitialized()) != nil {
            // libvips' switches are process-wide; coders that did not opt in still
            // refuse untrusted loaders themselves (see `decode`).
            if options.allowUntrusted {
                vips_block_untrusted_set(0)
                // Unblocking the untrusted loaders unblocks poppler's too: PDFs are
                // drawn in a child process (VipsDecoder+PDF), never by libvips'
                // loader in this one. Vips.initialization blocks it for everyone else.
                vips_operation_block_set("VipsForeignLoadPdf", 1)
            }
            if options.allowSVG { vips_operation_block_set("VipsForeignLoadSvg", 0) }
        }
    }

    /// libvips' concurrency for one image: the threads it uses inside one
    /// operation. Process-wide. Default 1: a server decodes many images at once,
    /// one per pool thread, which uses the cores better than threads per image.
    public static var concurrency: Int {
        get { Int(vips_concurrency_get()) }
        set {
            _ = try? Vips.ensureInitialized()
            vips_concurrency_set(Int32(max(1, newValue)))
        }
    }

    /// Whether libvips runs its SIMD code generator (liborc). Process-wide.
    /// Default false: liborc 0.4.33 (Debian 12's) crashed the example server with
    /// SIGSEGV every few thousand cold thumbnails, and the tool about once in 60
    /// batches; with it off, 20 000 in a row ran clean. It costs about 5% of a
    /// thumbnail's time here (docs/operations.md). Turn it on (`vips.vector`)
    /// only where a soak of your own load shows it safe.
    public static var vectorEnabled: Bool {
        get {
            _ = try? Vips.ensureInitialized()
            return CVips_vector_enabled() != 0
        }
        set {
            _ = try? Vips.ensureInitialized()
            CVips_vector_set_enabled(newValue ? 1 : 0)
        }
    }

    /// The formats this machine's libvips decodes.
    public static let decodableFormats: Set<ImageFormat> = {
        let loaders: [(ImageFormat, String)] = [
            (.jpeg, "jpegload_buffer"), (.png, "pngload_buffer"), (.gif, "gifload_buffer"), (.webp, "webpload_buffer"),
            (.tiff, "tiffload_buffer"), (.heif, "heifload_buffer"), (.avif, "heifload_buffer"), (.jxl, "jxlload_buffer"),
            (.svg, "svgload_buffer"), (.pdf, "pdfload_buffer"), (.bmp, "magickload_buffer"),
        ]
        // AVIF is libavif's (linked), whatever libvips has.
        return Set(loaders.filter { Vips.hasOperation($0.1) }.map(\.0)).union([.avif])
    }()

    /// The formats this machine's libvips encodes.
    public static let encodableFormats: Set<ImageFormat> = {
        let savers: [(ImageFormat, String)] = [
            (.jpeg, "jpegsave_buffer"), (.png, "pngsave_buffer"), (.gif, "gifsave_buffer"),
            (.webp, "webpsave_buffer"), (.tiff, "tiffsave_buffer"), (.jxl, "jxlsave_buffer"),
        ]
        var formats = Set(savers.filter { Vips.hasOperation($0.1) }.map(\.0))
        // heifsave exists whenever libheif does; which compressions work depends
        // on the encoders libheif was built with, so try each on a tiny image.
        if Vips.hasOperation("heifsave_buffer") {
            for format in [ImageFormat.avif, .heif] where Vips.canWrite(format) { formats.insert(format) }
        }
        return formats
    }()

    /// libvips' failure to load or start (it is loaded at its first use), else
    /// nil. Asking starts it, as ``canDecode(_:)`` does.
    public var unavailability: WebImageError? {
        do { try Vips.ensureInitialized(); return nil } catch let error as WebImageError where error.code == .libraryUnavailable { return error } catch { return nil }
    }

    public func canDecode(_ data: Data) -> Bool {
        guard let format = ImageFormat.sniff(data) else { return false }
        return Self.decodableFormats.contains(format)
    }

    /// The formats it writes: ``encodableFormats``, JPEG XL only with
    /// ``Options/allowUntrusted`` (libvips marks its JPEG XL saver untrusted, as
    /// it does the loader).
    public func canEncode(_ format: ImageFormat) -> Bool {
        Self.encodableFormats.contains(format) && (options.allowUntrusted || !Self.untrustedSavers.contains(format))
    }

    /// Formats whose libvips saver is marked untrusted.
    static let untrustedSavers: Set<ImageFormat> = {
        guard (try? Vips.ensureInitialized()) != nil else { return [] }
        return Set([(ImageFormat.jxl, "jxlsave_buffer")].filter { CVips_is_untrusted($0.1) != 0 }.map(\.0))
    }()

    public func decode(_ data: Data, options: DecodeOptions) throws -> Image {
        try withDecoder(data, options: options) { try $0.decode() }
    }

    /// Reads the header only: libvips opens images lazily, so no pixel is decoded
    /// (a GIF's frames are scanned for their count and delays, not decoded).
    public func info(_ data: Data) throws -> ImageInfo {
        try withDecoder(data, options: DecodeOptions()) { try $0.info() }
    }

    /// Checks the bytes have a loader this coder may use, then runs `body` while
    /// the bytes are pinned: libvips reads them lazily without copying, so every
    /// image made from them is finished before this returns.
    private func withDecoder<T>(_ data: Data, options: DecodeOptions, _ body: (VipsDecoder) throws -> T) throws -> T {
        try Vips.ensureInitialized()
        guard !data.isEmpty else { throw WebImageError(.decodeFailed, "no data to decode") }
        let format = ImageFormat.sniff(data)
        var data = data
        if format == .svg, self.options.allowsUntrusted(.svg) {
            // librsvg never sees scripts, external references or entities.
            data = try SVGSanitizer.clean(data)
        }
        if format == .pdf {
            guard self.options.allowsUntrusted(.pdf) else {
                throw WebImageError(.unsupportedFormat, "pdf is drawn by poppler, which is not written for hostile input; set vips.pdf = true (the first page, drawn in a child process) or vips.allowUntrusted = true (VipsImageCoder.Options) to decode it")
            }
            guard PopplerTools.available else { throw PopplerTools.missing }
            return try data.withUnsafeBytes { raw in
                try VipsWarnings.decoding(format) { try body(VipsDecoder(bytes: raw, format: .pdf, options: options, pdf: self.options, pdfSlots: pdfSlots)) }
            }
        }
        return try data.withUnsafeBytes { raw -> T in
            // AVIF, still or a sequence, goes to libavif (VipsDecoder+AVIF). A file
            // libavif 0.11 cannot parse (two ipma boxes, which libheif reads) goes on to
            // libvips' heif loader, and a failure there names libavif's reason too.
            var libavifError: WebImageError?
            if format == .avif {
                do {
                    return try VipsWarnings.decoding(format) { try body(VipsDecoder(bytes: raw, format: format, options: options)) }
                } catch let error as WebImageError where error.code == .decodeFailed && error.message.hasPrefix(VipsDecoder.avifParseFailure) {
                    // Only to libvips' heif loader: a broken AVIF that libvips would hand
                    // to ImageMagick (an untrusted loader) gets libavif's own reason.
                    guard let base = raw.baseAddress, let loader = CVips_find_loader(base, raw.count).map({ String(cString: $0) }),
                          loader.contains("Heif") else {
                        vips_error_clear()
                        throw error
                    }
                    libavifError = error
                }
            }
            do {
                return try decodeWithLoader(raw, format: format, options: options, libavif: libavifError == nil, body)
            } catch let error as WebImageError where libavifError != nil {
                throw WebImageError(error.code, "\(error.message) (libavif: \(libavifError!.message))", isTransient: false, underlying: error)
            }
        }
    }

    /// The libvips path: the loader libvips finds for the bytes, if this coder may use it.
    private func decodeWithLoader<T>(_ raw: UnsafeRawBufferPointer, format: ImageFormat?, options: DecodeOptions, libavif: Bool,
                                     _ body: (VipsDecoder) throws -> T) throws -> T {
        guard let base = raw.baseAddress,
              let loaderName = CVips_find_loader(base, raw.count).map({ String(cString: $0) })
        else {
            vips_error_clear()
            throw WebImageError(.unsupportedFormat, "libvips has no loader for \(format.map { "this \($0) data" } ?? "these bytes")")
        }
        if loaderName.hasPrefix("VipsForeignLoadPdf") {
            // libvips' test is "%PDF" at the start, the sniffer's "%PDF-": what is not a PDF to the sniffer is not drawn.
            throw WebImageError(.unsupportedFormat, "these bytes start like a PDF but not with %PDF-")
        }
        if !self.options.allowsUntrusted(format), CVips_is_untrusted(loaderName) != 0 {
            let specific = format == .svg ? "vips.svg = true (sanitised first) or " : ""
            throw WebImageError(.unsupportedFormat,
                                "\(format?.rawValue ?? loaderName) is decoded by \(loaderName), which libvips marks untrusted; set \(specific)vips.allowUntrusted = true (VipsImageCoder.Options) to decode it")
        }
        // A decode's error keeps only its own format's loader lines (Vips.ownLines)
        // and the warnings libvips gave while it ran (VipsWarnings).
        return try VipsWarnings.decoding(format) {
            try Vips.$decodingFormat.withValue(format) {
                try body(VipsDecoder(bytes: raw, format: format, options: options, libavif: libavif))
            }
        }
    }

    public func encode(_ image: Image, as format: ImageFormat, options: EncodeOptions) throws -> Data {
        try Vips.ensureInitialized()
        if Self.encodableFormats.contains(format), !canEncode(format) {
            throw WebImageError(.unsupportedFormat, "\(format) is written by a saver libvips marks untrusted; set vips.allowUntrusted = true (VipsImageCoder.Options.allowUntrusted) to write it")
        }
        guard canEncode(format) else {
            throw WebImageError(.encodeFailed, "libvips here cannot write \(format); it writes \(Self.encodableFormats.map(\.rawValue).sorted().joined(separator: ", "))")
        }
        return try VipsEncoder.encode(image, as: format, options: options)
    }
}

extension CoderRegistry {
    /// Registers ``VipsImageCoder`` under `vips`.
    @discardableResult
    public func registerVips(options: VipsImageCoder.Options = .init(), name: String = "vips") -> RegistrationToken {
        register(VipsImageCoder(options: options), name: name)
    }
}

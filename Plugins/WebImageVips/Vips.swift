internal import CVips
internal import CVipsOps
import Foundation
import Logging
import WebImage

/// The one place that calls libvips: initialises it once, takes its global
/// error buffer right after a failing call, and owns image references.
enum Vips {
    /// `vips_init` once, thread-safely (a Swift global is initialised exactly once).
    /// Never `vips_shutdown`. Untrusted loaders are blocked unless a coder opts in
    /// (poppler's PDF loader always),
    /// and libvips' operation cache is off: it would keep images, and with them
    /// the caller's buffers, alive past their owners. libvips' SIMD code
    /// generator (liborc) is off before any work: it crashed a server under
    /// plain load (SIGSEGV inside liborc-0.4 every few thousand thumbnails), as
    /// it has crashed others (sharp turns it off; libvips 8.15 replaced it).
    /// ``VipsImageCoder/vectorEnabled`` turns it back on.
    private static let initialization: Result<Void, WebImageError> = {
        // libvips is loaded here, not at start (Package.swift, `vipsLinking`).
        // Without it this coder decodes and encodes nothing; said once, here.
        if let reason = CVips_load_library() {
            let failure = WebImageError(.libraryUnavailable, "libvips cannot be loaded: \(String(cString: reason))")
            logger.error("\(failure.message); the vips coder decodes and encodes nothing")
            return .failure(failure)
        }
        guard CVips_init() == 0 else { return .failure(error(.decodeFailed, "vips_init")) }
        // libvips builds its table of classes lazily on the first lookup, and two
        // threads doing that first lookup at once trip an assertion
        // (vips_class_build_hash_cb). Build it here, once, before anyone else can.
        _ = vips_type_find("VipsOperation", "jpegload_buffer")
        var probe: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0]
        _ = vips_foreign_find_load_buffer(&probe, probe.count)
        vips_error_clear()
        // libvips' and GLib's warnings go to swift-log, one escaped line each,
        // not to stderr as GLib's own two-line records.
        CVips_route_log { domain, level, message in
            Vips.log(domain: domain.map { String(cString: $0) } ?? "", level: level, message: message.map { String(cString: $0) } ?? "")
        }
        vips_block_untrusted_set(1)
        // PDFs are drawn by poppler in a child process (VipsDecoder+PDF), never by
        // libvips' loader in this one (a coder that unblocks the untrusted loaders
        // blocks this one again).
        vips_operation_block_set("VipsForeignLoadPdf", 1)
        vips_cache_set_max(0)
        vips_concurrency_set(1)
        CVips_vector_set_enabled(0)
        return .success(())
    }()

    static func ensureInitialized() throws { try initialization.get() }

    /// Where libvips' and GLib's log messages go (label `webimage.vips`).
    static let logger = Logger(label: "webimage.vips")

    /// One GLib log message as a swift-log record: criticals and errors at
    /// `error`. A warning is about an input (a corrupt JPEG's "premature end of
    /// data segment", a PNG's "IHDR: CRC error"), so it goes to the decode it
    /// belongs to (``VipsWarnings``), which logs it once at `warning` with its
    /// request and adds it to its error; here it is only a `debug` record.
    /// libheif's note that it ignores an AVIF's nclx colour description, which
    /// every such file gets, and GLib's messages and debug output are `debug`
    /// records. The text is one line, escaped.
    static func log(domain: String, level: Int32, message: String) {
        let text = WebImageError.escapingControlCharacters(message.trimmingCharacters(in: .whitespacesAndNewlines))
        let swiftLevel: Logger.Level
        if level & (Int32(G_LOG_LEVEL_ERROR.rawValue) | Int32(G_LOG_LEVEL_CRITICAL.rawValue)) != 0 {
            swiftLevel = .error
        } else {
            if level & Int32(G_LOG_LEVEL_WARNING.rawValue) != 0, !message.contains("ignoring nclx profile") { VipsWarnings.record(text) }
            swiftLevel = .debug
        }
        logger.log(level: swiftLevel, "libvips: \(text)", metadata: ["domain": "\(domain)"])
    }

    /// The error for a failed call, with libvips' message (clearing its buffer).
    ///
    /// libvips 8.14 keeps one error buffer for the whole process, appended to by
    /// every thread, so at the moment a call fails it may also hold a line of
    /// another request's failure that happened at the same time. Each failing
    /// call takes (copies and clears) the buffer at once, so nothing lingers for a
    /// later request, and keeps only the lines of its own stage
    /// (``ownLines(_:for:)``): a decode keeps loaders' and sources' lines, an
    /// encode savers' and targets', a transform the rest. The lines kept are
    /// joined with "; ", one line.
    static func error(_ code: WebImageError.Code, _ operation: String) -> WebImageError {
        var text = ""
        if let copy = vips_error_buffer_copy() {
            text = String(cString: copy)
            g_free(copy)
        }
        let message = ownLines(text, for: code).joined(separator: "; ")
        return WebImageError(code, message.isEmpty ? "\(operation) failed" : "\(operation): \(message)")
    }

    /// What stage of the work a line of libvips' error buffer comes from, by its
    /// domain (the text before the first ": "): a loader or the source it reads
    /// (`pngload`, `VipsForeignLoadPng`, `source`, `VipsJpeg`), a saver or the
    /// target it writes (`webpsave`, `target`), or an operation (`rank`,
    /// `extract_area`, `vips_image_…`).
    enum LineStage: Equatable { case load, save, operation }

    static func stage(ofLine line: Substring) -> LineStage {
        guard let colon = line.range(of: ": ") else { return .operation }
        let domain = line[..<colon.lowerBound].lowercased()
        if domain.contains("save") || domain.contains("target") { return .save }
        let loaderMarks = ["load", "source", "vipsjpeg", "heif", "png", "gif", "tiff", "webp", "jxl", "jpeg"]
        return loaderMarks.contains(where: { domain.contains($0) }) ? .load : .operation
    }

    /// The lines of `text` (libvips' error buffer) that a failure of `code`'s
    /// stage can have written, in order, blank ones dropped: `decodeFailed` keeps
    /// loader lines and operation lines (a loader runs operations), `encodeFailed`
    /// saver lines and operation lines, and every other code operation lines
    /// only. A line of another stage belongs to another request's failure.
    ///
    /// A decode of a known format (``decodingFormat``, bound by the coder while it
    /// decodes) also drops the loader lines that name another format (`vipspng`
    /// in a WebP's decode): another request's decode failing at the same moment.
    static func ownLines(_ text: String, for code: WebImageError.Code, format: ImageFormat? = decodingFormat) -> [String] {
        text.split(whereSeparator: \.isNewline).compactMap { raw in
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty else { return nil }
            let stage = stage(ofLine: Substring(line))
            let keep: Bool = switch code {
            case .decodeFailed, .pixelLimitExceeded, .unsupportedFormat: stage != .save && !(stage == .load && namesAnotherFormat(line, than: format))
            case .encodeFailed: stage != .load
            default: stage == .operation
            }
            return keep ? line : nil
        }
    }

    /// The format of the bytes being decoded on this task, for ``ownLines(_:for:format:)``.
    @TaskLocal static var decodingFormat: ImageFormat?

    /// The words by which loaders' domains name their format.
    private static let formatMarks: [(ImageFormat, [String])] = [
        (.png, ["png"]), (.jpeg, ["jpeg", "jpg"]), (.webp, ["webp"]), (.gif, ["gif"]), (.tiff, ["tiff"]),
        (.heif, ["heif", "avif"]), (.avif, ["heif", "avif"]), (.jxl, ["jxl"]),
    ]

    /// Whether a loader line's domain names a format other than `format` (a
    /// domain naming none, such as `source`, names no other).
    static func namesAnotherFormat(_ line: String, than format: ImageFormat?) -> Bool {
        guard let format, let colon = line.range(of: ": ") else { return false }
        let domain = line[..<colon.lowerBound].lowercased()
        let own = formatMarks.first { $0.0 == format }?.1 ?? []
        if own.contains(where: { domain.contains($0) }) { return false }
        return formatMarks.contains { _, marks in marks.contains { domain.contains($0) } }
    }

    /// Runs a call that makes an image through an out-parameter.
    static func make(_ code: WebImageError.Code, _ operation: String, _ call: (UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32) throws -> VipsHandle {
        var out: UnsafeMutablePointer<VipsImage>?
        guard call(&out) == 0, let out else { throw error(code, operation) }
        return VipsHandle(out)
    }

    /// Runs a save call and copies the bytes libvips allocated.
    static func save(_ operation: String, _ call: (UnsafeMutablePointer<UnsafeMutableRawPointer?>, UnsafeMutablePointer<Int>) -> Int32) throws -> Data {
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard call(&buffer, &length) == 0, let buffer else { throw error(.encodeFailed, operation) }
        defer { CVips_free(buffer) }
        return Data(bytes: buffer, count: length)
    }

    /// Whether heifsave can write AVIF or HEIC here: a 16x16 grey image through
    /// it (libheif may lack the AV1 or HEVC encoder).
    static func canWrite(_ format: ImageFormat) -> Bool {
        let pixels = [UInt8](repeating: 128, count: 16 * 16 * 3)
        guard let image = pixels.withUnsafeBytes({ CVips_from_memory($0.baseAddress, $0.count, 16, 16, 3) }) else { return false }
        let handle = VipsHandle(image)
        let written = try? save("heifsave") { CVips_heifsave(handle.pointer, $0, $1, 50, 0, 1, format == .avif ? 1 : 0, 0, 0) }
        vips_error_clear()
        return written?.isEmpty == false
    }

    static func hasOperation(_ name: String) -> Bool {
        (try? ensureInitialized()) != nil && vips_type_find("VipsOperation", name) != 0
    }
}

/// Owns one reference to a `VipsImage`.
///
/// `@unchecked Sendable`: a libvips image is immutable once made, and libvips'
/// reference counting is thread-safe; the handle never mutates the image after
/// construction (metadata is set on fresh copies only).
final class VipsHandle: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<VipsImage>
    init(_ pointer: UnsafeMutablePointer<VipsImage>) { self.pointer = pointer }
    deinit { CVips_unref(pointer) }

    var width: Int { Int(CVips_width(pointer)) }
    var height: Int { Int(CVips_height(pointer)) }
    var bands: Int { Int(CVips_bands(pointer)) }
    var byteCount: Int { Int(CVips_sizeof_image(pointer)) }
    /// Bytes per band sample (1 for 8-bit, 2 for 16-bit, 4 for float).
    var bytesPerSample: Int { max(1, byteCount / max(1, width * height * bands)) }
    var hasAlpha: Bool { vips_image_hasalpha(pointer) != 0 }
    /// 8-bit sRGB with alpha (4 bands) or grey with alpha (2 bands).
    var isPlainWithAlpha: Bool {
        CVips_format(pointer) == Int32(VIPS_FORMAT_UCHAR.rawValue) && hasAlpha &&
            ((bands == 4 && CVips_interpretation(pointer) == Int32(VIPS_INTERPRETATION_sRGB.rawValue)) ||
             (bands == 2 && CVips_interpretation(pointer) == Int32(VIPS_INTERPRETATION_B_W.rawValue)))
    }

    func int(_ name: String) -> Int? {
        guard vips_image_get_typeof(pointer, name) != 0 else { return nil }
        var value: Int32 = 0
        return vips_image_get_int(pointer, name, &value) == 0 ? Int(value) : nil
    }

    func ints(_ name: String) -> [Int]? {
        guard vips_image_get_typeof(pointer, name) != 0 else { return nil }
        var array: UnsafeMutablePointer<Int32>?
        var count: Int32 = 0
        guard vips_image_get_array_int(pointer, name, &array, &count) == 0, let array else { return nil }
        return (0..<Int(count)).map { Int(array[$0]) }
    }

    /// The height of one page (frame); the whole height for a still image.
    var pageHeight: Int {
        let page = int("page-height") ?? height
        return page > 0 && height % page == 0 ? page : height
    }

    /// Decodes every pixel into memory: errors in the data (truncation) surface
    /// here. Inside a manager's job, its cancellation (a deadline, every caller
    /// gone, a shutdown) stops the computation at its next tile: libvips' kill
    /// switch on the destination, so one long operation (a blur of a large image)
    /// does not run to its end for nobody.
    func inMemory() throws -> VipsHandle {
        guard let flag = CancellationFlag.current else {
            guard let copy = CVips_copy_memory(pointer) else { throw Vips.error(.decodeFailed, "decoding") }
            return VipsHandle(copy)
        }
        guard let out = CVips_new_memory() else { throw Vips.error(.decodeFailed, "vips_image_new_memory") }
        let destination = VipsHandle(out)
        guard let token = flag.onCancel({ CVips_kill(destination.pointer) }) else {
            throw WebImageError(.cancelled, "the load was cancelled before libvips computed its pixels")
        }
        defer { flag.remove(token) }
        guard CVips_write(pointer, out) == 0 else {
            if flag.isCancelled {
                vips_error_clear()
                throw WebImageError(.cancelled, "the load was cancelled while libvips computed its pixels")
            }
            throw Vips.error(.decodeFailed, "decoding")
        }
        return destination
    }

    /// A copy whose animation metadata says `pageHeight`, `delays` (ms) and `loop`.
    func withAnimation(pageHeight: Int, delays: [Int], loop: Int) throws -> VipsHandle {
        let copy = try Vips.make(.encodeFailed, "vips_copy") { CVips_copy(pointer, $0) }
        vips_image_set_int(copy.pointer, "page-height", Int32(pageHeight))
        var values = delays.map { Int32(clamping: $0) }
        vips_image_set_array_int(copy.pointer, "delay", &values, Int32(values.count))
        vips_image_set_int(copy.pointer, "loop", Int32(clamping: loop))
        return copy
    }
}

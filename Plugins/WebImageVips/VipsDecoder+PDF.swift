internal import CVipsOps
import Foundation
import Synchronization
import WebImage

/// PDF, first page: read and drawn by poppler's own tools (`pdfinfo`,
/// `pdftocairo`) in a child process, never in this one. Poppler cannot be
/// stopped in the middle of a page, and a few kilobytes of nested form XObjects
/// make it draw for minutes; a child is killed at ``VipsImageCoder/Options/pdfTimeLimit``,
/// holds at most the memory its limit gives it (RLIMIT_AS), dies with this
/// process (`setpriv --pdeathsig`), and takes no part of this process down if
/// poppler crashes. At most ``VipsImageCoder/Options/pdfConcurrency`` run at
/// once, and a PDF beyond them is refused at once (`overloaded`) rather than
/// holding a decode slot while it waits: PDFs never starve other images. The
/// page it draws (PNG on its stdout) is decoded here like any PNG.
enum PopplerTools {
    /// `pdftocairo`, `pdfinfo`, `prlimit` and `setpriv` on `PATH` (or `/usr/bin`), found once.
    static let pdftocairo = find("pdftocairo")
    static let pdfinfo = find("pdfinfo")
    static let prlimit = find("prlimit")
    static let setpriv = find("setpriv")

    /// The PDFs one coder is reading or drawing now, against its
    /// ``VipsImageCoder/Options/pdfConcurrency``.
    final class Slots: Sendable {
        let running = Atomic<Int>(0)
    }

    /// `body` while one of `limit` slots is held; none free is `overloaded` at once.
    static func withSlot<T>(_ slots: Slots, limit: Int, _ body: () throws -> T) throws -> T {
        let taken = slots.running.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
        defer { slots.running.wrappingSubtract(1, ordering: .acquiringAndReleasing) }
        guard taken <= limit else {
            throw WebImageError(WebImageError.Code("overloaded"),
                                "\(limit) PDF(s) are being read or drawn (vips.pdfConcurrency); try again shortly",
                                isTransient: true, retryAfter: .seconds(1))
        }
        return try body()
    }

    /// Whether PDFs can be read here: poppler-utils is installed.
    static var available: Bool { pdftocairo != nil && pdfinfo != nil }

    static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/bin"]
        return directories.lazy.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The child's environment: ours, with the C locale, so `pdfinfo` prints
    /// numbers with a decimal point whatever the server's locale.
    static let environment: [String] = {
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C"
        return environment.map { "\($0.key)=\($0.value)" }
    }()

    /// What `pdfinfo` says of the document and its first page.
    struct Document: Equatable {
        /// The first page's size at 72 dpi (one pixel per point), rotation applied.
        var pageSize: PixelSize
        var pageCount: Int
    }

    /// Runs `tool` with `arguments` on `input` until `deadline`, under a memory
    /// limit of `memoryLimit` bytes and a CPU limit that outlives this process
    /// (should it die, the child does not run on). Its stdout, or a typed error.
    static func run(_ tool: String, _ arguments: [String], input: UnsafeRawBufferPointer, deadline: ContinuousClock.Instant,
                    memoryLimit: Int, maxOutput: Int, step: String) throws -> [UInt8] {
        let left = deadline - .now
        guard left > .zero else {
            throw WebImageError(.workTimedOut, "the PDF was not \(step) within vips.pdfTimeLimit", retryAfter: .seconds(2))
        }
        let milliseconds = Int(left / .milliseconds(1))
        var argv = [tool] + arguments
        if let prlimit {
            argv = [prlimit, "--as=\(memoryLimit)", "--cpu=\(milliseconds / 1000 + 2)", "--"] + argv
        }
        if let setpriv {
            // Killed with this process: a server that exits (its grace over, or
            // SIGKILL) leaves no poppler drawing on as an orphan.
            argv = [setpriv, "--pdeathsig", "KILL", "--"] + argv
        }
        var output: UnsafeMutablePointer<UInt8>?
        var length = 0
        var status: Int32 = 0
        var tail = [CChar](repeating: 0, count: 512)
        let result = withCStrings(argv) { cArguments in
            withCStrings(environment) { cEnvironment in
                CVips_run_child(argv[0], cArguments, input.baseAddress, input.count, Int32(clamping: milliseconds), maxOutput,
                                &output, &length, &status, &tail, tail.count, cEnvironment)
            }
        }
        defer { free(output) }
        let stderr = String(decoding: tail.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let reason = stderr.split(whereSeparator: \.isNewline).last.map { ": \($0)" } ?? ""
        let name = (tool as NSString).lastPathComponent
        switch Int(result) {
        case Int(CVIPS_CHILD_OK):
            guard status == 0 else {
                let how = status > 128 ? "was stopped by signal \(status - 128) (a limit of memory or CPU, or a crash)" : "failed (exit \(status))"
                throw WebImageError(.decodeFailed, "poppler's \(name) \(how) while the PDF was \(step)\(reason)")
            }
            return output.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
        case Int(CVIPS_CHILD_TIMED_OUT):
            // The service's own work past its time, as at a deadline: transient (never
            // blocklisted: a busy machine must not block a good PDF), 503 with Retry-After.
            throw WebImageError(.workTimedOut,
                                "the PDF was not \(step) within vips.pdfTimeLimit (poppler's \(name) was stopped)", retryAfter: .seconds(2))
        case Int(CVIPS_CHILD_OUTPUT_TOO_LARGE):
            throw WebImageError(.decodeFailed, "poppler's \(name) wrote more than \(maxOutput) bytes while the PDF was \(step); stopped")
        default:
            throw WebImageError(.decodeFailed, "could not start poppler's \(name) (\(String(cString: strerror(max(0, -status)))))")
        }
    }

    /// The page count and the first page's size, from `pdfinfo`. A document's
    /// title and other free text come before these lines in its output, so the
    /// last line of each kind is the tool's own.
    static func document(_ pdf: UnsafeRawBufferPointer, deadline: ContinuousClock.Instant) throws -> Document {
        guard let pdfinfo else { throw missing }
        let output = try run(pdfinfo, ["-f", "1", "-l", "1", "-"], input: pdf, deadline: deadline,
                             memoryLimit: 512 << 20, maxOutput: 1 << 20, step: "read")
        var pages: Int?, size: (Double, Double)?, rotation = 0
        for line in String(decoding: output, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if line.hasPrefix("Pages:"), fields.count == 2 {
                pages = Int(fields[1])
            } else if line.hasPrefix("Page "), fields.count >= 6, fields[1] == "1", fields[2] == "size:", fields[4] == "x",
                      let width = Double(fields[3]), let height = Double(fields[5]) {
                size = (width, height)
            } else if line.hasPrefix("Page "), fields.count == 4, fields[1] == "1", fields[2] == "rot:", let degrees = Int(fields[3]) {
                rotation = degrees
            }
        }
        guard let pages, pages >= 1, let (width, height) = size, width.isFinite, height.isFinite else {
            throw WebImageError(.decodeFailed, "poppler found no first page in the PDF")
        }
        // One pixel per point, each side rounded (595.276 points is 595 pixels); a
        // side under half a point is still one pixel.
        let rounded = { (points: Double) in points > 0 ? max(1, Int(min(points, 1e9).rounded())) : 0 }
        guard rounded(width) >= 1, rounded(height) >= 1 else {
            throw WebImageError(.decodeFailed, "the PDF's first page declares an empty size (\(width) x \(height) points)")
        }
        var pageSize = PixelSize(width: rounded(width), height: rounded(height))
        // pdfinfo prints /Rotate as written; poppler draws it modulo 360, and not at
        // all when it is no multiple of 90.
        let turned = ((rotation % 360) + 360) % 360
        if turned == 90 || turned == 270 { pageSize = PixelSize(width: pageSize.height, height: pageSize.width) }
        return Document(pageSize: pageSize, pageCount: pages)
    }

    /// The first page drawn at exactly `size` (upright, transparent where the page
    /// draws nothing), as PNG bytes.
    static func draw(_ pdf: UnsafeRawBufferPointer, size: PixelSize, deadline: ContinuousClock.Instant) throws -> [UInt8] {
        guard let pdftocairo else { throw missing }
        let pixels = size.area * 4
        // -cropbox: the page pdfinfo measures (its crop box), not the media box squeezed into it.
        return try run(pdftocairo, ["-png", "-singlefile", "-transp", "-cropbox", "-f", "1", "-l", "1",
                                    "-scale-to-x", "\(size.width)", "-scale-to-y", "\(size.height)", "-", "-"],
                       input: pdf, deadline: deadline, memoryLimit: (512 << 20) + 3 * pixels, maxOutput: pixels + (1 << 20),
                       step: "drawn at \(size)")
    }

    static var missing: WebImageError {
        WebImageError(.unsupportedFormat, "PDF pages are drawn by poppler's pdftocairo and pdfinfo (Debian: poppler-utils), which are not on PATH")
    }

    /// `strings` as a NULL-terminated C array for the length of `body`.
    static func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> T) -> T {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}

extension VipsDecoder {
    /// The first page of a PDF: its size from `pdfinfo`, under the limits as any
    /// image (a thumbnail is drawn at its box, a full decode at one pixel per
    /// point), drawn by `pdftocairo`, then cropped for a fill. Never upscaled.
    func decodePDF() throws -> Image {
        try PopplerTools.withSlot(pdfSlots, limit: pdfConcurrency) { try drawPDF() }
    }

    /// Cairo draws at most 32767 pixels a side.
    static let maxPDFSide = 32767

    private func drawPDF() throws -> Image {
        let deadline = ContinuousClock.now + pdfTimeLimit
        let page = try PopplerTools.document(bytes, deadline: deadline).pageSize
        var target = page
        var fill = false
        if let box = options.thumbnailPixelSize {
            fill = !options.preserveAspectRatio
            let scale = fill ? max(Double(box.width) / Double(page.width), Double(box.height) / Double(page.height))
                             : min(Double(box.width) / Double(page.width), Double(box.height) / Double(page.height))
            // Never upscaled; a fill that needs no shrink still cuts its box from the page.
            if scale < 1 {
                target = PixelSize(width: max(1, Int((Double(page.width) * scale).rounded())), height: max(1, Int((Double(page.height) * scale).rounded())))
            }
        }
        let footprint = ImageFootprint(size: target, bands: 4)
        let limitPixels = min(options.pixelLimit, options.memoryLimit / 4)
        let longest = max(target.width, target.height)
        if target.area > limitPixels || longest > Self.maxPDFSide {
            guard options.scaleDownLargeImages else {
                try footprint.check(pixelLimit: options.pixelLimit, memoryLimit: options.memoryLimit, step: "drawing the PDF's first page at \(target)")
                throw WebImageError(.pixelLimitExceeded, longest > Self.maxPDFSide
                    ? "the PDF's first page at \(target) is over the \(Self.maxPDFSide) pixels a side poppler draws; pass .scaleDownLargeImages to decode it smaller"
                    : "\(footprint) is over the limits; pass .scaleDownLargeImages to decode it smaller")
            }
            let factor = min((Double(limitPixels) / Double(target.area)).squareRoot(), Double(Self.maxPDFSide) / Double(longest))
            target = PixelSize(width: max(1, Int(Double(target.width) * factor)), height: max(1, Int(Double(target.height) * factor)))
            fill = false
        }
        let png = try PopplerTools.draw(bytes, size: target, deadline: deadline)
        let drawn = try png.withUnsafeBytes { raw in
            // libvips reads the bytes lazily: the pixels are in memory before they go.
            try VipsDecoder(bytes: raw, format: .png, options: DecodeOptions()).open().inMemory()
        }
        // pdftocairo rounds its scaled page up, so a size asked for can come out a
        // pixel wider or taller (a US Letter page at 77x100 is drawn 77x101): a
        // pixel or two either way is resized away. More is not poppler rounding.
        guard abs(drawn.width - target.width) <= 2, abs(drawn.height - target.height) <= 2 else {
            throw WebImageError(.decodeFailed, "poppler's pdftocairo drew \(drawn.width)x\(drawn.height), not the \(target) asked for")
        }
        var image = try Self.resized(drawn, to: target)
        if fill, let box = options.thumbnailPixelSize { image = try Self.crop(image, to: box, focus: options.cropFocus).inMemory() }
        return makeImage(try Self.outputColour(image, keepProfile: false), storedOrientation: .up, orientation: .up, shrink: 1)
    }

    /// What `pdfinfo` says, as any format's header: the first page's size, its
    /// page count; drawn with alpha, in sRGB.
    func pdfInfo() throws -> ImageInfo {
        let document = try PopplerTools.withSlot(pdfSlots, limit: pdfConcurrency) { try PopplerTools.document(bytes, deadline: .now + pdfTimeLimit) }
        var info = ImageInfo(format: .pdf, pixelSize: document.pageSize, storedOrientation: .up, frameDurations: [.zero], loopCount: 1,
                             hasAlpha: true, hasColorProfile: false, colorSpace: "srgb")
        info.pageCount = document.pageCount
        return info
    }
}

import ArgumentParser
import Foundation
import Synchronization
import UnixSignals
import WebImage
import WebImageKit
#if canImport(Glibc)
import Glibc
@_spi(Internals) import WebImageKit
#endif

struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Load images through the cache, optionally transform and write them."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "URLs or file paths.")
    var inputs: [String] = []

    @Option(name: .customLong("input-file"), help: "Read inputs from a file, one per line ('-' for standard input).")
    var inputFile: String?

    @Option(help: "Decode straight to fit a box, WxH or N (shrink on load).")
    var thumbnail: String?

    @Option(help: "Transformers joined with ';' (docs/tool.md lists them): resize:WxH[:fit|fill|stretch][:attention|entropy], crop:x,y,w,h, rotate:deg, flip:h|v, round:r, blur:s, tint:r,g,b[,a], sharpen[:s], flatten[:colour], pad:WxH[:colour[:gravity]], trim[:threshold], grey, watermark:path[:gravity[:opacity[:margin]]], dpr:n.")
    var transform: String?

    @Option(help: "Output format of thumbnails, transforms and --out: jpeg, png, webp, gif, avif, heic, tiff. A result with alpha is never written as JPEG: it becomes PNG (flatten it first to get JPEG).")
    var format: String?

    @Option(help: "Output quality, 1-100 (default: encode.quality, 90).")
    var quality: Int?

    @Option(help: "Encoder effort: WebP 0-6, AVIF/HEIC 0-9 (default: encode.effort, else WebP 2, AVIF 0).")
    var effort: Int?

    @Flag(help: "Progressive JPEG, interlaced PNG and GIF.")
    var progressive = false

    @Flag(name: .customLong("keep-color-profile"), help: "Keep the source's ICC profile and colours instead of converting to sRGB.")
    var keepColorProfile = false

    @Option(help: "The colour under transparent pixels in JPEG output: ffffff, #fff, 255,255,255, white (default: encode.background, white).")
    var background: String?

    @Option(help: "Write each result into this directory.")
    var out: String?

    @Option(help: "Inputs processed at once (default: 8, of which at most one more than the cores are local files).")
    var concurrency: Int?

    @Flag(name: .customLong("cache-only"), help: "Answer from the caches alone; an input they do not hold is reported as notCached (exit 1).")
    var cacheOnly = false

    @Flag(help: "One JSON object per input on standard output.")
    var json = false

    @Flag(help: "No progress bar.")
    var quiet = false

    func validate() throws {
        if inputs.isEmpty && inputFile == nil { throw ValidationError("give inputs, or --input-file") }
        if let thumbnail, PixelSize(parsing: thumbnail) == nil { throw ValidationError("--thumbnail takes WxH or N, not '\(thumbnail)'") }
        if let format, ImageFormat(name: format) == nil { throw ValidationError("--format takes jpeg, png, webp, gif, avif, heic or tiff, not '\(format)'") }
        if let quality, !(1...100).contains(quality) { throw ValidationError("--quality takes 1 to 100") }
        if let effort, !(0...9).contains(effort) { throw ValidationError("--effort takes 0 to 9") }
        if let background, RGBColor(parsing: background) == nil { throw ValidationError("--background takes a colour such as ffffff, #fff, 255,255,255 or white, not '\(background)'") }
        if let concurrency, concurrency < 1 { throw ValidationError("--concurrency takes a positive number") }
        if let transform {
            do { _ = try TransformSpec.parse(transform, watermark: TransformSpec.watermarkFile) } catch let error as WebImageError {
                throw ValidationError("--transform: \(error.message)")
            }
        }
    }

    func run() async throws {
        // An input file that cannot be opened is bad usage (exit 2), found before
        // anything is loaded or any cache is opened.
        let source: InputSource
        do {
            source = try InputSource(arguments: inputs, file: inputFile, window: limits.total * 4)
        } catch {
            Terminal.error("\(error)")
            throw ExitCode(2)
        }
        let manager = try await global.manager()
        var context = ImageContext()
        context.thumbnailPixelSize = thumbnail.flatMap(PixelSize.init(parsing:))
        context.transformer = try transform.map { try TransformSpec.parse($0, watermark: TransformSpec.watermarkFile) }
        context.encodeFormat = format.flatMap(ImageFormat.init(name:))
        if let requested = context.encodeFormat, manager.configuration.coders.encoder(for: requested) == nil {
            Terminal.error("--format \(requested): no coder here writes it")
            throw ExitCode(2)
        }
        if quality != nil || effort != nil || progressive || keepColorProfile || background != nil {
            var options = manager.configuration.encodeOptions
            if let quality { options.quality = quality }
            if let effort { options.effort = effort }
            if progressive { options.progressive = true }
            if keepColorProfile { options.keepColorProfile = true }
            if let background, let colour = RGBColor(parsing: background) { options.background = colour }
            context.encodeOptions = options
        }
        if let out {
            do { try OutputFile.makeDirectory(out) } catch let error as WebImageError {
                Terminal.error(error.message)
                throw ExitCode(2)
            }
        }

        let reporter = Reporter(json: json, total: inputFile == nil ? inputs.count : nil,
                                progress: !quiet && Terminal.standardErrorIsTerminal)
        // SIGTERM or SIGINT: take no new input, let the loads in flight finish and be
        // reported, wait for the manager's pending writes, then exit 128+signal. A
        // second signal exits at once.
        let interrupted = Lock<Int32?>(nil)
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let watcher = Task {
            for await signal in signals {
                let number = signal.rawValue
                if interrupted.withLock({ previous in defer { previous = previous ?? number }; return previous != nil }) {
                    Glibc.exit(128 + number)
                }
                source.stop()
            }
        }
        defer { watcher.cancel() }
        let job = LoadJob(manager: manager, context: context, options: cacheOnly ? [.waitStoreCache, .fromCacheOnly] : [.waitStoreCache],
                          out: out)
        let limits = self.limits
        await withTaskGroup(of: Bool.self) { group in
            var running = 0, runningFiles = 0
            for await input in source.lines() {
                // After a signal, inputs already read ahead are not started either.
                if source.isStopped { break }
                let isFile = LoadLimits.isLocalFile(input.text)
                while running >= limits.total || (isFile && runningFiles >= limits.files) {
                    guard let finishedFile = await group.next() else { break }
                    running -= 1
                    if finishedFile { runningFiles -= 1 }
                }
                if source.isStopped { break }
                running += 1
                if isFile { runningFiles += 1 }
                group.addTask {
                    let record = await job.run(input)
                    reporter.report(record)
                    source.consumed()
                    return isFile
                }
            }
        }
        reporter.finish()
        await manager.shutdown(gracePeriod: .seconds(30))
        if let number = interrupted.withLock({ $0 }) {
            Terminal.error("stopped by signal \(number) after \(reporter.done) inputs; loads in flight finished and were stored")
            throw ExitCode(128 + number)
        }
        if reporter.failures > 0 { throw ExitCode.failure }
    }
}

extension LoadCommand {
    /// `--concurrency` when given, for every input alike; otherwise `LoadLimits.standard`.
    var limits: LoadLimits {
        concurrency.map { LoadLimits(total: $0, files: $0) } ?? .standard
    }
}

/// How many inputs a batch has in flight. A download mostly waits on its origin,
/// so eight of them overlap well; a local file is read at once and then decoded,
/// and more of those than the cores can decode only hold their bytes and buffers
/// while they wait: a 270-photo 12 MP thumbnail batch peaked 6 MiB higher with
/// eight in flight than with three on 2 cores, in the same time
/// (docs/performance.md). One more than the cores keeps a core busy while
/// another load's file is read or its result written.
struct LoadLimits: Equatable {
    var total: Int
    var files: Int

    static let standard = LoadLimits(total: 8, files: min(8, ProcessInfo.processInfo.activeProcessorCount + 1))

    /// A path or a `file://` URL; `http(s)://`, `s3://` and other schemes are downloads.
    static func isLocalFile(_ input: String) -> Bool { isLocalFileInput(input) }
}

/// One input through the manager, then to a file if asked.
struct LoadJob: Sendable {
    let manager: ImageManager
    let context: ImageContext
    let options: ImageOptions
    let out: String?

    struct Record: Sendable {
        var input: String
        var key: String?
        var cacheType: CacheType?
        var size: PixelSize?
        var frames: Int?
        var bytes: Int?
        var output: String?
        var milliseconds: Double
        var error: WebImageError?
        /// Set when the image loaded but could not be cached (a full disk).
        var warning: String?
    }

    func run(_ line: InputSource.Input) async -> Record {
        let started = ContinuousClock.now
        let input = line.text
        var record = Record(input: input, milliseconds: 0)
        do {
            if let problem = line.problem { throw WebImageError(.invalidURL, problem) }
            guard let url = inputURL(input) else { throw WebImageError(.invalidURL, "'\(input)' is not a URL or path") }
            let result = try await manager.loadImage(with: url, options: options, context: context)
            record.key = result.key
            record.cacheType = result.cacheType
            record.size = result.image?.pixelSize
            record.frames = result.image?.frameCount
            record.warning = result.storeFailure.map { "not cached: \($0.message)" }
            var bytes = result.data
            if bytes == nil, let store = manager.store { bytes = try? await store.data(forKey: result.key) }
            record.bytes = bytes?.count
            if let out, let image = result.image {
                let written = try await write(image, bytes: bytes, input: url, key: result.key, into: out)
                record.output = written.path
                record.bytes = written.bytes
            }
        } catch {
            record.error = WebImageError.wrap(error, as: .loadFailed, "loading \(input)")
        }
        let elapsed = ContinuousClock.now - started
        record.milliseconds = (elapsed.timeInterval * 1000).rounded()
        return record
    }

    /// Writes the result in the format the cache holds it in
    /// (``ImageFormat/output(for:requested:canEncode:)``): the bytes the load
    /// returned when they are in that format (an original unchanged, or the
    /// derived bytes just stored), else the image encoded as the manager encodes.
    private func write(_ image: Image, bytes: Data?, input: URL, key: String, into directory: String) async throws -> (path: String, bytes: Int) {
        let coders = manager.configuration.coders
        guard let target = ImageFormat.output(for: image, requested: context.encodeFormat, canEncode: { coders.encoder(for: $0) != nil }),
              let coder = coders.encoder(for: target) else {
            throw WebImageError(.encodeFailed, "no coder writes \(context.encodeFormat ?? image.format ?? .png)")
        }
        let data: Data
        if let bytes, ImageFormat.sniff(bytes) == target {
            data = bytes
        } else {
            let options = context.encodeOptions ?? manager.configuration.encodeOptions
            data = try await BlockingThreadPool.shared.run { try coder.encode(image, as: target, options: options) }
        }
        let name = OutputFileName.make(for: input, key: key, fileExtension: target.fileExtension)
        let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
        try OutputFile.write(data, to: path)
        return (path, data.count)
    }
}

/// Prints results as they come (JSON lines or a table) and draws the progress bar.
final class Reporter: Sendable {
    private struct State {
        var counts: ProgressBar.Counts
        var headerPrinted = false
    }

    private let state: Lock<State>
    private let json: Bool
    private let progress: Bool
    private let started = ContinuousClock.now

    init(json: Bool, total: Int?, progress: Bool) {
        self.json = json
        self.progress = progress
        state = Lock(State(counts: ProgressBar.Counts(total: total)))
    }

    var failures: Int { state.withLock { $0.counts.failed } }
    var done: Int { state.withLock { $0.counts.done } }

    func report(_ record: LoadJob.Record) {
        state.withLock { state in
            state.counts.done += 1
            switch (record.error, record.cacheType) {
            case (.some, _): state.counts.failed += 1
            case (nil, .memory?): state.counts.memory += 1
            case (nil, .disk?): state.counts.disk += 1
            default: state.counts.network += 1
            }
            if progress { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
            if json {
                emit(jsonLine([
                    "input": record.input, "key": record.key, "cacheType": record.cacheType?.rawValue,
                    "pixelWidth": record.size?.width, "pixelHeight": record.size?.height, "frameCount": record.frames,
                    "bytes": record.bytes, "output": record.output, "milliseconds": record.milliseconds,
                    "error": record.error.map(errorObject), "warning": record.warning,
                ]))
            } else {
                if !state.headerPrinted {
                    emit(Self.row("FROM", "SIZE", "FRAMES", "BYTES", "MS", "INPUT"))
                    state.headerPrinted = true
                }
                // The input as one line, its control characters escaped: a name with
                // ESC or a newline must not drive the terminal or split the table.
                let input = WebImageError.escapingControlCharacters(record.input)
                if let error = record.error {
                    emit(Self.row("error", "-", "-", "-", String(format: "%.0f", record.milliseconds), "\(input)  \(error.code): \(error.message)"))
                } else {
                    let loaded = isLocalFileInput(record.input) ? "file" : "network"
                    let from = switch record.cacheType { case .memory?: "memory"; case .disk?: "disk"; case .shared?: "shared"; default: loaded }
                    emit(Self.row(from, record.size.map { "\($0)" } ?? "-", record.frames.map(String.init) ?? "-",
                                   record.bytes.map(String.init) ?? "-", String(format: "%.0f", record.milliseconds),
                                   input + (record.warning.map { "  (\(WebImageError.escapingControlCharacters($0)))" } ?? "")))
                }
            }
            if progress {
                let line = ProgressBar.render(state.counts, elapsed: ContinuousClock.now - started, width: Terminal.width - 1)
                FileHandle.standardError.write(Data(line.utf8))
            }
        }
    }

    func finish() {
        if progress { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }

    /// Writes a line straight to standard output (unbuffered, so consumers see each result at once).
    private func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func row(_ from: String, _ size: String, _ frames: String, _ bytes: String, _ ms: String, _ input: String) -> String {
        func pad(_ text: String, _ width: Int) -> String { text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count) }
        return pad(from, 8) + pad(size, 12) + pad(frames, 7) + pad(bytes, 10) + pad(ms, 7) + input
    }
}

/// Result files of `--out`: written whole or not at all.
enum OutputFile {
    /// Writes `data` under a temporary name in the same directory (created
    /// exclusively, never through a link), then renames it to `path`: a failure
    /// (a full disk) leaves no file, neither a partial one nor an empty one, and a
    /// symbolic link planted at `path` is replaced, never followed.
    static func write(_ data: Data, to path: String) throws {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0 ... .max)).part").path
        let fd: Int32
        do { fd = try FileIO.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode: 0o644) } catch {
            throw WebImageError(.storeFailed, "cannot write \(path): \(String(cString: strerror(error.code)))")
        }
        do throws(SystemCallError) {
            var failure: SystemCallError?
            do { try FileIO.writeAll(fd, data) } catch { failure = error }
            do { try FileIO.close(fd, temporary) } catch { failure = failure ?? error }
            if let failure { throw failure }
            try FileIO.syscall("rename \(temporary)") { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw WebImageError(.storeFailed, "cannot write \(path): \(String(cString: strerror(error.code)))")
        }
    }

    /// Makes the `--out` directory (and its parents) if it is missing.
    /// - Throws: `WebImageError` `.invalidArgument` with a plain message when the
    ///   path names something that is not a directory or cannot be made.
    static func makeDirectory(_ path: String) throws {
        var info = stat()
        if stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw WebImageError(.invalidArgument, "--out \(path): it exists and is not a directory")
            }
            guard access(path, W_OK | X_OK) == 0 else {
                throw WebImageError(.invalidArgument, "--out \(path): \(String(cString: strerror(errno)))")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            // Foundation's message names Cocoa error codes: say what the system said.
            if mkdir(path, 0o755) == 0 { return }
            let reason = String(cString: strerror(errno))
            throw WebImageError(.invalidArgument, "--out \(path): cannot make the directory: \(reason)")
        }
    }
}

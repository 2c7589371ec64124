import ArgumentParser
import Foundation
import Synchronization
import UnixSignals
@_spi(WebImageInternal) import WebImage
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

    @Option(help: "Output format of thumbnails, transforms and --out: jpeg, png, webp, gif, avif, heic, tiff, jxl. A result with alpha is never written as JPEG: it becomes PNG (flatten it first to get JPEG).")
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

    @Option(help: "Inputs processed at once, 1 to 1024 (default: 8, of which at most one more than the cores are local files).")
    var concurrency: Int?

    @Flag(name: .customLong("cache-only"), help: "Answer from the caches alone; an input they do not hold is reported as notCached (exit 1).")
    var cacheOnly = false

    @Flag(help: "One JSON object per input on standard output.")
    var json = false

    @Flag(help: "No progress bar.")
    var quiet = false

    func validate() throws {
        if let thumbnail {
            // A box past any image's side only re-encodes it whole, under a key of its own per number.
            guard let box = PixelSize(parsing: thumbnail), box.width <= 65_535, box.height <= 65_535 else {
                throw ValidationError("--thumbnail takes WxH or N, each side 1 to 65535, not '\(thumbnail)'")
            }
        }
        if let format, ImageFormat(name: format) == nil { throw ValidationError("--format takes jpeg, png, webp, gif, avif, heic, tiff or jxl, not '\(format)'") }
        if let quality, !(1...100).contains(quality) { throw ValidationError("--quality takes 1 to 100") }
        if let effort, !(0...9).contains(effort) { throw ValidationError("--effort takes 0 to 9") }
        if let background, RGBColor(parsing: background) == nil { throw ValidationError("--background takes a colour such as ffffff, #fff, 255,255,255 or white, not '\(background)'") }
        if let concurrency, !(1...LoadLimits.maxConcurrency).contains(concurrency) {
            throw ValidationError("--concurrency takes 1 to \(LoadLimits.maxConcurrency), not \(concurrency)")
        }
        if let transform {
            do { _ = try TransformSpec.parse(transform, watermark: TransformSpec.watermarkFile) } catch let error as WebImageError {
                throw ValidationError("--transform: \(error.message)")
            }
        }
    }

    func run() async throws {
        // Here, not in validate(): ArgumentParser validates before it reports an
        // unknown option, so `load --bogus` said "give inputs" instead of naming it.
        if inputs.isEmpty && inputFile == nil {
            Terminal.error("load: give inputs, or --input-file (see 'webimage load --help')")
            throw ExitCode(2)
        }
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
        let context = try loadContext(manager)
        var outDirectory: String?
        var madeForOut: [String] = []
        if let out {
            do { outDirectory = try OutputFile.makeDirectory(out, made: &madeForOut) } catch let error as WebImageError {
                CacheDirectory.removeMade(madeForOut)
                Terminal.error(error.message)
                throw ExitCode(2)
            }
        }
        let reporter = Reporter(json: json, total: inputFile == nil ? inputs.count : nil,
                                progress: !quiet && Terminal.standardErrorIsTerminal)
        let interrupted = Interruption()
        let watcher = await Self.stopOnSignals(source, interrupted)
        defer { watcher.cancel() }
        let load = InputLoad(manager: manager, context: context, options: cacheOnly ? [.waitStoreCache, .fromCacheOnly] : [.waitStoreCache],
                             out: outDirectory)
        await Self.loadAll(source, load, reporter, limits: limits)
        reporter.finish()
        // Inputs failed: the directories made for --out go again if nothing was
        // written into them (rmdir leaves one that holds a file).
        if reporter.failures > 0 { CacheDirectory.removeMade(madeForOut) }
        await manager.shutdown(gracePeriod: .seconds(30))
        if let number = interrupted.signal {
            Terminal.error("stopped by signal \(number) after \(reporter.done) inputs; loads in flight finished and were stored")
            throw ExitCode(128 + number)
        }
        if reporter.failures > 0 { throw ExitCode.failure }
    }

    /// The context every input loads with: thumbnail, transform, format and encode options.
    private func loadContext(_ manager: ImageManager) throws -> ImageContext {
        var context = ImageContext()
        context.thumbnailPixelSize = thumbnail.flatMap(PixelSize.init(parsing:))
        context.transformer = try transform.map { try TransformSpec.parse($0, watermark: TransformSpec.watermarkFile) }
        context.encodeFormat = format.flatMap(ImageFormat.init(name:))
        if let requested = context.encodeFormat, manager.configuration.coders.encoder(for: requested) == nil {
            let missing = manager.configuration.coders.unavailability.map { " (\($0.code): \($0.message))" } ?? ""
            Terminal.error("--format \(requested): no coder here writes it" + (requested == .jxl ? " (JPEG XL is written only with --set vips.allowUntrusted=true)" : missing))
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
        return context
    }

    /// SIGTERM or SIGINT: take no new input, let the loads in flight finish and be
    /// reported, wait for the manager's pending writes, then exit 128+signal. A
    /// second signal exits at once. Cancel the task it returns when done.
    private static func stopOnSignals(_ source: InputSource, _ interrupted: Interruption) async -> Task<Void, Never> {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        return Task {
            for await signal in signals {
                let number = signal.rawValue
                if interrupted.record(number) {
                    // Results being written are not finished: their temporary files go first.
                    PartialFiles.shared.removeAll()
                    Glibc.exit(128 + number)
                }
                source.stop()
            }
        }
    }

    /// Every input through `load`, within the limits (`LoadLimits`): local files
    /// count against both bounds, downloads against the total only.
    private static func loadAll(_ source: InputSource, _ load: InputLoad, _ reporter: Reporter, limits: LoadLimits) async {
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
                    let record = await load.run(input)
                    reporter.report(record)
                    source.consumed()
                    return isFile
                }
            }
        }
    }
}

/// The first signal a batch received, if any.
final class Interruption: Sendable {
    private let first = Lock<Int32?>(nil)

    var signal: Int32? { first.withLock { $0 } }

    /// Records `number`; true when a signal had arrived before (the second one exits at once).
    func record(_ number: Int32) -> Bool {
        first.withLock { previous in
            defer { previous = previous ?? number }
            return previous != nil
        }
    }
}

import Foundation
import WebImage
@_spi(Internals) import WebImageConfiguration
import WebImageCurl
@_spi(Internals) import WebImageKit
@_spi(Internals) import WebImageS3
import WebImageSamples
@_spi(Internals) import WebImageTurboJPEG
@_spi(Internals) import WebImageVips

/// The fuzz targets, by name. One binary serves them all; `FUZZ_TARGET` picks one.
/// Each must return normally for any input: a crash, a hang, a leak or an
/// AddressSanitizer report is a finding.
enum FuzzTargets {
    static let all: [String: @Sendable (Data) -> Void] = [
        "sniff": sniff,
        "header": header,
        "config": config,
        "cachekey": cacheKey,
        "decode": decode,
        "turbojpeg": turboJPEG,
        "negotiate": negotiate,
        "transform": transform,
        "s3": s3,
        "svg": svg,
    ]

    /// The SVG sanitiser on any bytes: a refusal, or a document with no
    /// declaration or script element left, which cleans to itself.
    static func svg(_ data: Data) {
        guard let clean = try? SVGSanitizer.clean(data) else { return }
        let text = String(decoding: clean, as: UTF8.self).lowercased()
        // A script element: `<script` and then the name's end (`<scriptect>` is another element).
        let script = text.contains(/<script[\s>\/]/) || text.hasSuffix("<script")
        precondition(!text.contains("<!doctype") && !text.contains("<!entity") && !script, "left a declaration or script: \(text.prefix(200))")
        precondition((try? SVGSanitizer.clean(clean)) == clean, "cleaning is not idempotent: \(text.prefix(200))")
    }

    /// What an S3 endpoint, or a user's URL, hands the S3 plugin: error documents
    /// and listing pages from a hostile endpoint, s3:// URLs, keys to encode. An
    /// answer is always an error (with a positive pause if any); a location
    /// survives its own URL; an encoded key is canonical and decodes back.
    static func s3(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        let statuses = [301, 307, 400, 403, 404, 410, 429, 500, 503]
        let status = statuses[Int(data.first ?? 0) % statuses.count]
        let error = S3Answer.error(status: status, body: data, headers: ["retry-after": String(text.prefix(40)), "x-amz-bucket-region": String(text.prefix(20))],
                                   what: "GET s3://b/k")
        if let pause = error.retryAfter { precondition(pause > .zero, "a pause of \(pause)") }
        // Every object in a page came from a <Key> element; a page never names more than the bytes could hold.
        let page = S3ListPage(data)
        precondition(page.objects.count <= data.count / 11, "\(page.objects.count) objects from \(data.count) bytes")
        if let url = URL(string: text), let location = try? S3Location(url: url) {
            precondition((try? S3Location(url: location.url)) == location, "\(location) did not survive its URL \(location.url)")
            // No dot-segment survives into a key, so the path sent, resolved as HTTP
            // resolves it, still names the bucket the allow-list judged.
            precondition(!location.key.split(separator: "/", omittingEmptySubsequences: false).contains { $0 == "." || $0 == ".." },
                         "\(location) holds a dot-segment")
            let request = S3Request(method: "GET", bucket: location.bucket, key: location.key,
                                    configuration: S3Configuration(endpoint: URL(string: "http://127.0.0.1:9000")!))
            // The path as sent (URL.path drops trailing slashes: a key of "//" is still under the bucket).
            let sent = URLComponents(url: request.url.standardized, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? ""
            precondition(sent.hasPrefix("/\(location.bucket)/"), "\(location) is sent as \(request.url)")
        }
        let encoded = S3Request.encodePath(text)
        precondition(encoded.utf8.allSatisfy { $0 < 0x80 && $0 != UInt8(ascii: " ") }, "an encoded key holds \(encoded)")
        precondition(encoded.removingPercentEncoding == text, "\(text.debugDescription) encoded as \(encoded) does not decode back")
        _ = S3Request.canonicalQuery([(text, text), ("list-type", "2")])
    }

    /// Format sniffing by magic bytes.
    static func sniff(_ data: Data) {
        if let format = ImageFormat.sniff(data) { _ = format.mimeType }
    }

    /// The header probe behind the pixel limit, and the GIF frame counter, for every format.
    static func header(_ data: Data) {
        data.withUnsafeBytes { bytes in
            for format in [ImageFormat.png, .gif, .jpeg, .webp, nil] { _ = HeaderProbe.size(of: bytes, format: format) }
            _ = HeaderProbe.gifFrameCount(bytes)
            precondition(HeaderProbe.jpegScanMarkers(bytes) <= bytes.count / 2, "more scan markers than byte pairs")
        }
    }

    /// The configuration value parsers: sizes, durations, CIDR ranges, transform specs,
    /// pixel sizes, and the key checker.
    static func config(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        _ = ByteCount.parse(text)
        _ = ConfigValues.parseDuration(text)
        _ = PixelSize(parsing: text)
        if let range = CurlLoader.AddressRange(text) { _ = range.description; _ = range.contains([10, 0, 0, 1]) }
        _ = try? TransformSpec.parse(text)
        if let focus = CropFocus(parsing: text) { precondition(CropFocus(parsing: focus.key) != nil, "a crop focus's key does not parse") }
        _ = ConfigKeyCheck.environmentName(for: text)
        _ = try? ConfigKeyCheck(known: ["store.kind", "loader.timeout"]).check([text], source: "fuzz")
    }

    /// Cache keys from URLs: the query filter, derived keys' scale, output file names.
    static func cacheKey(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        _ = ImageScale.scale(forKey: text)
        guard let url = URL(string: text) else { return }
        let key = CacheKeyFilter.removingQueryItems(["X-Amz-Signature", "sig"]).key(url)
        _ = ImageScale.scale(forKey: key)
        let name = OutputFileName.make(for: url, key: key, fileExtension: "png")
        precondition(!name.contains("/") && !name.hasPrefix(".") && !name.contains("\0"), "unsafe output name \(name)")
    }

    /// A decode through the vips coder with a small pixel limit and thumbnail size,
    /// and the header-only description.
    static func decode(_ data: Data) {
        var options = DecodeOptions(pixelLimit: 4_000_000)
        _ = try? coder.info(data)
        _ = try? coder.decode(data, options: options)
        options.thumbnailPixelSize = PixelSize(32)
        _ = try? coder.decode(data, options: options)
    }

    static let coder = VipsImageCoder()

    /// JPEG thumbnails through libjpeg-turbo (header, EXIF orientation, scaled
    /// decode), strict and tolerant of truncation, fit and fill; and one answer
    /// per file (docs/coder.md): the DC decoder and the copies without AC scans
    /// never take a file libjpeg refuses, and take it at libjpeg's size.
    static func turboJPEG(_ data: Data) {
        for (fill, truncated) in [(false, false), (true, true)] {
            var options = DecodeOptions(thumbnailPixelSize: PixelSize(width: 24, height: 16), pixelLimit: 4_000_000)
            options.preserveAspectRatio = !fill
            options.allowTruncated = truncated
            _ = try? turbo.decode(data, options: options)
        }
        guard let frame = data.withUnsafeBytes({ HeaderProbe.jpegFrame($0) }), frame.size.area <= 4_000_000,
              data.withUnsafeBytes({ HeaderProbe.jpegScanMarkers($0) }) <= VipsImageCoder.maxJPEGScans else { return }
        if let problem = TurboJPEGCoder.pathDisagreement(data) { preconditionFailure(problem) }
    }

    static let turbo = TurboJPEGCoder()

    /// Arbitrary transform specs over a small image, under a 16 MB budget: no
    /// crash, and nothing past the budget. `make fuzz` runs this target with
    /// `-malloc_limit_mb=64`, so one allocation past four times the budget (a
    /// step that slipped past its footprint) is a finding too. Sides are capped at
    /// 512 so that one run stays within libFuzzer's 10 s: a blur of sigma 100 over
    /// a 2048-pixel canvas takes longer than that on its own (what bounds that in
    /// a service is the load's deadline, which stops libvips between tiles).
    static func transform(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        guard let transformer = try? TransformSpec.parse(text, limits: TransformSpec.Limits(maxSteps: 8, maxSide: 512)) else { return }
        // What the steps cost is a finite number, never negative, whatever they are.
        let cost = TransformCost.estimate(transformer, input: ImageFootprint(smallImage))
        precondition(cost.isFinite && cost >= 0, "\(text) costs \(cost)")
        var budget = TransformBudget(pixelLimit: 4_000_000, memoryLimit: transformBudget)
        budget.maxCost = 50
        guard let result = try? budget.apply(transformer, to: smallImage) else { return }
        precondition(ImageFootprint(result).bytes <= transformBudget, "\(text) made \(ImageFootprint(result)), past the budget")
    }

    static let transformBudget = 16 << 20
    static let smallImage: Image = {
        let size = PixelSize(width: 64, height: 48)
        return Image(pixelSize: size, storage: SampleImages.landscape(size, seed: 1))
    }()

    /// What clients and origins send that is not an image: Accept headers,
    /// Retry-After values, placeholder hashes (BlurHash text, ThumbHash bytes) and
    /// colours, and failed-URL records from a shared store. The chosen format must always be one of the allowed set (or
    /// the PNG/JPEG fallback); a record must survive its own encoding.
    static func negotiate(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        let allowed: Set<ImageFormat> = [.avif, .webp, .jpeg, .png, .gif]
        for (alpha, animated) in [(false, false), (true, false), (false, true)] {
            let format = ImageFormat.negotiate(accept: text, hasAlpha: alpha, isAnimated: animated, allowed: allowed)
            precondition(allowed.contains(format), "negotiated \(format) outside the allowed set")
        }
        _ = AcceptedFormats(accept: text, allowed: [.jpeg]).key
        // An origin's Retry-After: no pause, or a positive one.
        if let pause = WebImageError.retryAfter(parsing: text) { precondition(pause > .zero, "Retry-After \(text) gave \(pause)") }
        _ = RGBColor(parsing: text)
        _ = try? BlurHash.decode(text, width: 8, height: 6, punch: 2)
        _ = try? BlurHash.averageColor(text)
        let bytes = [UInt8](data.prefix(64))
        _ = try? ThumbHash.decode(bytes)
        _ = try? ThumbHash.averageRGBA(bytes)
        // A failed-URL record read back from a shared store, which anyone with access may have written.
        if let record = FailureRecord(encoded: data), record.message.utf8.count <= FailureRecord.maxMessageBytes {
            precondition(FailureRecord(encoded: record.encoded()) == record, "a failure record did not survive its own encoding")
        }
    }
}

/// Before the first input: what libraries set up once for the process is set up
/// here, so that libFuzzer's leak check (which judges each input's allocations)
/// does not take it for a leak. fontconfig and Pango build their font caches on
/// the first text drawn (`text:` steps) and keep them for the process.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    _ = target
    if ProcessInfo.processInfo.environment["FUZZ_TARGET"] == "transform" {
        for size in [4, 24, 256] { _ = try? ImageTransformers.TextWatermark("warm <b>&amp;", size: size).transform(FuzzTargets.smallImage) }
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let data = start.map { Data(bytes: $0, count: count) } ?? Data()
    target(data)
    return 0
}

/// The target named by `FUZZ_TARGET`, chosen once.
let target: @Sendable (Data) -> Void = {
    let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""
    guard let body = FuzzTargets.all[name] else {
        FileHandle.standardError.write(Data("FUZZ_TARGET must be one of: \(FuzzTargets.all.keys.sorted().joined(separator: ", "))\n".utf8))
        exit(2)
    }
    return body
}()

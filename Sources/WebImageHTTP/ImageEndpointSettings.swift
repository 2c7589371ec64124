public import Configuration
public import Foundation
public import WebImage
import WebImageConfiguration

extension ImageEndpoint {
    /// Parses a `t=` spec into a transformer: `(spec, maxSteps, maxSide)`. WebImageKit
    /// supplies its `TransformSpec` grammar (`ImageEndpoint.Settings.standard`).
    public typealias TransformParser = @Sendable (_ spec: String, _ maxSteps: Int, _ maxSide: Int) throws -> any ImageTransformer
    /// Makes an image's BlurHash and ThumbHash through the manager. WebImageKit
    /// supplies libvips' (`ImageManager.placeholders(for:options:context:)`).
    public typealias PlaceholderMaker = @Sendable (_ manager: ImageManager, _ url: URL, _ context: ImageContext) async throws -> ImagePlaceholders

    /// The endpoint's settings, with their configuration keys:
    ///
    /// | key | default | meaning |
    /// | --- | --- | --- |
    /// | `thumbnail.allowedHosts` | empty: nothing | hosts the endpoint fetches from (``HostAllowList``), checked at every redirect too |
    /// | `thumbnail.maxDimension` | `2048` | the largest `w` or `h` accepted, and every size in `t=` (at most 65,535) |
    /// | `thumbnail.defaultFormat` | `auto` | the format when the request names none |
    /// | `thumbnail.formats` | `avif,webp,jpeg,png,gif` | the formats answered, by `format=` and by negotiation; add `jxl` to answer JPEG XL to clients that name it (opt-in) |
    /// | `thumbnail.signingKey` | none | a secret of 16 bytes or more: only signed URLs are answered (``URLSigner``) |
    /// | `thumbnail.cacheMaxAge` | `1d` | `Cache-Control: public, max-age=…` of images, placeholders and infos |
    /// | `thumbnail.maxSteps` | `8` | the most steps a `t=` spec may have |
    /// | `thumbnail.deadline` | `30s` | the longest one request may take; then 504 |
    /// | `thumbnail.shutdownGrace` | `20s` | on SIGTERM, how long requests in flight may finish (a server's setting) |
    /// | `thumbnail.maxInFlight` | `256` | requests answered at once; past it, 503 with `Retry-After: 1` before any work |
    /// | `thumbnail.maxInFlightPerOrigin` | half of `thumbnail.maxInFlight` (rounded down, at least 1) | of those, requests for images of one origin (scheme, host, port of `url=`) past a memory hit; past it, 503 with `Retry-After: 1` before any work (a memory hit is still answered), so an origin that never answers holds at most this many places until the deadline; above `thumbnail.maxInFlight` it acts as that |
    /// | `thumbnail.blockPrivateAddresses` | `true` (else `loader.blockPrivateAddresses` where set) | refuse origins at private, loopback and link-local addresses, checked where the loader connects (the loader's exempt ranges apply); off, the loader's own guard (`loader.blockPrivateAddresses`, on in `webimage serve` and WebImageKit's `serviceDefaults`) still refuses them |
    /// | `thumbnail.maxDownloadsPerOrigin` | `4` (else `loader.maxConcurrentPerHost` where set) | downloads of one origin at once across requests; `0` for no limit |
    /// | `loader.circuitBreaker.failures`, `.cooldown` | `5`, `30s` | when the manager has no breaker of its own, the endpoint's: an origin failing that often in a row is answered 503 for the cooldown; `0` for none |
    /// | `thumbnail.maxCost` | `400` | the most one request's work may cost, in megapixel passes (`TransformCost`); past it, 413 before any work |
    /// | `thumbnail.maxCostInFlight` | `250` per core | megapixel passes rendered at once across requests; heavier requests wait for room (`WorkBudget`) |
    /// | `thumbnail.maxHeavyInFlight` | cores − 1 (at least 1) | requests of a pass or more rendered at once, so that light ones always find a core (`WorkBudget`) |
    /// | `thumbnail.presets.NAME` | none | a query of the parameters above (`w=64&h=64&format=jpeg`) that `preset=NAME` stands for |
    /// | `thumbnail.onlyPresets` | `false` | refuse any sizing, format or transform parameter: only `preset=` |
    /// | `thumbnail.fallbackImage` | none | an image file answered, thumbnailed to the request's box, when the origin fails; read and checked at start-up (``FallbackImage``) |
    /// | `thumbnail.fallbackStatus` | `failure` | the fallback's status: the failure's own, or a number (`200`) |
    /// | `thumbnail.fallbackMaxAge` | `60s` | the fallback's `Cache-Control` max-age, short so that a CDN does not keep it |
    /// | `thumbnail.clientHints` | `false` | read `Sec-CH-DPR`, `Sec-CH-Width` and `Sec-CH-Viewport-Width` where the query leaves `dpr` or `w` out, and ask for them (`Accept-CH`) (``ThumbnailQuery``) |
    /// | `thumbnail.clientHintsWidthStep` | `100` | a hinted width is rounded up to a multiple of this, so that hints make at most `maxDimension / step` widths |
    public struct Settings: Sendable {
        public var allowedHosts = HostAllowList([])!
        public var maxDimension = 2048
        /// The largest `thumbnail.maxDimension` a configuration may set: 65,535, a JPEG's largest side.
        public static let maxDimensionLimit = 65_535
        /// nil: `auto`, negotiated per request from `Accept`.
        public var defaultFormat: ImageFormat? = nil
        /// The formats answered, by `format=` and by negotiation (those the
        /// coders write). Default ``ThumbnailQuery/defaultFormats``: AVIF, WebP,
        /// JPEG, PNG, GIF; JPEG XL is opt-in.
        public var formats: [ImageFormat] = ThumbnailQuery.defaultFormats
        public var cacheMaxAge: Duration = .seconds(86_400)
        /// Requests answered at once; the next is answered 503 at once. Each can hold
        /// a downloaded original while it waits for a decode thread, so this bounds
        /// the memory a burst can take.
        public var maxInFlight = 256
        /// Of ``maxInFlight``, the requests for images of one origin (scheme, host
        /// and port of `url=`) answered at once, past a memory hit; the next is
        /// answered 503 (`overloaded`, `Retry-After: 1`) at once. Requests waiting
        /// for an origin that accepts connections and never answers hold their
        /// places until ``deadline``, whether they wait for a download slot or
        /// share one download: this keeps the rest for other origins. `nil`, the
        /// default: half of ``maxInFlight``.
        public var maxInFlightPerOrigin: Int? = nil
        /// ``maxInFlightPerOrigin`` as it applies: half of ``maxInFlight`` when
        /// unset (at least 1), never more than ``maxInFlight``.
        public var effectiveMaxInFlightPerOrigin: Int { min(maxInFlight, maxInFlightPerOrigin ?? max(1, maxInFlight / 2)) }
        public var maxSteps = 8
        /// Refuse origins at private, loopback and link-local addresses, checked
        /// where the loader connects, after DNS and at every redirect
        /// (`ImageContext.refusesPrivateAddresses`). On by default: the URLs
        /// come from strangers. The loader's exempt ranges still apply.
        public var blockPrivateAddresses = true
        /// Downloads of one origin at once across requests (`OriginLimit`), so
        /// that an origin that never answers holds that many of the loader's slots,
        /// not all; 0 for no limit. Default 4.
        public var maxDownloadsPerOrigin = 4
        /// The endpoint's origin breaker, used when the manager has none of its
        /// own: after this many transient failures of an origin in a row, its
        /// requests are answered 503 for ``circuitBreakerCooldown``; 0 for none.
        /// Default 5.
        public var circuitBreakerFailures = OriginCircuitBreaker.defaultFailureThreshold
        public var circuitBreakerCooldown: Duration = OriginCircuitBreaker.defaultCooldown
        /// The most one request's work may cost, in megapixel passes: the
        /// thumbnail's pixels plus its `t=` steps (`TransformCost`), estimated
        /// from the box before any work (413 past it) and checked again on the
        /// decoded image, every frame counted. Default 400: about 4 s of one core
        /// (eight `blur:100` on a 2048 box cost 3,400).
        public var maxCost = 400
        /// Megapixel passes rendered at once across all requests; a request that
        /// costs a pass or more waits for room before its decode (`WorkBudget`).
        /// Default 250 per core.
        public var maxCostInFlight = 250 * max(1, ProcessInfo.processInfo.activeProcessorCount)
        /// Requests costing a pass or more rendered at once (`WorkBudget.maxHeavy`).
        /// Default one fewer than the cores, at least one: the decode pool has a
        /// thread per core, and heavy renders on all of them would keep a plain
        /// thumbnail waiting for seconds.
        public var maxHeavyInFlight = WorkBudget.defaultMaxHeavy
        public var deadline: Duration = .seconds(30)
        public var shutdownGrace: Duration = .seconds(20)
        /// With a signer, only signed URLs are answered.
        public var signer: URLSigner?
        /// Named parameter sets, by name (`thumbnail.presets.NAME`).
        public var presets: [String: QueryParameters] = [:]
        /// Only `preset=` requests are answered; any sizing, format or transform parameter is refused.
        public var onlyPresets = false
        /// An image answered in place of an origin's failure (404, 5xx, a
        /// timeout, bytes that do not decode), thumbnailed like the request asked
        /// from the bytes read when it was made.
        public var fallbackImage: FallbackImage?
        /// The fallback's status; nil answers the failure's own.
        public var fallbackStatus: Int?
        public var fallbackMaxAge: Duration = .seconds(60)
        /// Client hints stand in for a request's missing `dpr` and `w` (``ThumbnailQuery/ClientHints``); off by default.
        public var clientHints = false
        /// A hinted width is rounded up to a multiple of this. Default 100.
        public var clientHintsWidthStep = 100
        /// `t=`'s grammar; nil refuses `t=`.
        public var transformParser: TransformParser?
        /// How `placeholder` and `info?…&placeholder=1` make placeholders; nil
        /// answers them 404.
        public var placeholderMaker: PlaceholderMaker?
        /// The URL schemes `url=` may name; `s3` is added by itself when
        /// ``allowedHosts`` names a bucket (``sourceSchemes``).
        public var schemes: Set<String> = ["http", "https"]

        /// The schemes `url=` may name: ``schemes``, and `s3` when the allow-list names a bucket.
        public var sourceSchemes: Set<String> { allowedHosts.namesBuckets ? schemes.union(["s3"]) : schemes }

        public init() {}

        /// The keys the settings read (``init(config:presetNames:)``).
        public static let keys: Set<String> = [
            "thumbnail.allowedHosts", "thumbnail.maxDimension", "thumbnail.defaultFormat", "thumbnail.formats", "thumbnail.cacheMaxAge",
            "thumbnail.signingKey", "thumbnail.maxInFlight", "thumbnail.maxInFlightPerOrigin", "thumbnail.maxSteps", "thumbnail.maxCost", "thumbnail.maxCostInFlight",
            "thumbnail.maxHeavyInFlight",
            "thumbnail.blockPrivateAddresses", "thumbnail.maxDownloadsPerOrigin", "thumbnail.deadline", "thumbnail.shutdownGrace",
            "thumbnail.onlyPresets", "thumbnail.fallbackImage", "thumbnail.fallbackStatus", "thumbnail.fallbackMaxAge",
            "thumbnail.clientHints", "thumbnail.clientHintsWidthStep",
        ]
        /// Key families: `thumbnail.presets.NAME` for any NAME.
        public static let keyFamilies: Set<String> = ["thumbnail.presets"]

        /// Reads the settings from `config`.
        /// - Parameters:
        ///   - config: the layered configuration (swift-configuration).
        ///   - presetNames: the names under `thumbnail.presets` (a reader cannot
        ///     list its keys; `ConfigLayers.names(in:flags:file:environment:)` finds them).
        /// - Throws: `WebImageError(.invalidArgument)` naming the key of a bad value,
        ///   including a preset whose query does not parse.
        public init(config: ConfigReader, presetNames: [String] = []) throws {
            let values = ConfigValues(config)
            if let patterns = values.list("thumbnail.allowedHosts") {
                guard let list = HostAllowList(patterns) else {
                    throw values.invalid("thumbnail.allowedHosts", patterns.joined(separator: ","), "a list of host, host:port, *.domain, *, s3://bucket or s3://*")
                }
                allowedHosts = list
            }
            if let size = try values.int("thumbnail.maxDimension", minimum: 1) {
                // JPEG's and PNG's own limit of a side; past it no box could be encoded anyway.
                guard size <= Self.maxDimensionLimit else {
                    throw values.invalid("thumbnail.maxDimension", String(size), "a side from 1 to \(Self.maxDimensionLimit) pixels")
                }
                maxDimension = size
            }
            if let names = values.list("thumbnail.formats") {
                var chosen: [ImageFormat] = []
                for name in names {
                    guard let format = ThumbnailQuery.format(named: name) ?? nil else {
                        throw values.invalid("thumbnail.formats", names.joined(separator: ","), "a list of \(ThumbnailQuery.formats.map(\.rawValue).joined(separator: ", "))")
                    }
                    if !chosen.contains(format) { chosen.append(format) }
                }
                guard !chosen.isEmpty else { throw values.invalid("thumbnail.formats", "", "at least one format") }
                formats = chosen
            }
            if let name = values.text("thumbnail.defaultFormat") {
                guard let format = ThumbnailQuery.format(named: name), format.map(formats.contains) ?? true else {
                    throw values.invalid("thumbnail.defaultFormat", name, "auto or one of thumbnail.formats (\(formats.map(\.rawValue).joined(separator: ", ")))")
                }
                defaultFormat = format
            }
            if let age = try values.duration("thumbnail.cacheMaxAge") { cacheMaxAge = age }
            if let limit = try values.int("thumbnail.maxInFlight", minimum: 1) { maxInFlight = limit }
            if let limit = try values.int("thumbnail.maxInFlightPerOrigin", minimum: 1) { maxInFlightPerOrigin = limit }
            if let steps = try values.int("thumbnail.maxSteps", minimum: 1) { maxSteps = steps }
            if let cost = try values.int("thumbnail.maxCost", minimum: 1) { maxCost = cost }
            // One switch for the guard: the endpoint's key, else the loader's.
            if let block = try values.bool("thumbnail.blockPrivateAddresses") ?? values.bool("loader.blockPrivateAddresses") {
                blockPrivateAddresses = block
            }
            if let limit = try values.int("thumbnail.maxDownloadsPerOrigin", minimum: 0) ?? values.int("loader.maxConcurrentPerHost", minimum: 0) {
                maxDownloadsPerOrigin = limit
            }
            if let failures = try values.int("loader.circuitBreaker.failures", minimum: 0) { circuitBreakerFailures = failures }
            if let cooldown = try values.duration("loader.circuitBreaker.cooldown"), cooldown > .zero { circuitBreakerCooldown = cooldown }
            if let cost = try values.int("thumbnail.maxCostInFlight", minimum: 1) { maxCostInFlight = cost }
            if let heavy = try values.int("thumbnail.maxHeavyInFlight", minimum: 1) { maxHeavyInFlight = heavy }
            if let deadline = try values.duration("thumbnail.deadline") {
                guard deadline > .zero else { throw values.invalid("thumbnail.deadline", values.text("thumbnail.deadline") ?? "\(deadline)", "a duration longer than zero") }
                self.deadline = deadline
            }
            if let grace = try values.duration("thumbnail.shutdownGrace") { shutdownGrace = max(.zero, grace) }
            if let key = values.text("thumbnail.signingKey") {
                guard let signer = URLSigner(key: key) else {
                    // The value is a secret: the message gives its length, never the key.
                    throw WebImageError(.invalidArgument, "thumbnail.signingKey: \(key.utf8.count) bytes is too short to sign with; use at least \(URLSigner.minimumKeyLength) (32 random bytes in hex, say)")
                }
                self.signer = signer
            }
            if let only = try values.bool("thumbnail.onlyPresets") { onlyPresets = only }
            if let path = values.text("thumbnail.fallbackImage") {
                do { fallbackImage = try FallbackImage(contentsOf: URL(fileURLWithPath: path)) } catch let error as WebImageError {
                    throw WebImageError(.invalidArgument, "thumbnail.fallbackImage: \(error.message)")
                }
            }
            if let status = values.text("thumbnail.fallbackStatus"), status != "failure" {
                guard let code = Int(status), (200...599).contains(code) else {
                    throw values.invalid("thumbnail.fallbackStatus", status, "failure, or an HTTP status from 200 to 599")
                }
                fallbackStatus = code
            }
            if let age = try values.duration("thumbnail.fallbackMaxAge") { fallbackMaxAge = age }
            if let hints = try values.bool("thumbnail.clientHints") { clientHints = hints }
            if let step = try values.int("thumbnail.clientHintsWidthStep", minimum: 1) { clientHintsWidthStep = step }
            for name in presetNames {
                let key = "thumbnail.presets.\(name)"
                guard let text = values.text(key) else { continue }
                presets[name] = QueryParameters(text.hasPrefix("?") ? text.dropFirst() : Substring(text))
            }
            if onlyPresets, presets.isEmpty {
                throw WebImageError(.invalidArgument, "thumbnail.onlyPresets is true but no thumbnail.presets.NAME is set: every request would be refused")
            }
        }

        /// Checks every preset as a request would be parsed (with a placeholder
        /// URL): a preset that could never be answered stops start-up, not a request.
        /// Call it once the transform parser is set.
        public func validatePresets() throws {
            let placeholder = URL(string: "https://preset.invalid/")!
            for (name, parameters) in presets.sorted(by: { $0.key < $1.key }) {
                if let extra = parameters.names.first(where: ThumbnailQuery.presetOnlyParameters.contains) {
                    throw WebImageError(.invalidArgument, "thumbnail.presets.\(name): \(extra)= cannot be part of a preset")
                }
                let query: ThumbnailQuery
                do {
                    query = try ThumbnailQuery(sizing: parameters, url: placeholder, settings: self)
                } catch let error as WebImageError {
                    throw WebImageError(.invalidArgument, "thumbnail.presets.\(name): \(error.message)")
                }
                // Over thumbnail.maxCost, every request for it would be 413.
                let cost = query.estimatedCost
                guard cost <= Double(maxCost) else {
                    throw WebImageError(.invalidArgument, "thumbnail.presets.\(name): it costs \(Int(cost.rounded(.up))) megapixel passes at w=\(query.box.width) h=\(query.box.height), more than thumbnail.maxCost (\(maxCost)): every request for it would be refused")
                }
            }
        }
    }
}

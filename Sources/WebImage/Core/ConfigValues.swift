public import Configuration
import Foundation

/// Reads configuration values as text and parses them with errors that name the
/// key in full, whatever provider they came from (a JSON number, an environment string).
///
/// A plugin's factory is given one scoped to its own keys: the LMDB store's reads
/// `mapSize`, which configuration holds as `store.lmdb.mapSize`, and an error
/// names `store.lmdb.mapSize`.
/// ```swift
/// let values = ConfigValues(["store.lmdb.mapSize": "1GiB"]).scoped(to: "store.lmdb")
/// let mapSize = try values.bytes("mapSize") // 1073741824
/// ```
public struct ConfigValues: Sendable {
    public let config: ConfigReader
    /// The scope's full name (`store.lmdb`), empty for the whole configuration.
    public let scope: String

    public init(_ config: ConfigReader) {
        self.config = config
        self.scope = ""
    }

    /// Values given in code, by their full keys (`store.lmdb.mapSize`).
    public init(_ values: [String: String]) {
        var entries: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, value) in values { entries[AbsoluteConfigKey(ConfigKey(key))] = ConfigValue(.string(value), isSecret: false) }
        self.init(ConfigReader(provider: InMemoryProvider(values: entries)))
    }

    private init(_ config: ConfigReader, scope: String) {
        self.config = config
        self.scope = scope
    }

    /// The values under `scope` (`store.lmdb`): keys are read relative to it and
    /// named in full in errors.
    public func scoped(to scope: String) -> ConfigValues {
        ConfigValues(config.scoped(to: ConfigKey(scope)), scope: name(scope))
    }

    /// A key's full name: `mapSize` in scope `store.lmdb` is `store.lmdb.mapSize`.
    public func name(_ key: String) -> String { scope.isEmpty ? key : "\(scope).\(key)" }

    /// The value as text, or nil when no provider has it.
    public func text(_ key: String) -> String? {
        let configKey = ConfigKey(key)
        if let value = config.string(forKey: configKey) { return value }
        if let value = config.int(forKey: configKey) { return String(value) }
        if let value = config.double(forKey: configKey) { return String(value) }
        if let value = config.bool(forKey: configKey) { return String(value) }
        // A list where one value is read: its text, which no scalar setting parses,
        // so that `"kind": ["lmdb"]` is refused by name rather than read as unset.
        if let list = config.stringArray(forKey: configKey) ?? config.intArray(forKey: configKey)?.map(String.init) {
            return "[\(list.joined(separator: ", "))]"
        }
        return nil
    }

    public func invalid(_ key: String, _ value: String, _ expected: String) -> WebImageError {
        WebImageError(.invalidArgument, "\(name(key)): '\(WebImageError.hidingCredentials(value))' is not \(expected)")
    }

    public func int(_ key: String, minimum: Int = .min) throws -> Int? {
        guard let text = text(key) else { return nil }
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), value >= minimum else {
            throw invalid(key, text, minimum == 1 ? "a positive whole number" : minimum == 0 ? "a whole number of 0 or more" : "a whole number")
        }
        return value
    }

    public func bool(_ key: String) throws -> Bool? {
        guard let text = text(key) else { return nil }
        guard let flag = Bool(setting: text) else { throw invalid(key, text, Bool.settingWords) }
        return flag
    }

    /// Bytes: `1048576`, `512KB`, `64MiB`, `1GB`, `2GiB` (KB/MB/GB are powers of 1024 too).
    public func bytes(_ key: String) throws -> Int? {
        guard let text = text(key) else { return nil }
        guard let value = ByteCount.parse(text) else { throw invalid(key, text, "a size in bytes from 0 to 1024TiB, such as 1048576, 512MB or 1GiB") }
        return value
    }

    /// Durations: `30s`, `10m`, `2h`, `7d`, `500ms`, or plain seconds.
    /// `loader.timeout`: the one place it is read (the manager and every loader factory ask here).
    /// Zero is refused: curl reads a zero timeout as none at all, so a silent
    /// origin would hold a transfer for ever.
    public func loaderTimeout() throws -> Duration? {
        guard let timeout = try duration("loader.timeout") else { return nil }
        guard timeout > .zero else {
            throw invalid("loader.timeout", text("loader.timeout") ?? "", "a duration longer than zero (a long one, such as 7d, where there should be hardly any limit)")
        }
        return timeout
    }

    /// `loader.maxResponseSize`: the one place it is read.
    /// 0 is refused: every response, files too, would be too large.
    public func loaderMaxResponseSize() throws -> Int64? {
        guard let size = try bytes("loader.maxResponseSize") else { return nil }
        guard size > 0 else { throw WebImageError(.invalidArgument, "\(name("loader.maxResponseSize")): 0 would refuse every response as too large; give more than 0") }
        return Int64(size)
    }

    public func duration(_ key: String) throws -> Duration? {
        guard let text = text(key) else { return nil }
        guard let value = Self.parseDuration(text) else { throw invalid(key, text, "a duration such as 30s, 10m, 2h or 7d") }
        return value
    }

    /// A list: an array, or text separated by commas.
    public func list(_ key: String) -> [String]? {
        if let array = config.stringArray(forKey: ConfigKey(key)) { return array }
        return text(key).map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
    }

    /// Encode options from `<prefix>.quality` (1...100), `.effort` (0...9),
    /// `.progressive`, `.lossless`, `.keepMetadata`, `.keepColorProfile`,
    /// `.background` (`ffffff`, `#fff`, `255,255,255`, `white`) and
    /// `.chromaSubsampling` (`auto`, `on`, `off`), over `base`.
    public func encodeOptions(prefix: String, base: EncodeOptions) throws -> EncodeOptions {
        var options = base
        if let quality = try int("\(prefix).quality") {
            guard (1...100).contains(quality) else { throw invalid("\(prefix).quality", String(quality), "a quality from 1 to 100") }
            options.quality = quality
        }
        if let effort = try int("\(prefix).effort") {
            guard (0...9).contains(effort) else { throw invalid("\(prefix).effort", String(effort), "an effort from 0 to 9") }
            options.effort = effort
        }
        if let value = try bool("\(prefix).progressive") { options.progressive = value }
        if let value = try bool("\(prefix).lossless") { options.lossless = value }
        if let value = try bool("\(prefix).keepMetadata") { options.keepMetadata = value }
        if let value = try bool("\(prefix).keepColorProfile") { options.keepColorProfile = value }
        if let text = text("\(prefix).background") {
            guard let colour = RGBColor(parsing: text) else { throw invalid("\(prefix).background", text, "a colour such as ffffff, #fff, 255,255,255 or white") }
            options.background = colour
        }
        if let text = text("\(prefix).chromaSubsampling") {
            guard let mode = EncodeOptions.ChromaSubsampling(rawValue: text.lowercased()) else {
                throw invalid("\(prefix).chromaSubsampling", text, "auto, on or off")
            }
            options.chromaSubsampling = mode
        }
        return options
    }

    /// Parses `30s`, `10m`, `2h`, `7d`, `500ms`, or plain seconds; nil for anything else.
    public static func parseDuration(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        // Int64(exactly:) after rounding: "inf", "nan" and "1e300d" are not durations (a plain Int64() trapped).
        // Whole milliseconds, rounded down, except that a positive value is never
        // zero: 0.0001s is 1ms, not the 0 that turns some settings off.
        func milliseconds(_ value: Double) -> Duration? {
            guard let whole = Int64(exactly: (value * 1000).rounded(.down)) else { return nil }
            return .milliseconds(whole == 0 && value > 0 ? 1 : whole)
        }
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            guard let number = plainDecimal(trimmed.dropLast(suffix.count)), let value = milliseconds(number * factor) else { continue }
            return value
        }
        guard let seconds = plainDecimal(Substring(trimmed)) else { return nil }
        return milliseconds(seconds)
    }

    /// `30` or `0.5`: digits, then at most one `.` and more digits. Not what
    /// `Double(_:)` also reads (`1e3`, `0x1p4`, `+5`, `.5`, `inf`), which a size
    /// refuses too: a setting is written one way.
    private static func plainDecimal(_ text: Substring) -> Double? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        }
        return Double(text)
    }
}

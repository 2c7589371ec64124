public import Configuration
public import Foundation
import Logging
public import WebImage
@_spi(Internals) public import WebImageConfiguration

/// The configuration layers of the `webimage` tool and of services built like it,
/// highest precedence first: command-line flags, `WEBIMAGE_*` environment
/// variables, a JSON file, then a service's own defaults, then the built-in ones.
public enum ConfigLayers {
    /// - Parameters:
    ///   - flags: values set on the command line, by configuration key (`store.kind`).
    ///   - file: a JSON configuration file, if any.
    ///   - environment: the environment (the process's by default).
    ///   - defaults: values below every layer, by key: a service's own defaults
    ///     (the thumbnail server example turns `loader.blockPrivateAddresses` on here).
    ///   - knownKeys: every key something reads. A flag or `WEBIMAGE_*` variable
    ///     that names no known key, or a file's key under a known namespace
    ///     (`store.…`, `loader.…`) that names none, is refused: a typo never passes
    ///     silently. A service adds its own keys to the standard catalog's.
    ///   - environmentKeys: keys that `WEBIMAGE_*` variables may also name, which
    ///     this program does not read but another of the same family does (the
    ///     `webimage` tool's other commands accept `serve`'s, which a container
    ///     configured for `serve` sets for every command run in it).
    /// - Throws: ``WebImageError/Code/invalidArgument`` naming the key (and the
    ///   nearest known one), or a file that cannot be read.
    public static func reader(flags: [String: String], file: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                              defaults: [String: String] = [:],
                              knownKeys: Set<String> = PluginCatalog.standard.knownKeys,
                              keyFamilies: Set<String> = [],
                              environmentKeys: Set<String> = [], environmentKeyFamilies: Set<String> = []) async throws -> ConfigReader {
        let check = ConfigKeyCheck(known: knownKeys, families: keyFamilies)
        try check.check(flags.keys.sorted(), source: "set on the command line")
        try ConfigKeyCheck(known: knownKeys.union(environmentKeys), families: keyFamilies.union(environmentKeyFamilies)).checkEnvironment(environment)
        let fileLayer = try file.map(Self.fileLayer)
        if let file, let fileLayer {
            try check.check(fileLayer.keys, source: file, onlyNamespaces: true)
            // `{}` where a setting's value goes: refused, not read as absent.
            if let empty = fileLayer.emptyObjects.first(where: knownKeys.contains) {
                throw WebImageError(.invalidArgument, "\(empty): '{}' (in \(file)) is not a value: write the value, or leave the key out")
            }
        }
        var providers: [any ConfigProvider] = [inMemory("flags", flags)]
        providers.append(EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: "webimage"))
        if let file, let fileLayer {
            var values: [AbsoluteConfigKey: ConfigValue] = [:]
            for (key, value) in fileLayer.values { values[AbsoluteConfigKey(ConfigKey(key))] = ConfigValue(value, isSecret: false) }
            providers.append(InMemoryProvider(name: "file \(file)", values: values))
        }
        if !defaults.isEmpty { providers.append(inMemory("defaults", defaults)) }
        return ConfigReader(providers: providers)
    }

    /// The names set under a key family (``ConfigKeyCheck/families``) in any layer:
    /// `thumbnail.presets.avatar` in `flags` or the file, or
    /// `WEBIMAGE_THUMBNAIL_PRESETS_AVATAR` in the environment (whose name is read
    /// in lower case, `avatar`). Read each name's value through the reader, so
    /// that the layers' precedence holds.
    public static func names(in family: String, flags: [String: String], file: String?,
                             environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [String] {
        let head = family + "."
        var names = Set<String>()
        let keys = flags.keys.map { $0 } + (try file.map(fileKeys) ?? [])
        for key in keys where key.hasPrefix(head) && key.count > head.count && !key.dropFirst(head.count).contains(".") {
            names.insert(String(key.dropFirst(head.count)))
        }
        let environmentHead = ConfigKeyCheck.environmentName(for: "webimage.\(family)") + "_"
        for name in environment.keys where name.hasPrefix(environmentHead) && name.count > environmentHead.count {
            names.insert(name.dropFirst(environmentHead.count).lowercased())
        }
        return names.sorted()
    }

    /// The dotted keys of a JSON configuration file (`{"store": {"kind": …}}` has `store.kind`).
    static func fileKeys(_ file: String) throws -> [String] { try fileLayer(file).keys }

    /// A JSON configuration file's keys (sorted, those set to `null` too), the
    /// paths of its empty objects, and its values by dotted key (`{"store": {"kind": …}}`
    /// has `store.kind`), each as the text a flag or variable would give: a
    /// string as it is, a number as written in digits (`64`, `0.5`; `64.0` and
    /// `1e2` as `64.0` and `100.0`, which no whole-number setting reads), a
    /// boolean as `true` or `false`, an array as a list of those. A `null` is
    /// no value (the layers below answer).
    ///
    /// Read here rather than by swift-configuration's `JSONSnapshot`, which turns
    /// booleans and numbers into each other: `"maxInFlight": true` was read as 1,
    /// and `"memoryHitsOnEventLoop": 2` as on. As text, each is judged by the
    /// setting that reads it, as on the command line.
    /// - Throws: ``WebImageError/Code/invalidArgument`` for a file that cannot be
    ///   read, that is not JSON (with the line and column Foundation names), whose
    ///   top is not an object, or with an array holding arrays, objects or nulls.
    /// `line L, column C` of a byte offset in `data`, both counted from 1.
    static func lineAndColumn(_ data: Data, _ offset: Int) -> String {
        let before = data.prefix(offset)
        let line = before.filter { $0 == 0x0A }.count + 1
        let column = before.count - (before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
        return "line \(line), column \(column)"
    }

    /// The first comma before a closing `}` or `]`, or name given twice in one
    /// object, in JSON that Foundation parsed: what is wrong and its byte offset.
    static func strictProblem(in data: Data) -> (String, Int)? {
        let bytes = [UInt8](data)
        // Per open object its names so far; nil for an array.
        var open: [Set<String>?] = []
        var previous: UInt8 = 0  // the last byte outside strings and white space
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                let start = index
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\") { index += 1 }
                    index += 1
                }
                if case var names?? = open.last, previous == UInt8(ascii: "{") || previous == UInt8(ascii: ",") {
                    // Compared decoded: "k\u0069nd" is "kind".
                    let quoted = Data(bytes[start..<min(index + 1, bytes.count)])
                    let name = (try? JSONSerialization.jsonObject(with: quoted, options: .fragmentsAllowed)) as? String
                        ?? String(decoding: bytes[(start + 1)..<min(index, bytes.count)], as: UTF8.self)
                    guard names.insert(name).inserted else { return ("\"\(name)\" is given twice in one object", start) }
                    open[open.count - 1] = names
                }
                previous = byte
            case UInt8(ascii: "{"): open.append([]); previous = byte
            case UInt8(ascii: "["): open.append(nil); previous = byte
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if previous == UInt8(ascii: ",") { return ("a comma before \(Character(Unicode.Scalar(byte)))", index) }
                if !open.isEmpty { open.removeLast() }
                previous = byte
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): break
            default: previous = byte
            }
            index += 1
        }
        return nil
    }

    static func fileLayer(_ file: String) throws -> (keys: [String], values: [String: ConfigContent], emptyObjects: [String]) {
        guard FileManager.default.fileExists(atPath: file) else {
            throw WebImageError(.invalidArgument, "--config: no file at \(file)")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw WebImageError(.invalidArgument, "--config: cannot read \(file)")
        }
        let root: Any
        do { root = try JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed) } catch {
            // Foundation's own words say where ("Invalid value around character 8."); its
            // localizedDescription says only that the data is not in the correct format.
            var message = "--config \(file) is not valid JSON"
            if let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String {
                message += ": \(detail)"
                if let range = detail.range(of: #"character \d+"#, options: .regularExpression),
                   let offset = Int(detail[range].dropFirst("character ".count)), offset <= data.count {
                    message += " (\(Self.lineAndColumn(data, offset)))"
                }
            }
            throw WebImageError(.invalidArgument, message)
        }
        // What Foundation's parser takes and RFC 8259 does not, or takes silently:
        // a comma before } or ], and a name given twice in one object (the last won).
        if let (problem, offset) = Self.strictProblem(in: data) {
            throw WebImageError(.invalidArgument, "--config \(file) is not valid JSON: \(problem) (\(Self.lineAndColumn(data, offset)))")
        }
        guard let object = root as? [String: Any] else {
            let kind = root is NSNull ? "null" : root is [Any] ? "an array" : root is String ? "a string" : "a number or boolean"
            throw WebImageError(.invalidArgument, "--config \(file) must hold a JSON object ({ … }) at its top, not \(kind)")
        }
        var keys: [String] = []
        var seen = Set<String>()
        var values: [String: ConfigContent] = [:]
        var emptyObjects: [String] = []
        func walk(_ value: Any, _ path: String) throws {
            if !(value is [String: Any]) {
                // `{"store.kind": …}` and `{"store": {"kind": …}}` name one key: given
                // both ways, which one won would depend on dictionary order.
                guard seen.insert(path).inserted else {
                    throw WebImageError(.invalidArgument, "--config \(file): \(path) is set twice, as a dotted name and nested (or by two dotted names): keep one")
                }
                keys.append(path)
            }
            if let object = value as? [String: Any] {
                if object.isEmpty { emptyObjects.append(path) }
                for (name, child) in object { try walk(child, "\(path).\(name)") }
            } else if let array = value as? [Any] {
                values[path] = .stringArray(try array.enumerated().map { index, element in
                    guard let text = scalarText(element) else {
                        throw WebImageError(.invalidArgument, "--config \(file): \(path)[\(index)] is \(element is NSNull ? "null" : "an array or object"); a list holds strings, numbers or booleans")
                    }
                    return text
                })
            } else if let text = scalarText(value) {
                values[path] = .string(text)
            }
            // NSNull: no value.
        }
        for (name, child) in object { try walk(child, name) }
        return (keys.sorted(), values, emptyObjects)
    }

    /// A JSON scalar as text, or nil for null, an array or an object. Foundation
    /// gives a JSON boolean as an `NSNumber` whose type is `c` (a `Bool` cast
    /// would also take the numbers 0 and 1).
    private static func scalarText(_ value: Any) -> String? {
        if let string = value as? String { return string }
        guard let number = value as? NSNumber else { return nil }
        if String(cString: number.objCType) == "c" { return number.boolValue ? "true" : "false" }
        return number.stringValue
    }

    /// Text values by key (`store.kind`) as a provider.
    private static func inMemory(_ name: String, _ pairs: [String: String]) -> InMemoryProvider {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, value) in pairs { values[AbsoluteConfigKey(ConfigKey(key))] = ConfigValue(.string(value), isSecret: false) }
        return InMemoryProvider(name: name, values: values)
    }

    /// A manager with every plugin of the package, configured by `config`; the store
    /// defaults to LMDB in ``WebImageKit/defaultCacheDirectory``.
    public static func manager(config: ConfigReader) throws -> ImageManager {
        var configuration = try ImageManager.Configuration(config: config, catalog: .standard, defaultStorePath: WebImageKit.defaultCacheDirectory)
        configuration.logger.logLevel = .warning
        return ImageManager(configuration: configuration)
    }
}

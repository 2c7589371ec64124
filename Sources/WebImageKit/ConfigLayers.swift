public import Configuration
public import Foundation
import Logging
import SystemPackage
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
        if let file { try check.check(try fileKeys(file), source: file, onlyNamespaces: true) }
        var providers: [any ConfigProvider] = [inMemory("flags", flags)]
        providers.append(EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: "webimage"))
        if let file {
            guard FileManager.default.fileExists(atPath: file) else {
                throw WebImageError(.invalidArgument, "--config: no file at \(file)")
            }
            do {
                providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(file)))
            } catch {
                throw WebImageError(.invalidArgument, "--config \(file): \(error)")
            }
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
    static func fileKeys(_ file: String) throws -> [String] {
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
                    let before = data.prefix(offset)
                    let line = before.filter { $0 == 0x0A }.count + 1
                    let column = before.count - (before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
                    message += " (line \(line), column \(column))"
                }
            }
            throw WebImageError(.invalidArgument, message)
        }
        guard root is [String: Any] else {
            let kind = root is NSNull ? "null" : root is [Any] ? "an array" : root is String ? "a string" : "a number or boolean"
            throw WebImageError(.invalidArgument, "--config \(file) must hold a JSON object ({ … }) at its top, not \(kind)")
        }
        var keys: [String] = []
        func walk(_ value: Any, _ path: String?) {
            if let object = value as? [String: Any] {
                for (name, child) in object { walk(child, path.map { "\($0).\(name)" } ?? name) }
            } else if let path {
                keys.append(path)
            }
        }
        walk(root, nil)
        return keys.sorted()
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

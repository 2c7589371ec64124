public import Configuration
public import Foundation
import Logging
import SystemPackage
public import WebImage
import WebImageConfiguration

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
    public static func reader(flags: [String: String], file: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                              defaults: [String: String] = [:]) async throws -> ConfigReader {
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

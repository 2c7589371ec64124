public import Configuration
public import Foundation
public import Logging
import WebImage
@_spi(Internals) import WebImageConfiguration
public import WebImageHTTP

extension ImageEndpoint {
    /// A service's endpoint in one call, configured as `webimage serve` is: the
    /// layers of ``ConfigLayers`` (flags, then `WEBIMAGE_*` variables, then the
    /// JSON file, then ``ImageEndpoint/Settings/serviceDefaults``), a manager with
    /// every standard plugin (LMDB in ``WebImageKit/defaultCacheDirectory`` unless
    /// `store.kind` says otherwise), the endpoint's settings, and the presets
    /// named under `thumbnail.presets` in any layer. The fallback image, if set,
    /// is read and decoded now.
    ///
    /// ```swift
    /// let endpoint = try await ImageEndpoint.configured(file: "images.json")
    /// ```
    ///
    /// - Parameters:
    ///   - file: a JSON configuration file, if any.
    ///   - flags: values by key (`thumbnail.allowedHosts`), above every other layer.
    ///   - environment: where `WEBIMAGE_*` variables are read (the process's by default).
    ///   - defaults: values below every layer.
    ///   - extraKeys: keys your own service reads from the same layers, so that
    ///     the key check (a typo is refused, never ignored) lets them pass.
    ///   - logger: the endpoint's logger.
    /// - Throws: `WebImageError` ``WebImageError/Code/invalidArgument`` naming the key of a bad value.
    public static func configured(file: String? = nil, flags: [String: String] = [:],
                                  environment: [String: String] = ProcessInfo.processInfo.environment,
                                  defaults: [String: String] = Settings.serviceDefaults,
                                  extraKeys: Set<String> = [],
                                  logger: Logger = Logger(label: "webimage.http")) async throws -> ImageEndpoint {
        let layers = try await ConfigLayers.service(file: file, flags: flags, environment: environment,
                                                    defaults: defaults, extraKeys: extraKeys)
        return try configured(config: layers.config, presetNames: layers.presetNames, logger: logger)
    }

    /// The endpoint from a `ConfigReader` you built: the manager, the settings
    /// and the presets of `presetNames` (a reader cannot list the names under
    /// `thumbnail.presets`; ``ConfigLayers/service(file:flags:environment:defaults:extraKeys:)`` finds them in its layers).
    /// The fallback image, if set, is read and decoded now.
    /// - Throws: `WebImageError` ``WebImageError/Code/invalidArgument`` naming the key of a bad value.
    public static func configured(config: ConfigReader, presetNames: [String] = [],
                                  logger: Logger = Logger(label: "webimage.http")) throws -> ImageEndpoint {
        let settings = try Settings.standard(config: config, presetNames: presetNames)
        let manager = try ConfigLayers.manager(config: config)
        do { try settings.fallbackImage?.check(with: manager.configuration.coders) } catch let error as WebImageError {
            throw WebImageError(.invalidArgument, "thumbnail.fallbackImage: \(error.message)")
        }
        if settings.allowedHosts.patterns.isEmpty {
            logger.warning("thumbnail.allowedHosts is empty: every image request will be refused with 403")
        }
        // JPEG XL is opt-in twice: named in thumbnail.formats, and written only by a
        // coder allowed libvips' untrusted saver. One without the other is a mistake.
        if settings.formats.contains(.jxl), manager.configuration.coders.encoder(for: .jxl) == nil {
            throw WebImageError(.invalidArgument, "thumbnail.formats names jxl, which no coder here writes: JPEG XL is written only with vips.allowUntrusted = true")
        }
        return ImageEndpoint(manager: manager, settings: settings, logger: logger)
    }
}

extension ConfigLayers {
    /// The layers of a service (``reader(flags:file:environment:defaults:knownKeys:keyFamilies:)``
    /// with every key the standard plugins and the endpoint read, plus `extraKeys`),
    /// and the names set under `thumbnail.presets` in them.
    public static func service(file: String?, flags: [String: String] = [:],
                               environment: [String: String] = ProcessInfo.processInfo.environment,
                               defaults: [String: String] = ImageEndpoint.Settings.serviceDefaults,
                               extraKeys: Set<String> = []) async throws -> (config: ConfigReader, presetNames: [String]) {
        let config = try await reader(
            flags: flags, file: file, environment: environment, defaults: defaults,
            knownKeys: PluginCatalog.standard.knownKeys.union(ImageEndpoint.Settings.standardKeys).union(extraKeys),
            keyFamilies: ImageEndpoint.Settings.keyFamilies)
        let presets = try names(in: "thumbnail.presets", flags: flags, file: file, environment: environment)
        return (config, presets)
    }
}

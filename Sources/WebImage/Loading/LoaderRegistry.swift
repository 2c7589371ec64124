public import Foundation

/// The loaders a manager may use, found by URL scheme, newest-registered first.
///
/// ```swift
/// let loaders = LoaderRegistry.standard           // "file" for file:// and paths
/// loaders.register(CurlLoader(), name: "curl", schemes: ["http", "https"])
/// ```
public final class LoaderRegistry: Sendable {
    private struct Named: Sendable {
        let name: String
        let loader: any Loader
    }

    /// Entries are registered under their schemes; the name travels in the value.
    private let registry = Registry<Named>()

    public init() {}

    /// A registry holding the built-in ``FileLoader`` under the name `file`.
    public static var standard: LoaderRegistry {
        let registry = LoaderRegistry()
        registry.register(FileLoader(), name: "file", schemes: ["file"])
        return registry
    }

    /// Registers a loader for URL schemes, under a name configuration can select.
    @discardableResult
    public func register(_ loader: any Loader, name: String, schemes: [String]) -> RegistrationToken {
        registry.register(Named(name: name.lowercased(), loader: loader), names: schemes)
    }

    @discardableResult
    public func unregister(_ token: RegistrationToken) -> Bool { registry.unregister(token) }

    /// The newest loader registered for the URL's scheme that accepts the URL.
    /// A URL with no scheme (a plain path) is looked up under `file`.
    public func loader(for url: URL) -> (any Loader)? {
        let scheme = url.scheme?.lowercased() ?? "file"
        return registry.entries.first { $0.names.contains(scheme) && $0.value.loader.canLoad(url) }?.value.loader
    }

    /// The newest loader registered under this name.
    public func loader(named name: String) -> (any Loader)? {
        let name = name.lowercased()
        return registry.entries.first { $0.value.name == name }?.value.loader
    }

    /// Registered names, newest first.
    public var names: [String] {
        var seen = Set<String>()
        return registry.entries.map(\.value.name).filter { seen.insert($0).inserted }
    }

    /// Registered loaders, newest first.
    public var loaders: [any Loader] { registry.entries.map(\.value.loader) }
}

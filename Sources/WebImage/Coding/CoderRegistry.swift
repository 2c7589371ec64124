public import Foundation

/// The coders a manager may use, asked newest-registered first.
///
/// ```swift
/// let coders = CoderRegistry()
/// coders.register(VipsImageCoder(), name: "vips")
/// let token = coders.register(MyQOICoder(), name: "qoi")  // asked before vips
/// coders.unregister(token)
/// ```
public final class CoderRegistry: Sendable {
    private let registry = Registry<any ImageCoder>()

    public init() {}

    /// Registers a coder under a name; it is asked before every coder registered earlier.
    @discardableResult
    public func register(_ coder: any ImageCoder, name: String) -> RegistrationToken {
        registry.register(coder, names: [name])
    }

    /// Removes a registration. Returns false if the token was not registered.
    @discardableResult
    public func unregister(_ token: RegistrationToken) -> Bool { registry.unregister(token) }

    /// The newest coder registered under this name.
    public func coder(named name: String) -> (any ImageCoder)? { registry.value(named: name) }

    /// The newest coder that accepts these bytes.
    public func decoder(for data: Data) -> (any ImageCoder)? {
        registry.entries.first { $0.value.canDecode(data) }?.value
    }

    /// The newest coder that can write this format.
    public func encoder(for format: ImageFormat) -> (any ImageCoder)? {
        registry.entries.first { $0.value.canEncode(format) }?.value
    }

    /// Registered names, newest first.
    public var names: [String] { registry.names }

    /// Registered coders, newest first.
    public var coders: [any ImageCoder] { registry.entries.map(\.value) }
}

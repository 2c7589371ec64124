public import Logging
import Foundation
import Synchronization

/// A log handler that writes one line per record to standard error, and renders
/// its metadata only when it writes one.
///
/// swift-log's `StreamLogHandler` renders its metadata into a string each time
/// a value is set. A web framework sets a request id on every request's logger
/// (Hummingbird does), so a service that logs nothing per request still paid for
/// that rendering on every request: about 5 % of a warm hit's CPU in
/// `webimage serve`. This handler keeps the values as they are and renders them,
/// with the metadata provider's, in the line it writes. Its lines read as
/// `StreamLogHandler`'s do:
///
/// ```
/// 2026-11-26T05:37:23+0000 warning webimage.vips: format=svg [WebImageVips] message
/// ```
///
/// ```swift
/// LoggingSystem.bootstrap { LineLogHandler(label: $0) }
/// ```
public struct LineLogHandler: LogHandler {
    public let label: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// Where lines go: standard error, unless a test gives its own.
    private let write: @Sendable (String) -> Void

    public init(label: String, metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider) {
        self.init(label: label, metadataProvider: metadataProvider, write: Self.standardError)
    }

    package init(label: String, metadataProvider: Logger.MetadataProvider? = nil, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata, !explicit.isEmpty { merged.merge(explicit) { _, new in new } }
        let rendered = merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        write("\(Self.timestamp()) \(event.level) \(label):\(rendered) [\(event.source)] \(event.message)\n")
    }

    /// One line at a time, whole, from any thread.
    private static let lock = Mutex(())

    private static let standardError: @Sendable (String) -> Void = { line in
        lock.withLock { _ in
            var line = line
            line.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Foundation.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                    if written <= 0 { if errno == EINTR { continue } else { return } }
                    offset += written
                }
            }
        }
    }

    private static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

import Foundation

extension LoadCommand {
    /// `--concurrency` when given, for every input alike; otherwise `LoadLimits.standard`.
    var limits: LoadLimits {
        concurrency.map { LoadLimits(total: $0, files: $0) } ?? .standard
    }
}

/// How many inputs a batch has in flight. A download mostly waits on its origin,
/// so eight of them overlap well; a local file is read at once and then decoded,
/// and more of those than the cores can decode only hold their bytes and buffers
/// while they wait: a 270-photo 12 MP thumbnail batch peaked 6 MiB higher with
/// eight in flight than with three on 2 cores, in the same time
/// (docs/performance.md). One more than the cores keeps a core busy while
/// another load's file is read or its result written.
struct LoadLimits: Equatable {
    var total: Int
    var files: Int

    /// The most `--concurrency` takes: past the point where more inputs in flight
    /// only wait, and far from where the read-ahead window (four times it) or a
    /// task per input stops being cheap (2^61 overflowed; 10^9 ran for minutes
    /// before the first input).
    static let maxConcurrency = 1024

    static let standard = LoadLimits(total: 8, files: min(8, ProcessInfo.processInfo.activeProcessorCount + 1))

    /// A path or a `file://` URL; `http(s)://`, `s3://` and other schemes are downloads.
    static func isLocalFile(_ input: String) -> Bool { isLocalFileInput(input) }
}

import ArgumentParser
import Foundation
import Synchronization
import UnixSignals
@_spi(WebImageInternal) import WebImage
import WebImageKit
#if canImport(Glibc)
import Glibc
@_spi(Internals) import WebImageKit
#endif

/// Prints results as they come (JSON lines or a table) and draws the progress bar.
final class Reporter: Sendable {
    private struct State {
        var counts: ProgressBar.Counts
        var headerPrinted = false
    }

    private let state: Lock<State>
    private let json: Bool
    private let progress: Bool
    private let started = ContinuousClock.now

    init(json: Bool, total: Int?, progress: Bool) {
        self.json = json
        self.progress = progress
        state = Lock(State(counts: ProgressBar.Counts(total: total)))
    }

    var failures: Int { state.withLock { $0.counts.failed } }
    var done: Int { state.withLock { $0.counts.done } }

    func report(_ record: InputLoad.Record) {
        state.withLock { state in
            state.counts.done += 1
            switch (record.error, record.cacheType) {
            case (.some, _): state.counts.failed += 1
            case (nil, .memory?): state.counts.memory += 1
            case (nil, .disk?): state.counts.disk += 1
            default: state.counts.network += 1
            }
            if progress { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
            if json {
                emit(jsonLine([
                    "input": record.input, "key": record.key, "cacheType": record.cacheType?.rawValue,
                    "pixelWidth": record.size?.width, "pixelHeight": record.size?.height, "frameCount": record.frames,
                    "bytes": record.bytes, "output": record.output, "milliseconds": record.milliseconds,
                    "error": record.error.map(errorObject), "warning": record.warning,
                ]))
            } else {
                if !state.headerPrinted {
                    emit(Self.row("FROM", "SIZE", "FRAMES", "BYTES", "MS", "INPUT"))
                    state.headerPrinted = true
                }
                // The input as one line, its control characters escaped: a name with
                // ESC or a newline must not drive the terminal or split the table.
                let input = WebImageError.escapingControlCharacters(record.input)
                if let error = record.error {
                    emit(Self.row("error", "-", "-", "-", Self.milliseconds(record.milliseconds), "\(input)  \(error.code): \(error.message)"))
                } else {
                    let loaded = isLocalFileInput(record.input) ? "file" : "network"
                    let from = switch record.cacheType { case .memory?: "memory"; case .disk?: "disk"; case .shared?: "shared"; default: loaded }
                    emit(Self.row(from, record.size.map { "\($0)" } ?? "-", record.frames.map(String.init) ?? "-",
                                   record.bytes.map(String.init) ?? "-", Self.milliseconds(record.milliseconds),
                                   input + (record.warning.map { "  (\(WebImageError.escapingControlCharacters($0)))" } ?? "")))
                }
            }
            if progress {
                let line = ProgressBar.render(state.counts, elapsed: ContinuousClock.now - started, width: Terminal.width - 1)
                FileHandle.standardError.write(Data(line.utf8))
            }
        }
    }

    func finish() {
        if progress { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }

    /// Writes a line straight to standard output (unbuffered, so consumers see each result at once).
    private func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Whole milliseconds as digits (`String(format:)` went through Foundation's
    /// formatter for every row).
    static func milliseconds(_ value: Double) -> String {
        value.isFinite && abs(value) < 1e15 ? String(Int64(value.rounded())) : "-"
    }

    static func row(_ from: String, _ size: String, _ frames: String, _ bytes: String, _ ms: String, _ input: String) -> String {
        func pad(_ text: String, _ width: Int) -> String { text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count) }
        return pad(from, 8) + pad(size, 12) + pad(frames, 7) + pad(bytes, 10) + pad(ms, 7) + input
    }
}

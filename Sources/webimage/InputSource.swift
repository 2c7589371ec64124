import Foundation
import Synchronization
@_spi(WebImageInternal) import WebImage
#if canImport(Glibc)
import Glibc
#endif

/// Inputs from the arguments or read line by line from a file or standard input,
/// with at most `window` lines read ahead of those processed: a batch of 100 000
/// URLs runs in constant memory.
///
/// A line is at most ``maxLineBytes``: a longer one is handed out as an input
/// with a ``Input/problem`` (its first bytes name it) and the rest of it is
/// skipped without being kept, so `--input-file /dev/zero` holds 64 KiB, not
/// whatever it has read.
///
/// The input file is opened when the source is made, so a missing or unreadable
/// one is an error before any work starts, not a silent empty batch.
final class InputSource: Sendable {
    struct OpenError: Error, CustomStringConvertible {
        let description: String
    }

    /// `@unchecked Sendable`: the stream is read by the one reader thread only.
    private struct Stream: @unchecked Sendable { let handle: UnsafeMutablePointer<FILE> }

    /// One input: its text, or why it cannot be one (a line over the bound).
    struct Input: Sendable {
        var text: String
        var problem: String?
    }

    /// The longest input line, in bytes (a URL of 64 KiB is already far past
    /// what any server or browser takes).
    static let maxLineBytes = 64 << 10

    let arguments: [String]
    private let stream: Stream?
    private let window: DispatchSemaphore
    /// Set by ``stop()``: no further input is handed out.
    private let stopped = Lock(false)
    private let output = Lock<AsyncStream<Input>.Continuation?>(nil)

    /// - Throws: ``OpenError`` when `file` cannot be opened for reading, or is a directory.
    init(arguments: [String], file: String?, window: Int) throws {
        self.arguments = arguments
        // Made at 0 and signalled up to the window: libdispatch traps when a
        // semaphore is freed below its initial value, as this one is when a signal
        // stops the batch with lines read ahead and never consumed.
        self.window = DispatchSemaphore(value: 0)
        for _ in 0..<max(1, window) { self.window.signal() }
        guard let file else {
            stream = nil
            return
        }
        if file == "-" {
            guard let handle = fdopen(dup(0), "r") else { throw OpenError(description: "--input-file -: cannot read standard input") }
            stream = Stream(handle: handle)
            return
        }
        var info = stat()
        if stat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw OpenError(description: "--input-file: \(file) is a directory")
        }
        guard let handle = fopen(file, "r") else {
            throw OpenError(description: "--input-file: cannot open \(file): \(String(cString: strerror(errno)))")
        }
        stream = Stream(handle: handle)
    }

    /// Call once per input when its processing has finished.
    func consumed() { window.signal() }

    /// Whether ``stop()`` was called: the batch starts no further input, even one
    /// already read ahead.
    var isStopped: Bool { stopped.withLock { $0 } }

    /// Hands out no further input (SIGTERM): the stream ends now, even if the
    /// reader thread is waiting for a line of standard input.
    func stop() {
        stopped.withLock { $0 = true }
        output.withLock { $0 }?.finish()
        window.signal()
    }

    func lines() -> AsyncStream<Input> {
        let (lines, continuation) = AsyncStream.makeStream(of: Input.self)
        output.withLock { $0 = continuation }
        let thread = Thread { [self] in
            for argument in arguments {
                window.wait()
                if isStopped { break }
                continuation.yield(Input(text: argument))
            }
            if let handle = stream?.handle {
                while !isStopped, let line = Self.readLine(handle, stopped: { self.isStopped }) {
                    let input: Input
                    switch line {
                    case .text(let bytes):
                        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                        if text.isEmpty || text.hasPrefix("#") { continue }
                        // Decoded with U+FFFD in place of bad bytes, such a line would name another file.
                        input = String(validating: bytes, as: UTF8.self) == nil
                            ? Input(text: text, problem: "the input line is not valid UTF-8: names and URLs are read as UTF-8; it was skipped")
                            : Input(text: text)
                    case .tooLong(let head):
                        let text = String(decoding: head, as: UTF8.self)
                        input = Input(text: String(text.prefix(80)) + "…",
                                      problem: "the input line is longer than \(Self.maxLineBytes) bytes; it was skipped")
                    }
                    window.wait()
                    if isStopped { break }
                    continuation.yield(input)
                }
                fclose(handle)
            }
            continuation.finish()
        }
        thread.start()
        return lines
    }

    enum Line {
        case text([UInt8])
        /// Over ``maxLineBytes``: its first bytes; the rest was read and dropped.
        case tooLong([UInt8])
    }

    /// The next line of `handle` without its newline, nil at the end. A line over
    /// ``maxLineBytes`` is read to its end (or until `stopped`) and dropped.
    static func readLine(_ handle: UnsafeMutablePointer<FILE>, stopped: () -> Bool) -> Line? {
        var bytes: [UInt8] = []
        while true {
            let next = getc_unlocked(handle)
            if next == EOF { return bytes.isEmpty ? nil : .text(bytes) }
            if next == 0x0A { return .text(bytes) }
            bytes.append(UInt8(truncatingIfNeeded: next))
            if bytes.count > maxLineBytes { break }
        }
        var skipped = 0
        while true {
            let next = getc_unlocked(handle)
            if next == EOF || next == 0x0A { break }
            skipped += 1
            if skipped & 0xFFFFF == 0, stopped() { break }
        }
        return .tooLong(Array(bytes.prefix(256)))
    }
}

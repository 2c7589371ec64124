import Foundation
import Synchronization
import WebImage
#if canImport(Glibc)
import Glibc
#endif

/// Inputs from the arguments or read line by line from a file or standard input,
/// with at most `window` lines read ahead of those processed: a batch of 100 000
/// URLs runs in constant memory.
///
/// The input file is opened when the source is made, so a missing or unreadable
/// one is an error before any work starts, not a silent empty batch.
final class InputSource: Sendable {
    struct OpenError: Error, CustomStringConvertible {
        let description: String
    }

    /// `@unchecked Sendable`: the stream is read by the one reader thread only.
    private struct Stream: @unchecked Sendable { let handle: UnsafeMutablePointer<FILE> }

    let arguments: [String]
    private let stream: Stream?
    private let window: DispatchSemaphore
    /// Set by ``stop()``: no further input is handed out.
    private let stopped = Mutex(false)
    private let output = Mutex<AsyncStream<String>.Continuation?>(nil)

    /// - Throws: ``OpenError`` when `file` cannot be opened for reading, or is a directory.
    init(arguments: [String], file: String?, window: Int) throws {
        self.arguments = arguments
        self.window = DispatchSemaphore(value: max(1, window))
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

    /// Hands out no further input (SIGTERM): the stream ends now, even if the
    /// reader thread is waiting for a line of standard input.
    func stop() {
        stopped.withLock { $0 = true }
        output.withLock { $0 }?.finish()
        window.signal()
    }

    func lines() -> AsyncStream<String> {
        let (lines, continuation) = AsyncStream.makeStream(of: String.self)
        output.withLock { $0 = continuation }
        let thread = Thread { [self] in
            for argument in arguments {
                window.wait()
                if stopped.withLock({ $0 }) { break }
                continuation.yield(argument)
            }
            if let handle = stream?.handle {
                var line: UnsafeMutablePointer<CChar>?
                var capacity = 0
                while getline(&line, &capacity, handle) >= 0 {
                    let text = String(cString: line!).trimmingCharacters(in: .whitespacesAndNewlines)
                    if text.isEmpty || text.hasPrefix("#") { continue }
                    window.wait()
                    if stopped.withLock({ $0 }) { break }
                    continuation.yield(text)
                }
                free(line)
                fclose(handle)
            }
            continuation.finish()
        }
        thread.start()
        return lines
    }
}

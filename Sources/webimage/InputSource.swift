import Foundation

/// Inputs from the arguments or read line by line from a file or standard input,
/// with at most `window` lines read ahead of those processed: a batch of 100 000
/// URLs runs in constant memory.
final class InputSource: Sendable {
    let arguments: [String]
    let file: String?
    private let window: DispatchSemaphore

    init(arguments: [String], file: String?, window: Int) {
        self.arguments = arguments
        self.file = file
        self.window = DispatchSemaphore(value: max(1, window))
    }

    /// Call once per input when its processing has finished.
    func consumed() { window.signal() }

    func lines() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let thread = Thread { [self] in
            for argument in arguments {
                window.wait()
                continuation.yield(argument)
            }
            if let file {
                let handle: UnsafeMutablePointer<FILE>? = file == "-" ? fdopen(0, "r") : fopen(file, "r")
                if let handle {
                    var line: UnsafeMutablePointer<CChar>?
                    var capacity = 0
                    while getline(&line, &capacity, handle) >= 0 {
                        let text = String(cString: line!).trimmingCharacters(in: .whitespacesAndNewlines)
                        if text.isEmpty || text.hasPrefix("#") { continue }
                        window.wait()
                        continuation.yield(text)
                    }
                    free(line)
                    fclose(handle)
                } else {
                    Terminal.error("--input-file: cannot open \(file): \(String(cString: strerror(errno)))")
                }
            }
            continuation.finish()
        }
        thread.start()
        return stream
    }
}

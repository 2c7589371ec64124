import Foundation
import Logging
@_spi(WebImageInternal) import WebImage

/// libvips' warnings, given to the decode they belong to.
///
/// libvips reports much of what is wrong with an input as a GLib warning, not in
/// its error buffer: a PNG's "IHDR: CRC error" comes as a warning and the call
/// then fails with only "reading the png header failed". Each warning is kept
/// here, numbered, with the thread that emitted it. A decode takes the ones
/// emitted while it ran: all of them when it was the only decode in that time,
/// else those of its own thread (libvips reads a header on the calling thread;
/// pixels come from its worker threads, which no decode can claim when several
/// run at once). It logs each kind once at `warning`, to ``CoderLog/logger``
/// (the load's request) or the coder's own, and a failed decode's error carries them.
enum VipsWarnings {
    struct Warning {
        let sequence: Int
        let thread: pthread_t
        let text: String
    }

    struct State {
        var next = 0
        var recent: [Warning] = []
        var decodesRunning = 0
        var decodesStarted = 0
    }

    /// The 64 newest warnings, and the decodes running.
    static let state = Lock(State())
    static let keep = 64

    /// Called by the GLib log handler for each warning.
    static func record(_ text: String) {
        let thread = pthread_self()
        state.withLock { state in
            state.recent.append(Warning(sequence: state.next, thread: thread, text: text))
            state.next += 1
            if state.recent.count > keep { state.recent.removeFirst(state.recent.count - keep) }
        }
    }

    /// One decode's claim on the warnings emitted while it runs.
    struct Scope {
        let firstSequence: Int
        let started: Int
        let aloneAtStart: Bool
        let thread: pthread_t
    }

    static func begin() -> Scope {
        let thread = pthread_self()
        return state.withLock { state in
            state.decodesRunning += 1
            state.decodesStarted += 1
            return Scope(firstSequence: state.next, started: state.decodesStarted, aloneAtStart: state.decodesRunning == 1, thread: thread)
        }
    }

    /// The decode's warnings, each text once, in order.
    static func end(_ scope: Scope) -> [String] {
        let warnings = state.withLock { state in
            state.decodesRunning -= 1
            let alone = scope.aloneAtStart && state.decodesStarted == scope.started
            return state.recent.filter { $0.sequence >= scope.firstSequence && (alone || pthread_equal($0.thread, scope.thread) != 0) }.map(\.text)
        }
        var seen = Set<String>()
        return warnings.filter { seen.insert($0).inserted }
    }

    /// Runs a decode: its warnings logged once each, and added to its error.
    static func decoding<T>(_ format: ImageFormat?, _ body: () throws -> T) throws -> T {
        let scope = begin()
        do {
            let result = try body()
            log(end(scope), format)
            return result
        } catch let error as WebImageError {
            let warnings = end(scope)
            log(warnings, format)
            guard !warnings.isEmpty, error.code != .cancelled else { throw error }
            let missing = warnings.filter { !error.message.contains($0) }
            guard !missing.isEmpty else { throw error }
            throw WebImageError(error.code, "\(error.message) (libvips warned: \(missing.joined(separator: "; ")))",
                                isTransient: error.isTransient, statusCode: error.statusCode, underlying: error.underlying ?? error)
        } catch {
            log(end(scope), format)
            throw error
        }
    }

    private static func log(_ warnings: [String], _ format: ImageFormat?) {
        guard !warnings.isEmpty else { return }
        let logger = CoderLog.logger ?? Vips.logger
        for text in warnings {
            logger.warning("libvips: \(text)", metadata: ["format": "\(format?.rawValue ?? "unknown")"])
        }
    }
}

import Foundation
import WebImage

/// The one-line progress display of a batch: done/total, rate, ETA, and where
/// results came from. Rendering is a pure function of the counts and a width, so
/// it can be tested without a terminal.
package struct ProgressBar: Sendable {
    package struct Counts: Sendable, Hashable {
        package var done = 0
        package var total: Int?
        package var memory = 0
        package var disk = 0
        package var network = 0
        package var failed = 0
        package init(total: Int? = nil) { self.total = total }
    }

    /// The line for `counts` after `elapsed`, at most `width` characters, no newline.
    package static func render(_ counts: Counts, elapsed: Duration, width: Int) -> String {
        let seconds = max(0.001, elapsed.timeInterval)
        let rate = Double(counts.done) / seconds
        var tail = String(format: " %@ %.1f/s", counts.total.map { "\(counts.done)/\($0)" } ?? "\(counts.done)", rate)
        if let total = counts.total, rate > 0, counts.done < total {
            let eta = Int((Double(total - counts.done) / rate).rounded())
            tail += String(format: " ETA %d:%02d", eta / 60, eta % 60)
        }
        tail += " mem \(counts.memory) disk \(counts.disk) net \(counts.network)"
        if counts.failed > 0 { tail += " fail \(counts.failed)" }
        let room = width - tail.count - 2
        guard let total = counts.total, total > 0, room >= 5 else { return String(tail.dropFirst().prefix(max(0, width))) }
        let filled = min(room, Int(Double(room) * Double(counts.done) / Double(total)))
        return "[" + String(repeating: "=", count: filled) + String(repeating: " ", count: room - filled) + "]" + tail
    }
}

import Foundation

/// Wall-clock figures of tests that race a real timeout (a loader's, a Redis
/// command's), scaled for slow runs: `TEST_TIME_SCALE` (`make tsan` sets
/// 4, for ThreadSanitizer's slowdown with every suite running in parallel), 1
/// otherwise. (Not a `WEBIMAGE_` name: the configuration layers refuse unknown ones.) Scale the timeout and the work racing it together, so that the test
/// still tells the two outcomes apart.
package enum TestTiming {
    package static let scale: Double = {
        guard let text = ProcessInfo.processInfo.environment["TEST_TIME_SCALE"], let value = Double(text), value >= 1 else { return 1 }
        return value
    }()

    package static func scaled(_ duration: Duration) -> Duration { duration * scale }

    /// Milliseconds, scaled, for a test server's delay routes (`/slow/MS/…`).
    package static func milliseconds(_ value: Int) -> Int { Int((Double(value) * scale).rounded()) }
}

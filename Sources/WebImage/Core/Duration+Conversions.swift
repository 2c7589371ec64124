/// `Duration` in the units the package's C libraries, metrics and dates take.
/// One place for the arithmetic on `components`, which was written by hand in
/// nine. `package`: not API, so that users' own extensions never clash.
extension Duration {
    /// Seconds as a `Double` (for `Date` arithmetic and display).
    package var timeInterval: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Whole milliseconds, rounded toward zero (libcurl's `*_MS` options, GIF delays).
    package var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// Whole nanoseconds, rounded toward zero (swift-metrics timers).
    package var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

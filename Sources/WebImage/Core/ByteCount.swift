import Foundation

/// Sizes as people write them in configuration.
public enum ByteCount {
    /// The largest size a setting may give: 1 PiB. Far past any memory or disk a
    /// setting bounds, and far enough below `Int.max` that sums and products of
    /// sizes cannot overflow (which traps).
    public static let maximum = 1 << 50

    /// Parses `1048576`, `512KB`, `64MiB`, `1GB`, `2GiB`, `1TiB`, `10k` (every unit
    /// is a power of 1024, as for memory). Nil for text that is not a size from 0
    /// to ``maximum``.
    public static func parse(_ text: String) -> Int? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Int)] = [("tib", 1 << 40), ("gib", 1 << 30), ("mib", 1 << 20), ("kib", 1 << 10),
                                      ("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10),
                                      ("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10), ("b", 1)]
        var size: Int?
        if let (suffix, factor) = units.first(where: { trimmed.hasSuffix($0.0) }) {
            // Int(exactly:) after rounding: "inf", "nan" and "1e300GB" are not sizes (a plain Int() trapped).
            guard let number = Double(trimmed.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)), number >= 0 else { return nil }
            size = Int(exactly: (number * Double(factor)).rounded(.down))
        } else {
            size = Int(trimmed)
        }
        guard let size, size >= 0, size <= maximum else { return nil }
        return size
    }
}

extension ByteCount {
    /// A size as people read it: `512 B`, `1.5 MiB`, `2.0 GiB`.
    public static func text(_ bytes: Int) -> String {
        if bytes == .max { return "more than 8 EiB" }
        let units: [(String, Double)] = [("GiB", 1_073_741_824), ("MiB", 1_048_576), ("KiB", 1024)]
        for (unit, factor) in units where Double(bytes) >= factor {
            return String(format: "%.1f %@", Double(bytes) / factor, unit)
        }
        return "\(bytes) B"
    }
}

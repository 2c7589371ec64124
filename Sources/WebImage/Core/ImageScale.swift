import Foundation

/// The scale factor an image's key implies, as SDWebImage reads it.
///
/// `avatar@2x.png` is scale 2, `avatar@3x.png` scale 3; in `http` and `https`
/// URLs the percent-encoded forms `%402x.` and `%403x.` count too. Keys shorter
/// than 8 characters, and all others, are scale 1.
public enum ImageScale {
    public static func scale(forKey key: String) -> Double {
        guard key.utf8.count >= 8 else { return 1 }
        if key.contains("@3x.") { return 3 }
        if key.contains("@2x.") { return 2 }
        let lower = key.lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
            if lower.contains("%403x.") { return 3 }
            if lower.contains("%402x.") { return 2 }
        }
        return 1
    }
}

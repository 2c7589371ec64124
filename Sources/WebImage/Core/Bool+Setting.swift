import Foundation

extension Bool {
    /// The package's one reading of a true/false setting, from a configuration
    /// key, an environment variable, a store's setting or a query parameter:
    /// `true`, `yes`, `1`, `on` and `false`, `no`, `0`, `off`, in any case,
    /// spaces around ignored; nil for anything else (the caller names the key).
    /// What the reading accepts, for an error's message.
    package static let settingWords = "true or false (or yes/no, on/off, 1/0)"

    package init?(setting text: String) {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "yes", "1", "on": self = true
        case "false", "no", "0", "off": self = false
        default: return nil
        }
    }
}

import Foundation

/// `path` with a leading `~` or `~/` read as the home directory: `$HOME` when it
/// is set, as a shell reads it, else the account's. (Foundation's
/// `expandingTildeInPath` and `URL(fileURLWithPath:)` take the account's home on
/// Linux whatever `$HOME` says, so a tool run with another `HOME` looked in
/// `/root`.) `~user` and every other path are returned as they are.
package func expandingHome(_ path: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
    guard path == "~" || path.hasPrefix("~/") else { return path }
    let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
    return home + path.dropFirst()
}

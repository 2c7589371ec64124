package import Foundation

/// The directory of a store that keeps files.
package enum CacheDirectory {
    /// Creates `directory` (mode 0700) if needed and checks it is a writable
    /// directory: the first step of every store that keeps files.
    /// - Throws: ``WebImageError/Code/storeFailed`` saying which it is not.
    package static func prepare(_ directory: URL) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw WebImageError(.storeFailed, "cache directory \(directory.path) exists and is not a directory")
            }
        } else {
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw WebImageError(.storeFailed, "cannot create cache directory \(directory.path): \(error.localizedDescription)", underlying: error)
            }
        }
    }
}

package import Foundation

/// The directory of a store that keeps files.
package enum CacheDirectory {
    /// Creates `directory` (mode 0700) if needed and checks it is a directory
    /// this process can write: the first step of every store that keeps files.
    /// - Throws: ``WebImageError/Code/storeFailed`` saying which it is not, in
    ///   the system's words (`Not a directory`, `Permission denied`), naming the
    ///   part of the path that failed.
    package static func prepare(_ directory: URL) throws {
        let path = directory.path
        var info = stat()
        if stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw WebImageError(.storeFailed, "cache directory \(path) exists and is not a directory")
            }
            guard access(path, W_OK | X_OK) == 0 else {
                throw WebImageError(.storeFailed, "cache directory \(path) cannot be written: \(String(cString: strerror(errno)))")
            }
            return
        }
        if let failure = makeDirectories(path, mode: 0o700) {
            throw WebImageError(.storeFailed, "cannot create cache directory \(path): \(failure)")
        }
    }

    /// Makes `path` and its missing parents, each with `mode`, one `mkdir(2)` at
    /// a time, so that a failure can say which part failed and why (Foundation's
    /// own error names a Cocoa code, "NSCocoaErrorDomain error 512"). Nil when
    /// the directory is there at the end, else what failed:
    /// `/srv/file is not a directory`, `/proc/x: No such file or directory`;
    /// the directories it made before the failure are removed again.
    package static func makeDirectories(_ path: String, mode: mode_t) -> String? {
        guard !path.isEmpty else { return "an empty path names no directory" }
        var prefix = path.hasPrefix("/") ? "" : "."
        var made: [String] = []
        func failed(_ reason: String) -> String {
            for directory in made.reversed() { rmdir(directory) }
            return reason
        }
        for component in path.split(separator: "/") where component != "." {
            prefix += "/" + component
            if mkdir(prefix, mode) == 0 {
                made.append(prefix)
                continue
            }
            let code = errno
            var info = stat()
            if code == EEXIST {
                if stat(prefix, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { continue }
                return failed("\(prefix) is not a directory")
            }
            // A parent that exists but is a file reports ENOTDIR on the child.
            return failed("\(prefix): \(String(cString: strerror(code)))")
        }
        return nil
    }
}

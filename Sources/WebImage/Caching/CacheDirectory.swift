package import Foundation

/// The directory of a store that keeps files.
package enum CacheDirectory {
    /// Creates `directory` (mode 0700) if needed and checks it is a directory
    /// this process can write: the first step of every store that keeps files.
    /// - Throws: ``WebImageError/Code/storeFailed`` saying which it is not, in
    ///   the system's words (`Not a directory`, `Permission denied`), naming the
    ///   part of the path that failed.
    /// - Returns: the directory as the kernel resolved it (`realpath`): `..`
    ///   after a symbolic link is the link's target's parent, as `mkdir` found
    ///   it, not the path simplified as text (as a standardized URL would be).
    @discardableResult
    package static func prepare(_ directory: URL) throws -> URL {
        var made: [String] = []
        return try prepare(directory, made: &made)
    }

    /// ``prepare(_:)``, adding to `made` the directories it made (the deepest
    /// last), for a store whose own opening then fails to remove again
    /// (``removeMade(_:)``).
    @discardableResult
    package static func prepare(_ directory: URL, made: inout [String]) throws -> URL {
        let path = directory.path
        switch ensure(path, mode: 0o700, made: &made) {
        case nil: return resolved(path).map { URL(fileURLWithPath: $0, isDirectory: true) } ?? directory
        case .notADirectory: throw WebImageError(.storeFailed, "cache directory \(path) exists and is not a directory")
        case .notWritable(let reason): throw WebImageError(.storeFailed, "cache directory \(path) cannot be written: \(reason)")
        case .cannotMake(let reason): throw WebImageError(.storeFailed, "cannot create cache directory \(path): \(reason)")
        }
    }

    /// `path` with every symbolic link and `.` or `..` resolved by the kernel, or nil.
    package static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    /// Why a directory could not be had.
    package enum Failure: Equatable, Sendable {
        /// The path exists and is something else.
        case notADirectory
        /// It exists and this process cannot write it: the system's reason.
        case notWritable(String)
        /// It, or a parent, could not be made: which part failed, and why.
        case cannotMake(String)
    }

    /// A directory at `path` this process can write: there already, or made
    /// with its missing parents (each `mode`, see ``makeDirectories(_:mode:)``).
    /// Nil when it is there, else why not.
    package static func ensure(_ path: String, mode: mode_t) -> Failure? {
        var made: [String] = []
        return ensure(path, mode: mode, made: &made)
    }

    /// ``ensure(_:mode:)``, adding to `made` the directories it made.
    package static func ensure(_ path: String, mode: mode_t, made: inout [String]) -> Failure? {
        var info = stat()
        if !path.isEmpty, stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else { return .notADirectory }
            guard access(path, W_OK | X_OK) == 0 else { return .notWritable(String(cString: strerror(errno))) }
            return nil
        }
        return makeDirectories(path, mode: mode, made: &made).map(Failure.cannotMake)
    }

    /// Removes the directories `made` lists, deepest first, each only if it is
    /// empty (`rmdir(2)`): what a store made for itself before failing to open.
    package static func removeMade(_ made: [String]) {
        for directory in made.reversed() { rmdir(directory) }
    }

    /// Makes `path` and its missing parents, each with `mode`, one `mkdir(2)` at
    /// a time, so that a failure can say which part failed and why (Foundation's
    /// own error names a Cocoa code, "NSCocoaErrorDomain error 512"). Nil when
    /// the directory is there at the end, else what failed:
    /// `/srv/file is not a directory`, `/proc/x: No such file or directory`;
    /// the directories it made before the failure are removed again.
    package static func makeDirectories(_ path: String, mode: mode_t) -> String? {
        var made: [String] = []
        return makeDirectories(path, mode: mode, made: &made)
    }

    /// ``makeDirectories(_:mode:)``, adding to `made` the directories it made
    /// when it succeeds (on failure it removes them itself).
    package static func makeDirectories(_ path: String, mode: mode_t, made allMade: inout [String]) -> String? {
        guard !path.isEmpty else { return "an empty path names no directory" }
        var prefix = path.hasPrefix("/") ? "" : "."
        var made: [String] = []
        func failed(_ reason: String) -> String {
            removeMade(made)
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
        allMade += made
        return nil
    }
}

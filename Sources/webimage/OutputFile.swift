import ArgumentParser
import Foundation
import Synchronization
import UnixSignals
import WebImage
import WebImageKit
#if canImport(Glibc)
import Glibc
@_spi(Internals) import WebImageKit
#endif

/// Result files of `--out`: written whole or not at all.
enum OutputFile {
    /// Writes `data` under a temporary name in the same directory (created
    /// exclusively, never through a link), then renames it to `path`: a failure
    /// (a full disk) leaves no file, neither a partial one nor an empty one, and a
    /// symbolic link planted at `path` is replaced, never followed.
    static func write(_ data: Data, to path: String) throws {
        // Beside `path`, split as text (a URL would getcwd and stat for each file).
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = "\(directory).\(name).\(getpid()).\(UInt32.random(in: 0 ... .max)).part"
        let fd: Int32
        do { fd = try FileIO.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode: 0o644) } catch {
            throw WebImageError(.storeFailed, "cannot write \(path): \(String(cString: strerror(error.code)))")
        }
        do throws(SystemCallError) {
            var failure: SystemCallError?
            do { try FileIO.writeAll(fd, data) } catch { failure = error }
            do { try FileIO.close(fd, temporary) } catch { failure = failure ?? error }
            if let failure { throw failure }
            try FileIO.syscall("rename \(temporary)") { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw WebImageError(.storeFailed, "cannot write \(path): \(String(cString: strerror(error.code)))")
        }
    }

    /// Makes the `--out` directory (and its parents) if it is missing.
    /// - Throws: `WebImageError` `.invalidArgument` with a plain message when the
    ///   path names something that is not a directory or cannot be made.
    /// - Parameter made: gets the directories it made (the deepest last), for
    ///   a run that writes nothing into them to remove again.
    /// - Returns: the directory as the kernel resolved it (`realpath`), which
    ///   the writes use: `..` after a symbolic link is the target's parent.
    static func makeDirectory(_ path: String, made: inout [String]) throws -> String {
        guard !path.isEmpty else { throw WebImageError(.invalidArgument, "--out '': an empty path names no directory") }
        switch CacheDirectory.ensure(path, mode: 0o755, made: &made) {
        case nil: return CacheDirectory.resolved(path) ?? path
        case .notADirectory: throw WebImageError(.invalidArgument, "--out \(path): it exists and is not a directory")
        case .notWritable(let reason): throw WebImageError(.invalidArgument, "--out \(path): \(reason)")
        case .cannotMake(let reason): throw WebImageError(.invalidArgument, "--out \(path): cannot make the directory: \(reason)")
        }
    }
}

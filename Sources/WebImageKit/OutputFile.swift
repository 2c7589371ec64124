package import Foundation
import Synchronization
import WebImage
#if canImport(Glibc)
import Glibc
#endif

/// Result files of the tool's `--out`: written whole or not at all.
package enum OutputFile {
    /// Writes `data` under a temporary name in the same directory (created
    /// exclusively, never through a link), then renames it to `path`: a failure
    /// (a full disk) leaves no file, neither a partial one nor an empty one, and a
    /// symbolic link planted at `path` is replaced, never followed. While it is
    /// written, the temporary file is listed in `partials`, which a process
    /// exiting at once (a second signal) empties first.
    package static func write(_ data: Data, to path: String, partials: PartialFiles = .shared) throws {
        try Partial(for: path, in: partials).finish(writing: data)
    }

    /// One result being written: its temporary file, open and listed.
    package final class Partial {
        package let path: String
        package let temporary: String
        private let fd: Int32
        private let partials: PartialFiles
        private var finished = false

        /// Creates the temporary file beside `path` and lists it in `partials`.
        /// - Throws: `storeFailed` naming `path`, also once `partials` is closed.
        package init(for path: String, in partials: PartialFiles) throws {
            // Beside `path`, split as text (a URL would getcwd and stat for each file).
            let slash = path.lastIndex(of: "/")
            let directory = slash.map { String(path[...$0]) } ?? ""
            let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
            let temporary = "\(directory).\(name).\(getpid()).\(UInt32.random(in: 0 ... .max)).part"
            self.path = path
            self.temporary = temporary
            self.partials = partials
            fd = try partials.open(temporary, failing: path)
        }

        /// Writes `data`, closes, and renames the file to `path` (once); on any
        /// failure the temporary file is removed. Either way it leaves the list.
        package func finish(writing data: Data) throws {
            precondition(!finished, "a partial file is finished once")
            finished = true
            defer { partials.forget(temporary) }
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

        deinit {
            // Never finished: no file left.
            guard !finished else { return }
            close(fd)
            unlink(temporary)
            partials.forget(temporary)
        }
    }

    /// Makes the `--out` directory (and its parents) if it is missing.
    /// - Throws: `WebImageError` `.invalidArgument` with a plain message when the
    ///   path names something that is not a directory or cannot be made.
    /// - Parameter made: gets the directories it made (the deepest last), for
    ///   a run that writes nothing into them to remove again.
    /// - Returns: the directory as the kernel resolved it (`realpath`), which
    ///   the writes use: `..` after a symbolic link is the target's parent.
    package static func makeDirectory(_ path: String, made: inout [String]) throws -> String {
        guard !path.isEmpty else { throw WebImageError(.invalidArgument, "--out '': an empty path names no directory") }
        switch CacheDirectory.ensure(path, mode: 0o755, made: &made) {
        case nil: return CacheDirectory.resolved(path) ?? path
        case .notADirectory: throw WebImageError(.invalidArgument, "--out \(path): it exists and is not a directory")
        case .notWritable(let reason): throw WebImageError(.invalidArgument, "--out \(path): \(reason)")
        case .cannotMake(let reason): throw WebImageError(.invalidArgument, "--out \(path): cannot make the directory: \(reason)")
        }
    }
}

/// The temporary files of results being written. A process that exits without
/// letting its writes finish (the tool's second SIGINT or SIGTERM) calls
/// ``removeAll()`` first, so no `.NAME.PID.N.part` file stays behind.
package final class PartialFiles: Sendable {
    package static let shared = PartialFiles()
    private struct State {
        var paths: Set<String> = []
        var closed = false
    }

    private let state = Mutex(State())

    package init() {}

    /// The temporary files listed now.
    package var paths: Set<String> { state.withLock { $0.paths } }

    /// Creates `temporary` (exclusively, never through a link) and lists it, under
    /// the lock that ``removeAll()`` takes: a file is either listed or never made.
    fileprivate func open(_ temporary: String, failing path: String) throws -> Int32 {
        let opened = state.withLock { (state: inout State) -> Result<Int32, WebImageError> in
            guard !state.closed else { return .failure(WebImageError(.storeFailed, "cannot write \(path): the tool is exiting")) }
            do throws(SystemCallError) {
                let fd = try FileIO.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode: 0o644)
                state.paths.insert(temporary)
                return .success(fd)
            } catch {
                return .failure(WebImageError(.storeFailed, "cannot write \(path): \(String(cString: strerror(error.code)))"))
            }
        }
        return try opened.get()
    }

    fileprivate func forget(_ temporary: String) {
        _ = state.withLock { $0.paths.remove(temporary) }
    }

    /// Removes every listed file and refuses new ones from now on.
    package func removeAll() {
        state.withLock { state in
            state.closed = true
            for path in state.paths { unlink(path) }
            state.paths.removeAll()
        }
    }
}

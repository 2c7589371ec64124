#if canImport(Glibc)
package import Glibc
#endif
package import Foundation
import CWebImageSystem

/// A system call that failed: which call, on what, and its `errno`.
package struct SystemCallError: Error, Sendable, CustomStringConvertible {
    /// The call and its object: `open /var/cache/…`.
    package let call: String
    package let code: Int32

    /// `ENOENT`: the file is not there, which a cache reads as a miss. Every other
    /// failure (`EACCES`, `EMFILE`, `EIO`…) is the store's, and reaches
    /// `webimage_store_errors_total`.
    package var isNotFound: Bool { code == ENOENT }

    package var description: String { "\(call): \(String(cString: strerror(code)))" }
}

/// The package's one home for system calls on files, in the style of swift-nio's
/// `syscall(blocking:)`: every call retried when a signal interrupts it (`EINTR`),
/// short reads and writes continued, and a failure thrown as a ``SystemCallError``.
package enum FileIO {
    /// Runs `body`, a call that returns -1 and sets `errno` on failure, again while
    /// `errno` is `EINTR`; throws the other failures.
    @discardableResult
    package static func syscall<Result: BinaryInteger>(_ call: @autoclosure () -> String, _ body: () -> Result) throws(SystemCallError) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code == EINTR { continue }
            throw SystemCallError(call: call(), code: code)
        }
    }

    /// `open(2)`: a descriptor the caller closes.
    package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemCallError) -> Int32 {
        try syscall("open \(path)") { Glibc.open(path, flags, mode) }
    }

    /// `fstat(2)`.
    package static func stat(_ descriptor: Int32, _ what: @autoclosure () -> String) throws(SystemCallError) -> Glibc.stat {
        var info = Glibc.stat()
        try syscall("fstat \(what())") { fstat(descriptor, &info) }
        return info
    }

    /// `read(2)`, or `pread(2)` at `offset`: the bytes read, 0 at the end.
    package static func read(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int, at offset: Int? = nil) throws(SystemCallError) -> Int {
        try syscall("read") {
            if let offset { pread(descriptor, buffer, count, off_t(offset)) } else { Glibc.read(descriptor, buffer, count) }
        }
    }

    /// Reads until `buffer` is full or the file ends (from `offset` with `pread`):
    /// the bytes read.
    package static func readFully(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int? = nil) throws(SystemCallError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let n = try read(descriptor, buffer.baseAddress! + filled, buffer.count - filled, at: offset.map { $0 + filled })
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    /// Fills `buffer` from `offset` only from the page cache (`preadv2` with
    /// `RWF_NOWAIT`): true when every byte was there; false when any would have
    /// waited for the disk, the file ended early, or the filesystem or kernel
    /// cannot read without waiting (the caller then reads on its pool, where a
    /// real failure is thrown). Never blocks on the disk.
    package static func readFullyIfCached(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Bool {
        var filled = 0
        while filled < buffer.count {
            let n = CWI_pread_if_cached(descriptor, buffer.baseAddress! + filled, UInt(buffer.count - filled), Int64(offset + filled))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            filled += n
        }
        return true
    }

    /// Writes all of `bytes`.
    package static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        var written = 0
        while written < bytes.count {
            written += try syscall("write") { Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written) }
        }
    }

    /// Writes all of `data`.
    package static func writeAll(_ descriptor: Int32, _ data: some ContiguousBytes) throws(SystemCallError) {
        let failure: SystemCallError? = data.withUnsafeBytes { bytes in
            do throws(SystemCallError) { try writeAll(descriptor, bytes) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }

    /// Reads until `bytes` is full or the file ends, from `offset`: the bytes read.
    package static func readFully(_ descriptor: Int32, into bytes: inout [UInt8], at offset: Int) throws(SystemCallError) -> Int {
        let result: Result<Int, SystemCallError> = bytes.withUnsafeMutableBytes { buffer in
            do throws(SystemCallError) { return .success(try readFully(descriptor, into: buffer, at: offset)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// `close(2)`, its failure thrown (a write the kernel deferred can fail here;
    /// never retried: on Linux the descriptor is gone either way).
    package static func close(_ descriptor: Int32, _ what: @autoclosure () -> String) throws(SystemCallError) {
        guard Glibc.close(descriptor) == 0 else { throw SystemCallError(call: "close \(what())", code: errno) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
import CWebImageSystem

/// The package's one home for reading and writing file descriptors: every call
/// retried when a signal interrupts it (`EINTR`), short reads and writes continued.
package enum FileIO {
    /// `read(2)`, or `pread(2)` at `offset`, retried on `EINTR`: the bytes read,
    /// 0 at the end, or -1 with `errno` set.
    package static func read(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int, at offset: Int? = nil) -> Int {
        while true {
            let n = if let offset { pread(descriptor, buffer, count, off_t(offset)) } else { Glibc.read(descriptor, buffer, count) }
            if n < 0 && errno == EINTR { continue }
            return n
        }
    }

    /// Reads until `buffer` is full or the file ends (from `offset` with `pread`):
    /// the bytes read, or -1 on an error.
    package static func readFully(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int? = nil) -> Int {
        var filled = 0
        while filled < buffer.count {
            let n = read(descriptor, buffer.baseAddress! + filled, buffer.count - filled, at: offset.map { $0 + filled })
            if n < 0 { return -1 }
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    /// Fills `buffer` from `offset` only from the page cache (`preadv2` with
    /// `RWF_NOWAIT`): true when every byte was there; false when any would have
    /// waited for the disk, the file ended early, or the filesystem or kernel
    /// cannot read without waiting. Never blocks on the disk.
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

    /// Writes all of `bytes`: 0, or the `errno` of the failure.
    package static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        var written = 0
        while written < bytes.count {
            let n = Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            written += n
        }
        return 0
    }
}

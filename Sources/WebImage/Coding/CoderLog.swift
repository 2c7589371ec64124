public import Logging

/// Where a coder writes what it has to say about an input that is not an error
/// (a PNG chunk's bad CRC that its decoder got past, a libvips warning), so that
/// it reaches the service's log with the request it belongs to.
///
/// While the manager decodes for a load it binds ``logger`` to its own logger
/// with the load's `key` in the metadata; a coder called directly sees nil and
/// logs to its own logger instead.
/// ```swift
/// (CoderLog.logger ?? myLogger).warning("qoi: trailing bytes ignored")
/// ```
public enum CoderLog {
    @TaskLocal public static var logger: Logger?
}

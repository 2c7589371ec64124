import ArgumentParser
import Foundation
import WebImage
import WebImageKit
import WebImageSamples

/// Writes the demo's sample images (``SampleImages``).
struct SamplesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "samples", abstract: "Write sample images into a directory (for the demo and tests).")

    @Argument(help: "The directory to write into.")
    var directory: String

    func validate() throws {
        if directory.isEmpty { throw ValidationError("an empty path names no directory") }
    }

    /// A directory that cannot be (a file is there) exits 2, a write that fails 1,
    /// each with a plain message.
    func run() async throws {
        do {
            for name in try SampleImages.write(to: URL(fileURLWithPath: directory)) { print(name) }
        } catch let error as WebImageError {
            Terminal.error("samples: \(error.message)")
            throw ExitCode(error.code == .invalidArgument ? 2 : 1)
        }
    }
}

import ArgumentParser
import Foundation
import WebImageKit
import WebImageSamples

/// Writes the demo's sample images (``SampleImages``).
struct SamplesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "samples", abstract: "Write sample images into a directory (for the demo and tests).")

    @Argument(help: "The directory to write into.")
    var directory: String

    func run() async throws {
        for name in try SampleImages.write(to: URL(fileURLWithPath: directory)) { print(name) }
    }
}

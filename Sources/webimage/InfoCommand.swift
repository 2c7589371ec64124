import ArgumentParser
import Foundation
import WebImage
import WebImageKit

struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "info", abstract: "Describe an image: format, size, scale, frames, orientation.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "A URL or file path.")
    var input: String

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        let manager = try await global.manager()
        do {
            guard let url = inputURL(input) else { throw WebImageError(.invalidURL, "'\(input)' is not a URL or path") }
            let result = try await manager.loadImage(with: url, options: [.waitStoreCache])
            guard let image = result.image else { throw WebImageError(.decodeFailed, "no image") }
            let info: [String: Any?] = [
                "input": input,
                "format": image.format?.rawValue,
                "pixelWidth": image.pixelSize.width, "pixelHeight": image.pixelSize.height,
                "width": image.width, "height": image.height, "scale": image.scale,
                "frameCount": image.frameCount,
                "frameDurations": image.frames.map { Double($0.duration.components.seconds) + Double($0.duration.components.attoseconds) / 1e18 },
                "loopCount": image.loopCount,
                "orientation": image.storedOrientation.rawValue,
                "hasAlpha": image.hasAlpha,
                "cacheType": result.cacheType.rawValue,
            ]
            if json {
                print(jsonLine(info))
            } else {
                for key in info.keys.sorted() { print("\(key): \(info[key]!.map { "\($0)" } ?? "null")") }
            }
        } catch {
            if json { print(jsonLine(["input": input, "error": errorObject(error)])) } else { Terminal.error("\(input): \(error)") }
            throw ExitCode.failure
        }
    }
}

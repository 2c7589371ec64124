import ArgumentParser
import Foundation
import WebImage
import WebImageKit
import WebImageVips

struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "info", abstract: "Describe an image from its header: format, size, frames, orientation, alpha, colour profile. Decodes no pixels (unless --placeholder), writes no cache.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "A URL or file path.")
    var input: String

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(help: "Add blurHash and thumbHash (base64): decodes a 100x100 thumbnail, still writing no cache.")
    var placeholder = false

    func run() async throws {
        let manager = try await global.manager()
        do {
            guard let url = inputURL(input) else { throw WebImageError(.invalidURL, "'\(input)' is not a URL or path") }
            // Headers only, and nothing written: describing an image must not cost
            // its decoded size, nor fill the cache with what was only looked at.
            let (info, cacheType) = try await manager.info(for: url)
            let scale = ImageScale.scale(forKey: manager.cacheKey(for: url))
            var placeholders: ImagePlaceholders?
            if placeholder {
                var context = ImageContext()
                context.storeCacheTiers = .none
                placeholders = try await manager.placeholders(for: url, context: context)
            }
            var fields: [String: Any?] = [
                "input": input,
                "format": info.format?.rawValue,
                "pixelWidth": info.pixelSize.width, "pixelHeight": info.pixelSize.height,
                "width": Double(info.pixelSize.width) / scale, "height": Double(info.pixelSize.height) / scale, "scale": scale,
                "frameCount": info.frameCount,
                "frameDurations": info.frameDurations.map(\.timeInterval),
                "loopCount": info.loopCount,
                "orientation": info.storedOrientation.rawValue,
                "hasAlpha": info.hasAlpha,
                "hasColorProfile": info.hasColorProfile,
                "colorSpace": info.colorSpace,
                "cacheType": cacheType.rawValue,
            ]
            if let placeholders {
                fields["blurHash"] = placeholders.blurHash
                fields["thumbHash"] = placeholders.thumbHashBase64
            }
            if json {
                print(jsonLine(fields))
            } else {
                for key in fields.keys.sorted() { print("\(key): \(fields[key]!.map { "\($0)" } ?? "null")") }
            }
        } catch {
            if json { print(jsonLine(["input": input, "error": errorObject(error)])) } else { Terminal.error("\(input): \(error)") }
            throw ExitCode.failure
        }
    }
}

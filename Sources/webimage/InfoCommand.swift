import ArgumentParser
import Foundation
import WebImage
import WebImageHTTP
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
            var context = ImageContext()
            context.storeCacheTiers = .none
            let (info, cacheType) = try await manager.info(for: url, context: context)
            let scale = ImageScale.scale(forKey: manager.cacheKey(for: url))
            var placeholders: ImagePlaceholders?
            if placeholder {
                placeholders = try await manager.placeholders(for: url, context: context)
            }
            // The same fields as `webimage serve`'s /info answers.
            var fields = info.fields(scale: scale, cacheType: cacheType, placeholders: placeholders)
            fields["input"] = input
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

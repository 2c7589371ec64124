import Foundation
import HTTPTypes
public import WebImage

extension ImageEndpoint {
    /// The parameters `info` reads (`s` is a signed URL's signature); any other is 400.
    public static let infoParameterNames: Set<String> = ["url", "placeholder", "s"]

    /// The parameters `placeholder` reads; any other is 400.
    public static let placeholderParameterNames: Set<String> = ["url", "s"]

    /// `placeholder?url=…`: `{"blurHash": …, "thumbHash": base64}` from a 100x100
    /// thumbnail the manager caches like any other.
    func placeholder(_ parameters: QueryParameters) async throws -> ImageResponse {
        try parse { try parameters.requireKnown(Self.placeholderParameterNames) }
        let url = try parse { try ThumbnailQuery.sourceURL(parameters, schemes: settings.sourceSchemes) }
        let placeholders = try await originPlaces.run(url) { try await makePlaceholders(url, context(for: url)) }
        return Self.json(["blurHash": placeholders.blurHash, "thumbHash": placeholders.thumbHashBase64], maxAge: settings.cacheMaxAge)
    }

    /// `info?url=…[&placeholder=1]`: `ImageInfo/fields(scale:cacheType:placeholders:)`
    /// as JSON, from the header alone (and a 100x100 thumbnail for the placeholders).
    func info(_ parameters: QueryParameters) async throws -> ImageResponse {
        try parse { try parameters.requireKnown(Self.infoParameterNames) }
        let url = try parse { try ThumbnailQuery.sourceURL(parameters, schemes: settings.sourceSchemes) }
        let wantsPlaceholders = try parse { () throws -> Bool in
            // One spelling each, as thumbnail's numbers have: `true` or `yes` would be another URL for the same answer.
            switch parameters["placeholder"] {
            case nil, "0": return false
            case "1": return true
            case let text?: throw WebImageError(.invalidArgument, "placeholder='\(text)' is not 1 or 0")
            }
        }
        let context = context(for: url)
        let (info, cacheType, placeholders) = try await originPlaces.run(url) {
            let (info, cacheType) = try await manager.info(for: url, context: context)
            return (info, cacheType, wantsPlaceholders ? try await makePlaceholders(url, context) : nil)
        }
        let scale = ImageScale.scale(forKey: manager.cacheKey(for: url))
        var fields = info.fields(scale: scale, cacheType: cacheType, placeholders: placeholders)
        fields["url"] = url.absoluteString
        return Self.json(fields, maxAge: settings.cacheMaxAge)
    }

    private func makePlaceholders(_ url: URL, _ context: ImageContext) async throws -> ImagePlaceholders {
        guard let maker = settings.placeholderMaker else {
            throw RequestError(WebImageError(.notFound, "placeholders are not offered here"))
        }
        return try await maker(manager, url, context)
    }
}

extension ImageInfo {
    /// The fields `webimage info --json` prints and the endpoint's `info` answers:
    /// `format`, `pixelWidth`, `pixelHeight` (upright, EXIF orientation applied),
    /// `storedPixelWidth` and `storedPixelHeight` (only where the file stores
    /// another size: before its orientation or crop, `ImageInfo/storedPixelSize`),
    /// `width`, `height` and `scale` (points at the URL's `@2x`/`@3x` scale),
    /// `frameCount`, `frameDurations` (seconds), `loopCount`, `pageCount` (a PDF's
    /// or TIFF's pages; 1 otherwise), `orientation` (the
    /// stored EXIF value), `hasAlpha`, `hasColorProfile`, `colorSpace`,
    /// `cacheType`, and with placeholders `blurHash` and `thumbHash` (base64).
    public func fields(scale: Double, cacheType: CacheType, placeholders: ImagePlaceholders? = nil) -> [String: Any?] {
        var fields: [String: Any?] = [
            "format": format?.rawValue,
            "pixelWidth": pixelSize.width, "pixelHeight": pixelSize.height,
            "width": Double(pixelSize.width) / scale, "height": Double(pixelSize.height) / scale, "scale": scale,
            "frameCount": frameCount,
            "frameDurations": frameDurations.map(\.timeInterval),
            "loopCount": loopCount,
            "pageCount": pageCount,
            "orientation": storedOrientation.rawValue,
            "hasAlpha": hasAlpha,
            "hasColorProfile": hasColorProfile,
            "colorSpace": colorSpace,
            "cacheType": cacheType.rawValue,
        ]
        if storedPixelSize != pixelSize {
            fields["storedPixelWidth"] = storedPixelSize.width
            fields["storedPixelHeight"] = storedPixelSize.height
        }
        if let placeholders {
            fields["blurHash"] = placeholders.blurHash
            fields["thumbHash"] = placeholders.thumbHashBase64
        }
        return fields
    }
}

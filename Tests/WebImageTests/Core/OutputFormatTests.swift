import Foundation
import Testing
@testable import WebImage

@Suite("Output format: alpha, and negotiation from Accept")
struct OutputFormatTests {
    struct Blank: ImageStorage { var byteCount: Int { 0 } }

    func image(format: ImageFormat?, alpha: Bool = false, frames: Int = 1) -> Image {
        Image(pixelSize: PixelSize(4), frames: Array(repeating: Image.Frame(duration: .milliseconds(100)), count: frames),
              format: format, hasAlpha: alpha, storage: Blank())
    }

    let everything: (ImageFormat) -> Bool = { _ in true }

    @Test("the requested format, else the source's, else PNG/JPEG; alpha never lands in JPEG")
    func output() {
        #expect(ImageFormat.output(for: image(format: .jpeg), requested: nil, canEncode: everything) == .jpeg)
        #expect(ImageFormat.output(for: image(format: .jpeg), requested: .webp, canEncode: everything) == .webp)
        #expect(ImageFormat.output(for: image(format: .jpeg, alpha: true), requested: nil, canEncode: everything) == .png)
        #expect(ImageFormat.output(for: image(format: .png, alpha: true), requested: .jpeg, canEncode: everything) == .png)
        #expect(ImageFormat.output(for: image(format: .jpeg, alpha: true), requested: .webp, canEncode: everything) == .webp)
        #expect(ImageFormat.output(for: image(format: .jpeg, alpha: true), requested: .avif, canEncode: everything) == .avif)
        #expect(ImageFormat.output(for: image(format: nil), requested: nil, canEncode: everything) == .jpeg)
        #expect(ImageFormat.output(for: image(format: .svg), requested: nil, canEncode: { $0 != .svg }) == .jpeg)
        #expect(ImageFormat.output(for: image(format: .jpeg, alpha: true), requested: nil, canEncode: { $0 == .jpeg || $0 == .webp }) == .webp,
                "no PNG encoder: another format with alpha")
        #expect(ImageFormat.output(for: image(format: .jpeg), requested: nil, canEncode: { _ in false }) == nil)
    }

    // What browsers send for <img> requests (2025–2026 releases).
    static let chrome = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
    static let firefox = "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
    static let safari = "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
    static let oldSafari = "image/png,image/svg+xml,image/*;q=0.8,video/*;q=0.8,*/*;q=0.5"
    static let oldFirefox = "image/webp,*/*"
    static let curl = "*/*"
    let all: Set<ImageFormat> = [.avif, .webp, .jpeg, .png, .gif]

    @Test("current browsers get AVIF, older ones WebP, and clients naming neither JPEG or PNG", arguments: [
        (chrome, ImageFormat.avif), (firefox, .avif), (safari, .avif), (oldFirefox, .webp), (oldSafari, .jpeg), (curl, .jpeg), ("", .jpeg),
    ])
    func browsers(accept: String, expected: ImageFormat) {
        #expect(ImageFormat.negotiate(accept: accept, hasAlpha: false, isAnimated: false, allowed: all) == expected)
    }

    @Test("alpha falls back to PNG, animations to animated WebP or GIF")
    func alphaAndAnimation() {
        #expect(ImageFormat.negotiate(accept: Self.oldSafari, hasAlpha: true, isAnimated: false, allowed: all) == .png)
        #expect(ImageFormat.negotiate(accept: Self.chrome, hasAlpha: true, isAnimated: false, allowed: all) == .avif)
        #expect(ImageFormat.negotiate(accept: Self.chrome, hasAlpha: false, isAnimated: true, allowed: all) == .webp)
        #expect(ImageFormat.negotiate(accept: Self.oldSafari, hasAlpha: false, isAnimated: true, allowed: all) == .gif)
        #expect(ImageFormat.negotiate(accept: nil, hasAlpha: true, isAnimated: true, allowed: all) == .gif)
    }

    @Test("the allowed set, q values, q=0 and malformed or unknown entries")
    func details() {
        #expect(ImageFormat.negotiate(accept: Self.chrome, hasAlpha: false, isAnimated: false, allowed: [.webp, .jpeg]) == .webp)
        #expect(ImageFormat.negotiate(accept: Self.chrome, hasAlpha: false, isAnimated: false, allowed: [.jpeg, .png]) == .jpeg)
        #expect(ImageFormat.negotiate(accept: "image/avif;q=0.5,image/webp;q=0.9", hasAlpha: false, isAnimated: false, allowed: all) == .webp)
        #expect(ImageFormat.negotiate(accept: "image/avif;q=0,image/webp", hasAlpha: false, isAnimated: false, allowed: all) == .webp)
        #expect(ImageFormat.negotiate(accept: "image/avif;q=0", hasAlpha: false, isAnimated: false, allowed: all) == .jpeg)
        #expect(ImageFormat.negotiate(accept: "IMAGE/WEBP ; Q=1", hasAlpha: false, isAnimated: false, allowed: all) == .webp)
        for junk in ["image/jxl", "text/html", ";;;,,,", "image/avif;q=nan", "webp", String(repeating: "image/x,", count: 10_000)] {
            let format = ImageFormat.negotiate(accept: junk, hasAlpha: false, isAnimated: false, allowed: all)
            #expect(format == (junk == "image/avif;q=nan" ? .avif : .jpeg), "\(junk.prefix(40))")
        }
        #expect(ImageFormat.negotiate(accept: Self.chrome, hasAlpha: false, isAnimated: false, allowed: []) == .jpeg, "an empty set still answers")
    }

    @Test("JPEG XL: first for a client that names it where the set allows it, never for an animation; elsewhere the keys are as before")
    func jpegXL() {
        let withJXL = all.union([.jxl])
        let safari17 = "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
        #expect(AcceptedFormats(accept: safari17, allowed: withJXL).modern == [.jxl, .avif, .webp])
        #expect(AcceptedFormats(accept: safari17, allowed: withJXL).key == "auto(jxl,avif,webp)")
        #expect(ImageFormat.negotiate(accept: safari17, hasAlpha: true, isAnimated: false, allowed: withJXL) == .jxl, "JPEG XL has alpha")
        #expect(ImageFormat.negotiate(accept: safari17, hasAlpha: false, isAnimated: true, allowed: withJXL) == .webp, "animations: not JPEG XL")
        // Not allowed (the default set): as if the client had not named it.
        #expect(AcceptedFormats(accept: safari17, allowed: all).key == "auto(avif,webp)")
        // A client's q values still rank it.
        #expect(ImageFormat.negotiate(accept: "image/jxl;q=0.5,image/avif", hasAlpha: false, isAnimated: false, allowed: withJXL) == .avif)
        #expect(ImageFormat.negotiate(accept: "image/jxl;q=0", hasAlpha: false, isAnimated: false, allowed: withJXL) == .jpeg)
        #expect(ImageFormat.negotiate(accept: Self.chrome, hasAlpha: false, isAnimated: false, allowed: withJXL) == .avif, "Chrome does not name it")
        // Effort: 5 by default, libvips' range 3...9.
        #expect(EncodeOptions().effort(for: .jxl) == 5 && EncodeOptions(effort: 0).effort(for: .jxl) == 3 && EncodeOptions(effort: 9).effort(for: .jxl) == 9)
    }

    @Test("Accept headers reduce to a few keys: one per answer, not per header")
    func acceptedKeys() {
        let keys = Set([Self.chrome, Self.firefox, Self.safari].map { AcceptedFormats(accept: $0, allowed: all).key })
        #expect(keys == ["auto(avif,webp)"] || keys == ["auto(avif,webp)", "auto(webp,avif)"])
        #expect(AcceptedFormats(accept: Self.safari, allowed: all).key == "auto(avif,webp)", "equal q: our order")
        #expect(AcceptedFormats(accept: Self.oldSafari, allowed: all).key == "auto()")
        #expect(AcceptedFormats(accept: Self.curl, allowed: all).key == AcceptedFormats(accept: nil, allowed: all).key)
        #expect(AcceptedFormats(accept: Self.chrome, allowed: [.jpeg, .webp]).key == "auto(webp;jpeg)")
        // The allowed set is part of the key: a result made without PNG is not served once PNG is allowed.
        #expect(AcceptedFormats(accept: "*/*", allowed: [.jpeg, .webp, .avif, .gif]).key != AcceptedFormats(accept: "*/*", allowed: all).key)
        // No modern format goes to a client that did not name it, whatever the set lacks.
        let noPNG = AcceptedFormats(accept: "*/*", allowed: [.jpeg, .webp, .avif])
        #expect(noPNG.format(hasAlpha: true, isAnimated: false) == .png && noPNG.format(hasAlpha: false, isAnimated: true) == .png)
        #expect(AcceptedFormats(accept: "*/*", allowed: [.webp, .gif]).format(hasAlpha: true, isAnimated: false) == .gif)
        var context = ImageContext(thumbnailPixelSize: PixelSize(64), encodeFormat: .png)
        context.acceptedFormats = AcceptedFormats(accept: Self.chrome, allowed: all)
        #expect(CacheKey.derived(from: "k", options: [], context: context) == "k#webimage(thumb=64x64,f=auto(avif,webp))")
    }

    @Test("encode options: clamped, effort per format, and a key that names what differs from the default")
    func encodeOptions() {
        #expect(EncodeOptions(quality: 500).quality == 100 && EncodeOptions(quality: -3).quality == 1)
        #expect(EncodeOptions(effort: 40).effort == 9 && EncodeOptions(effort: -1).effort == 0)
        #expect(EncodeOptions(effort: 9).effort(for: .webp) == 6 && EncodeOptions(effort: 9).effort(for: .avif) == 9)
        #expect(EncodeOptions().effort(for: .webp) == EncodeOptions.defaultEffort(for: .webp))
        #expect(EncodeOptions.derivedDefault.key == "q90")
        #expect(EncodeOptions(quality: 70, progressive: true, keepColorProfile: true, effort: 4, chromaSubsampling: .off, background: .black).key
                == "q70,prog,icc,e4,sub=off,bg=000000")
        #expect(RGBColor(parsing: "#FfF") == .white && RGBColor(parsing: "0,128,255") == RGBColor(red: 0, green: 128, blue: 255))
        for bad in ["", "#12345", "ggg", "256,0,0", "1,2", "white!", "-1,0,0"] { #expect(RGBColor(parsing: bad) == nil, "\(bad)") }
    }

    @Test("derived keys carry non-default encode options, and keepColorProfile marks even a plain decode")
    func keys() {
        let context = ImageContext(thumbnailPixelSize: PixelSize(64))
        #expect(CacheKey.derived(from: "k", options: [], context: context) == "k#webimage(thumb=64x64)")
        #expect(CacheKey.derived(from: "k", options: [], context: context, encodeOptions: EncodeOptions(quality: 70)) == "k#webimage(thumb=64x64,e=q70)")
        #expect(CacheKey.derived(from: "k", options: [], context: ImageContext(), encodeOptions: EncodeOptions(quality: 70)) == "k")
        #expect(CacheKey.derived(from: "k", options: [], context: ImageContext(), encodeOptions: EncodeOptions(quality: 90, keepColorProfile: true)) == "k#webimage(icc)")
    }
}

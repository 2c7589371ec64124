import Foundation
import Testing
import WebImage
import WebImageKit
import WebImageTestSupport
import WebImageVips

/// The colour steps through the spec grammar and the tool (their pixels:
/// WebImageVipsTests' ColourAdjustmentTests; the service: ImageEndpointTests).
@Suite("Colour steps in specs and the tool", .offCooperativePool)
struct ColourSpecTests {
    @Test("the spec grammar: each step with its bounds; bad values are invalidArgument naming the step")
    func grammar() throws {
        let chain = try TransformSpec.parse("brightness:1.2;contrast:0.8;saturation:0;gamma:2.2;pixelate:8")
        #expect(chain.steps.map(\.key) == ["brightness(1.2)", "contrast(0.8)", "saturation(0.0)", "gamma(2.2)", "pixelate(8)"])
        #expect(try TransformSpec.parse("saturate:2").key == "saturation(2.0)")
        #expect(try TransformSpec.parse("dpr:2;pixelate:4").key == "pixelate(8)", "a block is a size: times the DPR")
        for bad in ["brightness:-1", "brightness:11", "brightness:x", "brightness", "contrast:1,2", "saturation:nan", "gamma:0", "gamma:11",
                    "pixelate:0", "pixelate:99999", "pixelate:-3", "pixelate:inf", "brightness:1:2", "gamma:2:"] {
            #expect {
                try TransformSpec.parse(bad)
            } throws: { error in
                guard let error = error as? WebImageError else { return false }
                return error.code == .invalidArgument && error.message.contains(bad)
            }
        }
        // What they cost: a pass each; pixelate two.
        let footprint = ImageFootprint(size: PixelSize(1000), bands: 3)
        #expect(TransformCost.estimate(try TransformSpec.parse("brightness:2;pixelate:10"), input: footprint) == 3)
    }

    @Test("text: in the grammar, sizes times the DPR, fonts only from the configured set, bad fields invalidArgument naming the step")
    func textGrammar() throws {
        let mark = try #require(try TransformSpec.parse("text:© Example 2026:32:ff0000:0.5:nw") as? ImageTransformers.TextWatermark)
        #expect(mark.text == "© Example 2026" && mark.size == 32 && mark.colour == RGBColor(red: 255, green: 0, blue: 0) && mark.opacity == 0.5 && mark.gravity == .northWest)
        #expect(mark.font == ImageTransformers.TextWatermark.defaultFont)
        #expect((try TransformSpec.parse("dpr:2;text:x") as? ImageTransformers.TextWatermark)?.size == 48)
        let limits = TransformSpec.Limits(fonts: ["DejaVu Sans", "DejaVu Serif"])
        #expect((try TransformSpec.parse("text:x:::::dejavu serif", limits: limits) as? ImageTransformers.TextWatermark)?.font == "DejaVu Serif")
        // A combining mark on a letter draws; after ':' it stays with its own field.
        #expect((try TransformSpec.parse("text:e\u{301}:30") as? ImageTransformers.TextWatermark).map { ($0.text, $0.size) } ?? ("", 0) == ("e\u{301}", 30))
        for bad in ["text", "text:", "text:x:3", "text:x:999", "text:x:24:notacolour", "text:x:24:fff:2", "text:x:24:fff:0.5:up",
                    "text:x:24:fff:0.5:se:Comic Sans", "text:a:b:c:d:e:f:g", "text:" + String(repeating: "a", count: 101),
                    // Nothing that draws: spaces, format characters (RLO, BOM, ZWSP, a tag), a combining mark alone.
                    "text: ", "text:\u{202E}", "text:\u{FEFF}", "text:\u{200B}", "text:\u{E0001}", "text:\u{301}", "text:\u{301}:24",
                    // Letters and symbols blank by design: Hangul fillers, the blank Braille pattern.
                    "text:\u{3164}", "text:\u{3164} \u{3164}", "text:\u{115F}", "text:\u{FFA0}", "text:\u{2800}\u{2800}"] {
            #expect {
                try TransformSpec.parse(bad, limits: limits)
            } throws: { error in
                guard let error = error as? WebImageError else { return false }
                // Named once: the field's message is not wrapped in the step's again.
                return error.code == .invalidArgument && error.message.contains("transform '")
                    && error.message.components(separatedBy: "transform '").count == 2 && !error.message.contains("expected transform")
            }
        }
    }

    @Test("the tool: --transform saturation:0 writes a grey image, brightness:0 a black one; a bad value exits 2 naming it")
    func tool() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let photo = samples.appendingPathComponent("photo-1.jpg").path
        let out = tool.home.appendingPathComponent("out")
        for (spec, check) in [("saturation:0", { (r: Int, g: Int, b: Int) in abs(r - g) <= 1 && abs(g - b) <= 1 }), ("brightness:0", { (r: Int, g: Int, b: Int) in r + g + b == 0 })] {
            let result = try await tool.run(["load", "--json", "--store", "none", "--transform", "resize:64x64;\(spec)", "--format", "png", "--out", out.path, photo])
            let file = try #require(result.lines.first?["output"] as? String, "\(result.stdout) \(result.stderr)")
            let image = try VipsImageCoder().decode(try Data(contentsOf: URL(fileURLWithPath: file)), options: DecodeOptions())
            let pixels = try #require(image.storage(as: VipsStorage.self)).pixels(frameHeight: image.pixelSize.height)
            let n = pixels.channels
            #expect(n >= 3 && (0..<pixels.size.area).allSatisfy { check(Int(pixels.bytes[$0 * n]), Int(pixels.bytes[$0 * n + 1]), Int(pixels.bytes[$0 * n + 2])) }, "\(spec)")
        }
        let bad = try await tool.run(["load", "--store", "none", "--transform", "gamma:0", photo])
        #expect(bad.status == 2 && bad.stderr.contains("gamma:0"), "\(bad.stderr)")
    }
}

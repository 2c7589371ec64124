import Foundation
import Testing
import WebImage
import WebImageTestSupport

/// The opt-in formats through the tool, as a user runs it.
@Suite("Opt-in formats through webimage", .offCooperativePool)
struct FormatOptInToolTests {
    @Test("--format jxl writes JPEG XL with vips.allowUntrusted, and is refused without it; an SVG draws with vips.svg, is refused without it")
    func optIns() async throws {
        let tool = Tool()
        defer { tool.cleanUp() }
        let samples = tool.home.appendingPathComponent("samples")
        _ = try await tool.run(["samples", samples.path])
        let photo = samples.appendingPathComponent("photo-1.jpg").path
        let out = tool.home.appendingPathComponent("out")
        let allowed = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "64", "--format", "jxl", "--out", out.path,
                                          "--set", "vips.allowUntrusted=true", photo])
        let file = try #require(allowed.lines.first?["output"] as? String, "\(allowed.stdout) \(allowed.stderr)")
        let written = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(file.hasSuffix(".jxl") && ImageFormat.sniff(written) == .jxl)
        let refused = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "64", "--format", "jxl", "--out", out.path, photo])
        #expect(refused.status != 0 && (refused.stdout + refused.stderr).contains("vips.allowUntrusted"), "\(refused.stdout) \(refused.stderr)")

        let svg = tool.home.appendingPathComponent("a.svg")
        try Data("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"200\"><rect width=\"400\" height=\"200\" fill=\"red\"/></svg>".utf8).write(to: svg)
        let drawn = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "100", "--format", "png", "--out", out.path, "--set", "vips.svg=true", svg.path])
        #expect(drawn.status == 0 && drawn.lines.first?["pixelWidth"] as? Int == 100 && drawn.lines.first?["pixelHeight"] as? Int == 50, "\(drawn.stdout) \(drawn.stderr)")
        let notDrawn = try await tool.run(["load", "--json", "--store", "none", "--thumbnail", "100", svg.path])
        let error = notDrawn.lines.first?["error"] as? [String: Any]
        #expect(notDrawn.status == 1 && error?["code"] as? String == "unsupportedFormat" && (error?["message"] as? String)?.contains("vips.svg") == true, "\(notDrawn.stdout)")
    }
}

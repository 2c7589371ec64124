import Foundation
public import WebImage
import WebImageVips

/// Parses transformer specifications as the command line and query strings write them:
///
/// | spec | transformer |
/// | --- | --- |
/// | `resize:256x256`, `resize:256x256:fill`, `resize:200x100:stretch` | ``ImageTransformers/Resize`` |
/// | `crop:x,y,w,h` | ``ImageTransformers/Crop`` |
/// | `rotate:90`, `rotate:-12.5` | ``ImageTransformers/Rotate`` |
/// | `flip:h`, `flip:v` | ``ImageTransformers/Flip`` |
/// | `round:16` | ``ImageTransformers/RoundCorners`` |
/// | `blur:2.5` | ``ImageTransformers/Blur`` |
/// | `tint:r,g,b[,amount]` | ``ImageTransformers/Tint`` |
public enum TransformSpec {
    /// One transformer, or several joined with `;` (a pipeline).
    public static func parse(_ text: String) throws -> any ImageTransformer {
        let parts = text.split(separator: ";").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !parts.isEmpty else { throw WebImageError(.invalidArgument, "empty transform") }
        let transformers = try parts.map(parseOne)
        return transformers.count == 1 ? transformers[0] : ImageTransformers.Pipeline(transformers)
    }

    static func parseOne(_ text: String) throws -> any ImageTransformer {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let name = fields[0].lowercased()
        func bad(_ expected: String) -> WebImageError {
            WebImageError(.invalidArgument, "transform '\(text)': expected \(expected)")
        }
        /// Numbers, each finite and within `range`: a value that does not fit an Int
        /// (found by fuzzing: `round:8666…6` trapped), infinity or NaN is refused here.
        func numbers(_ index: Int, count: ClosedRange<Int>, within range: ClosedRange<Double> = -1e7...1e7) throws -> [Double] {
            guard fields.count > index else { throw bad("\(name):…") }
            let values = fields[index].split(separator: ",").compactMap { Double($0) }
            guard count.contains(values.count), values.count == fields[index].split(separator: ",").count else { throw bad("\(count.lowerBound) number(s) after '\(name):'") }
            guard values.allSatisfy({ $0.isFinite && range.contains($0) }) else {
                throw bad("numbers from \(range.lowerBound.formatted()) to \(range.upperBound.formatted()) after '\(name):'")
            }
            return values
        }
        switch name {
        case "resize":
            guard fields.count >= 2, let size = PixelSize(parsing: fields[1]) else { throw bad("resize:WxH[:fit|fill|stretch]") }
            let mode = fields.count > 2 ? ImageTransformers.ResizeMode(rawValue: fields[2].lowercased()) : .fit
            guard let mode else { throw bad("fit, fill or stretch") }
            return ImageTransformers.Resize(size, mode: mode)
        case "crop":
            let v = try numbers(1, count: 4...4, within: 0...1e7).map(Int.init)
            guard v[2] > 0, v[3] > 0 else { throw bad("a crop with a positive width and height") }
            return ImageTransformers.Crop(x: v[0], y: v[1], width: v[2], height: v[3])
        case "rotate":
            return ImageTransformers.Rotate(degrees: try numbers(1, count: 1...1)[0])
        case "flip":
            guard fields.count == 2, ["h", "v"].contains(fields[1].lowercased()) else { throw bad("flip:h or flip:v") }
            return ImageTransformers.Flip(vertical: fields[1].lowercased() == "v")
        case "round":
            return ImageTransformers.RoundCorners(radius: Int(try numbers(1, count: 1...1, within: 0...1e7)[0]))
        case "blur":
            // libvips' Gaussian mask grows with sigma: an absurd one costs minutes and gigabytes.
            let sigma = try numbers(1, count: 1...1, within: 0...100)[0]
            guard sigma > 0 else { throw bad("a positive blur radius") }
            return ImageTransformers.Blur(sigma: sigma)
        case "tint":
            let v = try numbers(1, count: 3...4)
            guard v.prefix(3).allSatisfy({ (0...255).contains($0) }) else { throw bad("colour components 0...255") }
            guard v.count < 4 || (0...1).contains(v[3]) else { throw bad("a tint amount from 0 to 1") }
            return ImageTransformers.Tint(red: UInt8(v[0]), green: UInt8(v[1]), blue: UInt8(v[2]), amount: v.count > 3 ? v[3] : 0.5)
        default:
            throw bad("one of resize, crop, rotate, flip, round, blur, tint")
        }
    }
}

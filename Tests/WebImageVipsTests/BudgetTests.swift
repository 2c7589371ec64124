import Foundation
import Testing
@testable import WebImage
import WebImageTurboJPEG
import WebImageVips
import WebImageTestSupport

extension VipsTests {
@Suite("Budgets in the coders", .offCooperativePool)
struct CoderBudgetTests {
    @Test("a few hundred bytes declaring 10000x10000 with 10 components: refused from the header by both coders, thumbnail or not")
    func tenComponents() throws {
        for progressive in [true, false] {
            let file = SyntheticImages.declaredJPEG(width: 10_000, height: 10_000, components: 10, progressive: progressive)
            #expect(file.count < 400)
            for coder in [VipsImageCoder() as any ImageCoder, TurboJPEGCoder()] {
                for box in [nil, PixelSize(256)] {
                    let options = DecodeOptions(thumbnailPixelSize: box)
                    if !progressive, box != nil {
                        // Baseline at 1/8 is 1250x1250 x 10 bands (16 MB), within the budget:
                        // libjpeg streams it, and the result (or a typed error) stays in the box.
                        do {
                            let image = try coder.decode(file, options: options)
                            #expect(image.pixelSize.width <= 256 && image.pixelSize.height <= 256)
                        } catch let error as WebImageError {
                            #expect(error.code == .decodeFailed, "\(error)")
                        }
                        continue
                    }
                    let error = #expect(throws: WebImageError.self) { try coder.decode(file, options: options) }
                    #expect(error?.code == .pixelLimitExceeded, "\(type(of: coder)) progressive \(progressive) box \(String(describing: box)): \(String(describing: error))")
                }
            }
        }
    }

    @Test("libvips' SIMD code generator (liborc) is off from the first use of libvips; vips.vector turns it on")
    func vectorOff() throws {
        _ = VipsImageCoder().canEncode(.jpeg)
        #expect(!VipsImageCoder.vectorEnabled, "liborc crashed a server under load: off by default")
        VipsImageCoder.vectorEnabled = true
        #expect(VipsImageCoder.vectorEnabled)
        VipsImageCoder.vectorEnabled = false
        #expect(!VipsImageCoder.vectorEnabled)
    }

    @Test("the memory limit counts bands and depth: a file within the pixel limit but over the bytes is refused, or scaled down")
    func bytesNotPixels() throws {
        let photo = try Fixtures.photoJPEG(width: 600, height: 400)
        let coder = VipsImageCoder()
        let error = #expect(throws: WebImageError.self) { try coder.decode(photo, options: DecodeOptions(memoryLimit: 500_000)) }
        #expect(error?.code == .pixelLimitExceeded && error?.message.contains("3 bands") == true, "\(String(describing: error))")
        var options = DecodeOptions(memoryLimit: 500_000)
        options.scaleDownLargeImages = true
        let fitted = try coder.decode(photo, options: options)
        #expect(fitted.pixelSize.area * 3 <= 500_000 && fitted.pixelSize.width > 100)
    }

    @Test("a long libvips operation stops at its next tile when its job is cancelled, not at its end")
    func killedMidOperation() async throws {
        let image = try VipsImageCoder().decode(try Fixtures.photoJPEG(width: 2400, height: 1800), options: DecodeOptions())
        let blur = ImageTransformers.Blur(sigma: 100)
        // Uncancelled, for the time it takes here.
        let started = ContinuousClock.now
        _ = try await BlockingThreadPool.shared.run { try blur.transform(image) }
        let whole = ContinuousClock.now - started
        // Cancelled a tenth of the way in.
        let flag = CancellationFlag()
        let cancelledAt = Task {
            try await Task.sleep(for: whole / 10)
            flag.cancel()
            return ContinuousClock.now
        }
        let error = await #expect(throws: WebImageError.self) {
            try await BlockingThreadPool.shared.run { try flag.makingCurrent { try blur.transform(image) } }
        }
        let stopped = ContinuousClock.now
        #expect(error?.code == .cancelled, "\(String(describing: error))")
        let late = stopped - (try await cancelledAt.value)
        #expect(late < whole / 2, "stopped \(late) after the cancel; the whole blur takes \(whole)")
    }

    @Test("13 rotations of 45 degrees: refused at the step that would pass the limit, before it runs, within seconds")
    func rotations() throws {
        let image = try VipsImageCoder().decode(try Fixtures.photoJPEG(width: 640, height: 480), options: DecodeOptions())
        let chain = ImageTransformers.Pipeline(Array(repeating: ImageTransformers.Rotate(degrees: 45), count: 13))
        let budget = TransformBudget(pixelLimit: 100_000_000, memoryLimit: 400_000_000)
        let started = ContinuousClock.now
        let error = #expect(throws: WebImageError.self) { try budget.apply(chain, to: image) }
        #expect(error?.code == .pixelLimitExceeded && error?.message.contains("rotate(45.0)") == true, "\(String(describing: error))")
        #expect(ContinuousClock.now - started < .seconds(120), "generous: it used to take 23 s and 2.2 GB at full speed")
        // Every footprint the transformers predict is what they make.
        let small = try VipsImageCoder().decode(try Fixtures.photoJPEG(width: 64, height: 48), options: DecodeOptions())
        let transformers: [any ImageTransformer] = [
            ImageTransformers.Rotate(degrees: 45), ImageTransformers.Rotate(degrees: 90), ImageTransformers.Rotate(degrees: -12.5),
            ImageTransformers.Resize(PixelSize(width: 30, height: 30)), ImageTransformers.Resize(PixelSize(width: 30, height: 20), mode: .fill),
            ImageTransformers.Pad(PixelSize(width: 100, height: 90), background: nil), ImageTransformers.Crop(x: 2, y: 2, width: 10, height: 12),
            ImageTransformers.RoundCorners(radius: 5), ImageTransformers.Tint(red: 1, green: 2, blue: 3),
        ]
        for transformer in transformers {
            let made = ImageFootprint(try transformer.transform(small))
            let predicted = transformer.footprint(after: ImageFootprint(small))
            #expect(made.bytes <= predicted.bytes && made.size.area * 10 >= predicted.size.area * 9, "\(transformer.key): made \(made), predicted \(predicted)")
        }
    }
}
}

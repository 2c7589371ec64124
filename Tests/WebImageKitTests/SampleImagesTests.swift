import Foundation
import Testing
import WebImageTestSupport
import WebImage
import WebImageKit
import WebImageVips
import WebImageSamples

@Suite("Sample images", .offCooperativePool)
struct SampleImagesTests {
    @Test("the orientation transforms: 6 and 8 undo each other, the rest undo themselves, 5-8 swap sides")
    func transforms() {
        // 3x2, every pixel its own value.
        let buffer = PixelBuffer(size: PixelSize(width: 3, height: 2), channels: 1, bytes: [1, 2, 3, 4, 5, 6])
        #expect(SampleImages.transform(buffer, orientation: 2).bytes == [3, 2, 1, 6, 5, 4])
        #expect(SampleImages.transform(buffer, orientation: 3).bytes == [6, 5, 4, 3, 2, 1])
        #expect(SampleImages.transform(buffer, orientation: 4).bytes == [4, 5, 6, 1, 2, 3])
        // Rotating 90° clockwise: the left column, read bottom-up, becomes the top row.
        let clockwise = SampleImages.transform(buffer, orientation: 6)
        #expect(clockwise.size == PixelSize(width: 2, height: 3) && clockwise.bytes == [4, 1, 5, 2, 6, 3])
        #expect(SampleImages.transform(buffer, orientation: 8).bytes == [3, 6, 2, 5, 1, 4])
        #expect(SampleImages.transform(buffer, orientation: 5).bytes == [1, 4, 2, 5, 3, 6])
        #expect(SampleImages.transform(buffer, orientation: 7).bytes == [6, 3, 5, 2, 4, 1])
        for orientation in 1...8 {
            let stored = SampleImages.storedPixels(showing: buffer, orientation: orientation)
            #expect(SampleImages.transform(stored, orientation: orientation).bytes == buffer.bytes, "orientation \(orientation)")
        }
    }

    @Test("every oriented sample decodes, orientation applied, to the same upright picture")
    func orientedSamples() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("samples-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let names = try SampleImages.write(to: directory)
        #expect(names.count == 14 && names.contains("oriented-8.jpg"))
        let coder = VipsImageCoder()
        func upright(_ orientation: Int) throws -> (Image, PixelBuffer) {
            let data = try Data(contentsOf: directory.appendingPathComponent("oriented-\(orientation).jpg"))
            let image = try coder.decode(data, options: DecodeOptions())
            return (image, try #require(image.storage(as: VipsStorage.self)).pixels(frameHeight: image.pixelSize.height))
        }
        let (_, reference) = try upright(1)
        for orientation in 1...8 {
            let (image, pixels) = try upright(orientation)
            #expect(image.storedOrientation == ImageOrientation(exif: orientation), "the file carries tag \(orientation)")
            #expect(image.pixelSize == PixelSize(width: 640, height: 400), "oriented-\(orientation) is upright: \(image.pixelSize)")
            guard pixels.bytes.count == reference.bytes.count else { continue }
            var difference = 0
            for index in stride(from: 0, to: pixels.bytes.count, by: 7) { difference += abs(Int(pixels.bytes[index]) - Int(reference.bytes[index])) }
            let mean = Double(difference) / Double(pixels.bytes.count / 7)
            #expect(mean < 4, "oriented-\(orientation) shows the same picture as oriented-1 (mean difference \(mean))")
        }
    }
}

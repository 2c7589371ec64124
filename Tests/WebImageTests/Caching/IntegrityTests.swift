import Foundation
import Testing
@testable import WebImage

@Suite("Entries that prove themselves")
struct IntegrityTests {
    @Test("XXH64 is XXH64 (seed 0): the reference implementation's vectors")
    func vectors() {
        #expect(XXH64.hash(Data()) == 0xEF46_DB37_51D8_E999)
        #expect(XXH64.hash(Data("a".utf8)) == 0xD24E_C4F1_A98C_6E5B)
        #expect(XXH64.hash(Data("abc".utf8)) == 0x44BC_2CF5_AD77_0999)
        #expect(XXH64.hash(Data("0123456789abcdef0123456789abcdef".utf8)) == 0x642A_9495_8E71_E6C5)
        var long = Data()
        for _ in 0..<3 { long.append(contentsOf: (0...255).map { UInt8($0) }) }
        long.append(contentsOf: Array("xyz".utf8))
        #expect(XXH64.hash(long) == 0xE921_A1B4_5BD7_79F8)
    }

    @Test("XXH3 is XXH3-64 (seed 0): libxxhash's values across its length classes (0, 1–3, 4–8, 9–16, 17–128, 129–240, long)")
    func xxh3Vectors() {
        let bytes = Data((0..<100_003).map { UInt8(truncatingIfNeeded: $0 * 31 + 7) })
        let expected: [(Int, UInt64)] = [
            (0, 0x2D06800538D394C2), (1, 0x4C5CCA45D0F4811F), (3, 0x15F7093B173D005C), (4, 0xDCA012F95811B6B9),
            (8, 0xDEC6A9A43575982E), (9, 0xCBE393399F17FFBD), (16, 0x7E484C18D74895D0), (17, 0x208BDE5EE2BED407),
            (128, 0xF92B70EAA21A6288), (129, 0xF8F76713F2BB60FA), (240, 0xCCC7375172C41F03), (241, 0x0B3B630948CE4A00),
            (1024, 0x23BC880EBF0D29C6), (100_003, 0xE0950E66CF107FE8),
        ]
        for (length, value) in expected {
            #expect(XXH3.hash(bytes.prefix(length)) == value, "\(length) bytes")
            // The LMDB store's hit: the copy and the same value, made together.
            let (copy, hash) = bytes.prefix(length).withUnsafeBytes { XXH3.hashCopying($0) }
            #expect(hash == value, "\(length) bytes copied")
            #expect(copy == bytes.prefix(length), "\(length) bytes copied")
        }
    }

    @Test("XXH3.hash128 is XXH3-128 with its seed: libxxhash's values, seed 0 and another")
    func xxh3Seeded128() {
        let bytes = Data((0..<100_003).map { UInt8(truncatingIfNeeded: $0 * 31 + 7) })
        let expected: [(Int, UInt64, UInt64, UInt64)] = [
            (0, 0x0000000000000000, 0x6001C324468D497F, 0x99AA06D3014798D8),
            (3, 0x0000000000000000, 0x15F7093B173D005C, 0x46F66CB935381565),
            (200, 0x0000000000000000, 0x60EA018811F9A437, 0x8D8629A1AEF9EF90),
            (100_003, 0x0000000000000000, 0xE0950E66CF107FE8, 0xCB5EBD34F7252F19),
            (16, 0x9E3779B97F4A7C15, 0x4E683254A04C377F, 0xBE0F27BAC4D1F58F),
            (1024, 0x9E3779B97F4A7C15, 0x7E249ADC60E1F9B4, 0x927C8D2B50D33F53),
            (100_003, 0x9E3779B97F4A7C15, 0xE09F45FB9BF20B6D, 0x10BBF5066995FB7D),
        ]
        for (length, seed, low, high) in expected {
            let hash = bytes.prefix(length).withUnsafeBytes { XXH3.hash128($0, seed: seed) }
            #expect(hash.low == low && hash.high == high, "\(length) bytes, seed \(seed)")
        }
    }

    @Test("an entry of format 2 (an XXH64 checksum) still reads, checked with XXH64, with no checksum handed on; a flipped byte in it is damaged")
    func codecFormat2() throws {
        let payload = Data([9, 8, 7, 6, 5])
        let record = CacheEntryCodec.record(key: "k", metadata: CacheMetadata(etag: "e"), checksum: XXH64.hash(payload))
        var footer = CacheEntryCodec.footer(recordLength: record.count)
        footer.replaceSubrange(4..<8, with: withUnsafeBytes(of: UInt32(2).littleEndian, Array.init))
        let blob = payload + Data(record) + Data(footer)
        guard case .entry(let entry) = CacheEntryCodec.decode(blob, key: "k") else { Issue.record("a sound format-2 blob"); return }
        #expect(entry.data == payload && entry.metadata.etag == "e" && entry.checksum == nil)
        var flipped = blob
        flipped[1] ^= 1
        guard case .damaged = CacheEntryCodec.decode(flipped, key: "k") else { Issue.record("a flipped format-2 blob"); return }
        guard case .entry(let current) = CacheEntryCodec.decode(CacheEntryCodec.encode(payload, key: "k", metadata: CacheMetadata()), key: "k") else {
            Issue.record("a sound blob"); return
        }
        #expect(current.checksum == XXH3.hash(payload))
    }

    @Test("a flipped payload byte in a file entry is a miss, and the file is removed; the footer alone proves nothing")
    func flippedFileByte() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileCacheStore(directory: directory, limits: .unlimited)
        let payload = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try await store.setData(payload, forKey: "k")
        let url = try #require(try await store.fileURL(forKey: "k"))
        for offset in [0, 1000, 4095] {
            try await store.setData(payload, forKey: "k")
            var file = try Data(contentsOf: url)
            file[offset] ^= 0x10
            try file.write(to: url)
            #expect(try await store.entry(forKey: "k") == nil, "byte \(offset) flipped must not be served")
            #expect(!FileManager.default.fileExists(atPath: url.path), "the damaged entry is removed")
        }
        try await store.setData(payload, forKey: "k")
        #expect(try await store.entry(forKey: "k")?.data == payload)
    }

    @Test("the shared codec: a flipped byte is damaged, another key's blob is left alone, format 1 reads as damaged")
    func codec() throws {
        let blob = CacheEntryCodec.encode(Data([1, 2, 3, 4]), key: "k", metadata: CacheMetadata(etag: "e"))
        guard case .entry(let entry) = CacheEntryCodec.decode(blob, key: "k") else { Issue.record("a sound blob"); return }
        #expect(entry.data == Data([1, 2, 3, 4]) && entry.metadata.etag == "e")
        var flipped = blob
        flipped[2] ^= 1
        guard case .damaged(let reason) = CacheEntryCodec.decode(flipped, key: "k") else { Issue.record("flipped"); return }
        #expect(reason.contains("checksum"))
        guard case .otherKey = CacheEntryCodec.decode(blob, key: "other") else { Issue.record("other key"); return }
        var old = blob
        old[old.count - 12] = 1  // the footer's version field
        guard case .damaged = CacheEntryCodec.decode(old, key: "k") else { Issue.record("format 1"); return }
    }

    @Test("a disk hit no coder reads is removed and loaded again, once; the URL is not blocked")
    func undecodableHit() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileCacheStore(directory: directory, limits: .unlimited)
        let h = Harness(store: store)
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 8, height: 6))
        // Bytes that pass their checksum but are not the image (written so by a bug elsewhere).
        try await store.setData(Data("TIMG".utf8) + Data([1]), forKey: "test://host/a.timg")
        let result = try await h.manager.loadImage(with: h.url("a.timg"), options: .waitStoreCache)
        #expect(result.cacheType == .none && result.image?.pixelSize == PixelSize(width: 8, height: 6))
        #expect(h.loader.requestCount == 1)
        #expect(try await store.entry(forKey: "test://host/a.timg")?.data == TestCoder.encode(width: 8, height: 6))
        #expect(h.manager.blocklist.blockingError(for: "test://host/a.timg") == nil)
        // With .fromCacheOnly the damaged entry is still removed, and the load fails as not decodable.
        try await store.setData(Data("TIMG".utf8), forKey: "test://host/b.timg")
        await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("b.timg"), options: .fromCacheOnly) }
        #expect(try await store.entry(forKey: "test://host/b.timg") == nil)
    }
}

@Suite("Budgets")
struct BudgetTests {
    /// Grows the canvas by `factor` per side, as a rotation does, and says so.
    struct Growing: ImageTransformer {
        var factor: Int
        var key: String { "grow(\(factor))" }
        func footprint(after input: ImageFootprint) -> ImageFootprint {
            var output = input
            output.size = PixelSize(width: input.size.width * factor, height: input.size.height * factor)
            return output
        }
        func transform(_ image: Image) throws -> Image {
            let size = PixelSize(width: image.pixelSize.width * factor, height: image.pixelSize.height * factor)
            return Image(pixelSize: size, hasAlpha: true, storage: PixelBuffer(size: size, channels: 4, bytes: [UInt8](repeating: 0, count: size.area * 4)))
        }
    }

    /// Claims to keep the size, but grows it: the real output is checked too.
    struct Lying: ImageTransformer {
        var key: String { "lie" }
        func transform(_ image: Image) throws -> Image { try Growing(factor: 8).transform(image) }
    }

    @Test("footprints: bytes are width x height x bands x bytes per sample x frames, saturating")
    func footprints() throws {
        #expect(ImageFootprint(size: PixelSize(width: 10_000, height: 10_000), bands: 10).bytes == 1_000_000_000)
        #expect(ImageFootprint(size: PixelSize(width: 100, height: 100), bands: 4, bytesPerSample: 2, frames: 3).bytes == 240_000)
        #expect(ImageFootprint(size: PixelSize(width: .max / 2, height: 4), bands: 4).bytes == .max)
        let error = #expect(throws: WebImageError.self) {
            try ImageFootprint(size: PixelSize(width: 10_000, height: 10_000), bands: 10)
                .check(pixelLimit: 100_000_000, memoryLimit: 400_000_000, step: "decoding the header's 10000x10000")
        }
        #expect(error?.code == .pixelLimitExceeded && error?.message.contains("10 bands") == true, "\(String(describing: error))")
    }

    @Test("a chain is refused at the step that would pass the limit, before it runs; a step that lies is caught after it")
    func chain() throws {
        let size = PixelSize(width: 100, height: 100)
        let image = Image(pixelSize: size, hasAlpha: true, storage: PixelBuffer(size: size, channels: 4, bytes: [UInt8](repeating: 0, count: size.area * 4)))
        let budget = TransformBudget(pixelLimit: 1_000_000, memoryLimit: 2_000_000)
        let chain = ImageTransformers.Pipeline([Growing(factor: 2), Growing(factor: 2), Growing(factor: 2), Growing(factor: 2)])
        let error = #expect(throws: WebImageError.self) { try budget.apply(chain, to: image) }
        // 100 -> 200 -> 400 -> 800 (2.56 MB of RGBA): the third step is refused before it runs.
        #expect(error?.code == .pixelLimitExceeded && error?.message.contains("400x400") == true, "\(String(describing: error))")
        let lie = #expect(throws: WebImageError.self) { try budget.apply(ImageTransformers.Pipeline([Lying(), Growing(factor: 2)]), to: image) }
        #expect(lie?.code == .pixelLimitExceeded && lie?.message.contains("lie") == true)
        let cancelled = TransformBudget(pixelLimit: .max, memoryLimit: .max, isCancelled: { true })
        #expect((try? cancelled.apply(Growing(factor: 1), to: image)) == nil)
    }

    @Test("the manager applies the budget to a context's transformer: pixelLimitExceeded, never a block")
    func manager() async throws {
        let h = Harness { $0.decodeOptions.memoryLimit = 1_000_000 }
        h.loader.serve("test://host/a.timg", data: TestCoder.encode(width: 100, height: 100))
        let context = ImageContext(transformer: ImageTransformers.Pipeline([Growing(factor: 3), Growing(factor: 3)]))
        let error = await #expect(throws: WebImageError.self) { try await h.manager.loadImage(with: h.url("a.timg"), context: context) }
        #expect(error?.code == .pixelLimitExceeded)
        #expect(h.manager.blocklist.blockingError(for: "test://host/a.timg") == nil)
    }
}

// SPDX-License-Identifier: Apache-2.0
import AFMImages
import Foundation
import Testing

/// A well-formed image and what the inspector must report for it.
struct ValidCase: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    let format: ImageFormat
    let width: Int
    let height: Int

    var testDescription: String { name }
}

/// A malformed `image_url` and the error code it must produce.
struct MalformedCase: Sendable, CustomTestStringConvertible {
    let name: String
    let url: String
    let code: String

    init(_ name: String, _ url: String, _ code: String) {
        self.name = name
        self.url = url
        self.code = code
    }

    init(_ name: String, bytes: [UInt8], _ code: String) {
        self.init(name, ImageFixtures.dataURL(bytes), code)
    }

    var testDescription: String { name }
}

private typealias F = ImageFixtures

private func inspectionError(_ url: String) -> ImageError? {
    do {
        _ = try ImageInspector.inspect(dataURL: url)
        return nil
    } catch {
        return error
    }
}

@Suite("ImageInspector")
struct ImageInspectorTests {
    static let valid: [ValidCase] = [
        ValidCase(name: "PNG 1×1", bytes: F.png(width: 1, height: 1), format: .png, width: 1, height: 1),
        ValidCase(
            name: "PNG 640×480 RGB", bytes: F.png(width: 640, height: 480, colourType: 2), format: .png, width: 640,
            height: 480),
        ValidCase(
            name: "PNG 16384×16384", bytes: F.png(width: 16384, height: 16384), format: .png, width: 16384,
            height: 16384),
        ValidCase(
            name: "PNG 1-bit grey", bytes: F.png(width: 3, height: 7, bitDepth: 1, colourType: 0), format: .png,
            width: 3, height: 7),
        ValidCase(
            name: "JPEG SOF0 640×480", bytes: F.jpeg(width: 640, height: 480), format: .jpeg, width: 640, height: 480),
        ValidCase(
            name: "JPEG SOF2 progressive", bytes: F.jpeg(width: 100, height: 50, sof: 0xC2), format: .jpeg, width: 100,
            height: 50),
        ValidCase(
            name: "JPEG SOF15", bytes: F.jpeg(width: 9, height: 8, sof: 0xCF), format: .jpeg, width: 9, height: 8),
        ValidCase(
            name: "JPEG with DHT (C4) before the frame", bytes: F.jpeg(width: 320, height: 240, before: F.app0 + F.dht),
            format: .jpeg, width: 320, height: 240),
        ValidCase(
            name: "JPEG with fill bytes and standalone markers",
            bytes: F.jpeg(
                width: 12, height: 34,
                before: [0xFF, 0xFF, 0xFF] + F.app0 + [0xFF, 0xD0, 0xFF, 0x01, 0xFF, 0xD8] + F.dht),
            format: .jpeg, width: 12, height: 34),
        ValidCase(
            name: "JPEG with DAC (CC) and JPG (C8) segments",
            bytes: F.jpeg(width: 7, height: 5, before: [0xFF, 0xCC, 0x00, 0x04, 0, 0, 0xFF, 0xC8, 0x00, 0x02]),
            format: .jpeg, width: 7, height: 5),
        ValidCase(
            name: "WebP lossy", bytes: F.webpVP8(width: 550, height: 368), format: .webp, width: 550, height: 368),
        ValidCase(
            name: "WebP lossless", bytes: F.webpVP8L(width: 16384, height: 1), format: .webp, width: 16384, height: 1),
        ValidCase(
            name: "WebP extended", bytes: F.webpVP8X(width: 400, height: 300), format: .webp, width: 400, height: 300),
        ValidCase(name: "GIF89a", bytes: F.gif(screen: (10, 20), frame: (10, 20)), format: .gif, width: 10, height: 20),
        ValidCase(
            name: "GIF87a without extensions",
            bytes: F.gif(version: "GIF87a", screen: (5, 6), frame: (5, 6), extensions: false), format: .gif, width: 5,
            height: 6),
        ValidCase(
            name: "GIF first frame smaller than the screen", bytes: F.gif(screen: (200, 100), frame: (50, 40)),
            format: .gif, width: 50, height: 40),
        ValidCase(
            name: "GIF without frames uses the logical screen", bytes: F.gif(screen: (30, 40), frame: nil),
            format: .gif, width: 30, height: 40),
    ]

    @Test("well-formed images are recognised, as bytes and as data URLs", arguments: valid)
    func recognisesValidImages(_ c: ValidCase) throws {
        let fromBytes = try ImageInspector.inspect(bytes: c.bytes)
        #expect(fromBytes.format == c.format)
        #expect(fromBytes.mimeType == "image/\(c.format.rawValue)")
        #expect(fromBytes.width == c.width)
        #expect(fromBytes.height == c.height)
        #expect(fromBytes.bytes == c.bytes)
        let fromURL = try ImageInspector.inspect(dataURL: F.dataURL(c.bytes, mime: "image/\(c.format.rawValue)"))
        #expect(fromURL == fromBytes)
    }

    @Test("a real, complete 1×1 PNG")
    func realPNG() throws {
        let info = try ImageInspector.inspect(dataURL: "data:image/png;base64," + F.onePixelPNGBase64)
        let bytes = try #require(Data(base64Encoded: F.onePixelPNGBase64))
        #expect(info == ImageInfo(format: .png, width: 1, height: 1, bytes: Array(bytes)))
    }

    @Test("the declared MIME type is not trusted: the real format is reported")
    func declaredTypeIgnored() throws {
        let png = F.png(width: 2, height: 3)
        for mime in ["image/jpeg", "text/plain", "", "application/octet-stream;name=x.gif"] {
            let info = try ImageInspector.inspect(dataURL: F.dataURL(png, mime: mime))
            #expect(info.format == .png)
            #expect(info.mimeType == "image/png")
        }
    }

    @Test("scheme and base64 token are case-insensitive; parameters may precede ;base64")
    func headerVariants() throws {
        let payload = Data(F.gif(screen: (4, 4), frame: (4, 4))).base64EncodedString()
        for prefix in ["DATA:image/gif;BASE64,", "Data:image/gif;charset=binary;Base64,", "data:;base64,"] {
            #expect(try ImageInspector.inspect(dataURL: prefix + payload).format == .gif)
        }
    }

    @Test("padding is optional, and every payload length decodes to the original bytes")
    func paddingAndRoundTrip() throws {
        var rng = SystemRandomNumberGenerator()
        for extra in 0..<12 {
            let bytes = F.png(width: 9, height: 9) + (0..<extra).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let padded = Data(bytes).base64EncodedString()
            var unpadded = padded
            while unpadded.hasSuffix("=") { unpadded.removeLast() }
            for payload in [padded, unpadded] {
                let info = try ImageInspector.inspect(dataURL: "data:image/png;base64," + payload)
                #expect(info.bytes == bytes)
            }
        }
    }

    @Test("exactly 8 MiB decoded is accepted")
    func exactlyAtLimit() throws {
        var bytes = F.png(width: 8, height: 8)
        bytes += [UInt8](repeating: 0, count: ImageInspector.maximumDecodedBytes - bytes.count)
        let info = try ImageInspector.inspect(dataURL: F.dataURL(bytes))
        #expect(info.bytes.count == ImageInspector.maximumDecodedBytes)
        #expect(info.width == 8)
    }

    @Test("a 100 MB payload is refused by its length, before decoding")
    func hugePayloadRefusedEarly() {
        let url = "data:image/png;base64," + String(repeating: "A", count: 100_000_000)
        let clock = ContinuousClock()
        var error: ImageError?
        let elapsed = clock.measure { error = inspectionError(url) }
        #expect(error?.code == ImageError.Code.imageTooLarge)
        #expect(elapsed < .seconds(2))
    }

    @Test("inspect(bytes:) enforces the size limit too")
    func bytesSizeLimit() {
        let bytes = F.png(width: 1, height: 1) + [UInt8](repeating: 0, count: ImageInspector.maximumDecodedBytes)
        do {
            _ = try ImageInspector.inspect(bytes: bytes)
            Issue.record("an image over the limit was accepted")
        } catch {
            #expect(error.code == "image_too_large")
        }
    }

    @Test("remote URLs get a message saying to send a base64 data URL")
    func remoteURLMessage() throws {
        let error = try #require(inspectionError("https://example.com/cat.png"))
        #expect(error.code == "invalid_image_url")
        #expect(error.message.contains("remote image URLs are not supported"))
        #expect(error.message.contains("base64 data URL"))
    }

    @Test("error messages say what was wrong")
    func messages() throws {
        let space = try #require(inspectionError("data:image/png;base64,iVBO Rw0KGg"))
        #expect(space.message.contains("whitespace"))
        #expect(space.message.contains("offset 4"))
        let big = try #require(inspectionError(F.dataURL(F.png(width: 20000, height: 10))))
        #expect(big.message.contains("20000×10"))
        let unsupported = try #require(inspectionError(F.dataURL(Array("BM123456789".utf8))))
        #expect(unsupported.message.contains("not PNG, JPEG, WebP or GIF"))
    }

    // MARK: - Malformed inputs

    static let malformed: [MalformedCase] = {
        let png = F.dataURL(F.png(width: 1, height: 1))
        let payload = String(png.split(separator: ",")[1])
        let nineMiB = String(repeating: "A", count: 9 * 1024 * 1024 / 3 * 4)
        let overByOne = String(repeating: "A", count: (8 * 1024 * 1024 + 3) / 3 * 4)
        var pngChunk = F.png(width: 1, height: 1)
        pngChunk[11] = 14  // IHDR length 14
        var jpegNoMarker = F.jpeg(width: 4, height: 4)
        jpegNoMarker[2 + F.app0.count] = 0x12
        return [
            // Not a base64 data URL.
            MalformedCase("empty string", "", "invalid_image_url"),
            MalformedCase("https URL", "https://example.com/cat.png", "invalid_image_url"),
            MalformedCase("http URL, upper case", "HTTP://example.com/cat.png", "invalid_image_url"),
            MalformedCase("file id", "file-abc123", "invalid_image_url"),
            MalformedCase("data URL truncated to the scheme", "data:", "invalid_image_url"),
            MalformedCase("truncated in the header", "data:image/pn", "invalid_image_url"),
            MalformedCase("missing comma", "data:image/png;base64" + payload, "invalid_image_url"),
            MalformedCase("not base64 (percent-encoded data URL)", "data:image/png," + payload, "invalid_image_url"),
            MalformedCase("charset but no base64", "data:image/png;charset=utf-8,abcd", "invalid_image_url"),
            MalformedCase("base64 not last", "data:image/png;base64;x=y," + payload, "invalid_image_url"),
            MalformedCase("space in header", "data: image/png;base64," + payload, "invalid_image_url"),
            MalformedCase(
                "header too long", "data:image/" + String(repeating: "x", count: 300) + ";base64," + payload,
                "invalid_image_url"),
            // Invalid base64.
            MalformedCase("space in payload", "data:image/png;base64,iVBO Rw0KGg", "invalid_base64"),
            MalformedCase("line break in payload", "data:image/png;base64,iVBORw0K\nGgo=", "invalid_base64"),
            MalformedCase("URL-safe alphabet", "data:image/png;base64,iVBORw0K-_oA", "invalid_base64"),
            MalformedCase("percent escape in payload", "data:image/png;base64,iVBO%2BRw0", "invalid_base64"),
            MalformedCase("padding in the middle", "data:image/png;base64,QQ==QUJD", "invalid_base64"),
            MalformedCase("only padding", "data:image/png;base64,====", "invalid_base64"),
            MalformedCase("wrong padding length", "data:image/png;base64,QUJDQQ=", "invalid_base64"),
            MalformedCase("impossible length", "data:image/png;base64,QUJDQ", "invalid_base64"),
            MalformedCase("non-ASCII in payload", "data:image/png;base64,iVBOérw0", "invalid_base64"),
            MalformedCase("payload truncated to an impossible length", String(png.dropLast(3)), "invalid_base64"),
            // Too large.
            MalformedCase("9 MiB payload", "data:image/png;base64," + nineMiB, "image_too_large"),
            MalformedCase("8 MiB + 1 byte", "data:image/png;base64," + overByOne, "image_too_large"),
            // Not a supported format.
            MalformedCase("text", bytes: Array("hello, world".utf8), "unsupported_image_format"),
            MalformedCase(
                "BMP", bytes: Array("BM".utf8) + [UInt8](repeating: 0, count: 60), "unsupported_image_format"),
            MalformedCase(
                "RIFF WAVE", bytes: Array("RIFF".utf8) + [36, 0, 0, 0] + Array("WAVEfmt ".utf8),
                "unsupported_image_format"),
            MalformedCase(
                "GIF88a", bytes: Array("GIF88a".utf8) + [1, 0, 1, 0, 0, 0, 0, 0x3B], "unsupported_image_format"),
            MalformedCase(
                "PNG signature with one wrong byte",
                bytes: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0B] + [UInt8](repeating: 0, count: 30),
                "unsupported_image_format"),
            // Supported format, broken header.
            MalformedCase("empty payload", "data:image/png;base64,", "invalid_image"),
            MalformedCase("payload truncated inside the PNG header", String(png.prefix(22 + 20)), "invalid_image"),
            MalformedCase("PNG signature prefix only", bytes: [0x89, 0x50, 0x4E, 0x47], "invalid_image"),
            MalformedCase(
                "PNG truncated in IHDR", bytes: Array(F.png(width: 1, height: 1).prefix(20)), "invalid_image"),
            MalformedCase(
                "PNG first chunk not IHDR", bytes: F.png(width: 1, height: 1, chunkType: "IDAT"), "invalid_image"),
            MalformedCase("PNG IHDR length 14", bytes: pngChunk, "invalid_image"),
            MalformedCase("PNG IHDR bad CRC", bytes: F.png(width: 1, height: 1, badCRC: true), "invalid_image"),
            MalformedCase("PNG bit depth 3", bytes: F.png(width: 1, height: 1, bitDepth: 3), "invalid_image"),
            MalformedCase("PNG colour type 5", bytes: F.png(width: 1, height: 1, colourType: 5), "invalid_image"),
            MalformedCase("JPEG SOI only", bytes: [0xFF, 0xD8, 0xFF], "invalid_image"),
            MalformedCase(
                "JPEG truncated in APP0", bytes: Array(F.jpeg(width: 4, height: 4).prefix(10)), "invalid_image"),
            MalformedCase(
                "JPEG truncated in SOF", bytes: Array(F.jpeg(width: 4, height: 4).prefix(2 + F.app0.count + 6)),
                "invalid_image"),
            MalformedCase(
                "JPEG scan before frame", bytes: [0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02, 0xFF, 0xD9], "invalid_image"),
            MalformedCase("JPEG EOI before frame", bytes: [0xFF, 0xD8] + F.app0 + [0xFF, 0xD9], "invalid_image"),
            MalformedCase(
                "JPEG segment length 1", bytes: [0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x01, 0, 0, 0], "invalid_image"),
            MalformedCase("JPEG garbage where a marker belongs", bytes: jpegNoMarker, "invalid_image"),
            MalformedCase("JPEG stuffed zero outside a scan", bytes: [0xFF, 0xD8, 0xFF, 0x00, 0, 0], "invalid_image"),
            MalformedCase(
                "JPEG frame header too short", bytes: [0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x05, 8, 0, 1, 0, 1],
                "invalid_image"),
            MalformedCase(
                "WebP truncated after WEBP", bytes: Array(F.webpVP8(width: 4, height: 4).prefix(14)), "invalid_image"),
            MalformedCase("WebP RIFF prefix only", bytes: Array("RIFF".utf8) + [4, 0], "invalid_image"),
            MalformedCase(
                "WebP VP8 without start code", bytes: F.webpVP8(width: 4, height: 4, startCode: [0, 0, 0]),
                "invalid_image"),
            MalformedCase(
                "WebP VP8 not a key frame", bytes: F.webpVP8(width: 4, height: 4, keyFrame: false), "invalid_image"),
            MalformedCase(
                "WebP VP8L wrong signature", bytes: F.webpVP8L(width: 4, height: 4, signature: 0x2E), "invalid_image"),
            MalformedCase("WebP VP8L version 1", bytes: F.webpVP8L(width: 4, height: 4, version: 1), "invalid_image"),
            MalformedCase("WebP VP8X chunk too short", bytes: F.riff("VP8X", [0, 0, 0, 0, 1, 0]), "invalid_image"),
            MalformedCase(
                "WebP first chunk ALPH", bytes: F.riff("ALPH", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), "invalid_image"),
            MalformedCase("GIF truncated screen descriptor", bytes: Array("GIF89a".utf8) + [1, 0, 1], "invalid_image"),
            MalformedCase(
                "GIF ends before the first image", bytes: Array(F.gif(screen: (4, 4), frame: (4, 4)).prefix(30)),
                "invalid_image"),
            MalformedCase(
                "GIF unknown block", bytes: Array("GIF89a".utf8) + [1, 0, 1, 0, 0, 0, 0, 0x99], "invalid_image"),
            MalformedCase(
                "GIF truncated image descriptor",
                bytes: Array("GIF89a".utf8) + [1, 0, 1, 0, 0, 0, 0, 0x2C, 0, 0, 0, 0, 1], "invalid_image"),
            // Dimensions.
            MalformedCase("PNG 0×0", bytes: F.png(width: 0, height: 0), "invalid_image_dimensions"),
            MalformedCase("PNG 20000×10", bytes: F.png(width: 20000, height: 10), "invalid_image_dimensions"),
            MalformedCase("PNG 10×16385", bytes: F.png(width: 10, height: 16385), "invalid_image_dimensions"),
            MalformedCase("PNG 2^32−1 wide", bytes: F.png(width: .max, height: 1), "invalid_image_dimensions"),
            MalformedCase("JPEG height 0 (DNL)", bytes: F.jpeg(width: 640, height: 0), "invalid_image_dimensions"),
            MalformedCase("JPEG 65535 wide", bytes: F.jpeg(width: 65535, height: 1), "invalid_image_dimensions"),
            MalformedCase("WebP VP8 0×0", bytes: F.webpVP8(width: 0, height: 0), "invalid_image_dimensions"),
            MalformedCase(
                "WebP VP8X 20000×10", bytes: F.webpVP8X(width: 20000, height: 10), "invalid_image_dimensions"),
            MalformedCase("GIF frame 0×5", bytes: F.gif(screen: (5, 5), frame: (0, 5)), "invalid_image_dimensions"),
            MalformedCase(
                "GIF screen 20000 with no frame", bytes: F.gif(screen: (20000, 1), frame: nil),
                "invalid_image_dimensions"),
        ]
    }()

    @Test("malformed inputs are refused with the right code", arguments: malformed)
    func refusesMalformedInput(_ c: MalformedCase) {
        let error = inspectionError(c.url)
        #expect(error?.code == c.code, "\(error?.message ?? "accepted")")
        #expect(error?.message.isEmpty == false)
    }

    @Test("the malformed table covers every error code")
    func tableCoversEveryCode() {
        let codes = Set(Self.malformed.map(\.code))
        #expect(
            codes == [
                ImageError.Code.invalidImageURL, ImageError.Code.invalidBase64, ImageError.Code.imageTooLarge,
                ImageError.Code.unsupportedImageFormat, ImageError.Code.invalidImage,
                ImageError.Code.invalidImageDimensions,
            ])
        #expect(Self.malformed.count >= 25)
    }

    @Test("every truncation of a valid image is refused, never crashes")
    func everyTruncation() {
        let images = Self.valid.map(\.bytes)
        for image in images {
            for length in 0..<min(image.count, 40) {
                do {
                    let info = try ImageInspector.inspect(bytes: Array(image.prefix(length)))
                    // A JPEG or GIF cut after its frame header still has readable dimensions.
                    #expect(info.width > 0)
                } catch {
                    #expect(["invalid_image", "unsupported_image_format"].contains(error.code))
                }
            }
        }
    }

    @Test("random bytes after a signature never crash")
    func fuzzHeaders() {
        var rng = SystemRandomNumberGenerator()
        let signatures: [[UInt8]] = [
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], [0xFF, 0xD8, 0xFF], Array("GIF89a".utf8),
            Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBP".utf8),
        ]
        for _ in 0..<2000 {
            let signature = signatures.randomElement(using: &rng) ?? []
            let tail = (0..<Int.random(in: 0..<64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            do {
                let info = try ImageInspector.inspect(bytes: signature + tail)
                #expect((1...ImageInspector.maximumDimension).contains(info.width))
                #expect((1...ImageInspector.maximumDimension).contains(info.height))
            } catch {
                #expect(["invalid_image", "invalid_image_dimensions"].contains(error.code))
            }
        }
    }
}

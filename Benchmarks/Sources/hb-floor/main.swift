import Foundation
import Hummingbird
import NIOCore

// The floor for the service's warm path (compare.py server): a Hummingbird 2 route
// in a release build that answers the same bytes from a dictionary, with no
// pipeline behind it. hb-floor PORT LISTING, where each line of LISTING is
// "REQUEST-TARGET<TAB>FILE" (the path and query a client asks for, and the file
// holding the bytes answered).
let arguments = CommandLine.arguments
guard arguments.count == 3, let port = Int(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: hb-floor PORT LISTING\n".utf8))
    exit(2)
}
var bodies: [String: ByteBuffer] = [:]
for line in try String(contentsOfFile: arguments[2], encoding: .utf8).split(separator: "\n") {
    let fields = line.split(separator: "\t", maxSplits: 1)
    guard fields.count == 2 else { continue }
    bodies[String(fields[0])] = ByteBuffer(bytes: try Data(contentsOf: URL(fileURLWithPath: String(fields[1]))))
}
let table = bodies
let router = Router()
router.get("/health") { _, _ in "ok\n" }
router.get("/thumbnail") { request, _ -> Response in
    guard let body = table[request.uri.description] else { return Response(status: .notFound) }
    return Response(status: .ok, headers: [.contentType: "image/jpeg", .cacheControl: "public, max-age=86400"],
                    body: ResponseBody(byteBuffer: body))
}
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
try await app.runService()

// A second process for the LMDB tests: writes or checks entries whose content is
// a pure function of their key, so any partial or foreign value is detectable.
//
//   webimage-lmdb-helper write DIR PREFIX COUNT [HALT]
//       write COUNT entries, exit 0; with HALT, after entry HALT - 1 create
//       DIR/halted-PREFIX and go on only once DIR/go exists
//   webimage-lmdb-helper hammer DIR PREFIX        write forever (until killed)
import Foundation
import WebImage
import WebImageLMDB

func value(for index: Int, prefix: String) -> Data {
    var data = Data("\(prefix)-\(index)|".utf8)
    data.append(Data(repeating: UInt8(truncatingIfNeeded: index &* 31 &+ prefix.utf8.count), count: 500 + (index &* 7919) % 40_000))
    return data
}

let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
    FileHandle.standardError.write(Data("usage: webimage-lmdb-helper write|hammer DIR PREFIX [COUNT]\n".utf8))
    exit(2)
}
let store = try LMDBCacheStore(directory: URL(fileURLWithPath: arguments[2]),
                               limits: .unlimited, options: .init(mapSize: 1 << 20, maxMapSize: 1 << 30))
let prefix = arguments[3]
switch arguments[1] {
case "write":
    let count = Int(arguments[4]) ?? 100
    let halt = arguments.count > 5 ? Int(arguments[5]) : nil
    for index in 0..<count {
        if index == halt {
            _ = FileManager.default.createFile(atPath: arguments[2] + "/halted-" + prefix, contents: nil)
            while !FileManager.default.fileExists(atPath: arguments[2] + "/go") { try await Task.sleep(for: .milliseconds(5)) }
        }
        try await store.setData(value(for: index, prefix: prefix), forKey: "\(prefix)-\(index)")
        if index % 7 == 0 { _ = try await store.entry(forKey: "\(prefix)-\(index / 2)") }
    }
case "hammer":
    // Tell the test the store is open and writes are under way.
    _ = FileManager.default.createFile(atPath: arguments[2] + "/ready", contents: nil)
    var index = 0
    while true {
        try await store.setData(value(for: index, prefix: prefix), forKey: "\(prefix)-\(index % 200)")
        index += 1
    }
default:
    exit(2)
}

/// The requirements a plugin broke, one line each.
///
/// The suites throw this instead of calling a test framework, so that they run
/// under Swift Testing, XCTest or a plain executable alike:
///
/// ```swift
/// @Test func conforms() async throws {
///     try await CacheStoreConformance { try MyStore(path: tempDir()) }.run()
/// }
/// ```
public struct ConformanceFailure: Error, CustomStringConvertible {
    public let suite: String
    /// `check: what was wrong`, one per broken requirement.
    public let failures: [String]
    public var description: String {
        "\(suite): \(failures.count) requirement(s) broken:\n" + failures.map { "  - " + $0 }.joined(separator: "\n")
    }
}

/// Collects failed checks across a suite run.
struct Checker {
    let suite: String
    private(set) var failures: [String] = []

    init(suite: String) { self.suite = suite }

    mutating func check(_ name: String, _ body: () async throws -> Void) async {
        do { try await body() } catch let failure as Expectation {
            failures.append("\(name): \(failure.message)")
        } catch {
            failures.append("\(name): threw \(error)")
        }
    }

    func finish() throws {
        if !failures.isEmpty { throw ConformanceFailure(suite: suite, failures: failures) }
    }
}

struct Expectation: Error {
    let message: String
}

func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw Expectation(message: message()) }
}

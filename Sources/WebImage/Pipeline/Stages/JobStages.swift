import Synchronization

/// What a load's job is doing, so that a deadline that passes can say which part
/// ran out of time, and whether the origin or the service was slow.
enum LoadStage: Sendable {
    case lookup, waitingForOriginals, download, waitingForRoom, decode, transform, encode, store

    /// The words of a timeout's message: "… passed its deadline in …".
    var words: String {
        switch self {
        case .lookup: "its cache lookup"
        case .waitingForOriginals: "the wait for room in the originals' budget"
        case .download: "its download (the origin had not finished answering)"
        case .waitingForRoom: "the wait for room to render it (the work budget, the decode pool)"
        case .decode: "its decode, after its download had finished"
        case .transform: "its transform, after its download had finished"
        case .encode: "its encode, after its download had finished"
        case .store: "its store write"
        }
    }

    /// The error for a deadline that passed in this stage: `timedOut` (an origin's
    /// slowness, 504 through the endpoint) for the download alone,
    /// `workTimedOut` (the service's own, 503 with `Retry-After`) for the rest.
    func deadlineError(_ url: String) -> WebImageError {
        if self == .download {
            return WebImageError(.timedOut, "\(url) passed its deadline in \(words)")
        }
        return WebImageError(.workTimedOut, "\(url) passed its deadline in \(words)", retryAfter: .seconds(2))
    }
}

/// The stage of every job running, by its job key.
final class JobStages: Sendable {
    private let stages = Lock<[String: LoadStage]>([:])

    func set(_ key: String, _ stage: LoadStage) { stages.withLock { $0[key] = stage } }
    /// Sets the stage of a job that has one still: a download other jobs share
    /// may outlive the job it was started for, whose stage must not come back.
    func update(_ key: String, _ stage: LoadStage) {
        stages.withLock { stages in
            if stages[key] != nil { stages[key] = stage }
        }
    }
    func clear(_ key: String) { _ = stages.withLock { $0.removeValue(forKey: key) } }
    func stage(of key: String) -> LoadStage? { stages.withLock { $0[key] } }
    var isEmpty: Bool { stages.withLock { $0.isEmpty } }
}

/// The stage of one call that is not a coalesced job (`ImageManager.info`).
final class StageBox: Sendable {
    private let stage = Lock(LoadStage.lookup)
    var value: LoadStage {
        get { stage.withLock { $0 } }
        set { stage.withLock { $0 = newValue } }
    }
}

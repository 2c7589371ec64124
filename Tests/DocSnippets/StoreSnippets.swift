// docs/writing-plugins.md's store registration, compiled with the tests and run
// by DocSnippetsTests, which also checks that the page shows it as it is here.

// snippet-begin: store-registration
import Foundation
import WebImage
import WebImageConfiguration
import WebImageKit
// snippet-pause

/// writing-plugins.md's store: a file store under /dev/shm, chosen by configuration.
package func sharedMemoryStoreManager(flags: [String: String]) async throws -> ImageManager {
// snippet-resume

    let catalog = PluginCatalog.standard
    // `store.kind = shm` chooses it; its own setting is `store.shm.folder`.
    catalog.stores.register(name: "shm", keys: ["folder"]) { settings in
        let folder = settings.values.text("folder") ?? "webimage"
        guard !folder.isEmpty, !folder.contains("/"), folder != ".", folder != ".." else {
            throw settings.values.invalid("folder", folder, "a folder name")
        }
        let directory = URL(fileURLWithPath: "/dev/shm").appendingPathComponent(folder)
        return try FileCacheStore(directory: directory, limits: settings.limits)
    }
    // flags: ["store.kind": "shm", "store.shm.folder": "thumbnails"]
    let config = try await ConfigLayers.reader(flags: flags, file: nil, knownKeys: catalog.knownKeys)
    return ImageManager(configuration: try ImageManager.Configuration(config: config, catalog: catalog))
// snippet-end
}

import Foundation

/// What the screen keeps across process death: the local id of the transfer it shows. The app backs it
/// with `@SceneStorage` (see the App's `SceneMemory`); the SDK decides what to re-attach from it
/// (`SendOnce.restoreComposer`), so a receipt is still on screen after the system discarded the scene.
@MainActor
public protocol ScreenMemory: AnyObject {
    /// The local id of the transfer on screen; nil while the form is being filled in.
    var transferId: String? { get set }
}

/// A `ScreenMemory` that lives as long as the object (tests share one between two view models).
@MainActor
public final class InMemoryScreenMemory: ScreenMemory {
    public var transferId: String?

    public init(transferId: String? = nil) {
        self.transferId = transferId
    }
}

/// Where the SDK's database lives: Application Support, excluded from iCloud backup (a restored backup
/// must never bring back a stale copy of the transfers) and readable by background work after the first
/// unlock (`completeUntilFirstUserAuthentication`). Linux (the tests) has neither attribute.
public enum DatabaseLocation {
    /// Creates `directory` and applies both protections to it (and so to the files created in it).
    public static func prepare(_ directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        #if os(iOS)
        try FileManager.default.setAttributes(
            [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: directory.path)
        #endif
        #if canImport(Darwin)
        var url = directory
        var values = URLResourceValues()
        values.isExcludedFromBackup = true
        try url.setResourceValues(values)
        #endif
    }
}

import BackgroundTasks
import DemoViewModel
import Foundation
import SendOnce
import UIKit

/// BGTaskScheduler and UIApplication carrying out the bindings' `BackgroundSending` decisions: the SDK's
/// transfers are followed from launch (a refresh is asked for at each confirm and at a start with work left),
/// a send in flight when the app leaves the foreground finishes in the extra time iOS grants, and what is
/// left runs in a `BGAppRefreshTask`. Thin on purpose. (Not built here: no iOS SDK on this machine.)
enum BackgroundSend {
    static let identifier = "io.sendonce.demo.refresh" // also in Info.plist: BGTaskSchedulerPermittedIdentifiers
    static let background = BackgroundSending(scheduler: RefreshScheduler(), time: AppTime(), identifier: identifier)

    /// Call once, before the app finishes launching.
    static func register(directory: URL, databaseDirectory: URL) {
        BGTaskScheduler.shared.register(forTaskWithIdentifier: identifier, using: nil) { task in
            let work = Task {
                let sdk = try? await DemoBackground.sharedSdk(directory: directory, databaseDirectory: databaseDirectory)
                let success = await sdk.map { await background.handleRefresh($0) } ?? true
                task.setTaskCompleted(success: success)
            }
            // iOS ends the time early: the drain's request is cut off, the transfer stays durable, same key.
            task.expirationHandler = { work.cancel() }
        }
        Task {
            if let sdk = try? await DemoBackground.sharedSdk(directory: directory, databaseDirectory: databaseDirectory) {
                background.attach(to: sdk)
            }
        }
    }

    /// The scene went to the background: finish what is in flight in the extra time iOS grants.
    static func appDidEnterBackground(directory: URL, databaseDirectory: URL) {
        Task {
            if let sdk = try? await DemoBackground.sharedSdk(directory: directory, databaseDirectory: databaseDirectory) {
                await background.appDidEnterBackground(sdk)
            }
        }
    }
}

/// `BGAppRefreshTaskRequest`s (a `BGProcessingTask` runs only when the device is idle: too late to pay).
struct RefreshScheduler: RefreshScheduling {
    func submitRefresh(identifier: String, earliestBegin: Date) throws {
        let request = BGAppRefreshTaskRequest(identifier: identifier)
        request.earliestBeginDate = earliestBegin
        try BGTaskScheduler.shared.submit(request)
    }
}

/// `UIApplication`'s extra time; its methods are main-actor API, called here from wherever the SDK is.
struct AppTime: BackgroundTimeGranting {
    func beginTask(name: String, expiration: @escaping @Sendable () -> Void) -> Int {
        onMain { UIApplication.shared.beginBackgroundTask(withName: name, expirationHandler: expiration).rawValue }
    }

    func endTask(_ token: Int) {
        onMain { UIApplication.shared.endBackgroundTask(UIBackgroundTaskIdentifier(rawValue: token)) }
    }

    private func onMain<T: Sendable>(_ body: @MainActor () -> T) -> T {
        Thread.isMainThread ? MainActor.assumeIsolated(body) : DispatchQueue.main.sync { MainActor.assumeIsolated(body) }
    }
}

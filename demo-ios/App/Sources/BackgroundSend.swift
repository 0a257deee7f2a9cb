import BackgroundTasks
import DemoViewModel
import Foundation

/// Sends what the screen left behind: a BGProcessingTask (network required) drains the process's shared
/// SDK within the time iOS gives, then asks for the next run at the earliest next attempt. Thin on
/// purpose: every decision is the SDK's. (Not built here: no iOS SDK on this machine.)
enum BackgroundSend {
    static let identifier = "io.sendonce.demo.drain" // also in Info.plist: BGTaskSchedulerPermittedIdentifiers

    /// Call once, before the app finishes launching.
    static func register(directory: URL, databaseDirectory: URL) {
        BGTaskScheduler.shared.register(forTaskWithIdentifier: identifier, using: nil) { task in
            let work = Task {
                let summary = try? await DemoBackground.drain(
                    directory: directory, databaseDirectory: databaseDirectory, deadline: .seconds(25))
                schedule(after: summary?.nextAttemptIn)
                task.setTaskCompleted(success: summary?.unfinished.isEmpty ?? true)
            }
            // iOS ends the time early: the drain's request is cut off, the transfer stays durable, same key.
            task.expirationHandler = { work.cancel() }
        }
    }

    /// Asks for a run when there is a network, no sooner than `after` (nil: nothing left).
    static func schedule(after: TimeInterval? = 0) {
        guard let after else { return }
        let request = BGProcessingTaskRequest(identifier: identifier)
        request.requiresNetworkConnectivity = true
        request.earliestBeginDate = Date(timeIntervalSinceNow: after)
        try? BGTaskScheduler.shared.submit(request)
    }
}

import DemoViewModel
import Network
import SwiftUI

/// Platform lifecycle only: one view model per scene, restored from the scene's storage,
/// `NWPathMonitor`'s connectivity changes and the scene phase forwarded to it, and the background drain
/// scheduled. No transfer logic here. (iOS may kill the app at any time; the SDK has already persisted every
/// confirmed transfer, the extra time at the move to the background, the next BGAppRefreshTask or the next
/// launch resumes it with the same key, and the
/// scene's saved transfer id brings its receipt back.)
@main
struct SendOnceDemoApp: App {
    init() {
        BackgroundSend.register(directory: SendOnceDemoApp.dataDirectory(), databaseDirectory: SendOnceDemoApp.databaseDirectory())
    }

    var body: some Scene {
        WindowGroup { DemoScene() }
    }

    /// Application Support/sendonce: the demo account (kept across launches).
    static func dataDirectory() -> URL {
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        return base.appendingPathComponent("sendonce", isDirectory: true)
    }

    /// Application Support/sendonce/db: the SDK's database, excluded from iCloud backup and protected
    /// `completeUntilFirstUserAuthentication` (DatabaseLocation prepares it).
    static func databaseDirectory() -> URL {
        dataDirectory().appendingPathComponent("db", isDirectory: true)
    }
}

/// The scene: its `@SceneStorage` keeps the local id of the transfer on screen across process death.
struct DemoScene: View {
    @SceneStorage("sendonce.transferId") private var savedTransferId = ""
    @State private var vm: DemoViewModel?
    @State private var monitor = NWPathMonitor()
    @Environment(\.scenePhase) private var scenePhase

    var body: some View {
        Group {
            if let vm { ContentView(vm: vm) } else { ProgressView() }
        }
        .task {
            guard vm == nil else { return }
            let model = DemoViewModel(
                directory: SendOnceDemoApp.dataDirectory(), memory: SceneMemory($savedTransferId),
                databaseDirectory: SendOnceDemoApp.databaseDirectory()
            )
            vm = model
            // The SDK wakes every waiting retry at once when the network comes back.
            monitor.pathUpdateHandler = { path in
                let available = path.status == .satisfied
                Task { @MainActor in model.onNetworkChanged(available) }
            }
            monitor.start(queue: DispatchQueue(label: "io.sendonce.demo.network"))
        }
        .onChange(of: scenePhase) { phase in
            // In the background the shared SDK spreads its wake-ups; a send in flight finishes in the extra
            // time iOS grants, and a refresh task runs what is left.
            vm?.onForegroundChanged(phase == .active)
            if phase == .background {
                BackgroundSend.appDidEnterBackground(
                    directory: SendOnceDemoApp.dataDirectory(), databaseDirectory: SendOnceDemoApp.databaseDirectory())
            }
        }
    }
}

/// `@SceneStorage` behind the view model's `ScreenMemory` ("" stands for none).
@MainActor
final class SceneMemory: ScreenMemory {
    private let storage: Binding<String>

    init(_ storage: Binding<String>) {
        self.storage = storage
    }

    var transferId: String? {
        get { storage.wrappedValue.isEmpty ? nil : storage.wrappedValue }
        set { storage.wrappedValue = newValue ?? "" }
    }
}

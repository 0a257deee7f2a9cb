import DemoViewModel
import Network
import SwiftUI

/// Platform lifecycle only: creates the view model once, forwards `NWPathMonitor`'s connectivity changes
/// and the scene phase to it, and schedules the background drain. No transfer logic here. (iOS may kill the
/// app at any time; the SDK has already persisted every confirmed transfer, and the next launch or the
/// next BGProcessingTask resumes it with the same key.)
@main
struct SendOnceDemoApp: App {
    @State private var vm = DemoViewModel(directory: SendOnceDemoApp.dataDirectory())
    @State private var monitor = NWPathMonitor()
    @Environment(\.scenePhase) private var scenePhase

    init() {
        BackgroundSend.register(directory: SendOnceDemoApp.dataDirectory())
    }

    var body: some Scene {
        WindowGroup {
            ContentView(vm: vm)
                .task {
                    // In the foreground the SDK wakes every waiting retry at once when the network comes back.
                    let model = vm
                    monitor.pathUpdateHandler = { path in
                        let available = path.status == .satisfied
                        Task { @MainActor in model.onNetworkChanged(available) }
                    }
                    monitor.start(queue: DispatchQueue(label: "io.sendonce.demo.network"))
                }
        }
        .onChange(of: scenePhase) { phase in
            // In the background the shared SDK spreads its wake-ups; the task finishes what is left.
            vm.onForegroundChanged(phase == .active)
            if phase == .background { BackgroundSend.schedule() }
        }
    }

    /// Application Support/sendonce: the SDK's database and the demo account (kept across launches).
    static func dataDirectory() -> URL {
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        return base.appendingPathComponent("sendonce", isDirectory: true)
    }
}

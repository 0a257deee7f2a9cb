import DemoViewModel
import Network
import SwiftUI

/// Platform lifecycle only: creates the view model once and forwards `NWPathMonitor`'s connectivity
/// changes to it. No transfer logic here. (There is no close on background: iOS may kill the app at any
/// time, and the SDK has already persisted every confirmed transfer; the next launch resumes it.)
@main
struct SendOnceDemoApp: App {
    @State private var vm = DemoViewModel(directory: SendOnceDemoApp.dataDirectory())
    @State private var monitor = NWPathMonitor()

    var body: some Scene {
        WindowGroup {
            ContentView(vm: vm)
                .task {
                    // The SDK wakes every waiting retry at once when the network comes back.
                    let model = vm
                    monitor.pathUpdateHandler = { path in
                        let available = path.status == .satisfied
                        Task { @MainActor in model.onNetworkChanged(available) }
                    }
                    monitor.start(queue: DispatchQueue(label: "io.sendonce.demo.network"))
                }
        }
    }

    /// Application Support/sendonce: the SDK's database and the demo account (kept across launches).
    static func dataDirectory() -> URL {
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        return base.appendingPathComponent("sendonce", isDirectory: true)
    }
}

import Foundation
import SendOnce

extension DemoViewModel {
    /// One open SDK with its composer and the tasks that follow them.
    @MainActor
    final class Session {
        let account: DemoAccount
        let sdk: SendOnce
        let composer: Composer
        let openedAtWallMs: Int64
        var tasks: [Task<Void, Never>] = []

        init(account: DemoAccount, sdk: SendOnce, composer: Composer, openedAtWallMs: Int64) {
            self.account = account
            self.sdk = sdk
            self.composer = composer
            self.openedAtWallMs = openedAtWallMs
        }

        /// The screen goes away; the shared SDK goes on in the background (or is closed, with `sdkToo`).
        func close(sdkToo: Bool) {
            tasks.forEach { $0.cancel() }
            composer.close()
            if sdkToo {
                sdk.close()
            } else {
                try? sdk.setInForeground(false)
            }
        }
    }
}

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

        /// Signs up on first start and opens the SDK; every disk access runs off the MainActor (the account
        /// store is an actor, the SDK's calls are async, the directory is prepared on a detached task).
        static func open(
            url: String, directory: URL, store: AccountStore, wallet: WalletClient, options: DemoOptions,
            trainMode: TrainMode, networkAvailable: Bool, savedTransferId: String?
        ) async throws -> Session {
            let account: DemoAccount
            if let saved = await store.account(serverUrl: url) {
                account = saved
            } else {
                account = try await wallet.signUp(serverUrl: url, balanceMinor: options.startingBalanceMinor, currency: options.currency)
                await store.save(account)
            }
            let openedAt = options.nowMs()
            let sdk = try await DemoBackground.sharedSdk(databaseDirectory: directory, account: account, options: options)
            do {
                // The shared instance may have run in the background since the last screen: set it as this one wants.
                try sdk.setInForeground(true)
                try await sdk.setNetworkProfile(trainMode.profile, seed: options.trainSeed ?? UInt64.random(in: 0 ... .max))
                try await sdk.setNetworkAvailable(networkAvailable)
                // After a kill: the SDK re-attaches the screen to the transfer it showed (a receipt included),
                // else to the newest unfinished one.
                let composer = try await sdk.restoreComposer(savedLocalId: savedTransferId)
                return Session(account: account, sdk: sdk, composer: composer, openedAtWallMs: openedAt)
            } catch {
                sdk.close()
                throw error
            }
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

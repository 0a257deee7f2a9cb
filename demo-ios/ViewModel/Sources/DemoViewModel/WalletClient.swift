import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The demo's account on one server: the payer, and a second user to send to.
public struct DemoAccount: Codable, Equatable, Sendable {
    public var serverUrl: String
    public var userId: String
    public var token: String
    public var recipientId: String
}

/// Never the token: an account printed (`print`, `dump`, string interpolation, a crash reporter's mirror) must
/// not sign anyone in.
extension DemoAccount: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "DemoAccount(serverUrl: \(serverUrl), userId: \(userId), token: <redacted>, recipientId: \(recipientId))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["serverUrl": serverUrl, "userId": userId, "token": "<redacted>", "recipientId": recipientId])
    }
}

/// The wallet as `GET /v1/wallet` answers it.
public struct Wallet: Equatable, Sendable {
    public var userId: String
    public var balanceMinor: Int64
    public var currency: String
}

/// An HTTP answer the demo did not expect.
public struct HTTPStatusError: Error, CustomStringConvertible {
    public let status: Int
    public let body: String
    public var description: String { "HTTP \(status): \(body.prefix(200))" }
}

/// The few plain HTTP calls the demo makes besides transfers (which only the SDK sends): the balance, and
/// the demo sign-up through server-mock's test API. Against a real backend, replace `signUp` with the
/// app's login and keep `wallet`.
public final class WalletClient: Sendable {
    private let session: URLSession

    public init(timeout: TimeInterval = 5) {
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = timeout
        config.timeoutIntervalForResource = timeout
        session = URLSession(configuration: config)
    }

    /// `GET /v1/wallet` with the bearer token.
    public func wallet(serverUrl: String, token: String) async throws -> Wallet {
        let json = try await send(serverUrl, "GET", "/v1/wallet", body: nil, token: token, expect: 200)
        guard let balance = (json["balance_minor"] as? NSNumber)?.int64Value else {
            throw HTTPStatusError(status: 200, body: "no balance_minor")
        }
        return Wallet(userId: json["user_id"] as? String ?? "", balanceMinor: balance, currency: json["currency"] as? String ?? "")
    }

    /// Creates the demo payer (with `balanceMinor`) and a recipient on server-mock (`POST /v1/test/users`).
    public func signUp(serverUrl: String, balanceMinor: Int64, currency: String) async throws -> DemoAccount {
        func create(_ name: String, _ balance: Int64) async throws -> (String, String) {
            let body: [String: Any] = ["display_name": name, "balance_minor": balance, "currency": currency]
            let json = try await send(serverUrl, "POST", "/v1/test/users", body: body, token: nil, expect: 201)
            guard let id = json["user_id"] as? String, let token = json["token"] as? String else {
                throw HTTPStatusError(status: 201, body: "no user_id/token")
            }
            return (id, token)
        }
        let (userId, token) = try await create("You (sendonce demo)", balanceMinor)
        let (recipientId, _) = try await create("Rahim (demo recipient)", 0)
        return DemoAccount(serverUrl: serverUrl, userId: userId, token: token, recipientId: recipientId)
    }

    private func send(
        _ base: String, _ method: String, _ path: String, body: [String: Any]?, token: String?, expect: Int
    ) async throws -> [String: Any] {
        var trimmed = base
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let url = URL(string: trimmed + path) else { throw URLError(.badURL) }
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let body {
            request.httpBody = try JSONSerialization.data(withJSONObject: body)
            request.setValue("application/json", forHTTPHeaderField: "content-type")
        }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "authorization") }
        let (data, status): (Data, Int) = try await withCheckedThrowingContinuation { continuation in
            session.dataTask(with: request) { data, response, error in
                if let error { return continuation.resume(throwing: error) }
                continuation.resume(returning: (data ?? Data(), (response as? HTTPURLResponse)?.statusCode ?? 0))
            }.resume()
        }
        guard status == expect else { throw HTTPStatusError(status: status, body: String(decoding: data, as: UTF8.self)) }
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
    }
}

/// Remembers the server URL setting and one demo account per server in a JSON file. An actor: its file
/// is read and written off the MainActor.
public actor AccountStore {
    private struct Contents: Codable {
        var serverUrl: String?
        var accounts: [String: DemoAccount] = [:]
    }

    private let file: URL
    private var loaded: Contents?

    public init(file: URL) {
        self.file = file
    }

    /// The saved server URL setting, if any.
    public var serverUrl: String? { contents().serverUrl }

    /// Saves the server URL setting.
    public func setServerUrl(_ url: String?) {
        var c = contents()
        c.serverUrl = url
        write(c)
    }

    public func account(serverUrl: String) -> DemoAccount? {
        contents().accounts[serverUrl]
    }

    public func save(_ account: DemoAccount) {
        var c = contents()
        c.accounts[account.serverUrl] = account
        write(c)
    }

    private func contents() -> Contents {
        if let loaded { return loaded }
        let read = (try? JSONDecoder().decode(Contents.self, from: Data(contentsOf: file))) ?? Contents()
        loaded = read
        return read
    }

    private func write(_ c: Contents) {
        loaded = c
        try? FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        if let data = try? JSONEncoder().encode(c) {
            try? data.write(to: file, options: .atomic)
        }
    }
}

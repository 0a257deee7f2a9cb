// Test helpers shared by the bindings' tests and the iOS demo's tests (library product SendOnceTestSupport).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

public struct User: Sendable {
    public let id: String
    public let token: String
}

public struct LedgerEntry: Sendable {
    public let kind: String
    public let userId: String
    public let amountMinor: Int64
    public let idempotencyKey: String?
    public let transferId: String?
}

/// The real server-mock binary on a free loopback port with its own database file; stopped by `stop()`.
/// The binary is `$CARGO_TARGET_DIR/debug/server-mock` (or `SENDONCE_SERVER_MOCK`), built with
/// `cargo build -p server-mock`.
public final class MockServer: @unchecked Sendable {
    public let dir: URL
    public let baseUrl: String
    private let process = Process()

    public init() throws {
        let env = ProcessInfo.processInfo.environment
        let target = env["CARGO_TARGET_DIR"] ?? "\(#filePath)/../../../../../target"
        let binary = env["SENDONCE_SERVER_MOCK"] ?? "\(target)/debug/server-mock"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw TestError("no server-mock binary at \(binary): run `cargo build -p server-mock`")
        }
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("sendonce-swift-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let log = dir.appendingPathComponent("server.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--listen", "127.0.0.1:0", "--db", dir.appendingPathComponent("server.db").path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: log)
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { throw TestError("server-mock exited before listening; see \(log.path)") }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).split(separator: "\n")[0]
        guard text.hasPrefix("listening on ") else { throw TestError("unexpected first line: \(text)") }
        baseUrl = "http://" + text.dropFirst("listening on ".count).trimmingCharacters(in: .whitespaces)
    }

    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: dir)
    }

    /// A fresh database path for an SDK instance.
    public func dbPath(_ name: String = "client") -> String {
        dir.appendingPathComponent("\(name)-\(UUID().uuidString).db").path
    }

    public func createUser(_ name: String, balanceMinor: Int64 = 0, currency: String = "BDT") async throws -> User {
        let body = try JSONSerialization.data(withJSONObject: ["display_name": name, "balance_minor": balanceMinor, "currency": currency])
        let json = try await request("POST", "/v1/test/users", body: body, expect: 201) as! [String: Any]
        return User(id: json["user_id"] as! String, token: json["token"] as! String)
    }

    public func ledger() async throws -> [LedgerEntry] {
        let rows = try await request("GET", "/v1/test/ledger") as! [[String: Any]]
        return rows.map {
            LedgerEntry(
                kind: $0["kind"] as! String,
                userId: $0["user_id"] as! String,
                amountMinor: ($0["amount_minor"] as! NSNumber).int64Value,
                idempotencyKey: $0["idempotency_key"] as? String,
                transferId: $0["transfer_id"] as? String
            )
        }
    }

    /// Debits recorded under `key`.
    public func debits(_ key: String) async throws -> [LedgerEntry] {
        try await ledger().filter { $0.kind == "debit" && $0.idempotencyKey == key }
    }

    public func balance(_ user: User) async throws -> Int64 {
        let json = try await request("GET", "/v1/wallet", token: user.token) as! [String: Any]
        return (json["balance_minor"] as! NSNumber).int64Value
    }

    private func request(_ method: String, _ path: String, body: Data? = nil, token: String? = nil, expect: Int = 200) async throws -> Any {
        var req = URLRequest(url: URL(string: baseUrl + path)!)
        req.httpMethod = method
        req.timeoutInterval = 10
        if let body {
            req.httpBody = body
            req.setValue("application/json", forHTTPHeaderField: "content-type")
        }
        if let token { req.setValue("Bearer \(token)", forHTTPHeaderField: "authorization") }
        let (data, status): (Data, Int) = try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: req) { data, response, error in
                if let error { return continuation.resume(throwing: error) }
                continuation.resume(returning: (data ?? Data(), (response as? HTTPURLResponse)?.statusCode ?? 0))
            }.resume()
        }
        guard status == expect else {
            throw TestError("\(method) \(path) answered \(status): \(String(decoding: data, as: UTF8.self))")
        }
        return try JSONSerialization.jsonObject(with: data)
    }
}

public struct TestError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

import Foundation
import XCTest
@testable import SendOnce

/// The store key from Swift. This host's library is built without encryption (the SQLCipher build is the
/// mobile packages' choice, `--features encryption`; its test is Rust's `sdk/tests/encryption.rs`): a config
/// with a key is then refused, and the file is never created in clear. The key never prints.
final class StoreKeyTests: XCTestCase {
    func testAKeyIsRefusedByALibraryWithoutEncryptionAndTheFileIsNeverCreatedInClear() async throws {
        XCTAssertFalse(storeEncryptionAvailable())
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("storekey-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = dir.appendingPathComponent("s.db").path
        let key = try StoreKey(bytes: Data(repeating: 0x5a, count: 32))
        let config = SendOnceConfig(baseUrl: "http://127.0.0.1:9", dbPath: db, encryptionKey: key)
        do {
            _ = try await SendOnce.open(config)
            XCTFail("opened with a key in a library without encryption")
        } catch SendOnceError.InvalidConfig {
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: db), "nothing written in clear")
        var dumped = ""
        dump(config, to: &dumped)
        XCTAssertFalse("\(config)\(dumped)".lowercased().contains("5a5a"))
        XCTAssertThrowsError(try StoreKey(bytes: Data(count: 16)))
    }
}

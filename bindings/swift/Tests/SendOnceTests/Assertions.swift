import SendOnceTestSupport
import XCTest
@testable import SendOnce

extension ServerTestCase {
    /// Fails the test if `body` throws anything but `expected` (compared by case).
    func assertThrows<T>(_ expected: (SendOnceError) -> Bool, _ what: String, _ body: () async throws -> T) async {
        do {
            _ = try await body()
            XCTFail("\(what): no error thrown")
        } catch let e as SendOnceError {
            XCTAssertTrue(expected(e), "\(what): unexpected \(e)")
        } catch {
            XCTFail("\(what): not a SendOnceError: \(error)")
        }
    }
}

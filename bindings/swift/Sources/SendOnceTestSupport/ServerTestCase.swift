import Foundation
import XCTest

/// A test class with one real server-mock for all its tests: started before the first, stopped after the
/// last (XCTest runs the classes one after another, so the one slot is never shared by two at once).
open class ServerTestCase: XCTestCase {
    nonisolated(unsafe) public static var shared: MockServer?
    public var server: MockServer { Self.shared! }

    override open class func setUp() {
        super.setUp()
        do {
            shared = try MockServer()
        } catch {
            fatalError("could not start server-mock: \(error)")
        }
    }

    override open class func tearDown() {
        shared?.stop()
        shared = nil
        super.tearDown()
    }
}

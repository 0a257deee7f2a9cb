import Foundation
import XCTest

/// A helper executable built with the tests (`SendOnceHoldFile`, `SendOnceParkOrder`): on Linux it sits
/// in the build directory beside the test binary, on macOS inside Tests.xctest/Contents/MacOS.
func helperExecutable(_ name: String, near test: AnyClass) throws -> URL {
    var dir = Bundle(for: test).bundleURL
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        dir.deleteLastPathComponent()
    }
    throw NSError(domain: "no \(name) executable near \(Bundle(for: test).bundleURL.path)", code: 1)
}

/// The first line a child process writes to `pipe`, with its newline; what came before EOF if none.
func firstLine(of pipe: Pipe) -> String {
    var line = Data()
    while !line.contains(UInt8(ascii: "\n")) {
        let chunk = pipe.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        line.append(chunk)
    }
    return String(decoding: line, as: UTF8.self)
}

// A second process on one database file, as an app extension or a second app process would be: opens the
// shared instance on the path in its first argument, prints "holding", and keeps the file until stdin
// closes. Used by BackgroundTests; not part of what an app depends on (no product).
import Foundation
import SendOnce

let sdk = try await SendOnce.shared(SendOnceConfig(baseUrl: "http://127.0.0.1:9", dbPath: CommandLine.arguments[1]))
FileHandle.standardOutput.write(Data("holding\n".utf8)) // unbuffered, unlike print
_ = FileHandle.standardInput.readDataToEndOfFile()
sdk.close()

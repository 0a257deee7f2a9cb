import SendOnceTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tiny scripted HTTP/1.1 server on loopback for answers server-mock never gives to a correct client:
/// every `POST /v1/transfers` gets `status` with the problem `code`. The demo's sign-up and wallet calls are
/// answered like server-mock does. One connection per request (`Connection: close`).
final class ScriptedServer: @unchecked Sendable {
    let baseUrl: String
    private let fd: Int32
    private let status: Int
    private let code: String
    private let lock = NSLock()
    private var users = 0
    private var transfers = 0

    var transferRequests: Int {
        lock.lock()
        defer { lock.unlock() }
        return transfers
    }

    init(status: Int = 422, code: String = "idempotency_key_reused") throws {
        self.status = status
        self.code = code
        #if os(Linux)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw TestError("socket failed") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let sock = fd
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(sock, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(sock, 16) == 0 else { throw TestError("bind/listen failed") }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(sock, $0, &len) }
        }
        baseUrl = "http://127.0.0.1:\(UInt16(bigEndian: addr.sin_port))"
        let listener = fd
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { return }
                Thread.detachNewThread { self.serve(client) }
            }
        }
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var headerEnd: Int?
        var contentLength = 0
        while true {
            let n = read(client, &buffer, buffer.count)
            if n <= 0 { return }
            data.append(contentsOf: buffer[0 ..< n])
            if headerEnd == nil, let range = findHeaderEnd(data) {
                headerEnd = range
                let head = String(decoding: data[0 ..< range], as: UTF8.self).lowercased()
                for line in head.split(separator: "\r\n") where line.hasPrefix("content-length:") {
                    contentLength = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
            if let end = headerEnd, data.count >= end + 4 + contentLength { break }
        }
        let requestLine = String(decoding: data.prefix(while: { $0 != 13 }), as: UTF8.self).split(separator: " ")
        let method = requestLine.first.map(String.init) ?? ""
        let path = requestLine.count > 1 ? String(requestLine[1].split(separator: "?")[0]) : ""
        let (status, type, body) = answer(method, path)
        let reason = status == 200 ? "OK" : status == 201 ? "Created" : "Error"
        let response = "HTTP/1.1 \(status) \(reason)\r\ncontent-type: \(type)\r\ncontent-length: \(body.utf8.count)\r\n"
            + "connection: close\r\n\r\n\(body)"
        let bytes = Array(response.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            sent += n
        }
    }

    private func findHeaderEnd(_ data: [UInt8]) -> Int? {
        guard data.count >= 4 else { return nil }
        for i in 0 ... data.count - 4 where data[i] == 13 && data[i + 1] == 10 && data[i + 2] == 13 && data[i + 3] == 10 {
            return i
        }
        return nil
    }

    private func answer(_ method: String, _ path: String) -> (Int, String, String) {
        lock.lock()
        defer { lock.unlock() }
        switch (method, path) {
        case ("POST", "/v1/test/users"):
            users += 1
            return (201, "application/json", #"{"user_id":"usr_scripted_\#(users)","token":"tok_scripted_\#(users)"}"#)
        case ("GET", "/v1/wallet"):
            return (200, "application/json", #"{"user_id":"usr_scripted_1","balance_minor":1000000,"currency":"BDT"}"#)
        case ("POST", "/v1/transfers"):
            transfers += 1
            return (status, "application/problem+json",
                    #"{"type":"about:blank","title":"scripted","status":\#(status),"code":"\#(code)","detail":"scripted answer"}"#)
        default:
            return (404, "application/problem+json", #"{"status":404,"code":"not_found","detail":"\#(path)"}"#)
        }
    }
}

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SendOnceTestSupport
import XCTest
@testable import SendOnce

/// URLSessionTransport's failures reach the SDK typed (`TransportFailure`), as OkHttpTransport's do in
/// Kotlin: a timeout is "timed out", a refused connection a connection error, no network "offline".
final class TransportTests: ServerTestCase {
    /// A loopback port whose kernel completes every handshake and which never answers (nothing accepts).
    final class SilentPort {
        let fd: Int32
        let port: UInt16

        init() throws {
            #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
            #endif
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = 0
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            let size = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) }
            }
            guard fd >= 0, bound == 0, listen(fd, 16) == 0 else {
                close(fd)
                throw TestError("could not listen on loopback")
            }
            var length = size
            _ = withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            self.fd = fd
            port = UInt16(bigEndian: addr.sin_port)
        }

        deinit {
            close(fd)
        }
    }

    final class Answers: @unchecked Sendable {
        let lock = NSLock()
        var errors: [String] = []
        func add(_ e: SdkEvent) {
            guard case let .attemptAnswered(_, _, nil, _, error?) = e else { return }
            lock.withLock { errors.append(error) }
        }
        var first: String? { lock.withLock { errors.first } }
    }

    /// The first attempt's error as the SDK recorded it, through URLSession with `configuration`.
    func firstError(baseUrl: String, _ configuration: URLSessionConfiguration) async throws -> String? {
        let config = SendOnceConfig(
            baseUrl: baseUrl, dbPath: server.dbPath(), accessToken: AccessToken(value: "tok"),
            retry: RetryPolicy(base: 30, cap: 60, giveUpAfter: 86_400, jitter: false, budgetBurst: 10, budgetPerSecond: 1),
            // Far above URLSession's own timeout, so the error is URLSession's, not the SDK's bound.
            requestTimeout: 60
        )
        let sdk = try await SendOnce.open(config, tokenProvider: nil, transport: URLSessionTransport(configuration: configuration))
        defer { sdk.close() }
        let answers = Answers()
        let token = try sdk.addEventListener { answers.add($0) }
        defer { token.cancel() }
        _ = try await sdk.sendTransfer(to: "usr_x", amountMinor: 100, currency: "BDT")
        for _ in 0..<2000 where answers.first == nil {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        return answers.first
    }

    func testAURLSessionTimeoutIsTheSdksTimeout() async throws {
        let silent = try SilentPort()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 0.3
        let error = try await firstError(baseUrl: "http://127.0.0.1:\(silent.port)", configuration)
        // Untyped, it arrived as "connection error: Error Domain=NSURLErrorDomain Code=-1001 ...".
        XCTAssertEqual(error, "timed out")
    }

    func testARefusedConnectionIsAConnectionError() async throws {
        // A port that was just free: nothing listens there.
        let port = try SilentPort().port
        let error = try await firstError(baseUrl: "http://127.0.0.1:\(port)", .ephemeral)
        XCTAssertTrue(error?.hasPrefix("connection error: URLError -1004") ?? false, "\(error ?? "no answer")")
    }

    /// Before, the transport set its cache policy on the caller's own configuration object.
    func testTheCallersConfigurationIsLeftAsItWas() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .returnCacheDataElseLoad
        _ = URLSessionTransport(configuration: configuration)
        XCTAssertEqual(configuration.requestCachePolicy, .returnCacheDataElseLoad)
    }

    /// Before, a cancelled send went on until URLSession's own timeout (60 s here) and then said "timed out".
    func testACancelledSendCancelsItsRequest() async throws {
        let silent = try SilentPort()
        let transport = URLSessionTransport()
        let request = HttpRequest(
            method: "GET", url: "http://127.0.0.1:\(silent.port)/", headers: RedactedHeaders([]), body: Data())
        let send = Task { try await transport.send(request: request) }
        try await Task.sleep(nanoseconds: 200_000_000)
        send.cancel()
        do {
            _ = try await send.value
            XCTFail("a silent port answered")
        } catch let failure as TransportFailure {
            guard case let .Connection(detail) = failure else { return XCTFail("\(failure)") }
            XCTAssertTrue(detail.hasPrefix("URLError -999"), detail) // NSURLErrorCancelled
        }
    }

    func testURLErrorsMapToTheSdksTransportFailures() {
        XCTAssertEqual(URLSessionTransport.failure(URLError(.notConnectedToInternet)), .Offline)
        XCTAssertEqual(URLSessionTransport.failure(URLError(.cannotFindHost)), .Offline)
        XCTAssertEqual(URLSessionTransport.failure(URLError(.timedOut)), .Timeout)
        XCTAssertEqual(URLSessionTransport.failure(NSError(domain: NSURLErrorDomain, code: URLError.Code.timedOut.rawValue)), .Timeout)
        XCTAssertEqual(URLSessionTransport.failure(TransportFailure.Offline), .Offline, "a typed failure passes as it is")
        guard case let .Connection(detail) = URLSessionTransport.failure(URLError(.secureConnectionFailed)) else {
            return XCTFail("a TLS failure is a connection error")
        }
        XCTAssertTrue(detail.hasPrefix("URLError -1200"), detail)
    }
}

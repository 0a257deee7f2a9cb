// The SDK's requests through URLSession, so the app's ATS settings, proxy, protocol classes and
// certificate checks apply (FoundationNetworking on Linux).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An `HttpTransport` on URLSession.
///
/// ```swift
/// let sdk = try SendOnce.shared(config, transport: URLSessionTransport(challenge: pinning))
/// ```
///
/// Redirects are refused (a followed 3xx would send the body elsewhere) and nothing is cached; the SDK's
/// schedule owns every retry, with the same key and bytes. `challenge` answers server-trust challenges
/// (certificate pinning); without it the system's default handling applies. Its failures reach the SDK typed:
/// no network or no DNS as `Offline`, `URLError.timedOut` as `Timeout`, the rest as `Connection`.
public final class URLSessionTransport: HttpTransport, Sendable {
    private let session: URLSession

    public init(
        configuration: URLSessionConfiguration = .ephemeral,
        challenge: (@Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?))? = nil
    ) {
        // A copy: the caller's configuration object (a class) may serve its other sessions, which must
        // keep their cache settings.
        let configuration = (configuration.copy() as? URLSessionConfiguration) ?? .ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        session = URLSession(configuration: configuration, delegate: Delegate(challenge), delegateQueue: nil)
    }

    deinit {
        session.invalidateAndCancel()
    }

    /// Sends once; every failure is thrown as a `TransportFailure` (see `failure(_:)`), so the SDK records
    /// "offline" / "timed out" / "connection error" as it does for its built-in transport.
    public func send(request: HttpRequest) async throws -> HttpResponse {
        do {
            return try await exchange(request)
        } catch {
            throw Self.failure(error)
        }
    }

    /// What the SDK is told for a URLSession error (anything else is a connection error with its text).
    static func failure(_ error: Error) -> TransportFailure {
        if let failure = error as? TransportFailure { return failure }
        let ns = error as NSError
        guard let code = (error as? URLError)?.code ?? (ns.domain == NSURLErrorDomain ? URLError.Code(rawValue: ns.code) : nil) else {
            return .Connection(detail: String(describing: error))
        }
        switch code {
        case .notConnectedToInternet, .dataNotAllowed, .internationalRoamingOff, .callIsActive,
             .cannotFindHost, .dnsLookupFailed:
            return .Offline
        case .timedOut:
            return .Timeout
        default:
            return .Connection(detail: "URLError \(code.rawValue): \(ns.localizedDescription)")
        }
    }

    private func exchange(_ request: HttpRequest) async throws -> HttpResponse {
        guard let url = URL(string: request.url) else { throw URLError(.badURL) }
        var r = URLRequest(url: url)
        r.httpMethod = request.method
        for header in request.headers { r.addValue(header.value, forHTTPHeaderField: header.name) }
        if request.method != "GET" { r.httpBody = request.body }
        let session = self.session
        // The SDK cancels a send it no longer waits for (close(), a drain's deadline, a cancelled Swift
        // task): the request is cancelled with it instead of holding a connection until URLSession's timeout,
        // as OkHttpTransport's call is.
        let running = RunningTask()
        let (data, response): (Data, URLResponse) = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: r) { data, response, error in
                    if let error { return continuation.resume(throwing: error) }
                    guard let response else { return continuation.resume(throwing: URLError(.badServerResponse)) }
                    continuation.resume(returning: (data ?? Data(), response))
                }
                running.start(task)
            }
        } onCancel: {
            running.cancel()
        }
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        let headers = http.allHeaderFields.compactMap { name, value -> HttpHeader? in
            guard let name = name as? String else { return nil }
            return HttpHeader(name: name.lowercased(), value: "\(value)")
        }
        return HttpResponse(status: UInt16(clamping: http.statusCode), headers: headers, body: data)
    }

    /// The data task of one send, and whether it was cancelled before it started (the handler may run first).
    private final class RunningTask: @unchecked Sendable {
        private let lock = NSLock()
        private var task: URLSessionDataTask?
        private var cancelled = false

        func start(_ task: URLSessionDataTask) {
            let cancelled = lock.withLock { () -> Bool in
                self.task = task
                return self.cancelled
            }
            task.resume()
            if cancelled { task.cancel() }
        }

        func cancel() {
            let task = lock.withLock { () -> URLSessionDataTask? in
                cancelled = true
                return self.task
            }
            task?.cancel()
        }
    }

    private final class Delegate: NSObject, URLSessionTaskDelegate, Sendable {
        let challenge: (@Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?))?

        init(_ challenge: (@Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?))?) {
            self.challenge = challenge
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
        ) {
            completionHandler(nil) // hand the 3xx back: the SDK treats it as "outcome unknown"
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            guard let answer = self.challenge else { return completionHandler(.performDefaultHandling, nil) }
            let (disposition, credential) = answer(challenge)
            completionHandler(disposition, credential)
        }
    }
}

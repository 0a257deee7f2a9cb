// Hand-written, beside the generated SendOnceFFI.swift (whose HttpRequest uses it; see bindings/uniffi.toml).

/// The headers of an `HttpRequest`: a collection of `HttpHeader` to iterate and send as it is, whose printed
/// forms (`description`, `debugDescription`, `dump`'s mirror, and so the request's) show the value of
/// `authorization` as `<redacted>`, so a transport that logs the request it was handed never leaks the bearer
/// token. (A single `HttpHeader` printed on its own still shows its value: log the request, not the header.)
public struct RedactedHeaders: RandomAccessCollection, Hashable, Sendable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable {
    /// The headers as they are sent.
    public let headers: [HttpHeader]

    public init(_ headers: [HttpHeader]) { self.headers = headers }

    public var startIndex: Int { headers.startIndex }
    public var endIndex: Int { headers.endIndex }
    public subscript(position: Int) -> HttpHeader { headers[position] }

    private var printed: [String] {
        headers.map { "\($0.name): \($0.name.lowercased() == "authorization" ? "<redacted>" : $0.value)" }
    }

    public var description: String { "[" + printed.joined(separator: ", ") + "]" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, unlabeledChildren: printed, displayStyle: .collection) }
}

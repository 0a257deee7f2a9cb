// Spans checked before they cross into Rust. uniffi's generated lowering of a `TimeInterval` stops the
// process (`fatalError`) on a negative, infinite or NaN value, so an app's bad setting would crash it
// instead of being the typed `InvalidConfig` every other bad input is. Rust refuses the rest (zero
// timeouts, a retention outside its range); this only keeps the values lowerable.
import Foundation
import SendOnceFFI

/// Throws `InvalidConfig` naming the span unless it is a finite, non-negative number of seconds.
func checkSpan(_ name: String, _ value: TimeInterval?) throws {
    guard let value else { return }
    guard value.isFinite, value >= 0, value < TimeInterval(Int64.max) else {
        throw SendOnceError.InvalidConfig(detail: "\(name) is \(value) s; a span must be a finite number of seconds, zero or more")
    }
}

extension SendOnceConfig {
    /// Every span of the config lowerable, or `InvalidConfig` naming the first that is not.
    func checkSpans() throws {
        try checkSpan("requestTimeout", requestTimeout)
        try checkSpan("connectTimeout", connectTimeout)
        try checkSpan("retention", retention)
        try checkSpan("tokenTimeout", tokenTimeout)
        try checkSpan("backgroundWakeWindow", backgroundWakeWindow)
        if let retry {
            try checkSpan("retry.base", retry.base)
            try checkSpan("retry.cap", retry.cap)
            try checkSpan("retry.giveUpAfter", retry.giveUpAfter)
        }
        try networkProfile?.checkSpans()
    }
}

extension NetworkProfile {
    /// A custom profile's spans lowerable, or `InvalidConfig` naming the first that is not.
    func checkSpans() throws {
        guard case let .custom(settings) = self else { return }
        try checkSpan("latency", settings.latency)
        try checkSpan("latencyJitter", settings.latencyJitter)
        try checkSpan("tunnelEvery", settings.tunnelEvery)
        try checkSpan("tunnelLength", settings.tunnelLength)
        try checkSpan("timeout", settings.timeout)
    }
}

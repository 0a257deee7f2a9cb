import Foundation

/// The latest value plus every `AsyncStream` subscribed to it.
///
/// Two locks, taken in one order only (`delivery` then `state`):
/// - `state` guards the fields and is never held while yielding or finishing a stream, because
///   yielding may take the consumer task's own lock, and a consumer that cancels (`break` in a
///   `for await`) runs `onTermination`, which takes `state`; holding both the other way round is the
///   deadlock this type exists to avoid.
/// - `delivery` serialises publishers, so every subscriber sees the values in publication order; it is
///   never taken by `onTermination`.
final class Broadcast<Value: Sendable & Equatable>: Sendable {
    private struct State {
        var current: Value
        var subscribers: [UUID: AsyncStream<Value>.Continuation] = [:]
        var finished = false
    }

    private let state: Locked<State>
    private let delivery = Locked(())

    init(_ initial: Value) {
        state = Locked(State(current: initial))
    }

    /// The latest value.
    var value: Value { state.withLock { $0.current } }

    /// The latest value at once, then every published one; finishes with `finish()`.
    func stream(_ policy: AsyncStream<Value>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<Value> {
        AsyncStream(bufferingPolicy: policy) { continuation in
            let id = UUID()
            delivery.withLock { _ in
                let latest: Value? = state.withLock { s in
                    if s.finished { return nil }
                    s.subscribers[id] = continuation
                    return s.current
                }
                guard let latest else {
                    continuation.finish()
                    return
                }
                continuation.yield(latest)
                continuation.onTermination = { [weak self] _ in self?.remove(id) }
            }
        }
    }

    /// Publishes `next(current)` unless it returns nil or the same value. `next` runs under the delivery
    /// lock, so a value read inside it can never be overtaken by an older one.
    func publish(_ next: (Value) -> Value?) {
        delivery.withLock { _ in
            let (before, done) = state.withLock { ($0.current, $0.finished) }
            guard !done, let value = next(before), value != before else { return }
            let targets = state.withLock { s in
                s.current = value
                return Array(s.subscribers.values)
            }
            for continuation in targets {
                continuation.yield(value)
            }
        }
    }

    /// Ends every stream; later publications are dropped.
    func finish() {
        let targets = state.withLock { s in
            s.finished = true
            defer { s.subscribers.removeAll() }
            return Array(s.subscribers.values)
        }
        for continuation in targets {
            continuation.finish()
        }
    }

    private func remove(_ id: UUID) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }
}

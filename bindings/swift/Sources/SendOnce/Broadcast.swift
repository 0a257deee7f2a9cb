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
final class Broadcast<Value: Sendable & Equatable>: @unchecked Sendable {
    private let state = NSLock()
    private let delivery = NSLock()
    private var current: Value
    private var subscribers: [UUID: AsyncStream<Value>.Continuation] = [:]
    private var finished = false

    init(_ initial: Value) {
        current = initial
    }

    /// The latest value.
    var value: Value {
        state.lock()
        defer { state.unlock() }
        return current
    }

    /// The latest value at once, then every published one; finishes with `finish()`.
    func stream(_ policy: AsyncStream<Value>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<Value> {
        AsyncStream(bufferingPolicy: policy) { continuation in
            let id = UUID()
            delivery.lock()
            defer { delivery.unlock() }
            state.lock()
            if finished {
                state.unlock()
                continuation.finish()
                return
            }
            subscribers[id] = continuation
            let latest = current
            state.unlock()
            continuation.yield(latest)
            continuation.onTermination = { [weak self] _ in self?.remove(id) }
        }
    }

    /// Publishes `next(current)` unless it returns nil or the same value. `next` runs under the delivery
    /// lock, so a value read inside it can never be overtaken by an older one.
    func publish(_ next: (Value) -> Value?) {
        delivery.lock()
        defer { delivery.unlock() }
        state.lock()
        let before = current
        let done = finished
        state.unlock()
        guard !done, let value = next(before), value != before else { return }
        state.lock()
        current = value
        let targets = Array(subscribers.values)
        state.unlock()
        for continuation in targets {
            continuation.yield(value)
        }
    }

    /// Ends every stream; later publications are dropped.
    func finish() {
        state.lock()
        finished = true
        let targets = Array(subscribers.values)
        subscribers.removeAll()
        state.unlock()
        for continuation in targets {
            continuation.finish()
        }
    }

    private func remove(_ id: UUID) {
        state.lock()
        subscribers[id] = nil
        state.unlock()
    }
}

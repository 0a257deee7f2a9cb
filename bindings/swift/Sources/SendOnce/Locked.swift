import Foundation

/// A value behind a lock: the one audited `@unchecked Sendable` of this package. `Synchronization.Mutex`
/// does this job from iOS 18 / macOS 15; the package supports iOS 15 / macOS 12, so this is its stand-in
/// (every access to `value` goes through `withLock`).
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, holding the lock.
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

extension Locked {
    /// Takes the value out, leaving nil: of two racing takers exactly one gets it.
    func take<Wrapped>() -> Wrapped? where Value == Wrapped? {
        withLock { slot in
            defer { slot = nil }
            return slot
        }
    }
}

/// Work that touches the disk runs here, never on the caller's thread (the MainActor included), whatever
/// executor the caller's task uses.
let ioQueue = DispatchQueue(label: "io.sendonce.io", qos: .userInitiated, attributes: .concurrent)

/// Runs `body` on `ioQueue` and returns its result to the awaiting task.
func offCallerThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        ioQueue.async { continuation.resume(with: Result { try body() }) }
    }
}

/// Runs `operation` and returns its result, or throws `CancellationError` as soon as the calling task is
/// cancelled. uniffi's Swift glue polls a Rust future to completion whatever happens to the Task, so the
/// Rust call is told through the `CancelSignal` handed to `operation`: a call that passes it on (the waits:
/// `outcome(of:)`, `resolve`, `drain`) has its Rust future dropped at once; one that ignores it (the
/// commits: `sendTransfer`, `confirm`, bounded by one store transaction) finishes in the background and its
/// result is dropped.
func cancellable<T: Sendable>(_ operation: @escaping @Sendable (CancelSignal) async throws -> T) async throws -> T {
    let pending = Locked<CheckedContinuation<T, Error>?>(nil)
    let signal = CancelSignal()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            pending.withLock { $0 = continuation }
            // Cancelled before the handler could see the continuation: answer now (only one side takes it).
            if Task.isCancelled {
                pending.take()?.resume(throwing: CancellationError())
                return
            }
            Task {
                let result: Result<T, Error>
                do { result = .success(try await operation(signal)) } catch { result = .failure(error) }
                pending.take()?.resume(with: result)
            }
        }
    } onCancel: {
        signal.cancel()
        pending.take()?.resume(throwing: CancellationError())
    }
}

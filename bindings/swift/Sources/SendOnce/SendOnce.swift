// The idiomatic Swift surface of sendonce. The generated API is re-exported
// so apps need only `import SendOnce`.
@_exported import SendOnceFFI

public enum SendOnce {
    /// Version of the Rust core these bindings were generated from.
    public static var version: String { sdkVersion() }
}

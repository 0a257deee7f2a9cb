//! uniffi surface of the sendonce SDK: conversions and error mapping only.
uniffi::setup_scaffolding!();

/// Version of the Rust core the bindings were built from (placeholder export that
/// proves the Kotlin/Swift build plumbing until the real API lands).
#[uniffi::export]
pub fn sdk_version() -> String {
    env!("CARGO_PKG_VERSION").into()
}

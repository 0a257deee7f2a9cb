//! The uniffi-bindgen CLI, pinned to the workspace's uniffi version so the
//! generator always matches the scaffolding compiled into `sendonce-ffi`.
//! Used by `scripts/gen-bindings`: `uniffi-bindgen generate <libsendonce_ffi.so> ...`.
fn main() {
    uniffi::uniffi_bindgen_main()
}

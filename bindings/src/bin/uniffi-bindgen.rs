//! Generates the Kotlin and Swift sources from the built library (library mode).
fn main() {
    uniffi::uniffi_bindgen_main()
}

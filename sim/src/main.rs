//! `sendonce-sim`: train rides against the embedded mock server.
fn main() {
    println!("sendonce-sim: not built yet");
}

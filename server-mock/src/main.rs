//! server-mock binary.
fn main() {}

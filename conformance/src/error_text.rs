//! How the kit writes an error into a report or a proxied answer: the error and its causes
//! on one line (the client and the chaos proxy both do, so it sits below both).

/// An error with its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

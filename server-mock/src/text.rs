//! What text a user sends may hold before it reaches another user's screen or an SMS.

use sendonce_server::Problem;

/// Validates a stored name and returns the value to store: trimmed, 1..=`max_chars`
/// characters, no control characters or bidi overrides (they would reach SMS texts).
pub(crate) fn clean(field: &str, value: &str, max_chars: usize) -> Result<String, Problem> {
    let trimmed = value.trim();
    let n = trimmed.chars().count();
    if n == 0 || n > max_chars {
        return Err(Problem::invalid(format!(
            "{field} must have 1 to {max_chars} characters"
        )));
    }
    if let Some(bad) = trimmed.chars().find(|&c| forbidden_char(c)) {
        return Err(Problem::invalid(format!(
            "{field} must not contain control or bidi characters (found U+{:04X})",
            u32::from(bad)
        )));
    }
    Ok(trimmed.to_string())
}

/// Control characters (newlines included) and the bidi controls that can make a text read
/// differently from what it says (U+061C, U+200E/F, U+202A-E, U+2066-9).
pub(crate) fn forbidden_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

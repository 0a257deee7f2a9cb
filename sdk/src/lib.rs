//! sendonce client core.

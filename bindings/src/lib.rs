//! uniffi surface of the sendonce SDK: conversions and error mapping only.
uniffi::setup_scaffolding!();

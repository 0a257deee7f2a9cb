//! What the integration tests share: a config for a store file of their own.

use std::time::Duration;

use sendonce_ffi::SendOnceConfig;

/// A config on `db` against a host nothing answers for (the tests bring their transport or stay offline).
pub fn config(db: String) -> SendOnceConfig {
    SendOnceConfig {
        base_url: "https://api.example.com".into(),
        db_path: db,
        access_token: None,
        encryption_key: None,
        retry: None,
        request_timeout: Some(Duration::from_secs(5)),
        connect_timeout: Some(Duration::from_secs(5)),
        network_profile: None,
        max_concurrent_sends: 4,
        clock_speed: 1.0,
        retention: None,
        account_id: None,
        token_timeout: None,
        background_wake_window: Some(Duration::ZERO),
        log_personal_data: false,
        contract: None,
    }
}

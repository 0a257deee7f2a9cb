//! Settings that cannot work are refused with a typed error; a closed SDK answers `Closed` to every call.

mod common;

use std::time::Duration;

use common::scripted::{problem, req, rig, until};
use proptest::prelude::*;
use sendonce::{RetryPolicy, Sdk, SdkConfig, SdkError};
use tokio::sync::Semaphore;

fn builder() -> sendonce::SdkConfigBuilder {
    SdkConfig::builder("http://127.0.0.1:9", "/nonexistent-dir/never-created.db")
}

/// Checks both doors: `build()` and `Sdk::open` on a config whose fields were set directly.
fn refused(policy: RetryPolicy) -> Result<(), String> {
    let built = builder().retry(policy.clone()).build();
    if !matches!(built, Err(SdkError::InvalidConfig(_))) {
        return Err(format!("build() accepted {policy:?}: {built:?}"));
    }
    let mut config = builder().build().unwrap();
    config.retry = policy.clone();
    match Sdk::open(config) {
        Err(SdkError::InvalidConfig(_)) => Ok(()),
        other => Err(format!("open() accepted {policy:?}: {other:?}")),
    }
}

fn bad_rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        -1e300f64..0.0,
        0.0f64..1e-4,
        1e7f64..1e300,
    ]
}

fn bad_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (1u64..1_000_000).prop_map(Duration::from_nanos),
        Just(Duration::MAX),
        (365 * 24 * 3600u64..u64::MAX).prop_map(Duration::from_secs),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_bad_budget_rate_is_refused(rate in bad_rate()) {
        let policy = RetryPolicy { budget_per_second: rate, ..RetryPolicy::default() };
        prop_assert_eq!(refused(policy), Ok(()));
    }

    #[test]
    fn a_bad_base_cap_or_horizon_is_refused(d in bad_duration(), which in 0usize..3) {
        let mut policy = RetryPolicy::default();
        match which {
            0 => policy.base = d,
            1 => policy.cap = d,
            _ => policy.give_up_after = d,
        }
        prop_assert_eq!(refused(policy), Ok(()));
    }

    #[test]
    fn a_bad_timeout_or_concurrency_is_refused(d in bad_duration(), n in prop_oneof![Just(0usize), 100_000usize..usize::MAX], which in 0usize..3) {
        let b = builder();
        let b = match which {
            0 => b.request_timeout(d),
            1 => b.connect_timeout(d),
            _ => b.max_concurrent_sends(n),
        };
        let built = b.build();
        prop_assert!(matches!(built, Err(SdkError::InvalidConfig(_))), "{:?}", built);
    }
}

#[test]
fn the_default_and_the_documented_settings_are_accepted() {
    builder().build().unwrap();
    builder()
        .retry_base(Duration::from_millis(10))
        .retry_cap(Duration::from_millis(100))
        .give_up_after(Duration::from_millis(300))
        .build()
        .unwrap();
    builder()
        .retry(RetryPolicy {
            base: Duration::from_secs(600),
            cap: Duration::from_secs(3600),
            budget_burst: 100_000,
            ..RetryPolicy::default()
        })
        .build()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_calls_return_closed_after_close() {
    let rig =
        std::sync::Arc::new(rig(vec![problem(503, r#"{"code":"service_unavailable"}"#)]).await);
    let gate = std::sync::Arc::new(Semaphore::new(0));
    rig.script.lock().unwrap().gate = Some(gate.clone());
    // No network signal: the sender leaves the transfer alone, so the look-up at the server is the resolve's.
    rig.sdk.set_network_available(false).unwrap();
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    let (resolving, waiting) = {
        let (a, b) = (rig.clone(), rig.clone());
        let (ida, idb) = (t.local_id.clone(), t.local_id.clone());
        (
            tokio::spawn(async move { a.sdk.resolve(&ida).await }),
            tokio::spawn(async move { b.sdk.wait_for_outcome(&idb).await }),
        )
    };
    until("the resolve's look-up is out", || {
        rig.script.lock().unwrap().lookups == 1
    })
    .await;
    rig.sdk.close();
    assert_eq!(resolving.await.unwrap().unwrap_err(), SdkError::Closed);
    assert_eq!(waiting.await.unwrap().unwrap_err(), SdkError::Closed);
    assert_eq!(
        rig.sdk.send_transfer(req()).await.unwrap_err(),
        SdkError::Closed
    );
    assert_eq!(
        rig.sdk.resolve(&t.local_id).await.unwrap_err(),
        SdkError::Closed
    );
    assert!(rig.script.lock().unwrap().arrivals.is_empty());
    gate.add_permits(10);
}

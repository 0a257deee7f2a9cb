//! The benchmarks' endpoints (test API): the plain-insert baseline validates like a
//! transfer; the contract floor and the peer (a Powertools-style layer) move real money once
//! per request and never overdraw.

use crate::common::*;

/// `POST /v1/bench/{what}` as `user` with a JSON body.
async fn bench(s: &TestServer, what: &str, user: &User, body: String) -> Resp {
    to_resp(
        s.client
            .post(format!("{}/v1/bench/{what}", s.url))
            .bearer_auth(&user.token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn the_bench_floor_moves_money_once_per_request_and_the_relay_credits_it() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 100).await, s.user("B", 0).await);
    for _ in 0..3 {
        let r = bench(&s, "floor", &a, transfer_body(&b.id, 10)).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
    }
    s.settle().await;
    assert_eq!((s.balance(&a).await, s.balance(&b).await), (70, 30));
    let ledger = s.ledger().await;
    let debits = ledger.iter().filter(|e| e["kind"] == "debit").count();
    assert_eq!(
        debits, 3,
        "one debit per floor request, each under its own key"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_bench_peer_moves_money_once_per_request_and_credits_it_inline() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 100).await, s.user("B", 0).await);
    for _ in 0..3 {
        let r = bench(&s, "peer", &a, transfer_body(&b.id, 10)).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
    }
    // No outbox: the credit is the handler's, before the answer.
    assert_eq!((s.balance(&a).await, s.balance(&b).await), (70, 30));
    let ledger = s.ledger().await;
    let debits = ledger.iter().filter(|e| e["kind"] == "debit").count();
    assert_eq!(
        debits, 3,
        "one debit per peer request, each under its own key"
    );
    let r = bench(&s, "peer", &a, transfer_body(&b.id, 71)).await;
    assert_ne!(
        r.status, 201,
        "a balance that does not cover it moves nothing"
    );
    assert_eq!(s.balance(&a).await, 70);
    s.stop().await;
}

#[tokio::test]
async fn the_bench_floor_never_overdraws_under_concurrent_requests() {
    never_overdraws("floor").await;
}

#[tokio::test]
async fn the_bench_peer_never_overdraws_under_concurrent_requests() {
    never_overdraws("peer").await;
}

async fn never_overdraws(path: &str) {
    let s = start_default().await;
    let (a, b) = (s.user("A", 100).await, s.user("B", 0).await);
    // 16 requests of 30 at once against a balance of 100: at most three can move money.
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (client, url) = (s.client.clone(), format!("{}/v1/bench/{path}", s.url));
        let (token, body) = (a.token.clone(), transfer_body(&b.id, 30));
        requests.spawn(async move {
            let sent = client.post(url).bearer_auth(token).body(body);
            let sent = sent.header("content-type", "application/json").send();
            sent.await.unwrap().status().as_u16()
        });
    }
    let statuses = requests.join_all().await;
    let moved = statuses.iter().filter(|&&status| status == 201).count();
    assert_eq!(moved, 3, "{statuses:?}");
    s.settle().await;
    assert_eq!((s.balance(&a).await, s.balance(&b).await), (10, 90));
    s.stop().await;
}

#[tokio::test]
async fn bench_plain_validates_like_a_transfer() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 0).await, s.user("B", 0).await);
    let plain = |body: String| bench(&s, "plain", &a, body);
    assert_eq!(plain(transfer_body(&b.id, 100)).await.status, 201);
    assert_eq!(plain(transfer_body(&b.id, 0)).await.status, 400);
    assert_eq!(plain(transfer_body("usr_nobody", 1)).await.status, 404);
    s.stop().await;
}

//! Figure 9's counts that do not move with the load (issue 33): per request, the statements
//! PostgreSQL executed (top-level: each is one round trip from its client, `BEGIN` and `COMMIT`
//! included) and the WAL bytes they wrote, from `pg_stat_statements` (which `scripts/pg` loads),
//! for the first request, the contract's floor, the peer and the plain insert. One request at a
//! time, a fixed number each, the relay drained before reading: the relay's statements and WAL
//! are part of a request's cost. The bench's own statements are tagged and left out.

use std::time::Duration;

use super::{connect, fresh_db, start, users};
use crate::report::{r3, Report, Row};
use crate::server::{client, post, transfer_body, COUNTED, FIRST_OVER_FLOOR_TARGET};
use crate::stats::fmt;

/// Statements and WAL bytes per request of one kind.
#[derive(Clone, Copy)]
struct PerRequest {
    statements: f64,
    wal_bytes: f64,
}

/// The bench's own statements carry this, so the sums leave them out.
const TAG: &str = "/* sendonce-bench */";

pub(super) async fn statements_and_wal(report: &mut Report, url: &str, quick: bool) {
    let db = fresh_db(url).await;
    let pg = connect(&db).await;
    if let Err(e) = pg
        .batch_execute(&format!(
            "{TAG} CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
        ))
        .await
    {
        report.note(
            "9 counts",
            format!("not counted: pg_stat_statements is not loaded in this cluster ({e}); scripts/pg start loads it"),
        );
        return;
    }
    let server = start(&db, Duration::from_secs(48 * 3600)).await;
    let base = server.base_url();
    let (senders, to) = users(&base).await;
    let c = client();
    let n = if quick { 100 } else { 500 };
    let mut per = std::collections::BTreeMap::new();
    for (kind, path) in COUNTED {
        let reset = format!("{TAG} SELECT pg_stat_statements_reset()");
        pg.batch_execute(&reset).await.expect("reset");
        for i in 0..n {
            let user = &senders[i % senders.len()];
            let key = (kind == "first").then(|| uuid::Uuid::new_v4().to_string());
            let url = format!("{base}{path}");
            let a = post(&c, &url, &user.token, key.as_deref(), transfer_body(&to, 1)).await;
            assert_eq!(a.status, 201, "{kind} request {i}");
        }
        let pending = format!(
            "{TAG} SELECT EXISTS (SELECT 1 FROM sendonce_outbox WHERE published_at_ms IS NULL)"
        );
        while pg
            .query_one(&pending, &[])
            .await
            .is_ok_and(|r| r.get::<_, bool>(0))
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let sums = pg
            .query_one(
                &format!(
                    "{TAG} SELECT COALESCE(sum(calls), 0)::float8, COALESCE(sum(wal_bytes), 0)::float8
                     FROM pg_stat_statements
                     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                       AND query NOT LIKE '{TAG}%'"
                ),
                &[],
            )
            .await
            .expect("pg_stat_statements");
        let (calls, wal): (f64, f64) = (sums.get(0), sums.get(1));
        per.insert(
            kind,
            PerRequest {
                statements: calls / n as f64,
                wal_bytes: wal / n as f64,
            },
        );
    }
    server.shutdown().await;
    let (first, floor, peer, plain) = (per["first"], per["floor"], per["peer"], per["plain"]);
    let row = |what: &str, a: PerRequest, b: PerRequest, of: &str, gate: bool| {
        let (s, w) = (a.statements / b.statements, a.wal_bytes / b.wal_bytes);
        let r = Row::new(
            "9",
            format!(
                "PostgreSQL counts per request, one at a time: {what} (statements · WAL bytes)"
            ),
        )
        .subject(format!("{:.2} · {:.0} B", a.statements, a.wal_bytes))
        .baseline(format!("{:.2} · {:.0} B {of}", b.statements, b.wal_bytes))
        .ratio(format!("{} · {}", fmt(s), fmt(w)));
        if gate {
            let t = FIRST_OVER_FLOOR_TARGET;
            r.target(format!("≤ {t} each"), s <= t && w <= t)
        } else {
            r
        }
    };
    // The floor's row carries the gate.
    for (what, a, b, of, gate) in [
        ("first vs plain", first, plain, "plain insert", false),
        ("first vs contract floor", first, floor, "floor", true),
        ("first vs peer", first, peer, "peer", false),
        ("peer vs plain", peer, plain, "plain insert", false),
    ] {
        report.rows.push(row(what, a, b, of, gate));
    }
    for (name, a, b) in [
        ("plain", first, plain),
        ("floor", first, floor),
        ("peer", first, peer),
    ] {
        report.key(
            &format!("pg_first_over_{name}_statements_ratio"),
            r3(a.statements / b.statements),
        );
        report.key(
            &format!("pg_first_over_{name}_wal_bytes_ratio"),
            r3(a.wal_bytes / b.wal_bytes),
        );
    }
    let json = |p: PerRequest| serde_json::json!({"statements": r3(p.statements), "wal_bytes": p.wal_bytes.round()});
    report.key(
        "pg_counts_per_request",
        serde_json::json!({"first": json(first), "floor": json(floor), "peer": json(peer),
                           "plain": json(plain), "requests": n}),
    );
    report.note(
        "9 counts",
        format!(
            "`pg_stat_statements` (top-level statements: one round trip each, `BEGIN`/`COMMIT` \
             included; `wal_bytes`: the WAL each wrote) summed over the server's database while \
             {n} requests of each kind ran one at a time, from 32 senders, the relay drained \
             before reading; the bench's own statements are tagged and left out. Background \
             statements of those seconds (heartbeat, reaper) are included, for every kind alike."
        ),
    );
}

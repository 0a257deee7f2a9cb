//! The bench floor on SQLite: the least any design honouring the contract does for one
//! first request through the group writer, each phase one statement — the claim committed
//! (NORMAL, as `SqliteStore::claim`; the primary key spans every day, so no look-up), then
//! the gateway's record committed (NORMAL), then the sender's balance read (no overdraft),
//! the key's completion, the debit, its capture and its outbox event in one FULL commit. Downstream the
//! relay delivers the event like any other. The gap between this and `bench_plain` is what
//! the contract costs on this machine; the gap between this and a first request is what
//! the design adds on top (the key look-up, the balance pre-check, the fence's read, the
//! last guard's look-up, the request's own hashing and JSON).

use rusqlite::params;

use crate::ledger;
use crate::outbox;
use crate::store::{FloorTransfer, Instance, PlainRow};
use sendonce_server::store::sqlite::{keys, Db, Durability};
use sendonce_server::store::DbError;
use sendonce_server::store::NewKey;
use sendonce_server::{Claim, Lease};

/// One first request's floor; returns the outbox event id.
pub(super) async fn first_request(
    db: &Db,
    instance: &Instance,
    p: PlainRow,
) -> Result<i64, DbError> {
    let bucket_width_ms = p.bucket_width_ms;
    let FloorTransfer {
        record: t,
        body,
        hash,
    } = p.floor_transfer();
    let (t, body, hash) = (
        std::sync::Arc::new(t),
        std::sync::Arc::new(body),
        std::sync::Arc::new(hash),
    );
    let lease = (instance.id.clone(), instance.mono_ms());
    let (t1, b1, h1) = (t.clone(), body.clone(), hash.clone());
    db.write(Durability::Normal, move |c| {
        // The library's claim: one insert, as any first request's.
        let claimed = keys::claim(
            c,
            &NewKey {
                user_id: &t1.from_user_id,
                key: &t1.idempotency_key,
                hash: &h1,
                lock_id: "floor",
                now_ms: t1.created_at_ms,
                bucket_width_ms,
                lease: Lease {
                    instance: &lease.0,
                    mono_ms: lease.1,
                },
                body: &b1,
            },
        )?;
        match claimed {
            Claim::Acquired => Ok(()),
            Claim::Exists(_) => Err(DbError::Task("the floor's key was taken".into())),
        }
    })
    .await?;
    let t2 = t.clone();
    let authorization = format!("auth_{}", uuid::Uuid::new_v4().simple());
    db.write(Durability::Normal, move |c| {
        c.prepare_cached(
            "INSERT OR ROLLBACK INTO gateway_authorizations
                 (user_id, idem_key, authorization_id, calls, created_at_ms)
             VALUES (?1, ?2, ?3, 1, ?4)",
        )?
        .execute(params![
            t2.from_user_id,
            t2.idempotency_key,
            authorization,
            t2.created_at_ms
        ])?;
        Ok(())
    })
    .await?;
    db.write(Durability::Full, move |c| {
        // One writer at a time: the balance read here still holds at the debit.
        if ledger::balance(c, &t.from_user_id)? < t.amount_minor {
            return Err(DbError::Task(
                "the floor's sender cannot cover the amount".into(),
            ));
        }
        // The completion is the fence: debit and event only if the key is still ours.
        if !keys::complete(c, &t.from_user_id, &t.idempotency_key, "floor", 201, &body)? {
            return Err(DbError::Task("the floor's key was not in progress".into()));
        }
        ledger::insert_debit(c, &t, &hash)?;
        super::gateway::capture(c, &t.from_user_id, &t.idempotency_key, t.created_at_ms)?;
        outbox::insert_transfer_done(c, &t, &body)
    })
    .await
}

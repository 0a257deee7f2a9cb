//! What server-mock's test API and bench endpoints ask of a store: users made with a
//! balance, listings, counters, the bench's baseline and floor. None of it is the contract's
//! interface ([`super::Store`]), so a production store never has to carry it.

use std::sync::Arc;

use serde::Serialize;

use super::Fut;
use crate::ledger::EntryJson;

/// A user created by the test API (its opening balance is a ledger deposit).
#[derive(Debug, Clone)]
pub struct NewUser {
    /// Id.
    pub user_id: String,
    /// "sha256:" + hex hash of the token.
    pub token_hash: String,
    /// Display name.
    pub display_name: String,
    /// Wallet currency.
    pub currency: String,
    /// Opening balance.
    pub balance_minor: i64,
    /// Server time now.
    pub now_ms: i64,
    /// When the token stops working.
    pub token_expires_at_ms: i64,
}

/// A change the test API makes to one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserChange {
    /// The user becomes unknown (their ledger stays).
    Remove,
    /// Their token stops working.
    Revoke,
}

/// One SMS as the test API lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Sms {
    /// Row id.
    pub sms_id: i64,
    /// Recipient.
    pub user_id: String,
    /// Transfer it tells about.
    pub transfer_id: String,
    /// The text.
    pub text: String,
}

/// Counters the tests and the simulator check invariants with.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Key rows.
    pub idempotency_keys: i64,
    /// Key rows still in progress.
    pub keys_in_progress: i64,
    /// Outbox events not yet published.
    pub outbox_pending: i64,
    /// Outbox events stored (published or not).
    pub outbox_rows: i64,
    /// Inbox rows of the in-process consumers.
    pub inbox_rows: i64,
    /// Ledger entries.
    pub ledger_entries: i64,
    /// SMS sent.
    pub sms_sent: i64,
    /// Ledger credits.
    pub credits: i64,
    /// Gateway authorisations given (live, captured and voided).
    pub gateway_authorizations: i64,
    /// Gateway calls.
    pub gateway_calls: i64,
    /// Authorisations captured by a debit.
    pub gateway_captures: i64,
    /// Authorisations voided (the key's outcome did not use them). Once every key has its
    /// outcome, `gateway_authorizations == gateway_captures + gateway_voids`.
    pub gateway_voids: i64,
}

/// The benchmark baseline row: a transfer's data with no idempotency at all.
#[derive(Debug, Clone)]
pub struct PlainRow {
    /// Sender.
    pub user_id: String,
    /// Recipient.
    pub to_user_id: String,
    /// Amount.
    pub amount_minor: i64,
    /// Currency.
    pub currency: String,
    /// Note.
    pub note: Option<String>,
    /// Server time now.
    pub now_ms: i64,
    /// The key-table bucket a transfer made now lands in (the bench floor's key row).
    pub bucket: i64,
    /// The width of a key-table bucket (the library's claim computes `bucket` from it).
    pub bucket_width_ms: i64,
}

/// What a bench floor request writes: the transfer under a fresh key, its body and hash.
pub(crate) struct FloorTransfer {
    pub(crate) record: crate::ledger::TransferRecord,
    pub(crate) body: Vec<u8>,
    pub(crate) hash: Vec<u8>,
}

impl PlainRow {
    /// The transfer a bench floor request makes of this row (both backends' floors).
    pub(crate) fn floor_transfer(self) -> FloorTransfer {
        let record = crate::ledger::TransferRecord {
            transfer_id: format!("tr_{}", uuid::Uuid::now_v7().simple()),
            from_user_id: self.user_id,
            to_user_id: self.to_user_id,
            amount_minor: self.amount_minor,
            currency: self.currency,
            note: self.note,
            created_at_ms: self.now_ms,
            idempotency_key: uuid::Uuid::new_v4().to_string(),
        };
        let body = record.to_json();
        let hash = sendonce_server::fingerprint::request_hash("POST", "/v1/transfers", &body);
        FloorTransfer { record, body, hash }
    }
}

/// The bench peer's windows (both backends' peers): how long an `INPROGRESS` record blocks
/// its key (Powertools' `in_progress_expiry`, the handler's remaining time; 60 s like the
/// contract's lease), and how long a record answers (`expires_after_seconds`; the contract's
/// key window).
pub(crate) const PEER_IN_PROGRESS_MS: i64 = 60_000;
pub(crate) const PEER_EXPIRES_AFTER_MS: i64 = 48 * 3_600_000;

/// The test API's and the bench's view of a store (both backends implement it).
pub trait Fixtures: Send + Sync {
    /// creates a user with an opening balance.
    fn create_user(&self, user: NewUser) -> Fut<'_, ()>;
    /// removes a user or revokes their token; returns rows changed.
    fn change_user(&self, change: UserChange, user_id: String) -> Fut<'_, usize>;
    /// ledger entries after `after`, oldest first.
    fn ledger_page(&self, after: i64, limit: i64) -> Fut<'_, Vec<EntryJson>>;
    /// SMS after `after`, oldest first.
    fn sms_page(&self, after: i64, limit: i64) -> Fut<'_, Vec<Sms>>;
    /// counters.
    fn stats(&self) -> Fut<'_, Stats>;
    /// Bench baseline: one plain insert with the durability of a transfer's commit.
    fn bench_plain(&self, row: PlainRow) -> Fut<'_, i64>;
    /// Bench floor: the least any design honouring the contract does for one first
    /// request (its writes, the key lock and look-up day partitions need, the locked
    /// balance check), each phase one statement; `None` where the backend has no such path.
    fn bench_floor(&self, _row: PlainRow) -> Option<Fut<'_, i64>> {
        None
    }
    /// Bench peer: a first request through a Powertools-style idempotency layer on the same
    /// database (in-progress record, handler, completion; no fence, gateway record or outbox);
    /// `None` where the backend has no such path.
    fn bench_peer(&self, _row: PlainRow) -> Option<Fut<'_, i64>> {
        None
    }
}

/// Shared handle to a store's fixtures.
pub type SharedFixtures = Arc<dyn Fixtures>;

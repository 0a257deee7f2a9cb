//! server-mock's test API and bench endpoints on PostgreSQL ([`Fixtures`]).

use super::{accounts, floor, in_transaction, peer, PgStore};
use crate::ledger::EntryJson;
use crate::store::{Fixtures, Fut, NewUser, PlainRow, Sms, Stats, UserChange};

impl Fixtures for PgStore {
    fn create_user(&self, user: NewUser) -> Fut<'_, ()> {
        Box::pin(
            async move { in_transaction!(self, |tx| accounts::create_user(&tx, &user).await?) },
        )
    }

    fn change_user(&self, change: UserChange, user_id: String) -> Fut<'_, usize> {
        Box::pin(accounts::change_user(self, change, user_id))
    }

    fn ledger_page(&self, after: i64, limit: i64) -> Fut<'_, Vec<EntryJson>> {
        Box::pin(accounts::ledger_page(self, after, limit))
    }

    fn sms_page(&self, after: i64, limit: i64) -> Fut<'_, Vec<Sms>> {
        Box::pin(accounts::sms_page(self, after, limit))
    }

    fn stats(&self) -> Fut<'_, Stats> {
        Box::pin(accounts::stats(self))
    }

    fn bench_plain(&self, row: PlainRow) -> Fut<'_, i64> {
        Box::pin(accounts::bench_plain(self, row))
    }

    fn bench_floor(&self, row: PlainRow) -> Option<Fut<'_, i64>> {
        Some(Box::pin(floor::first_request(self, row)))
    }

    fn bench_peer(&self, row: PlainRow) -> Option<Fut<'_, i64>> {
        Some(Box::pin(peer::first_request(self, row)))
    }
}

//! Accounts: the store is bound to one account; signing out (or `wipe`) leaves nothing of it.

use std::path::Path;

use crate::core::Core;
use crate::error::{Result, SdkError};
use crate::events::SdkEvent;
use crate::model::Transfer;
use crate::sdk::Sdk;
use crate::store::{Store, Wiped};

/// What a sign-out or a wipe discarded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WipeReport {
    /// Unfinished transfers discarded (only with `force`): their outcome on the server is unknown.
    pub discarded_unfinished: Vec<Transfer>,
    /// Finished transfers deleted (the receipts on this device).
    pub deleted_finished: u32,
}

impl From<Wiped> for WipeReport {
    fn from(w: Wiped) -> Self {
        Self {
            discarded_unfinished: w.unfinished,
            deleted_finished: w.finished,
        }
    }
}

impl Sdk {
    /// The account the store is bound to, if any.
    pub fn account_id(&self) -> Result<Option<String>> {
        self.live()?.store.account()
    }

    /// Signs `account_id` in with `token`: binds the store at first use. Another account than the bound
    /// one is refused with `AccountMismatch` while the bound one has unfinished transfers; with none,
    /// its finished history is wiped first (the new account never sees it).
    pub fn sign_in(&self, account_id: &str, token: Option<String>) -> Result<Option<WipeReport>> {
        let core = self.live()?;
        let wiped = bind(core, account_id)?;
        crate::token::set_by_app(core, token)?;
        Ok(wiped)
    }

    /// Signs out: forgets the token and deletes every transfer and the account binding. Refused with
    /// `UnfinishedTransfers` while any transfer is unfinished, unless `force` (then the report lists
    /// what was discarded). Afterwards the file holds nothing of the account.
    pub fn sign_out(&self, force: bool) -> Result<WipeReport> {
        let core = self.live()?;
        refuse_unfinished(&core.store, force)?;
        core.set_access_token(None);
        let report = wipe_store(core, &core.store)?;
        core.changes.send_modify(|n| *n += 1);
        Ok(report)
    }
}

/// Wipes a file no instance has open (a sign-out while the app was not running). `Busy` if one has it;
/// refused with `UnfinishedTransfers` unless `force`. A missing file is nothing to wipe.
pub fn wipe(path: &Path, force: bool) -> Result<WipeReport> {
    if !path.exists() {
        return Ok(WipeReport::default());
    }
    let store = Store::open(path).map_err(|e| match e {
        SdkError::AlreadyOpen(p) => SdkError::Busy(p),
        other => other,
    })?;
    refuse_unfinished(&store, force)?;
    let report: WipeReport = store.wipe()?.into();
    tracing::info!(
        discarded_unfinished = report.discarded_unfinished.len(),
        deleted_finished = report.deleted_finished,
        "store wiped"
    );
    Ok(report)
}

fn refuse_unfinished(store: &Store, force: bool) -> Result<()> {
    let unfinished = store.unfinished_count()?;
    if unfinished > 0 && !force {
        return Err(SdkError::UnfinishedTransfers(unfinished));
    }
    Ok(())
}

/// Binds the store to `account_id`, or checks it is bound to it (see [`Sdk::sign_in`]).
pub(crate) fn bind(core: &Core, account_id: &str) -> Result<Option<WipeReport>> {
    bind_store(&core.store, account_id, |store| wipe_store(core, store))
}

/// The binding rule on a bare store (at open, before the instance exists).
pub(crate) fn bind_store(
    store: &Store,
    account_id: &str,
    wipe: impl FnOnce(&Store) -> Result<WipeReport>,
) -> Result<Option<WipeReport>> {
    match store.account()? {
        Some(bound) if bound == account_id => Ok(None),
        Some(_) => {
            let unfinished = store.unfinished_count()?;
            if unfinished > 0 {
                return Err(SdkError::AccountMismatch(format!(
                    "{unfinished} unfinished transfers belong to the account signed in before; \
                     let them finish, or sign out with force"
                )));
            }
            let report = wipe(store)?;
            store.bind_account(account_id)?;
            Ok(Some(report))
        }
        None => {
            store.bind_account(account_id)?;
            Ok(None)
        }
    }
}

fn wipe_store(core: &Core, store: &Store) -> Result<WipeReport> {
    let report: WipeReport = store.wipe()?.into();
    tracing::info!(
        discarded_unfinished = report.discarded_unfinished.len(),
        deleted_finished = report.deleted_finished,
        "store wiped"
    );
    core.emit(SdkEvent::Wiped {
        discarded_unfinished: u32::try_from(report.discarded_unfinished.len()).unwrap_or(u32::MAX),
        deleted_finished: report.deleted_finished,
    });
    Ok(report)
}

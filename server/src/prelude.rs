//! The names an application of the library uses, in one import: `use sendonce_server::prelude::*;`.
//!
//! An operation ([`Operation`], its [`Fence`], [`Outcome`] and [`Event`]s), its answers
//! ([`Problem`], [`StatusCode`]), both stores and the SQL written once for them ([`SqliteKeys`],
//! [`PgKeys`], [`Sql`], [`Tx`], [`params!`](crate::params)), and the axum wiring ([`Engine`],
//! [`Authenticate`] or [`TokenTable`], [`bearer`], [`Principal`], [`LogPublisher`]). Nothing here is only in the prelude: each name
//! keeps its own path, which the rustdoc of each item gives.

pub use crate::engine::{bearer, token_hash, Authenticate, LogPublisher, Principal, TokenTable};
pub use crate::outcome::{Event, Outcome};
pub use crate::params;
pub use crate::problem::Problem;
pub use crate::store::postgres::PgKeys;
pub use crate::store::sql::{Sql, Tx};
pub use crate::store::sqlite::SqliteKeys;
pub use crate::store::{DbError, Fence};
pub use crate::{Engine, Operation};
pub use axum::http::StatusCode;

//! The application's own SQL, written once for both stores.
//!
//! A service on the library keeps its own tables (orders, cards, a ledger) beside the engine's.
//! Through [`Sql`] it writes their statements once: `$1`, `$2`… parameters, values as [`Value`]s,
//! rows as [`Row`]s, and its unit of work as one async closure over a [`Tx`] — the same code on
//! SQLite and on PostgreSQL. What stays the application's to keep portable is the SQL text
//! itself: the common subset (`BIGINT`, `TEXT`, `BYTEA` columns; `INSERT … ON CONFLICT DO
//! NOTHING`; a conditional `UPDATE … WHERE balance >= $2` rather than `SELECT … FOR UPDATE`,
//! which SQLite lacks and which a conditional write makes unnecessary on both).
//!
//! Implemented by [`super::sqlite::SqliteKeys`] and [`super::postgres::PgKeys`] (`sql.rs` in
//! each store's folder).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use super::{DbError, Fut, Keys};
use crate::outcome::Outcome;

/// A value bound to a `$n` parameter or read from a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// SQL `NULL`.
    Null,
    /// An integer (`BIGINT`; SQLite's `INTEGER`).
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes (`BYTEA`; SQLite's `BLOB`).
    Bytes(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Bytes(v.to_vec())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// Parameters for a statement: `params![a, b]` is `vec![Value::from(a), Value::from(b)]`.
#[macro_export]
macro_rules! params {
    ($($v:expr),* $(,)?) => { vec![$($crate::store::sql::Value::from($v)),*] };
}

/// One row read, its columns in the order of the `SELECT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn column(&self, i: usize) -> Result<&Value, DbError> {
        self.0
            .get(i)
            .ok_or_else(|| DbError::Sql(format!("no column {i} in a row of {}", self.0.len())))
    }

    /// Column `i` as an integer.
    pub fn int(&self, i: usize) -> Result<i64, DbError> {
        match self.column(i)? {
            Value::Int(v) => Ok(*v),
            other => Err(DbError::Sql(format!(
                "column {i} is {other:?}, not an integer"
            ))),
        }
    }

    /// Column `i` as text.
    pub fn text(&self, i: usize) -> Result<String, DbError> {
        match self.column(i)? {
            Value::Text(v) => Ok(v.clone()),
            other => Err(DbError::Sql(format!("column {i} is {other:?}, not text"))),
        }
    }

    /// Column `i` as bytes.
    pub fn bytes(&self, i: usize) -> Result<Vec<u8>, DbError> {
        match self.column(i)? {
            Value::Bytes(v) => Ok(v.clone()),
            other => Err(DbError::Sql(format!("column {i} is {other:?}, not bytes"))),
        }
    }
}

/// A statement to run: its text, its parameters, and whether it returns rows.
#[derive(Debug, Clone)]
pub struct Call {
    /// The SQL, with `$1`-style parameters.
    pub sql: String,
    /// `$1` is `params[0]`, and so on.
    pub params: Vec<Value>,
    /// Whether rows are read (`query`) or only counted (`execute`).
    pub returns_rows: bool,
}

impl Call {
    /// A statement whose changed rows are counted.
    pub fn execute(sql: &str, params: Vec<Value>) -> Self {
        Self {
            sql: sql.to_string(),
            params,
            returns_rows: false,
        }
    }

    /// A statement whose rows are read.
    pub fn query(sql: &str, params: Vec<Value>) -> Self {
        Self {
            sql: sql.to_string(),
            params,
            returns_rows: true,
        }
    }
}

/// What a [`Call`] gave: rows changed, or rows read.
#[derive(Debug)]
pub enum Reply {
    /// Rows changed by an `execute`.
    Changed(u64),
    /// Rows read by a `query`.
    Rows(Vec<Row>),
}

impl Reply {
    /// The rows an `execute` changed.
    pub fn changed(self) -> Result<u64, DbError> {
        match self {
            Reply::Changed(n) => Ok(n),
            Reply::Rows(_) => Err(DbError::Sql("an execute read rows".into())),
        }
    }

    /// The rows a `query` read.
    pub fn rows(self) -> Result<Vec<Row>, DbError> {
        match self {
            Reply::Rows(rows) => Ok(rows),
            Reply::Changed(_) => Err(DbError::Sql("a query changed rows".into())),
        }
    }
}

/// The future of a unit of work (or of one of its statements) over a [`Tx`].
pub type TxFut<'t, T> = Pin<Box<dyn Future<Output = Result<T, DbError>> + Send + 't>>;

/// The unit of work's transaction: the one that checked the fence and will store the outcome.
/// Only its own statements may be awaited inside a unit of work.
#[derive(Clone, Copy)]
pub struct Tx<'t>(&'t (dyn Run + 't));

/// How a store runs one statement inside a unit of work's transaction.
pub trait Run: Sync {
    /// Runs `call`.
    fn run<'a>(&'a self, call: Call) -> TxFut<'a, Reply>;
}

impl<'t> Tx<'t> {
    /// The transaction a store's `run` acts on.
    pub fn new(run: &'t (dyn Run + 't)) -> Self {
        Self(run)
    }

    /// Runs a statement; the number of rows it changed.
    pub async fn execute(self, sql: &str, params: Vec<Value>) -> Result<u64, DbError> {
        self.0.run(Call::execute(sql, params)).await?.changed()
    }

    /// Runs a query; every row it read.
    pub async fn query(self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>, DbError> {
        self.0.run(Call::query(sql, params)).await?.rows()
    }

    /// Runs a query; its first row, if any.
    pub async fn query_opt(self, sql: &str, params: Vec<Value>) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params).await?.into_iter().next())
    }
}

/// Where a SQLite unit of work hands its statements to the writer thread that polls it: the
/// future parks a [`Call`] here and yields; the thread runs it on the transaction's connection,
/// leaves the [`Reply`], and polls again. (The connection itself never enters the future, which
/// must be `Send` like PostgreSQL's.)
#[derive(Default)]
pub struct Slot(Mutex<SlotState>);

#[derive(Default)]
enum SlotState {
    #[default]
    Empty,
    Asked(Call),
    Answered(Result<Reply, DbError>),
}

impl Slot {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ask(&self, call: Call) {
        *self.lock() = SlotState::Asked(call);
    }

    fn reply(&self) -> Result<Reply, DbError> {
        match std::mem::take(&mut *self.lock()) {
            SlotState::Answered(reply) => reply,
            _ => Err(DbError::Sql(
                "a statement of the unit of work got no answer".into(),
            )),
        }
    }

    /// The statement the unit of work is waiting on, if any.
    pub fn asked(&self) -> Option<Call> {
        let mut state = self.lock();
        match std::mem::take(&mut *state) {
            SlotState::Asked(call) => Some(call),
            other => {
                *state = other;
                None
            }
        }
    }

    /// Leaves the answer to the statement taken with [`Slot::asked`].
    pub fn answer(&self, reply: Result<Reply, DbError>) {
        *self.lock() = SlotState::Answered(reply);
    }
}

impl Run for Slot {
    fn run<'a>(&'a self, call: Call) -> TxFut<'a, Reply> {
        Box::pin(async move {
            self.ask(call);
            YieldOnce(false).await;
            self.reply()
        })
    }
}

/// Pending once, then ready: hands control back to whoever polls the unit of work.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

/// Application SQL on a store, the same on SQLite and PostgreSQL.
pub trait Sql: Keys {
    /// Runs statements separated by `;` (a schema), outside any unit of work.
    fn batch<'a>(&'a self, sql: &'a str) -> Fut<'a, ()>;
    /// Runs a write outside any unit of work; the rows it changed.
    fn execute<'a>(&'a self, sql: &'a str, params: Vec<Value>) -> Fut<'a, u64>;
    /// Runs a read outside any unit of work (on SQLite, the reader connection: never waits
    /// for the writer); every row.
    fn query<'a>(&'a self, sql: &'a str, params: Vec<Value>) -> Fut<'a, Vec<Row>>;

    /// Makes the store's unit of work from one written once: `S::work(move |tx| { let o =
    /// o.clone(); Box::pin(async move { … tx.execute(…).await? … }) })`. It may run more than
    /// once (a retried group commit, a serialization failure), so it acts on `tx` only and
    /// awaits nothing else.
    fn work<F>(f: F) -> Self::Work
    where
        Self: Sized,
        F: for<'t> FnMut(Tx<'t>) -> TxFut<'t, Outcome> + Send + 'static;

    /// The first row of [`Sql::query`], if any.
    fn query_opt<'a>(&'a self, sql: &'a str, params: Vec<Value>) -> Fut<'a, Option<Row>> {
        let rows = Sql::query(self, sql, params);
        Box::pin(async move { Ok(rows.await?.into_iter().next()) })
    }

    /// The one row of [`Sql::query`] (a `SELECT` of aggregates or sub-selects always has
    /// one); a [`DbError`] when it read none.
    fn query_one<'a>(&'a self, sql: &'a str, params: Vec<Value>) -> Fut<'a, Row> {
        let row = self.query_opt(sql, params);
        Box::pin(async move { row.await?.ok_or_else(|| DbError::Sql("no row".into())) })
    }
}

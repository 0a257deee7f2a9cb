//! [`Sql`] on SQLite: `$n` parameters bound by name, rows read back as [`Value`]s, and a unit of
//! work driven on the writer's connection inside the fenced transaction.

use std::task::{Context, Poll, Waker};

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use super::{SqliteKeys, Work};
use crate::outcome::Outcome;
use crate::store::sql::{Call, Reply, Row, Slot, Sql, Tx, TxFut, Value};
use crate::store::{DbError, Fut};

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Integer(*v),
            Value::Text(v) => ValueRef::Text(v.as_bytes()),
            Value::Bytes(v) => ValueRef::Blob(v),
        }))
    }
}

/// Runs `call` on `conn`.
fn run(conn: &Connection, call: &Call) -> Result<Reply, DbError> {
    let mut st = conn.prepare_cached(&call.sql)?;
    if st.parameter_count() != call.params.len() {
        return Err(DbError::Sql(format!(
            "{} parameters given for {} in {:?}",
            call.params.len(),
            st.parameter_count(),
            call.sql
        )));
    }
    // To SQLite `$1` is a name, numbered where it first appears: bound by name, `$2` written
    // before `$1` still takes the second value.
    for (i, v) in call.params.iter().enumerate() {
        let name = format!("${}", i + 1);
        let index = st
            .parameter_index(&name)?
            .ok_or_else(|| DbError::Sql(format!("no {name} in {:?}", call.sql)))?;
        st.raw_bind_parameter(index, v)?;
    }
    if !call.returns_rows {
        return Ok(Reply::Changed(st.raw_execute()? as u64));
    }
    let mut rows = st.raw_query();
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let row = (0..r.as_ref().column_count())
            .map(|i| read(r.get_ref(i)?, i))
            .collect::<Result<_, DbError>>()?;
        out.push(Row(row));
    }
    Ok(Reply::Rows(out))
}

fn read(v: ValueRef<'_>, i: usize) -> Result<Value, DbError> {
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Int(n),
        ValueRef::Text(t) => Value::Text(
            String::from_utf8(t.to_vec())
                .map_err(|_| DbError::Sql(format!("column {i} is not UTF-8")))?,
        ),
        ValueRef::Blob(b) => Value::Bytes(b.to_vec()),
        ValueRef::Real(_) => {
            return Err(DbError::Sql(format!(
                "column {i} is REAL: not BIGINT, TEXT or BYTEA"
            )))
        }
    })
}

impl Sql for SqliteKeys {
    fn batch<'a>(&'a self, sql: &'a str) -> Fut<'a, ()> {
        let sql = sql.to_string();
        Box::pin(self.db().call(move |c| Ok(c.execute_batch(&sql)?)))
    }

    fn execute<'a>(&'a self, sql: &'a str, params: Vec<Value>) -> Fut<'a, u64> {
        let call = Call::execute(sql, params);
        Box::pin(self.db().call(move |c| run(c, &call)?.changed()))
    }

    fn query<'a>(&'a self, sql: &'a str, params: Vec<Value>) -> Fut<'a, Vec<Row>> {
        let call = Call::query(sql, params);
        Box::pin(self.db().read(move |c| run(c, &call)?.rows()))
    }

    fn work<F>(mut f: F) -> Work
    where
        F: for<'t> FnMut(Tx<'t>) -> TxFut<'t, Outcome> + Send + 'static,
    {
        Box::new(move |conn| {
            // The unit of work's future parks each statement in the slot and yields; it is run
            // here, on the transaction's connection, and the future polled again with its answer.
            let slot = Slot::default();
            let mut work = f(Tx::new(&slot));
            let mut cx = Context::from_waker(Waker::noop());
            loop {
                match work.as_mut().poll(&mut cx) {
                    Poll::Ready(outcome) => return outcome,
                    Poll::Pending => match slot.asked() {
                        Some(call) => slot.answer(run(conn, &call)),
                        None => {
                            return Err(DbError::Sql(
                                "the unit of work awaited something other than its transaction"
                                    .into(),
                            ))
                        }
                    },
                }
            }
        })
    }
}

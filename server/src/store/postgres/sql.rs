//! [`Sql`] on PostgreSQL: each [`Value`] bound as the Rust type of its parameter's SQL type
//! (as the prepared statement reports it), rows read back as [`Value`]s, and the unit of work run
//! on the fenced transaction itself.

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::types::{ToSql, Type};

use super::{work, PgKeys, Work};
use crate::outcome::Outcome;
use crate::store::sql::{Call, Reply, Row, Run, Sql, Tx, TxFut, Value};
use crate::store::{DbError, Fut};

/// Runs `call` on `c` (a pooled connection or the unit of work's transaction).
async fn run<C: GenericClient>(c: &C, call: &Call) -> Result<Reply, DbError> {
    let st = c.prepare_cached(&call.sql).await?;
    if st.params().len() != call.params.len() {
        return Err(DbError::Sql(format!(
            "{} parameters given for {} in {:?}",
            call.params.len(),
            st.params().len(),
            call.sql
        )));
    }
    let bound = call
        .params
        .iter()
        .zip(st.params())
        .map(|(v, ty)| bind(v, ty))
        .collect::<Result<Vec<_>, _>>()?;
    let params: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| &**b as _).collect();
    if !call.returns_rows {
        return Ok(Reply::Changed(c.execute(&st, &params).await?));
    }
    let rows = c.query(&st, &params).await?;
    rows.iter()
        .map(read_row)
        .collect::<Result<_, _>>()
        .map(Reply::Rows)
}

/// `v` as the Rust type PostgreSQL's `ty` takes.
fn bind(v: &Value, ty: &Type) -> Result<Box<dyn ToSql + Sync + Send>, DbError> {
    let int = |i: i64| -> Result<Box<dyn ToSql + Sync + Send>, DbError> {
        let too_big = |_| DbError::Sql(format!("{i} does not fit a {ty} parameter"));
        Ok(match *ty {
            Type::INT2 => Box::new(i16::try_from(i).map_err(too_big)?),
            Type::INT4 => Box::new(i32::try_from(i).map_err(too_big)?),
            _ => Box::new(i),
        })
    };
    Ok(match (v, ty) {
        (Value::Int(i), _) => int(*i)?,
        (Value::Text(s), _) => Box::new(s.clone()),
        (Value::Bytes(b), _) => Box::new(b.clone()),
        (Value::Null, &Type::INT2) => Box::new(None::<i16>),
        (Value::Null, &Type::INT4) => Box::new(None::<i32>),
        (Value::Null, &Type::INT8) => Box::new(None::<i64>),
        (Value::Null, &Type::BYTEA) => Box::new(None::<Vec<u8>>),
        (Value::Null, _) => Box::new(None::<String>),
    })
}

fn read_row(r: &tokio_postgres::Row) -> Result<Row, DbError> {
    let column = |i: usize| -> Result<Value, DbError> {
        let ty = r.columns()[i].type_();
        Ok(match *ty {
            Type::INT2 => r.try_get::<_, Option<i16>>(i)?.map(i64::from).into(),
            Type::INT4 => r.try_get::<_, Option<i32>>(i)?.map(i64::from).into(),
            Type::INT8 => r.try_get::<_, Option<i64>>(i)?.into(),
            Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.into(),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                r.try_get::<_, Option<String>>(i)?.into()
            }
            _ => {
                return Err(DbError::Sql(format!(
                    "column {i} is {ty}: not BIGINT, TEXT or BYTEA"
                )))
            }
        })
    };
    (0..r.len()).map(column).collect::<Result<_, _>>().map(Row)
}

/// The unit of work's statements run on its transaction.
impl Run for Transaction<'_> {
    fn run<'a>(&'a self, call: Call) -> TxFut<'a, Reply> {
        Box::pin(async move { run(self, &call).await })
    }
}

impl Sql for PgKeys {
    fn batch<'a>(&'a self, sql: &'a str) -> Fut<'a, ()> {
        Box::pin(async move { Ok(self.pool().get().await?.batch_execute(sql).await?) })
    }

    fn execute<'a>(&'a self, sql: &'a str, params: Vec<Value>) -> Fut<'a, u64> {
        let call = Call::execute(sql, params);
        Box::pin(async move { run(&self.pool().get().await?, &call).await?.changed() })
    }

    fn query<'a>(&'a self, sql: &'a str, params: Vec<Value>) -> Fut<'a, Vec<Row>> {
        let call = Call::query(sql, params);
        Box::pin(async move { run(&self.pool().get().await?, &call).await?.rows() })
    }

    fn work<F>(mut f: F) -> Work
    where
        F: for<'t> FnMut(Tx<'t>) -> TxFut<'t, Outcome> + Send + 'static,
    {
        work(move |tx| f(Tx::new(tx)))
    }
}

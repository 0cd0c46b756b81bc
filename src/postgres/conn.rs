//! The pool and the statements run on its connections: every call under
//! the call timeout, its failures classified (see [`super::error`]).

use std::error::Error as StdError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use deadpool_postgres::{ClientWrapper, Object, Pool, Transaction};
use futures::TryStreamExt;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::{Row, RowStream, Statement};

use super::error::{timeout_error, DbError};
use crate::error::{Error, Result};
use crate::serde::Serializer;

/// How the saver sends statements to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StatementMode {
    /// Named prepared statements, prepared once per connection and cached:
    /// the fastest mode, for direct connections and session poolers.
    #[default]
    Prepared,
    /// Only the unnamed statement, parsed with every execution (still one
    /// round trip). Needed behind transaction poolers such as PgBouncer in
    /// `pool_mode = transaction`, where consecutive statements may reach
    /// different server connections and named statements go missing
    /// (LangGraph issue #6705).
    Unnamed,
}

/// A statement parameter with its PostgreSQL type.
pub(crate) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// Runs `sql` on a pooled connection: [`query_stream`]'s rows, collected.
pub(crate) async fn query(
    client: &ClientWrapper,
    mode: StatementMode,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    query_stream(client, mode, sql, params).await?.try_collect().await
}

/// Runs `sql` on a pooled connection; rows are handed out as they arrive.
pub(crate) async fn query_stream(
    client: &ClientWrapper,
    mode: StatementMode,
    sql: &str,
    params: &[Param<'_>],
) -> Result<RowStream, tokio_postgres::Error> {
    match mode {
        StatementMode::Prepared => {
            let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
            let statement = client.prepare_typed_cached(sql, &types).await?;
            client.query_raw(&statement, params.iter().map(|(v, _)| *v)).await
        }
        StatementMode::Unnamed => {
            client
                .query_typed_raw(sql, params.iter().map(|(v, t)| (*v, t.clone())))
                .await
        }
    }
}

/// Runs `sql` inside a transaction.
pub(crate) async fn query_tx(
    tx: &Transaction<'_>,
    mode: StatementMode,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    match mode {
        StatementMode::Prepared => {
            let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
            let statement = tx.prepare_typed_cached(sql, &types).await?;
            let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(v, _)| *v).collect();
            tx.query(&statement, &values).await
        }
        StatementMode::Unnamed => tx.query_typed(sql, params).await,
    }
}

/// Runs one statement, `statement` when prepared (else `sql` as the
/// unnamed statement); how many rows it returned. Its request leaves when
/// the future is first polled, so futures joined in order pipeline.
pub(crate) async fn run(
    client: &ClientWrapper,
    statement: Option<&Statement>,
    sql: &str,
    params: &[Param<'_>],
) -> Result<usize, tokio_postgres::Error> {
    let stream = match statement {
        Some(statement) => client.query_raw(statement, params.iter().map(|(v, _)| *v)).await?,
        None => {
            client
                .query_typed_raw(sql, params.iter().map(|(v, t)| (*v, t.clone())))
                .await?
        }
    };
    futures::pin_mut!(stream);
    let mut rows = 0;
    while stream.try_next().await?.is_some() {
        rows += 1;
    }
    Ok(rows)
}

/// JSON text bound as a `jsonb` parameter.
#[derive(Debug)]
pub(crate) struct JsonbParam(pub(crate) String);

impl ToSql for JsonbParam {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        if *ty == Type::JSONB {
            out.extend_from_slice(&[1]);
        }
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB || *ty == Type::JSON
    }

    to_sql_checked!();
}

/// The JSON text of a `jsonb` (or `json`) column.
#[derive(Debug)]
pub(crate) struct JsonbText(pub(crate) Vec<u8>);

impl<'a> FromSql<'a> for JsonbText {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, text)) => Ok(JsonbText(text.to_vec())),
                _ => Err("unsupported jsonb binary format version".into()),
            }
        } else {
            Ok(JsonbText(raw.to_vec()))
        }
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB || *ty == Type::JSON
    }
}

/// The storage side of [`PostgresSaver`](super::PostgresSaver): the pool and its settings.
#[derive(Clone)]
pub(crate) struct Pg {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) pool: Pool,
    pub(super) mode: StatementMode,
    pub(super) serde: Arc<dyn Serializer>,
    /// Whether the server compresses with LZ4 (see [`super::queries::PUT_LZ4`]),
    /// asked once.
    pub(super) lz4: tokio::sync::OnceCell<bool>,
    /// The longest one call (or one page of a listing) may take.
    pub(super) call_timeout: Option<Duration>,
    /// Group commit of `put` and `put_writes` (see [`super::group`]), unless
    /// turned off.
    pub(super) group: Option<super::group::Group>,
    /// See [`super::PostgresSaverBuilder::fill_from_parent`].
    pub(super) fill_from_parent: bool,
}

impl Pg {
    /// Runs one call under the [call timeout](super::PostgresSaverBuilder::call_timeout).
    /// `sent` is set by the call just before it sends what may commit; a
    /// timeout after that cannot tell whether the change was applied.
    pub(super) async fn timed<T>(
        &self,
        op: &'static str,
        sent: Option<&AtomicBool>,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        timed(&self.inner.pool, self.inner.call_timeout, op, sent, call).await
    }

    /// The caller's error for a failure (see [`fail`]).
    pub(super) fn fail(&self, e: DbError, op: &'static str, read: bool) -> Error {
        fail(&self.inner.pool, e, op, read)
    }

    pub(super) fn discard_idle(&self, e: &DbError) {
        discard_idle(&self.inner.pool, e);
    }

    pub(super) async fn client(&self) -> Result<Object, DbError> {
        Ok(self.inner.pool.get().await?)
    }

    pub(super) fn serde(&self) -> &dyn Serializer {
        &*self.inner.serde
    }

    pub(super) async fn q(
        &self,
        client: &Object,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<tokio_postgres::Row>, DbError> {
        Ok(query(client, self.inner.mode, sql, params).await?)
    }
}

/// Runs one call on `pool`'s connections under `limit`. `sent` is set by
/// the call just before it sends what may commit; a timeout after that
/// cannot tell whether the change was applied.
pub(crate) async fn timed<T>(
    pool: &Pool,
    limit: Option<Duration>,
    op: &'static str,
    sent: Option<&AtomicBool>,
    call: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let Some(limit) = limit else {
        return call.await;
    };
    match tokio::time::timeout(limit, call).await {
        Ok(out) => out,
        Err(_) => {
            // The call's connection went back to the pool when the call
            // was dropped, possibly with a request in flight on a silent
            // network: no idle connection is trusted any more.
            pool.retain(|_, _| false);
            let committed = sent.is_some_and(|s| s.load(Ordering::SeqCst));
            tracing::debug!(op, ?limit, committed, "postgres: call timed out");
            Err(timeout_error(op, limit, committed))
        }
    }
}

/// The caller's error for a failure; when the connection broke, the idle
/// connections are dropped too (a server restart or an idle-connection
/// reaper takes them all), so the next call opens a fresh one.
pub(crate) fn fail(pool: &Pool, e: DbError, op: &'static str, read: bool) -> Error {
    discard_idle(pool, &e);
    e.into_error(op, read)
}

fn discard_idle(pool: &Pool, e: &DbError) {
    if e.connection_broke() {
        pool.retain(|_, _| false);
    }
}

/// Runs an idempotent read, once more on a fresh connection if its
/// connection broke.
macro_rules! read_retrying {
    ($saver:expr, $op:literal, $call:expr) => {{
        match $call.await {
            Ok(v) => Ok(v),
            Err(e) if e.worth_retrying_read() => {
                tracing::debug!(error = ?e, concat!("postgres ", $op, ": connection failed, retrying once"));
                $saver.discard_idle(&e);
                $call.await.map_err(|e| $saver.fail(e, $op, true))
            }
            Err(e) => Err($saver.fail(e, $op, true)),
        }
    }};
}
pub(crate) use read_retrying;

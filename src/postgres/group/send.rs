//! Sending one group: `BEGIN`, the group's locks, each member's statement
//! and `COMMIT` in one pipelined round trip, and each member's answer from
//! what the server said (see the [parent module](super) for what happens
//! when a member or the group fails).

use std::sync::Arc;

use deadpool_postgres::Object;
use tokio_postgres::types::Type;
use tokio_postgres::Statement;

use super::super::conn::{run, Param, Pg, StatementMode};
use super::super::error::DbError;
use super::super::queries;
use super::Job;

impl Pg {
    /// Sends one group; answers its members, and returns those to send
    /// again (the innocent members of a group one member failed). A group
    /// whose transaction failed in a way no member's own statement shows
    /// ([`Sent::Failed`]) is split in two and each half sent as a group of
    /// its own, down to single writes, so only the member at fault gets the
    /// error and the others still commit in groups.
    pub(super) async fn run_group(&self, client: &Object, jobs: Vec<Job>) -> Vec<Job> {
        let mut again = Vec::new();
        let mut halves = vec![jobs];
        while let Some(mut jobs) = halves.pop() {
            if jobs.len() == 1 {
                for job in jobs {
                    let lz4 = match job.write.stores_checkpoint() {
                        true => self.has_lz4(client).await,
                        false => Ok(false),
                    };
                    let out = match lz4 {
                        Ok(lz4) => self.q(client, job.write.sql(lz4), &job.write.params()).await,
                        Err(e) => Err(e),
                    };
                    let _ = job.reply.send(out.and_then(|rows| job.write.answer(rows.len())));
                }
                continue;
            }
            match self.send_group(client, &jobs).await {
                Err(e) => {
                    for job in jobs {
                        let _ = job.reply.send(Err(e.share()));
                    }
                }
                Ok(Sent::Committed(rows)) => {
                    for (job, rows) in jobs.into_iter().zip(rows) {
                        let _ = job.reply.send(job.write.answer(rows));
                    }
                }
                Ok(Sent::Each(outs)) => {
                    for (job, out) in jobs.into_iter().zip(outs) {
                        let _ = job.reply.send(out.and_then(|rows| job.write.answer(rows)));
                    }
                }
                Ok(Sent::Failed(failure)) => {
                    tracing::debug!(
                        size = jobs.len(),
                        error = ?failure,
                        "postgres group commit: the group's transaction failed, sending each half as a group"
                    );
                    let second = jobs.split_off(jobs.len() / 2);
                    halves.push(second);
                    halves.push(jobs);
                }
                Ok(Sent::Culprit(culprit, e)) => {
                    tracing::debug!(
                        size = jobs.len(),
                        culprit,
                        "postgres group commit: one member failed, sending the others again"
                    );
                    for (i, job) in jobs.into_iter().enumerate() {
                        if i == culprit {
                            let _ = job.reply.send(Err(DbError::Pg(e.clone())));
                        } else {
                            again.push(job);
                        }
                    }
                }
            }
        }
        again
    }

    /// `BEGIN`, the statements, `COMMIT`, in one round trip; when the
    /// transaction failed in a way no member's own statement shows, each
    /// member again in a transaction of its own (see [`Sent`]). `Err`: the
    /// whole group failed, before anything was sent or with the connection
    /// (then whether the group committed is unknown).
    async fn send_group(&self, client: &Object, jobs: &[Job]) -> Result<Sent, DbError> {
        let mode = self.inner.mode;
        let lz4 = match jobs.iter().any(|j| j.write.stores_checkpoint()) {
            true => self.has_lz4(client).await?,
            false => false,
        };
        let params: Vec<Vec<Param<'_>>> = jobs.iter().map(|j| j.write.params()).collect();
        let mut statements: Vec<Option<Statement>> = Vec::with_capacity(jobs.len());
        for (job, params) in jobs.iter().zip(&params) {
            statements.push(match mode {
                StatementMode::Prepared => {
                    let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
                    Some(client.prepare_typed_cached(job.write.sql(lz4), &types).await?)
                }
                StatementMode::Unnamed => None,
            });
        }
        // The group's locks, taken first and each kind in key order: the
        // fenced members' lease rows, then the thread locks of the puts and
        // steps (as `delete_for_runs` takes them): a group never holds one
        // while it waits for another in an order some other transaction
        // takes them in reverse.
        let leases: Vec<&str> = jobs.iter().filter_map(|j| j.write.fence_thread()).collect();
        let threads: Vec<&str> = jobs.iter().filter_map(|j| j.write.put_thread()).collect();
        let leases_locked = self.group_lock(client, queries::LOCK_GROUP_LEASES, &leases).await?;
        let threads_locked = self.group_lock(client, queries::LOCK_GROUP_THREADS, &threads).await?;
        // Each request leaves when its future is first polled, and `join!`
        // and `join_all` poll in order: BEGIN, the locks, the statements,
        // COMMIT.
        let runs = jobs
            .iter()
            .zip(&params)
            .zip(&statements)
            .map(|((job, params), statement)| run(client, statement.as_ref(), job.write.sql(lz4), params));
        let (begin, leases_locked, threads_locked, outs, commit) = futures::join!(
            client.batch_execute("BEGIN"),
            leases_locked,
            threads_locked,
            futures::future::join_all(runs),
            client.batch_execute("COMMIT"),
        );
        let locked = leases_locked.and(threads_locked);
        let own = |outs: Vec<Result<usize, tokio_postgres::Error>>| outs.into_iter().map(|o| o.map_err(DbError::from));
        if let Err(e) = begin {
            let e = DbError::from(e);
            if e.connection_broke() {
                return Err(e);
            }
            // No transaction block: each statement was a transaction of its
            // own, and its outcome its caller's.
            return Ok(Sent::Each(own(outs).collect()));
        }
        let (first, rows) = match locked {
            Err(e) => (Some((None, e)), Vec::new()),
            Ok(()) => {
                let mut rows = Vec::with_capacity(outs.len());
                let mut first = None;
                for (i, out) in outs.into_iter().enumerate() {
                    match out {
                        Ok(n) => rows.push(n),
                        Err(e) => {
                            first = Some((Some(i), e));
                            break;
                        }
                    }
                }
                (first, rows)
            }
        };
        let failure = match first {
            None => match commit {
                Ok(()) => return Ok(Sent::Committed(rows)),
                Err(e) => DbError::from(e),
            },
            Some((who, e)) => {
                let e = Arc::new(e);
                let broke = DbError::Pg(e.clone()).connection_broke();
                match who {
                    // The server refused this member's statement and rolled
                    // the whole transaction back, whatever the `COMMIT`
                    // answered: nothing of the group is stored.
                    Some(i) if !broke && !conflict(&e) => return Ok(Sent::Culprit(i, e)),
                    _ if broke => return Err(DbError::Pg(e)),
                    // The rollback must be done before anything else is sent.
                    _ => {
                        commit?;
                        DbError::Pg(e)
                    }
                }
            }
        };
        // A failed `COMMIT` (a deferred constraint, a serialization failure),
        // the group's own statement, or a conflict of the group's transaction
        // as a whole: rolled back, and no one member's doing.
        if failure.connection_broke() {
            return Err(failure);
        }
        Ok(Sent::Failed(failure))
    }

    /// A group's lock statement `sql` over `threads` (nothing when there is
    /// none), prepared first in prepared mode; the future sends it.
    async fn group_lock<'a>(
        &self,
        client: &'a Object,
        sql: &'static str,
        threads: &'a [&'a str],
    ) -> Result<impl std::future::Future<Output = Result<(), tokio_postgres::Error>> + 'a, DbError> {
        let statement = match (self.inner.mode, threads.is_empty()) {
            (StatementMode::Prepared, false) => Some(client.prepare_typed_cached(sql, &[Type::TEXT_ARRAY]).await?),
            _ => None,
        };
        Ok(async move {
            if threads.is_empty() {
                return Ok(());
            }
            let params: [Param<'_>; 1] = [(&threads, Type::TEXT_ARRAY)];
            run(client, statement.as_ref(), sql, &params).await.map(drop)
        })
    }
}

/// How a group's transaction ended.
enum Sent {
    /// Every member committed; the rows each member's statement returned.
    Committed(Vec<usize>),
    /// This member's own statement failed with this error; nothing of the
    /// group is stored, and the others are to be sent again.
    Culprit(usize, Arc<tokio_postgres::Error>),
    /// Each member's own outcome (the rows its statement returned), from a
    /// transaction of its own.
    Each(Vec<Result<usize, DbError>>),
    /// The transaction failed in a way no member's own statement shows and
    /// was rolled back: nothing of the group is stored, and no member is
    /// known to be at fault.
    Failed(DbError),
}

/// Whether a statement failed because the group's transaction as a whole
/// conflicted with another (a serialization failure, a deadlock): the same
/// statement alone may well succeed.
fn conflict(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| matches!(c.code(), "40001" | "40P01"))
}

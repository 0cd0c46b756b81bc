//! The file's space: its pages, freelist and WAL, and giving free pages back
//! in bounded steps (see [`crate::space`]).

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::error::sql_error;
use super::SqliteSaver;
use crate::space::{ReclaimOptions, SpacePart, SpaceUsage};
use crate::{Error, Result};

/// `PRAGMA auto_vacuum`'s values.
const AUTO_VACUUM_FULL: i64 = 1;
const AUTO_VACUUM_INCREMENTAL: i64 = 2;

/// The most steps one reclaim runs: far more than any file needs (a step
/// gives back at least one page or ends the loop), a guard against a
/// freelist refilled by writers as fast as it is emptied.
const MAX_STEPS: u64 = 1 << 20;

fn pragma(conn: &Connection, name: &str) -> Result<i64> {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .map_err(sql_error)
}

/// Runs a pragma that may return rows, to its end.
fn run(conn: &Connection, sql: &str) -> Result<()> {
    let mut stmt = conn.prepare(sql).map_err(sql_error)?;
    let mut rows = stmt.query([]).map_err(sql_error)?;
    while rows.next().map_err(sql_error)?.is_some() {}
    Ok(())
}

fn wal_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// Page size, page count, freelist pages and the auto-vacuum mode.
#[derive(Debug, Clone, Copy)]
struct Pages {
    size: i64,
    free: i64,
    auto_vacuum: i64,
}

fn pages(conn: &Connection) -> Result<Pages> {
    Ok(Pages {
        size: pragma(conn, "page_size")?,
        free: pragma(conn, "freelist_count")?,
        auto_vacuum: pragma(conn, "auto_vacuum")?,
    })
}

fn bytes(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl SqliteSaver {
    async fn pages(&self) -> Result<Pages> {
        self.inner().writer.read(pages).await
    }

    /// The file's `database` and `wal` parts; `None` in memory.
    pub(crate) async fn space_usage(&self) -> Result<Option<SpaceUsage>> {
        let Some(path) = self.path() else {
            return Ok(None);
        };
        let p = self.pages().await?;
        let failed = |e: std::io::Error| Error::storage("sqlite", false, format!("{}: {e}", path.display()));
        let main = std::fs::metadata(path).map_err(failed)?.len();
        let wal = std::fs::metadata(wal_path(path)).map_or(0, |m| m.len());
        let parts = vec![
            SpacePart {
                name: "database".to_owned(),
                bytes: main,
                table_bytes: main,
                reclaimable_bytes: Some(bytes(p.free.saturating_mul(p.size))),
                ..SpacePart::default()
            },
            SpacePart {
                name: "wal".to_owned(),
                bytes: wal,
                table_bytes: wal,
                reclaimable_bytes: Some(wal),
                ..SpacePart::default()
            },
        ];
        Ok(Some(SpaceUsage::of(parts, false)))
    }

    /// Gives the freelist back (incremental vacuum in steps of
    /// `options.step_pages`, each its own write job; or, asked to, one
    /// `VACUUM` of a file without incremental auto-vacuum) and truncates the
    /// WAL. Gives the steps run and what was done.
    pub(crate) async fn reclaim(&self, options: ReclaimOptions) -> Result<(u64, Vec<String>)> {
        let writer = &self.inner().writer;
        writer.check_writable("reclaim_space")?;
        let mut actions = Vec::new();
        let mut steps: u64 = 0;
        let p = self.pages().await?;
        match p.auto_vacuum {
            AUTO_VACUUM_INCREMENTAL => {
                let step = i64::from(options.step_pages);
                let mut freed: i64 = 0;
                while steps < MAX_STEPS {
                    let started = std::time::Instant::now();
                    let gone = writer
                        .write("reclaim_space", move |conn| {
                            let before = pragma(conn, "freelist_count")?;
                            if before == 0 {
                                return Ok(0);
                            }
                            run(conn, &format!("PRAGMA incremental_vacuum({step})"))?;
                            Ok(before.saturating_sub(pragma(conn, "freelist_count")?))
                        })
                        .await?;
                    if gone <= 0 {
                        break;
                    }
                    freed = freed.saturating_add(gone);
                    steps = steps.saturating_add(1);
                    crate::retention::rest(started, options.rest).await;
                }
                actions.push(format!(
                    "incremental_vacuum: {freed} free page(s) given back in {steps} step(s) of at most {step}"
                ));
            }
            AUTO_VACUUM_FULL => actions.push("auto_vacuum = FULL: free pages go back at every commit".to_owned()),
            _ if options.rewrite => {
                writer
                    .read(|conn| {
                        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM")
                            .map_err(sql_error)
                    })
                    .await?;
                steps = 1;
                actions.push(format!(
                    "VACUUM: the file rewritten ({} free page(s) dropped), now with incremental auto-vacuum",
                    p.free
                ));
            }
            _ => actions.push(format!(
                "{} free page(s) kept: the file has no incremental auto-vacuum (Python's SqliteSaver creates \
                 files so); later writes reuse them, and the rewrite option (VACUUM) gives them back",
                p.free
            )),
        }
        if self.path().is_some() {
            let (busy, _, _): (i64, i64, i64) = writer
                .read(|conn| {
                    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                    .map_err(sql_error)
                })
                .await?;
            actions.push(if busy == 0 {
                "wal_checkpoint(TRUNCATE): the WAL folded into the file and truncated".to_owned()
            } else {
                "wal_checkpoint(TRUNCATE): busy (another connection reads or writes), the WAL kept".to_owned()
            });
        }
        Ok((steps, actions))
    }
}

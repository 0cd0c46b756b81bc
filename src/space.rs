//! What a store takes, part by part, and giving back what deletes freed:
//! [`SaverAdmin::space_usage`](crate::SaverAdmin::space_usage) and
//! [`SaverAdmin::reclaim_space`](crate::SaverAdmin::reclaim_space).
//!
//! Deleting checkpoints (`delete_thread`, `prune`, `delete_for_runs`) removes
//! rows and keys at once, but not every store hands the space back at once:
//!
//! | store | after a delete | what `reclaim_space` does |
//! |---|---|---|
//! | SQLite | freed pages go on the file's freelist, reused by later writes; the WAL keeps the deleted pages until a checkpoint | with incremental auto-vacuum (files this crate creates): `PRAGMA incremental_vacuum` a bounded number of pages per write transaction until the freelist is empty, then `PRAGMA wal_checkpoint(TRUNCATE)`: the file and its WAL shrink. A file without it (Python's `SqliteSaver` creates them so) keeps its freelist unless [`ReclaimOptions::rewrite`] runs `VACUUM`, which switches it to incremental auto-vacuum and blocks writers while it rewrites the file |
//! | PostgreSQL | deleted rows (and their TOAST chunks) are dead tuples until a vacuum, automatic or not, makes their space reusable | a plain `VACUUM` of each checkpoint table (never `FULL`: no lock against readers or writers); files shrink only by their empty tail pages, the rest is reused by later writes |
//! | Redis | memory is freed when the keys go (`UNLINK`: in the background) | sweeps the global index entries of expired threads ([`RedisSaver::sweep_expired`](crate::redis::RedisSaver::sweep_expired)) |
//! | memory | freed at once | nothing |
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> checkpointer::Result<()> {
//! use checkpointer::space::ReclaimOptions;
//! use checkpointer::OpenOptions;
//! let store = OpenOptions::new().open("memory:").await?;
//! let report = store.reclaim_space(ReclaimOptions::new()).await?;
//! assert_eq!(report.freed_bytes(), None); // memory cannot tell its size
//! # Ok(())
//! # }
//! ```

use crate::setters::setters;

/// What a store takes: the total, its parts (files, tables, key groups) and
/// the bytes a [`reclaim_space`](crate::SaverAdmin::reclaim_space) could
/// give back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpaceUsage {
    /// Bytes in all, as [`SaverAdmin::storage_size`](crate::SaverAdmin::storage_size) gives them.
    pub bytes: u64,
    /// Whether the bytes are the server's memory (Redis), not disk.
    pub in_memory: bool,
    /// The parts: SQLite `database` and `wal`; PostgreSQL one per table;
    /// Redis `keys`.
    pub parts: Vec<SpacePart>,
    /// Bytes that are free or dead inside [`bytes`](Self::bytes) (see
    /// [`SpacePart::reclaimable_bytes`]), `None` where the store cannot tell.
    pub reclaimable_bytes: Option<u64>,
}

/// One part of a store's [`SpaceUsage`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SpacePart {
    /// The file (`database`, `wal`), table or key group.
    pub name: String,
    /// Everything of the part: a table's heap, TOAST and indexes.
    pub bytes: u64,
    /// A PostgreSQL table's main heap (`pg_relation_size`); a file's bytes.
    pub table_bytes: u64,
    /// A PostgreSQL table's TOAST table and its index (where large values
    /// live); 0 elsewhere.
    pub toast_bytes: u64,
    /// A PostgreSQL table's indexes (`pg_indexes_size`); 0 elsewhere.
    pub index_bytes: u64,
    /// Live rows (PostgreSQL's `n_live_tup` estimate), where known.
    pub live_rows: Option<u64>,
    /// Dead rows of the table and of its TOAST table (PostgreSQL's
    /// `n_dead_tup`, which the statistics report with a delay of up to a
    /// second), where known.
    pub dead_rows: Option<u64>,
    /// What is free or dead in the part: SQLite's freelist pages × page
    /// size, a WAL's whole size; on PostgreSQL an estimate, the heap and
    /// TOAST bytes in proportion to their dead rows.
    pub reclaimable_bytes: Option<u64>,
}

impl SpaceUsage {
    /// The part named `name`.
    pub fn part(&self, name: &str) -> Option<&SpacePart> {
        self.parts.iter().find(|p| p.name == name)
    }

    /// A store of one part `name` of `size`.
    pub(crate) fn whole(name: &str, size: crate::StorageSize) -> SpaceUsage {
        let part = SpacePart {
            name: name.to_owned(),
            bytes: size.bytes,
            table_bytes: size.bytes,
            ..SpacePart::default()
        };
        SpaceUsage::of(vec![part], size.in_memory)
    }

    /// A usage of `parts`: the total and the reclaimable bytes summed
    /// (reclaimable `None` when no part knows it).
    pub(crate) fn of(parts: Vec<SpacePart>, in_memory: bool) -> SpaceUsage {
        let bytes = parts.iter().fold(0u64, |n, p| n.saturating_add(p.bytes));
        let reclaimable_bytes = parts
            .iter()
            .filter_map(|p| p.reclaimable_bytes)
            .reduce(u64::saturating_add);
        SpaceUsage {
            bytes,
            in_memory,
            parts,
            reclaimable_bytes,
        }
    }
}

/// How [`reclaim_space`](crate::SaverAdmin::reclaim_space) works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReclaimOptions {
    pub(crate) rewrite: bool,
    pub(crate) step_pages: u32,
    pub(crate) rest: u32,
}

impl Default for ReclaimOptions {
    fn default() -> Self {
        ReclaimOptions {
            rewrite: false,
            step_pages: 256,
            rest: crate::retention::DEFAULT_REST,
        }
    }
}

impl ReclaimOptions {
    /// Bounded steps, no rewrite.
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// Whether a SQLite file without incremental auto-vacuum is rewritten
        /// by `VACUUM` (default `false`): its freelist goes, and the file is
        /// switched to incremental auto-vacuum, so later reclaims go in
        /// steps. `VACUUM` holds the write lock until it is done (readers
        /// go on): for a maintenance window. Honoured by SQLite; any other
        /// store refuses it with [`Error::InvalidInput`](crate::Error::InvalidInput).
        pub fn rewrite(rewrite: bool) => rewrite = rewrite;

        /// The most SQLite pages one step gives back (default 256: 1 MiB
        /// with 4 KiB pages), each step one short write transaction queued
        /// with the other writes (at least 1).
        pub fn step_pages(pages: u32) => step_pages = pages.max(1);

        /// After each SQLite step, wait `rest` times as long as the step
        /// took (at most [`MAX_REST`](crate::retention::MAX_REST)), so that
        /// the writes beside it find the file free (default
        /// [`DEFAULT_REST`](crate::retention::DEFAULT_REST); 0: no wait).
        pub fn rest(rest: u32) => rest = rest;
    }

    /// Whether a rewrite was asked for.
    pub fn rewrites(&self) -> bool {
        self.rewrite
    }
}

/// What [`reclaim_space`](crate::SaverAdmin::reclaim_space) did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReclaimReport {
    /// The store before, `None` where it cannot tell (memory).
    pub before: Option<SpaceUsage>,
    /// The store after.
    pub after: Option<SpaceUsage>,
    /// Bounded steps run (SQLite incremental vacuum steps; PostgreSQL
    /// tables vacuumed).
    pub steps: u64,
    /// What was done, in words, one line each (e.g. `"VACUUM
    /// checkpoint_blobs"`, `"wal_checkpoint(TRUNCATE)"`), and what was not
    /// and why.
    pub actions: Vec<String>,
}

/// [`ReclaimOptions::rewrite`] refused on a store other than SQLite.
pub(crate) fn refuse_rewrite(backend: &str, options: &ReclaimOptions) -> crate::Result<()> {
    if options.rewrites() && backend != "sqlite" {
        return Err(crate::Error::invalid(format!(
            "a {backend} store cannot honour the reclaim option rewrite (only sqlite can)"
        )));
    }
    Ok(())
}

impl ReclaimReport {
    /// A store that frees space as it deletes: nothing done.
    pub(crate) fn nothing_done(backend: &str, usage: Option<SpaceUsage>) -> ReclaimReport {
        ReclaimReport {
            after: usage.clone(),
            before: usage,
            steps: 0,
            actions: vec![format!("nothing to do: {backend} frees space as it deletes")],
        }
    }

    /// Bytes given back (before − after; 0 when the store grew meanwhile),
    /// `None` where the store cannot tell its size.
    pub fn freed_bytes(&self) -> Option<u64> {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => Some(b.bytes.saturating_sub(a.bytes)),
            _ => None,
        }
    }
}

//! The tables' space, TOAST and indexes included, their dead rows, and a
//! plain `VACUUM` on request (see [`crate::space`]).

use super::error::DbError;
use super::PostgresSaver;
use crate::space::{SpacePart, SpaceUsage};
use crate::Result;

/// The tables a store's size counts, in report order.
const TABLES: [&str; 4] = [
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
];

/// Each table of [`TABLES`] that exists: its total, heap, TOAST (with its
/// index) and index bytes, and the live and dead rows of the table and of
/// its TOAST table (the statistics' estimates).
const SPACE: &str = "\
SELECT t.name, pg_total_relation_size(c.oid)::bigint, pg_relation_size(c.oid)::bigint, \
coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)::bigint, pg_indexes_size(c.oid)::bigint, \
s.n_live_tup::bigint, s.n_dead_tup::bigint, ts.n_live_tup::bigint, ts.n_dead_tup::bigint \
FROM unnest($1::text[]) WITH ORDINALITY AS t(name, n) \
JOIN pg_class c ON c.oid = to_regclass(t.name) \
LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid \
LEFT JOIN pg_stat_all_tables ts ON ts.relid = c.reltoastrelid \
ORDER BY t.n";

fn count(n: Option<i64>) -> Option<u64> {
    n.map(|n| u64::try_from(n).unwrap_or(0))
}

/// `bytes` × dead ÷ (live + dead): the share of a heap that dead rows take.
fn dead_share(bytes: u64, live: Option<u64>, dead: Option<u64>) -> u64 {
    let (live, dead) = (live.unwrap_or(0), dead.unwrap_or(0));
    let rows = u128::from(live).saturating_add(u128::from(dead));
    if rows == 0 {
        return 0;
    }
    let share = u128::from(bytes).saturating_mul(u128::from(dead)) / rows;
    u64::try_from(share).unwrap_or(u64::MAX)
}

impl PostgresSaver {
    /// One part per checkpoint table (see [`crate::space`]).
    pub(crate) async fn space_usage(&self) -> Result<SpaceUsage> {
        let pg = self.pg();
        let what = |e: DbError| e.into_error("space_usage", true);
        let client = pg.client().await.map_err(what)?;
        let tables: Vec<&str> = TABLES.to_vec();
        let rows = client
            .query(SPACE, &[&tables])
            .await
            .map_err(|e| what(DbError::from(e)))?;
        let mut parts = Vec::with_capacity(rows.len());
        for row in rows {
            let get = |i: usize| -> Result<Option<i64>> { row.try_get(i).map_err(|e| what(DbError::from(e))) };
            let name: String = row.try_get(0).map_err(|e| what(DbError::from(e)))?;
            let [total, heap, toast, index] = [1, 2, 3, 4].map(|i| get(i).map(|n| count(n).unwrap_or(0)));
            let (table_bytes, toast_bytes) = (heap?, toast?);
            let (live, dead, toast_live, toast_dead) = (count(get(5)?), count(get(6)?), count(get(7)?), count(get(8)?));
            let reclaimable =
                dead_share(table_bytes, live, dead).saturating_add(dead_share(toast_bytes, toast_live, toast_dead));
            parts.push(SpacePart {
                name,
                bytes: total?,
                table_bytes,
                toast_bytes,
                index_bytes: index?,
                live_rows: live,
                dead_rows: match (dead, toast_dead) {
                    (None, None) => None,
                    (d, t) => Some(d.unwrap_or(0).saturating_add(t.unwrap_or(0))),
                },
                reclaimable_bytes: Some(reclaimable),
            });
        }
        Ok(SpaceUsage::of(parts, false))
    }

    /// A plain `VACUUM` of each checkpoint table, one statement each:
    /// dead rows' space becomes reusable, empty tail pages go back to the
    /// file system; readers and writers go on meanwhile (no `FULL`). Gives
    /// the tables vacuumed.
    pub(crate) async fn vacuum(&self) -> Result<Vec<String>> {
        let pg = self.pg();
        let what = |e: DbError| e.into_error("reclaim_space", false);
        let client = pg.client().await.map_err(what)?;
        let mut done = Vec::new();
        for table in TABLES.iter().take(3) {
            let exists: bool = client
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[table])
                .await
                .and_then(|r| r.try_get(0))
                .map_err(|e| what(DbError::from(e)))?;
            if exists {
                client
                    .batch_execute(&format!("VACUUM {table}"))
                    .await
                    .map_err(|e| what(DbError::from(e)))?;
                done.push(format!("VACUUM {table}"));
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::dead_share;

    #[test]
    fn dead_share_is_proportional_and_total() {
        assert_eq!(dead_share(1000, Some(3), Some(1)), 250);
        assert_eq!(dead_share(1000, None, None), 0);
        assert_eq!(dead_share(u64::MAX, Some(0), Some(u64::MAX)), u64::MAX);
    }
}

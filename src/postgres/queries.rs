//! The SQL the saver runs. Every mutating operation is one statement (data
//! modifying CTEs), so it is atomic and costs one round trip, except `prune`
//! and `delete_for_runs`, which lock the threads they collect values from.

/// Whether `ch` has a value at checkpoint row `c`: an inline entry in its
/// `channel_values`, or a non-`empty` blob at the version it names.
macro_rules! stored {
    ($c:literal, $ch:literal) => {
        concat!(
            "((",
            $c,
            ".checkpoint -> 'channel_values') ? ",
            $ch,
            " OR EXISTS (SELECT 1 FROM checkpoint_blobs bl WHERE bl.thread_id = ",
            $c,
            ".thread_id AND bl.checkpoint_ns = ",
            $c,
            ".checkpoint_ns AND bl.channel = ",
            $ch,
            " AND bl.version = ",
            $c,
            ".checkpoint -> 'channel_versions' ->> ",
            $ch,
            " AND bl.type <> 'empty'))"
        )
    };
}

/// `$1` thread, `$2` ns, `$3` id, `$4` parent, `$5` checkpoint, `$6`
/// metadata, `$7..$10` blob channels, versions, types, payloads, `$11` the
/// channels this put neither gives a value nor names in `new_versions`: each
/// keeps the inline value the parent has at the same version (values in
/// blobs are found by version anyway).
///
/// The other statements that store a checkpoint are this one with parts
/// added (each `[...]` is spliced in, empty for [`PUT`]): `with`, CTEs
/// before the thread lock `lk`; `lk`, more of `lk` (columns evaluated with
/// the lock, a `FROM`); `before`, text between the `blobs` CTE and the
/// checkpoint's `INSERT`; `after`, text after it.
macro_rules! put {
    ([$($with:tt)*], [$($lk:tt)*], [$($before:tt)*], [$($after:tt)*]) => {
        concat!(
            "WITH ",
            $($with)*
            "lk AS (SELECT pg_advisory_xact_lock_shared(1667985524, hashtext($1)) AS l",
            $($lk)*
            "), \
fill AS (SELECT coalesce(jsonb_object_agg(m.ch, p.checkpoint -> 'channel_values' -> m.ch), '{}'::jsonb) AS vals \
FROM checkpoints p, unnest($11::text[]) AS m(ch) \
WHERE p.thread_id = $1 AND p.checkpoint_ns = $2 AND p.checkpoint_id = $4 \
AND (p.checkpoint -> 'channel_values') ? m.ch \
AND p.checkpoint -> 'channel_versions' -> m.ch = $5::jsonb -> 'channel_versions' -> m.ch), \
blobs AS (\
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
SELECT $1, $2, b.channel, b.version, b.type, b.blob \
FROM lk, unnest($7::text[], $8::text[], $9::text[], $10::bytea[]) AS b(channel, version, type, blob) \
ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING) ",
            $($before)*
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) \
SELECT $1, $2, $3, $4, jsonb_set($5::jsonb, '{channel_values}', fill.vals || ($5::jsonb -> 'channel_values')), $6 \
FROM lk, fill \
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET \
parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata",
            $($after)*
        )
    };
}

/// The `lk` column of [`PUT_LZ4`].
macro_rules! lz4 {
    () => {
        ", set_config('default_toast_compression', 'lz4', true) AS z"
    };
}

/// See [`put!`].
pub(crate) const PUT: &str = put!([], [], [], []);

/// [`PUT`] with its large values (blobs, checkpoint JSONB) TOAST-compressed
/// with LZ4 instead of the server's
/// default (pglz, unless configured otherwise), for this statement only
/// (`set_config(.., true)` lasts until the statement's transaction ends):
/// the values are the same bytes; pglz spent a sixth of the server's time
/// compressing message lists it then stored uncompressed anyway.
pub(crate) const PUT_LZ4: &str = put!([], [lz4!(),], [], []);

/// The lease check of a fenced write, the first CTE of its statement
/// (`docs/design.md`, *Fencing*): the lease's row when the lease names the
/// writer (`$w`) and epoch (`$e`) and has not expired on the server's clock,
/// then extended by `$l` ms and locked until the write commits; no row
/// otherwise. Every part of the write reads from it, so a refused write
/// stores nothing (and does not take the thread's lock), and the statement
/// returns the lease's epoch, or no row when refused: a refusal is no
/// error, and the other members of a group commit are not disturbed.
macro_rules! fence {
    ($w:literal, $e:literal, $l:literal) => {
        concat!(
            "fence AS (UPDATE checkpointer_leases SET expires_at = clock_timestamp() + $",
            $l,
            "::float8 * interval '1 millisecond' WHERE thread_id = $1 AND owner = $",
            $w,
            " AND epoch = $",
            $e,
            " AND expires_at > clock_timestamp() RETURNING epoch), "
        )
    };
}

/// [`PUT`] of a fenced saver: `$12` writer, `$13` epoch, `$14` lease in ms
/// (see [`fence!`]).
pub(crate) const PUT_FENCED: &str = put!(
    [fence!("12", "13", "14"),],
    [" FROM fence",],
    [", cp AS (",],
    [") SELECT epoch FROM fence"]
);

/// [`PUT_LZ4`] of a fenced saver (see [`PUT_FENCED`]).
pub(crate) const PUT_LZ4_FENCED: &str = put!(
    [fence!("12", "13", "14"),],
    [lz4!(), " FROM fence",],
    [", cp AS (",],
    [") SELECT epoch FROM fence"]
);

/// How a stored write meets one of the same key (thread, ns, checkpoint,
/// task, idx): a regular write keeps the first value, a special one
/// (negative idx) replaces it.
macro_rules! writes_conflict {
    () => {
        " ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET \
channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob, task_path = EXCLUDED.task_path \
WHERE EXCLUDED.idx < 0"
    };
}

/// The writes of an atomic step, a CTE between its `blobs` and its
/// checkpoint (see [`put!`]): `$12` the checkpoint they belong to, `$13..$18`
/// task id, task path, idx, channel, type, payload.
macro_rules! step_writes {
    () => {
        concat!(
            ", wr AS (INSERT INTO checkpoint_writes \
(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob) \
SELECT $1, $2, $12, w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob \
FROM lk, unnest($13::text[], $14::text[], $15::int4[], $16::text[], $17::text[], $18::bytea[]) \
AS w(task_id, task_path, idx, channel, type, blob)",
            writes_conflict!(),
            ") "
        )
    };
}

/// An atomic step (`docs/design.md`, *Atomic steps*): [`PUT`]'s `$1..$11`,
/// and the step's writes, every task's (see `step_writes!`), in one
/// statement, so in any transaction (a group commit's too) both are stored
/// or neither.
pub(crate) const STEP: &str = put!([], [], [step_writes!(),], []);

/// [`STEP`] with [`PUT_LZ4`]'s compression.
pub(crate) const STEP_LZ4: &str = put!([], [lz4!(),], [step_writes!(),], []);

/// [`STEP`] of a fenced saver: `$19` writer, `$20` epoch, `$21` lease.
pub(crate) const STEP_FENCED: &str = put!(
    [fence!("19", "20", "21"),],
    [" FROM fence",],
    [step_writes!(), ", cp AS (",],
    [") SELECT epoch FROM fence"]
);

/// [`STEP_LZ4`] of a fenced saver (see [`STEP_FENCED`]).
pub(crate) const STEP_LZ4_FENCED: &str = put!(
    [fence!("19", "20", "21"),],
    [lz4!(), " FROM fence",],
    [step_writes!(), ", cp AS (",],
    [") SELECT epoch FROM fence"]
);

/// Whether the server can compress with LZ4 (PostgreSQL 14 or later, built
/// with it): one row, true or false.
pub(crate) const HAS_LZ4: &str = "SELECT EXISTS (SELECT 1 FROM pg_settings \
WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals))";

/// `$1` thread, `$2` ns, `$3` checkpoint id, `$4` task id, `$5` task path,
/// `$6..$9` idx, channel, type, payload. Regular writes keep the first value
/// of (task_id, idx); special ones (negative idx) replace it. `[with]` and
/// `[from]` are spliced in before the `INSERT` and its `unnest` (a fenced
/// saver's lease check), `[after]` at the end.
macro_rules! put_writes {
    ([$($with:tt)*], [$($from:tt)*], [$($after:tt)*]) => {
        concat!(
            $($with)*
            "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob) \
SELECT $1, $2, $3, $4, $5, w.idx, w.channel, w.type, w.blob \
FROM ",
            $($from)*
            "unnest($6::int4[], $7::text[], $8::text[], $9::bytea[]) AS w(idx, channel, type, blob)",
            writes_conflict!(),
            $($after)*
        )
    };
}

/// See [`put_writes!`].
pub(crate) const PUT_WRITES: &str = put_writes!([], [], []);

/// [`PUT_WRITES`] of a fenced saver: `$10` writer, `$11` epoch, `$12` lease
/// (see [`fence!`]).
pub(crate) const PUT_WRITES_FENCED: &str = put_writes!(
    ["WITH ", fence!("10", "11", "12"), "ins AS (",],
    ["fence, ",],
    [") SELECT epoch FROM fence"]
);

/// `$1` thread.
pub(crate) const DELETE_THREAD: &str = "\
WITH c AS (DELETE FROM checkpoints WHERE thread_id = $1), \
b AS (DELETE FROM checkpoint_blobs WHERE thread_id = $1) \
DELETE FROM checkpoint_writes WHERE thread_id = $1";

/// [`DELETE_THREAD`] of a fenced saver: `$2` writer, `$3` epoch, `$4` lease
/// (see [`fence!`]); the lease stays.
pub(crate) const DELETE_THREAD_FENCED: &str = concat!(
    "WITH ",
    fence!("2", "3", "4"),
    "c AS (DELETE FROM checkpoints WHERE thread_id = $1 AND EXISTS (SELECT FROM fence)), \
b AS (DELETE FROM checkpoint_blobs WHERE thread_id = $1 AND EXISTS (SELECT FROM fence)), \
w AS (DELETE FROM checkpoint_writes WHERE thread_id = $1 AND EXISTS (SELECT FROM fence)) \
SELECT epoch FROM fence"
);

/// `$1` threads.
pub(crate) const DELETE_THREADS: &str = "\
WITH c AS (DELETE FROM checkpoints WHERE thread_id = ANY($1::text[])), \
b AS (DELETE FROM checkpoint_blobs WHERE thread_id = ANY($1::text[])) \
DELETE FROM checkpoint_writes WHERE thread_id = ANY($1::text[])";

/// The checkpoint tuples of the rows of `inner` (a subquery over
/// `checkpoints` selecting [`ROW_COLUMNS`], with its own order and limit), as
/// plain rows without arrays: one per checkpoint, one per blob at a version
/// its `channel_versions` names, one per write. Every row starts with the
/// position `n` of its checkpoint in [`LIST_ORDER`] and its kind `k`:
///
/// | k | t1 | t2 | t3 | t4 | j1, j2 | blob | i |
/// |---|----|----|----|----|--------|------|---|
/// | 0 checkpoint | thread_id | checkpoint_ns | checkpoint_id | parent id | checkpoint, metadata | | |
/// | 1 blob | channel | type | checkpoint_id | | | blob | position in `channel_versions` |
/// | 2 write | task_id | channel | type | task_path | | blob | idx |
///
/// Each blob is one primary-key probe (`LIMIT 1` keeps the planner from
/// hashing every blob of the thread per checkpoint), and so are the writes of
/// each checkpoint (`OFFSET 0` keeps the subquery from being flattened into a
/// join that the generic plan of a prepared statement hashes: with table
/// statistics it read every write of the table per call), no aggregate copies
/// blobs into arrays, and the client decodes each row as it arrives while the
/// server reads the next.
pub(crate) fn select_tuples(inner: &str) -> String {
    tuples_numbered(&format!("row_number() OVER ({LIST_ORDER})"), inner)
}

/// [`select_tuples`] for an `inner` of at most one row (the gets): its
/// position is 1, with no window over it.
fn select_one_tuple(inner: &str) -> String {
    tuples_numbered("1::int8", inner)
}

fn tuples_numbered(n: &str, inner: &str) -> String {
    format!(
        "WITH c AS MATERIALIZED (SELECT {n} AS n, s.* FROM ({inner}) s) \
SELECT c.n, 0 AS k, c.thread_id AS t1, c.checkpoint_ns AS t2, c.checkpoint_id AS t3, c.parent_checkpoint_id AS t4, \
c.checkpoint AS j1, c.metadata AS j2, NULL::bytea AS blob, NULL::int8 AS i FROM c \
UNION ALL \
SELECT c.n, 1, cv.channel, bl.type, c.checkpoint_id, NULL, NULL, NULL, bl.blob, cv.i \
FROM c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') WITH ORDINALITY AS cv(channel, version, i) \
CROSS JOIN LATERAL (SELECT x.type, x.blob FROM checkpoint_blobs x WHERE x.thread_id = c.thread_id \
AND x.checkpoint_ns = c.checkpoint_ns AND x.channel = cv.channel AND x.version = cv.version \
AND x.type <> 'empty' LIMIT 1) bl \
UNION ALL \
SELECT c.n, 2, wr.task_id, wr.channel, wr.type, wr.task_path, NULL, NULL, wr.blob, wr.idx \
FROM c CROSS JOIN LATERAL (SELECT x.task_id, x.channel, x.type, x.task_path, x.blob, x.idx \
FROM checkpoint_writes x WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns \
AND x.checkpoint_id = c.checkpoint_id OFFSET 0) wr"
    )
}

/// The row columns the tuple queries read from `checkpoints`.
pub(crate) const ROW_COLUMNS: &str =
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata";

/// The order of `list` (and of the inner subqueries of [`select_tuples`]).
pub(crate) const LIST_ORDER: &str = "ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC";

/// `$1` thread, `$2` ns, `$3` checkpoint id.
pub(crate) fn get_tuple_by_id() -> String {
    select_one_tuple(&format!(
        "SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3"
    ))
}

/// `$1` thread, `$2` ns.
pub(crate) fn get_tuple_latest() -> String {
    select_one_tuple(&format!(
        "SELECT {ROW_COLUMNS} FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
ORDER BY checkpoint_id DESC LIMIT 1"
    ))
}

/// `$1`/`$2`/`$3` (thread, ns, parent id) triples: the `__pregel_tasks`
/// writes of each parent, by the triple's position (from 1) and in write
/// order, from which checkpoints older than format v4 get their sends back
/// (`docs/design.md`, *PostgreSQL backend*).
pub(crate) const PARENT_SENDS: &str = "\
SELECT p.i, w.type, w.blob \
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS p(thread_id, checkpoint_ns, checkpoint_id, i) \
JOIN checkpoint_writes w ON w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns \
AND w.checkpoint_id = p.checkpoint_id AND w.channel = '__pregel_tasks' \
ORDER BY p.i, w.task_path, w.task_id, w.idx";

/// The delta-history walk from the checkpoint `target` selects (`docs/design.md`, *Delta channel history*).
/// `$1` thread, `$2` ns, `$4` channels. One row per ancestor walked (parent
/// first) and stored channel: the channels still open there, those it stores
/// (they close there), and each stored value (inline JSON and/or blob). The
/// walk ends when every channel is closed, at the root, or after as many steps
/// as the namespace has checkpoints (a parent cycle; the caller stops at the
/// first repeated id).
macro_rules! delta_walk {
    ($target:literal) => {
        concat!(
            "WITH RECURSIVE target AS (", $target, "), ",
            "bound AS (SELECT count(*) AS n FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2), ",
            "walk (depth, checkpoint_id, parent_checkpoint_id, open, stored) AS (",
            "SELECT 1, c.checkpoint_id, c.parent_checkpoint_id, o.open, s.stored ",
            "FROM target t ",
            "JOIN checkpoints c ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = t.parent_checkpoint_id ",
            "CROSS JOIN LATERAL (SELECT $4::text[] AS open) o ",
            "CROSS JOIN LATERAL (SELECT ARRAY(SELECT ch FROM unnest(o.open) AS ch WHERE ",
            stored!("c", "ch"),
            ") AS stored) s ",
            "UNION ALL ",
            "SELECT w.depth + 1, c.checkpoint_id, c.parent_checkpoint_id, o.open, s.stored ",
            "FROM walk w ",
            "CROSS JOIN LATERAL (SELECT ARRAY(SELECT ch FROM unnest(w.open) AS ch WHERE ch <> ALL (w.stored)) AS open) o ",
            "JOIN checkpoints c ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = w.parent_checkpoint_id ",
            "CROSS JOIN LATERAL (SELECT ARRAY(SELECT ch FROM unnest(o.open) AS ch WHERE ",
            stored!("c", "ch"),
            ") AS stored) s ",
            "WHERE cardinality(o.open) > 0 AND w.depth < (SELECT n FROM bound)) ",
            "SELECT w.depth, w.checkpoint_id, w.open, w.stored, sv.channel, sv.inline, sv.type, sv.blob ",
            "FROM walk w LEFT JOIN LATERAL (",
            "SELECT ch AS channel, c.checkpoint -> 'channel_values' -> ch AS inline, bl.type, bl.blob ",
            "FROM unnest(w.stored) AS ch ",
            "JOIN checkpoints c ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = w.checkpoint_id ",
            "LEFT JOIN checkpoint_blobs bl ON bl.thread_id = $1 AND bl.checkpoint_ns = $2 AND bl.channel = ch ",
            "AND bl.version = c.checkpoint -> 'channel_versions' ->> ch AND bl.type <> 'empty'",
            ") sv ON TRUE ORDER BY w.depth"
        )
    };
}

/// Delta-history walk from checkpoint `$3` (see `delta_walk!`).
pub(crate) const DELTA_WALK_BY_ID: &str = delta_walk!(
    "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints \
WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3"
);

/// Delta-history walk from the latest checkpoint; `$3` is unused (NULL).
pub(crate) const DELTA_WALK_LATEST: &str = delta_walk!(
    "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints \
WHERE thread_id = $1 AND checkpoint_ns = $2 AND $3::text IS NULL ORDER BY checkpoint_id DESC LIMIT 1"
);

/// Stage 2 of delta history: `$1` thread, `$2` ns, `$3`/`$4` (checkpoint id,
/// channel) pairs. The writes of each pair.
pub(crate) const DELTA_WRITES: &str = "\
SELECT w.checkpoint_id, w.channel, w.task_id, w.task_path, w.idx, w.type, w.blob \
FROM unnest($3::text[], $4::text[]) AS p(checkpoint_id, channel) \
JOIN checkpoint_writes w ON w.thread_id = $1 AND w.checkpoint_ns = $2 \
AND w.checkpoint_id = p.checkpoint_id AND w.channel = p.channel";

/// `$1` thread: takes the thread's exclusive advisory lock until the
/// transaction ends.
///
/// The per-thread advisory locks are `pg_advisory_xact_lock(int4, int4)`
/// with first key (`classid`) 1667985524 (`0x636b_7074`, the bytes of
/// `"ckpt"`) and second key `hashtext(thread_id)`: `put` takes it shared,
/// `prune` and `delete_for_runs` exclusive, so values are never collected
/// under a concurrent `put` that still refers to them.
pub(crate) const LOCK_THREAD: &str = "SELECT pg_advisory_xact_lock(1667985524, hashtext($1))";

/// Whether the thread has a checkpoint (an import that creates refuses it).
pub(crate) const THREAD_HAS_CHECKPOINTS: &str = "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1)";

/// `$1` threads: takes their shared advisory locks (those `put` takes) in
/// key order, as [`LOCK_RUN_THREADS`] takes exclusive ones, at the start of
/// a group commit's transaction.
pub(crate) const LOCK_GROUP_THREADS: &str = "\
SELECT count(pg_advisory_xact_lock_shared(1667985524, s.h)) FROM (\
SELECT DISTINCT hashtext(t) AS h FROM unnest($1::text[]) AS t ORDER BY h) s";

/// `$1` threads: locks their lease rows in key order, at the start of a
/// group commit's transaction with fenced members, before
/// [`LOCK_GROUP_THREADS`]: every transaction takes lease rows before thread
/// locks (a fenced write alone does too, its lease check being the first
/// part of its statement), and groups take them in one order, so fenced
/// groups never wait on each other in a cycle.
pub(crate) const LOCK_GROUP_LEASES: &str = "\
SELECT count(*) FROM (SELECT 1 FROM checkpointer_leases WHERE thread_id = ANY($1::text[]) \
ORDER BY thread_id FOR UPDATE) s";

/// `$1` thread: per namespace the latest checkpoint, the root checkpoint its
/// metadata names (`parents[""]`), the channels it has a version but no value
/// for, and its metadata (which names the delta channels among them).
pub(crate) const PRUNE_HEADS: &str = concat!(
    "SELECT h.checkpoint_ns, h.checkpoint_id, h.root, ",
    "ARRAY(SELECT ch FROM jsonb_object_keys(h.checkpoint -> 'channel_versions') AS ch WHERE NOT ",
    stored!("h", "ch"),
    ") AS unstored, h.metadata ",
    "FROM (SELECT DISTINCT ON (checkpoint_ns) thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata, ",
    "metadata -> 'parents' ->> '' AS root FROM checkpoints WHERE thread_id = $1 ",
    "ORDER BY checkpoint_ns, checkpoint_id DESC) h"
);

/// `$1` thread, `$2` ids: which of the ids are checkpoints of the root
/// namespace.
pub(crate) const ROOT_CHECKPOINTS: &str =
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = ANY($2::text[])";

/// `$1` thread, `$2`/`$3` (ns, id) of the checkpoints to keep, `$4` namespaces
/// removed entirely. Deletes every other checkpoint of the thread with its
/// writes, every write of the removed namespaces, and the blobs no kept
/// checkpoint of their namespace refers to; clears the parent of a kept
/// checkpoint whose parent is not kept (Python's `PRUNE_PARENTS_SQL`).
pub(crate) const PRUNE_APPLY: &str = "\
WITH keep AS (SELECT * FROM unnest($2::text[], $3::text[]) AS k(ns, id)), \
dc AS (DELETE FROM checkpoints c WHERE c.thread_id = $1 \
AND NOT EXISTS (SELECT 1 FROM keep k WHERE k.ns = c.checkpoint_ns AND k.id = c.checkpoint_id) \
RETURNING c.checkpoint_ns, c.checkpoint_id), \
dp AS (UPDATE checkpoints c SET parent_checkpoint_id = NULL FROM keep k WHERE c.thread_id = $1 \
AND c.checkpoint_ns = k.ns AND c.checkpoint_id = k.id AND c.parent_checkpoint_id IS NOT NULL \
AND NOT EXISTS (SELECT 1 FROM keep p WHERE p.ns = k.ns AND p.id = c.parent_checkpoint_id)), \
dw AS (DELETE FROM checkpoint_writes w USING dc WHERE w.thread_id = $1 \
AND w.checkpoint_ns = dc.checkpoint_ns AND w.checkpoint_id = dc.checkpoint_id), \
dn AS (DELETE FROM checkpoint_writes w WHERE w.thread_id = $1 AND w.checkpoint_ns = ANY($4::text[])), \
db AS (DELETE FROM checkpoint_blobs b WHERE b.thread_id = $1 AND NOT EXISTS (\
SELECT 1 FROM checkpoints c JOIN keep k ON k.ns = c.checkpoint_ns AND k.id = c.checkpoint_id \
WHERE c.thread_id = $1 AND c.checkpoint_ns = b.checkpoint_ns \
AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)) \
SELECT count(*) FROM dc";

/// Retention skeletons of thread `$1`, `$4` rows after (ns `$2`, id `$3`)
/// in (ns, id) order ([`SKELETONS_FIRST`]: from the start): ns, id, parent,
/// `ts`, metadata, the versioned channels with their versions and whether a
/// value is stored, the channels with an inline value and no version, the
/// count of pending writes and whether one is on `__interrupt__`.
macro_rules! skeletons {
    ($after:literal) => {
        concat!(
            "SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint ->> 'ts', c.metadata, ",
            "v.chs, v.vers, v.stored, ",
            "ARRAY(SELECT k FROM jsonb_object_keys(CASE WHEN jsonb_typeof(c.checkpoint -> 'channel_values') = 'object' ",
            "THEN c.checkpoint -> 'channel_values' ELSE '{}'::jsonb END) AS k ",
            "WHERE NOT coalesce(c.checkpoint -> 'channel_versions' ? k, false)), ",
            "wr.n, wr.interrupt ",
            "FROM checkpoints c ",
            // the writes' count and interrupt in one probe of the writes'
            // key per checkpoint (an EXISTS of its own was planned as a
            // hashed subplan: a scan of every interrupt of the store per page)
            "CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(bool_or(w.channel = '__interrupt__'), false) AS interrupt ",
            "FROM checkpoint_writes w WHERE w.thread_id = c.thread_id ",
            "AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id) AS wr ",
            "CROSS JOIN LATERAL (SELECT coalesce(array_agg(kv.key), '{}'::text[]), ",
            "coalesce(array_agg(kv.value), '{}'::text[]), coalesce(array_agg(",
            stored!("c", "kv.key"),
            "), '{}'::bool[]) FROM jsonb_each_text(CASE WHEN jsonb_typeof(c.checkpoint -> 'channel_versions') = 'object' ",
            "THEN c.checkpoint -> 'channel_versions' ELSE '{}'::jsonb END) AS kv) AS v(chs, vers, stored) ",
            "WHERE c.thread_id = $1 ",
            $after,
            "ORDER BY c.checkpoint_ns, c.checkpoint_id LIMIT $4"
        )
    };
}

/// See [`skeletons!`].
pub(crate) const SKELETONS_FIRST: &str = skeletons!("AND $2::text IS NULL AND $3::text IS NULL ");

/// See [`skeletons!`].
pub(crate) const SKELETONS_AFTER: &str = skeletons!("AND (c.checkpoint_ns, c.checkpoint_id) > ($2::text, $3::text) ");

/// Turns JIT compilation off for the rest of a transaction.
pub(crate) const NO_JIT: &str = "SET LOCAL jit = off";

/// Lets a transaction's commit return before its WAL is flushed (atomic
/// still; a crash may undo it whole).
pub(crate) const NO_SYNC_COMMIT: &str = "SET LOCAL synchronous_commit = off";

/// A retention batch of (thread `$1`, ns `$2`): deletes the checkpoints `$3`
/// and their writes, clears the parent of the checkpoints `$4` whose parent
/// is among `$3`, and returns the counts and the (channel, version) pairs
/// the deleted checkpoints named.
pub(crate) const RETAIN_DELETE: &str = "\
WITH dc AS (DELETE FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY($3::text[]) \
RETURNING checkpoint -> 'channel_versions' AS cv), \
dw AS (DELETE FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY($3::text[]) \
RETURNING 1), \
dp AS (UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = $1 AND checkpoint_ns = $2 \
AND checkpoint_id = ANY($4::text[]) AND parent_checkpoint_id = ANY($3::text[]) RETURNING 1), \
named AS (SELECT kv.key, kv.value FROM dc CROSS JOIN LATERAL jsonb_each_text(CASE WHEN jsonb_typeof(dc.cv) = 'object' \
THEN dc.cv ELSE '{}'::jsonb END) AS kv) \
SELECT (SELECT count(*) FROM dc), (SELECT count(*) FROM dw), \
ARRAY(SELECT key FROM named ORDER BY key, value), ARRAY(SELECT value FROM named ORDER BY key, value)";

/// The (channel, version) pairs named by the checkpoints of (thread `$1`,
/// ns `$2`) with an id greater than `$3` (put since a retention scan).
pub(crate) const RETAIN_FRESH_NAMES: &str = "\
SELECT kv.key, kv.value FROM checkpoints c CROSS JOIN LATERAL jsonb_each_text(CASE WHEN \
jsonb_typeof(c.checkpoint -> 'channel_versions') = 'object' THEN c.checkpoint -> 'channel_versions' \
ELSE '{}'::jsonb END) AS kv WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id > $3";

/// Deletes the blobs of (thread `$1`, ns `$2`) at the (channel, version)
/// pairs `$3`, `$4`.
pub(crate) const RETAIN_DELETE_BLOBS: &str = "\
DELETE FROM checkpoint_blobs b USING unnest($3::text[], $4::text[]) AS d(channel, version) \
WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = d.channel AND b.version = d.version";

/// `$1` run ids: locks (exclusively, in key order) every thread holding a
/// checkpoint of those runs and returns the lock keys.
pub(crate) const LOCK_RUN_THREADS: &str = "\
SELECT s.h, pg_advisory_xact_lock(1667985524, s.h) FROM (\
SELECT DISTINCT hashtext(thread_id) AS h FROM checkpoints \
WHERE jsonb_typeof(metadata -> 'run_id') = 'string' AND metadata ->> 'run_id' = ANY($1::text[]) ORDER BY h) s";

macro_rules! delete_for_runs {
    ($threads:literal) => {
        concat!(
            "WITH del AS (DELETE FROM checkpoints WHERE jsonb_typeof(metadata -> 'run_id') = 'string' ",
            "AND metadata ->> 'run_id' = ANY($1::text[]) AND hashtext(thread_id) = ANY($2::int4[]) ",
            $threads,
            "RETURNING thread_id, checkpoint_ns, checkpoint_id), ",
            "dw AS (DELETE FROM checkpoint_writes w USING del WHERE w.thread_id = del.thread_id ",
            "AND w.checkpoint_ns = del.checkpoint_ns AND w.checkpoint_id = del.checkpoint_id), ",
            "db AS (DELETE FROM checkpoint_blobs b ",
            "WHERE (b.thread_id, b.checkpoint_ns) IN (SELECT thread_id, checkpoint_ns FROM del) ",
            "AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns ",
            "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version ",
            "AND NOT EXISTS (SELECT 1 FROM del d WHERE d.thread_id = c.thread_id AND d.checkpoint_ns = c.checkpoint_ns ",
            "AND d.checkpoint_id = c.checkpoint_id))) ",
            "SELECT count(*) FROM del"
        )
    };
}

/// `$1` run ids, `$2` lock keys taken by [`LOCK_RUN_THREADS`]: deletes the
/// runs' checkpoints with their writes, and the blobs of their namespaces no
/// remaining checkpoint refers to.
pub(crate) const DELETE_FOR_RUNS: &str = delete_for_runs!("");

/// [`DELETE_FOR_RUNS`] on the threads `$3` only (a fenced saver's: those
/// whose leases it checked).
pub(crate) const DELETE_FOR_RUNS_OF_THREADS: &str = delete_for_runs!("AND thread_id = ANY($3::text[]) ");

/// `RUN_THREADS`: `$1` run ids: the threads holding their checkpoints, in
/// thread order.
pub(crate) const RUN_THREADS: &str = "\
SELECT DISTINCT thread_id FROM checkpoints \
WHERE jsonb_typeof(metadata -> 'run_id') = 'string' AND metadata ->> 'run_id' = ANY($1::text[]) ORDER BY thread_id";

/// `$1` source thread, `$2` target thread. Copies everything when the source
/// has checkpoints and the target none; returns (target taken, rows copied).
pub(crate) const COPY_THREAD: &str = "\
WITH st AS (SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $2) AS taken, \
EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1) AS found), \
go AS (SELECT found AND NOT taken AS ok FROM st), \
c AS (INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) \
SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata \
FROM checkpoints, go WHERE thread_id = $1 AND go.ok RETURNING 1), \
b AS (INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
SELECT $2, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs, go WHERE thread_id = $1 AND go.ok \
ON CONFLICT DO NOTHING), \
w AS (INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob) \
SELECT $2, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob FROM checkpoint_writes, go \
WHERE thread_id = $1 AND go.ok ON CONFLICT DO NOTHING) \
SELECT (SELECT taken FROM st), (SELECT count(*) FROM c)";

/// Threads after cursor `$1` (exclusive), at most `$2`, each with its latest
/// checkpoint in any namespace (greatest id, ties by namespace descending).
/// A loose index scan: one index probe per thread.
macro_rules! list_threads {
    ($first:literal) => {
        concat!(
            "WITH RECURSIVE t(thread_id) AS ((",
            $first,
            ") UNION ALL ",
            "SELECT (SELECT c.thread_id FROM checkpoints c WHERE c.thread_id > t.thread_id ",
            "ORDER BY c.thread_id LIMIT 1) FROM t WHERE t.thread_id IS NOT NULL) ",
            "SELECT t.thread_id, l.checkpoint_ns, l.checkpoint_id, l.metadata FROM t CROSS JOIN LATERAL (",
            "SELECT checkpoint_ns, checkpoint_id, metadata FROM checkpoints c WHERE c.thread_id = t.thread_id ",
            "ORDER BY checkpoint_id DESC, checkpoint_ns DESC LIMIT 1) l ",
            "WHERE t.thread_id IS NOT NULL LIMIT $2"
        )
    };
}

/// [`list_threads!`] from the first thread; `$1` is unused (NULL).
pub(crate) const LIST_THREADS_FIRST: &str =
    list_threads!("SELECT thread_id FROM checkpoints WHERE $1::text IS NULL ORDER BY thread_id LIMIT 1");

/// [`list_threads!`] after thread `$1`.
pub(crate) const LIST_THREADS_AFTER: &str =
    list_threads!("SELECT thread_id FROM checkpoints WHERE thread_id > $1 ORDER BY thread_id LIMIT 1");

/// The bytes of the checkpoint tables with indexes and TOAST.
pub(crate) const TABLE_BYTES: &str = "\
    SELECT (coalesce(pg_total_relation_size(to_regclass('checkpoints')), 0) \
    + coalesce(pg_total_relation_size(to_regclass('checkpoint_blobs')), 0) \
    + coalesce(pg_total_relation_size(to_regclass('checkpoint_writes')), 0) \
    + coalesce(pg_total_relation_size(to_regclass('checkpoint_migrations')), 0))::bigint";

/// What tells this database apart from every other: its name and oid, and
/// when its server started (an oid is reused by another cluster).
pub(crate) const DATABASE_IDENTITY: &str = "SELECT d.datname || ' ' || d.oid::text || ' ' || \
    pg_postmaster_start_time()::text FROM pg_database d WHERE d.datname = current_database()";

/// The keys of every checkpoint (kind 0) and write (kind 1) of thread `$1`,
/// in one statement so both come from one snapshot: (kind, checkpoint_ns,
/// checkpoint_id, parent_checkpoint_id, task_id, task_path, idx, channel).
pub(crate) const THREAD_KEYS: &str = "\
    SELECT 0, checkpoint_ns, checkpoint_id, parent_checkpoint_id, NULL, NULL, NULL::integer, NULL \
    FROM checkpoints WHERE thread_id = $1 \
    UNION ALL SELECT 1, checkpoint_ns, checkpoint_id, NULL, task_id, task_path, idx, channel \
    FROM checkpoint_writes WHERE thread_id = $1";

// Fencing (`crate::fence`): a side table Python's savers never read, the
// lease's time on the server's clock (`clock_timestamp()`: the time of the
// statement, not of the transaction's start). `$1` thread, `$2` writer,
// `$3` lease in ms (acquire) or epoch, `$4` lease in ms.
pub(crate) const LEASES_TABLE: &str = "CREATE TABLE IF NOT EXISTS checkpointer_leases (\
thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)";

/// A new epoch when the lease is free, expired or the writer's own.
pub(crate) const LEASE_ACQUIRE: &str = "\
INSERT INTO checkpointer_leases AS l (thread_id, owner, epoch, expires_at) \
VALUES ($1, $2, COALESCE((SELECT epoch FROM checkpointer_leases WHERE thread_id = ''), 0) + 1, \
clock_timestamp() + $3::float8 * interval '1 millisecond') \
ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1, expires_at = excluded.expires_at \
WHERE l.expires_at <= clock_timestamp() OR l.owner = excluded.owner \
RETURNING epoch";

pub(crate) const LEASE_RENEW: &str = "\
UPDATE checkpointer_leases SET expires_at = clock_timestamp() + $4::float8 * interval '1 millisecond' \
WHERE thread_id = $1 AND owner = $2 AND epoch = $3 RETURNING epoch";

pub(crate) const LEASE_RELEASE: &str = "\
UPDATE checkpointer_leases SET expires_at = clock_timestamp() \
WHERE thread_id = $1 AND owner = $2 AND epoch = $3 RETURNING epoch";

/// Whether the lease table exists (a purge of a database never fenced).
pub(crate) const LEASES_TABLE_EXISTS: &str = "SELECT to_regclass('checkpointer_leases') IS NOT NULL";

/// Serializes a purge batch with every lease statement (they take `ROW
/// EXCLUSIVE`): an acquisition waiting on it reads the raised floor.
pub(crate) const LEASES_LOCK: &str = "LOCK TABLE checkpointer_leases IN SHARE ROW EXCLUSIVE MODE";

/// One purge batch: `$1` ms, `$2` rows at most. Deletes the leases whose
/// deadline passed more than `$1` ms ago of threads holding nothing, raises
/// the floor (the row of the empty thread id, which names no thread) to
/// their greatest epoch, and returns how many went.
pub(crate) const LEASES_PURGE: &str = "\
WITH gone AS (DELETE FROM checkpointer_leases WHERE thread_id IN (\
SELECT l.thread_id FROM checkpointer_leases l WHERE l.thread_id <> '' \
AND l.expires_at < clock_timestamp() - $1::float8 * interval '1 millisecond' \
AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = l.thread_id) \
AND NOT EXISTS (SELECT 1 FROM checkpoint_writes w WHERE w.thread_id = l.thread_id) LIMIT $2) \
RETURNING epoch), \
floor AS (INSERT INTO checkpointer_leases AS f (thread_id, owner, epoch, expires_at) \
SELECT '', '', max(epoch), 'epoch'::timestamptz FROM gone HAVING count(*) > 0 \
ON CONFLICT (thread_id) DO UPDATE SET epoch = greatest(f.epoch, excluded.epoch)) \
SELECT count(*) FROM gone";

/// The check of a fenced write, first in its transaction: a row when the
/// lease is held (then extended, and locked until the write commits).
pub(crate) const LEASE_CHECK: &str = "\
UPDATE checkpointer_leases SET expires_at = clock_timestamp() + $4::float8 * interval '1 millisecond' \
WHERE thread_id = $1 AND owner = $2 AND epoch = $3 AND expires_at > clock_timestamp() RETURNING epoch";

#[cfg(test)]
mod tests {
    #[test]
    fn thread_lock_class_matches_sql() {
        let class = 0x636b_7074_i32.to_string();
        for sql in [
            super::PUT,
            super::LOCK_THREAD,
            super::LOCK_RUN_THREADS,
            super::LOCK_GROUP_THREADS,
        ] {
            assert!(sql.contains(&class), "{sql}");
        }
    }
}

//! The store's put, get, filtered search and vector search on SQLite (and
//! the in-memory store's vector search), next to the physical floor: the
//! SQL statement each operation needs at least, run through rusqlite on
//! the same file in the same run (issue 34). For the searches without a
//! query the floor is the plan ours runs on our indexes by time
//! (`floor/…`: the walk of `store_updated_at_idx` for the filter over
//! `("bench",)`, one namespace read from `store_prefix_updated_at_idx`)
//! and, beside it, Python's statement (`floor_python/…`). The vector
//! search's floor is Python's statement (a join-free scan with sqlite-vec's
//! function in Rust); ours scans without SQL ordering the scores.
//!
//! ```sh
//! nice -n 19 cargo bench -p checkpointer-benches --features sqlite-bundled,store --bench store
//! STORE_BENCH_ITEMS=1000000 cargo bench -p checkpointer-benches --features sqlite-bundled,store --bench store
//! ```
//!
//! The data (the same in `scripts/store_side_by_side.py`, which runs
//! Python's `SqliteStore` alternated with ours through this binary's
//! `--serve` mode): item `i` is `("bench", "u{i % 100}")`, key `k{i}`,
//! value `{"text": <8 words>, "kind": "k{i % 8}", "n": i}`, its `text`
//! embedded with [`HashedNgramEmbeddings`] of 128 dimensions. Benchmark
//! ids are `store/<sqlite|floor|floor_python|memory>/<case>`, one operation
//! per iteration:
//! * `put`: an existing item overwritten (a new text, so a new vector), one
//!   batch, one transaction (WAL, `synchronous = FULL`);
//! * `get`: an item by key;
//! * `search_filter`: `{"kind": "k3"}` over `("bench",)`, limit 10;
//! * `search_namespace`: `("bench", "u7")`, no filter, limit 10;
//! * `vector_search`: a query over `("bench",)`, limit 10.

use std::io::{BufRead, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(feature = "postgres")]
use checkpointer::store::PostgresStore;
use checkpointer::store::{
    Filter, HashedNgramEmbeddings, InMemoryStore, IndexConfig, Namespace, Op, PutOp, SearchOp, SqliteStore, Store,
    StoreExt,
};
use criterion::{criterion_group, Criterion};
use rusqlite::functions::FunctionFlags;
use serde_json::{json, Value};
use tokio::runtime::Runtime;

/// Dimensions of the test embedding.
const DIMS: usize = 128;
/// Namespaces under `("bench",)`.
const SPACES: u64 = 100;
/// Puts per batch while filling.
const FILL_BATCH: u64 = 1000;

const WORDS: [&str; 64] = [
    "apple", "river", "stone", "cloud", "green", "rust", "python", "memory", "garden", "signal", "paper", "window",
    "engine", "silver", "forest", "market", "letter", "bridge", "summer", "winter", "castle", "planet", "doctor",
    "music", "travel", "coffee", "friend", "number", "yellow", "spring", "animal", "island", "pencil", "rocket",
    "candle", "orange", "basket", "mirror", "button", "jacket", "ticket", "rabbit", "bottle", "carpet", "dinner",
    "finger", "hammer", "kitten", "ladder", "meadow", "needle", "pepper", "puzzle", "saddle", "tunnel", "velvet",
    "wallet", "zipper", "anchor", "beacon", "cactus", "dragon", "falcon", "harbor",
];

/// Eight words chosen by `seed` (`store_side_by_side.py` has the same).
fn text(seed: u64) -> String {
    (0..8u64)
        .map(|k| {
            let h = (seed.wrapping_mul(2_654_435_761) ^ k.wrapping_mul(40_503)) & 0xFFFF_FFFF;
            WORDS[((h >> 11) % 64) as usize]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn namespace(i: u64) -> Namespace {
    Namespace::new(["bench".to_owned(), format!("u{}", i % SPACES)]).unwrap()
}

fn value(i: u64, seed: u64) -> Value {
    json!({"text": text(seed), "kind": format!("k{}", i % 8), "n": i})
}

fn index() -> IndexConfig {
    IndexConfig::new(DIMS, Arc::new(HashedNgramEmbeddings::new(DIMS))).fields(["text"])
}

/// Puts items `0..items`, in batches; the time it took.
async fn fill(store: &dyn Store, items: u64) -> Duration {
    let t = Instant::now();
    let mut i = 0;
    while i < items {
        let end = (i + FILL_BATCH).min(items);
        let ops = (i..end)
            .map(|i| Op::Put(PutOp::new(namespace(i), format!("k{i}"), value(i, i))))
            .collect();
        store.batch(ops).await.unwrap();
        i = end;
    }
    t.elapsed()
}

/// The operations measured, by name.
#[derive(Clone, Copy)]
enum Case {
    Put,
    Get,
    SearchFilter,
    SearchNamespace,
    VectorSearch,
}

impl Case {
    const ALL: [Case; 5] = [
        Case::Put,
        Case::Get,
        Case::SearchFilter,
        Case::SearchNamespace,
        Case::VectorSearch,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::Put => "put",
            Case::Get => "get",
            Case::SearchFilter => "search_filter",
            Case::SearchNamespace => "search_namespace",
            Case::VectorSearch => "vector_search",
        }
    }

    fn from_name(name: &str) -> Option<Case> {
        Case::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// Operation `n` of a case on a store of `items` items: the item it
/// touches is spread over the store (`n * 7919 % items`).
async fn run(store: &dyn Store, case: Case, n: u64, items: u64) {
    let i = n.wrapping_mul(7919) % items;
    let bench = Namespace::new(["bench"]).unwrap();
    match case {
        Case::Put => store
            .put(&namespace(i), &format!("k{i}"), value(i, items + n))
            .await
            .unwrap(),
        Case::Get => assert!(store.get(&namespace(i), &format!("k{i}")).await.unwrap().is_some()),
        Case::SearchFilter => {
            let filter = Filter::new().eq("kind", format!("k{}", n % 8));
            let found = store
                .search(SearchOp::new(bench).filter(filter).limit(10))
                .await
                .unwrap();
            assert_eq!(found.len(), 10);
        }
        Case::SearchNamespace => {
            let found = store.search(SearchOp::new(namespace(n)).limit(10)).await.unwrap();
            assert_eq!(found.len(), 10);
        }
        Case::VectorSearch => {
            let query = text(u64::MAX / 2 + n);
            let found = store.search(SearchOp::new(bench).query(query).limit(10)).await.unwrap();
            assert!(found[0].score.is_some());
        }
    }
}

/// The raw statements on one connection to the file: the floor.
struct Floor {
    conn: rusqlite::Connection,
    items: u64,
}

impl Floor {
    fn open(path: &Path, items: u64) -> Floor {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 10000")
            .unwrap();
        let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
        conn.create_scalar_function("vec_distance_cosine", 2, flags, |ctx| {
            let a = ctx
                .get_raw(0)
                .as_blob()
                .map_err(|e| rusqlite::Error::UserFunctionError(e.into()))?;
            let b = ctx
                .get_raw(1)
                .as_blob()
                .map_err(|e| rusqlite::Error::UserFunctionError(e.into()))?;
            let (mut dot, mut am, mut bm) = (0f32, 0f32, 0f32);
            for (x, y) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
                let x = f32::from_le_bytes([x[0], x[1], x[2], x[3]]);
                let y = f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
                dot += x * y;
                am += x * x;
                bm += y * y;
            }
            Ok(1.0 - f64::from(dot) / (f64::from(am).sqrt() * f64::from(bm).sqrt()))
        })
        .unwrap();
        Floor { conn, items }
    }

    /// Operation `n` of `case`; `python`: the searches without a query run
    /// Python's statement instead of the walk of our index.
    fn run(&self, case: Case, n: u64, python: bool) {
        let i = n.wrapping_mul(7919) % self.items;
        let prefix = namespace(i).labels().join(".");
        let rows = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> usize {
            let mut stmt = self.conn.prepare_cached(sql).unwrap();
            let mut rows = stmt.query(params).unwrap();
            let mut count = 0;
            while let Some(row) = rows.next().unwrap() {
                let _ = row.get_ref(2).unwrap();
                count += 1;
            }
            count
        };
        match case {
            Case::Put => {
                let now = "2026-12-07 12:00:00.000000+00:00";
                let bytes = serde_json::to_vec(&value(i, self.items + n)).unwrap();
                let vector = HashedNgramEmbeddings::new(DIMS).embed(&text(self.items + n));
                let blob: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
                self.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
                self.conn
                    .prepare_cached(
                        "INSERT INTO store (prefix, key, value, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
                         ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    )
                    .unwrap()
                    .execute(rusqlite::params![prefix, format!("k{i}"), bytes, now])
                    .unwrap();
                self.conn
                    .prepare_cached(
                        "INSERT OR REPLACE INTO store_vectors (prefix, key, field_name, embedding, created_at, updated_at)
                         VALUES (?1, ?2, 'text', ?3, ?4, ?4)",
                    )
                    .unwrap()
                    .execute(rusqlite::params![prefix, format!("k{i}"), blob, now])
                    .unwrap();
                self.conn.execute_batch("COMMIT").unwrap();
            }
            Case::Get => {
                let sql = "SELECT prefix, key, value, created_at, updated_at FROM store WHERE prefix = ?1 AND key = ?2";
                assert_eq!(rows(sql, &[&prefix, &format!("k{i}")]), 1);
            }
            Case::SearchFilter => {
                let sql = if python {
                    "SELECT prefix, key, value, created_at, updated_at FROM store
                     WHERE (prefix = ?1 OR prefix GLOB ?2) AND json_extract(value, '$.kind') = ?3
                     ORDER BY updated_at DESC LIMIT 10"
                } else {
                    "SELECT prefix, key, value, created_at, updated_at FROM store INDEXED BY store_updated_at_idx
                     WHERE (prefix = ?1 OR prefix GLOB ?2) AND json_extract(value, '$.kind') = ?3
                     ORDER BY updated_at DESC, prefix, rowid LIMIT 10"
                };
                assert_eq!(rows(sql, &[&"bench", &"bench.*", &format!("k{}", n % 8)]), 10);
            }
            Case::SearchNamespace => {
                let ns = namespace(n).labels().join(".");
                let sql = if python {
                    "SELECT prefix, key, value, created_at, updated_at FROM store
                     WHERE (prefix = ?1 OR prefix GLOB ?2) ORDER BY updated_at DESC LIMIT 10"
                } else {
                    // one namespace, nothing below it: its items newest first
                    // from our (prefix, updated_at) index
                    "SELECT prefix, key, value, created_at, updated_at FROM store
                     WHERE prefix = ?1 AND ?2 IS NOT NULL ORDER BY updated_at DESC, rowid LIMIT 10"
                };
                assert_eq!(rows(sql, &[&ns, &format!("{ns}.*")]), 10);
            }
            Case::VectorSearch => {
                let vector = HashedNgramEmbeddings::new(DIMS).embed(&text(u64::MAX / 2 + n));
                let blob: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
                let sql = "SELECT prefix, key, 1.0 - vec_distance_cosine(embedding, ?1) AS score FROM store_vectors
                           WHERE prefix = ?2 OR prefix GLOB ?3 ORDER BY score DESC LIMIT 10";
                assert_eq!(rows(sql, &[&blob, &"bench", &"bench.*"]), 10);
            }
        }
    }
}

/// Items in the criterion run: `STORE_BENCH_ITEMS`, default 10 000.
fn bench_items() -> u64 {
    std::env::var("STORE_BENCH_ITEMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000)
}

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let items = bench_items();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let store = rt.block_on(SqliteStore::builder(&path).index(index()).open()).unwrap();
    let took = rt.block_on(fill(&store, items));
    println!("FILL store/sqlite: {items} items in {:.1} s", took.as_secs_f64());
    let floor = Floor::open(&path, items);
    let memory = InMemoryStore::builder().index(index()).build().unwrap();
    let took = rt.block_on(fill(&memory, items));
    println!("FILL store/memory: {items} items in {:.1} s", took.as_secs_f64());
    let mut group = c.benchmark_group("store");
    for case in Case::ALL {
        let mut n = 0u64;
        group.bench_function(format!("sqlite/{}", case.name()), |b| {
            b.iter(|| {
                n += 1;
                rt.block_on(run(&store, case, n, items));
            });
        });
        let mut n = 0u64;
        group.bench_function(format!("floor/{}", case.name()), |b| {
            b.iter(|| {
                n += 1;
                floor.run(case, n, false);
            });
        });
        if matches!(case, Case::SearchFilter | Case::SearchNamespace) {
            let mut n = 0u64;
            group.bench_function(format!("floor_python/{}", case.name()), |b| {
                b.iter(|| {
                    n += 1;
                    floor.run(case, n, true);
                });
            });
        }
    }
    let mut n = 0u64;
    group.bench_function("memory/vector_search", |b| {
        b.iter(|| {
            n += 1;
            rt.block_on(run(&memory, Case::VectorSearch, n, items));
        });
    });
    group.finish();
    rt.block_on(store.close()).unwrap();
}

/// The store `--serve` runs on.
enum Served {
    Sqlite(SqliteStore),
    #[cfg(feature = "postgres")]
    Postgres(PostgresStore),
}

impl Served {
    fn store(&self) -> &dyn Store {
        match self {
            Served::Sqlite(s) => s,
            #[cfg(feature = "postgres")]
            Served::Postgres(s) => s,
        }
    }

    async fn close(self) {
        match self {
            Served::Sqlite(s) => s.close().await.unwrap(),
            #[cfg(feature = "postgres")]
            Served::Postgres(s) => drop(s),
        }
    }
}

/// Opens what an `open` command names: `"url"` a PostgreSQL store (no
/// index: no pgvector here; feature `postgres`), else the SQLite file `"db"`.
async fn open_served(cmd: &Value) -> Served {
    if let Some(url) = cmd["url"].as_str() {
        #[cfg(feature = "postgres")]
        return Served::Postgres(PostgresStore::builder().url(url).open().await.unwrap());
        #[cfg(not(feature = "postgres"))]
        panic!("{url}: built without the postgres feature");
    }
    let mut builder = SqliteStore::builder(cmd["db"].as_str().unwrap()).index(index());
    if let Some(bytes) = cmd["mmap"].as_u64() {
        builder = builder.reader_mmap_size(bytes);
    }
    Served::Sqlite(builder.open().await.unwrap())
}

/// `--serve`: the side of `scripts/store_side_by_side.py` that runs ours.
/// One JSON command a line on stdin, one JSON answer a line on stdout:
/// `{"cmd": "open", "db": PATH, "items": N, "fill": BOOL, "mmap": BYTES}`
/// (opens, with the readers' `mmap_size` when given, fills
/// when asked: `{"fill_s": S}`; `"url": URL` instead of `"db"`: a
/// PostgreSQL store, without an index), `{"cmd": "close"}`, `{"cmd": "run", "op":
/// CASE, "from": N, "count": C, "items": N}` (operations `from..from+C`:
/// `{"times": [seconds, ...]}`).
fn serve() {
    let rt = Runtime::new().unwrap();
    let mut store: Option<Served> = None;
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let cmd: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let answer = match cmd["cmd"].as_str().unwrap_or_default() {
            "open" => {
                let s = rt.block_on(open_served(&cmd));
                let took = match cmd["fill"].as_bool() {
                    Some(true) => rt
                        .block_on(fill(s.store(), cmd["items"].as_u64().unwrap()))
                        .as_secs_f64(),
                    _ => 0.0,
                };
                store = Some(s);
                json!({"fill_s": took})
            }
            "close" => {
                if let Some(s) = store.take() {
                    rt.block_on(s.close());
                }
                json!({})
            }
            "run" => {
                let s = store.as_ref().unwrap().store();
                let case = Case::from_name(cmd["op"].as_str().unwrap()).unwrap();
                let (from, count, items) = (
                    cmd["from"].as_u64().unwrap(),
                    cmd["count"].as_u64().unwrap(),
                    cmd["items"].as_u64().unwrap(),
                );
                let times: Vec<f64> = (from..from + count)
                    .map(|n| {
                        let t = Instant::now();
                        rt.block_on(run(s, case, n, items));
                        t.elapsed().as_secs_f64()
                    })
                    .collect();
                json!({ "times": times })
            }
            _ => break,
        };
        let mut out = stdout.lock();
        writeln!(out, "{answer}").unwrap();
        out.flush().unwrap();
    }
}

criterion_group! {
    name = store;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(4));
    targets = benches
}

fn main() {
    if std::env::args().any(|a| a == "--serve") {
        serve();
    } else {
        store();
        Criterion::default().configure_from_args().final_summary();
    }
}

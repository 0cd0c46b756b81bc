//! `PostgresStore` against the server: the Store conformance suite (every
//! check on this process's shared database, each under its own root), in
//! both statement modes; the model-based test; TTL with a clock the test
//! moves; the recorded sequence against the in-memory results; and, each
//! on a fresh database, the tables as Python's migrations make them, the
//! refusal of an index where the server has no pgvector (nothing created),
//! a batch failing inside its transaction storing nothing, values
//! PostgreSQL cannot hold refused, the sweep in bounded slices, and no
//! password in errors or `Debug`; `store::open` of a PostgreSQL URL, its
//! background sweeper removing expired rows without a call.

use std::sync::Arc;

use checkpointer::conformance::Outcome;
use checkpointer::postgres::StatementMode;
use checkpointer::store::conformance::{checks, fresh_namespace};
use checkpointer::store::{
    HashedNgramEmbeddings, IndexConfig, Namespace, Op, PostgresStore, PutOp, SearchOp, Store, StoreError, StoreExt,
    Ttl, TtlConfig,
};
use checkpointer::Error;
use serde_json::json;

use crate::harness;
use crate::postgres_support::{self, url_of};
use crate::store_suite::manual_clock;

pub(crate) fn tests() -> Vec<harness::Trial> {
    let mut out = Vec::new();
    for (module, mode) in [
        ("prepared", StatementMode::Prepared),
        ("unnamed", StatementMode::Unnamed),
    ] {
        for check in checks() {
            let name = check.name();
            out.push(harness::tokio(
                &format!("store::conformance::{module}::{name}"),
                &[&crate::POSTGRES],
                2,
                move || async move {
                    let store = shared_store(mode).await;
                    match check.run(&store).await {
                        Outcome::Passed => {}
                        // the server has no pgvector, so the store has no
                        // index (`no_index_without_pgvector` shows it)
                        Outcome::Skipped(_) if name.starts_with("vector_") => {}
                        Outcome::Skipped(reason) => panic!("store check `{name}` did not run: {reason}"),
                        Outcome::Failed(failure) => panic!("store check `{name}` failed: {failure}"),
                    }
                },
            ));
        }
    }
    out.push(harness::test(
        "store::matches_the_oracle",
        &[&crate::POSTGRES],
        matches_the_oracle,
    ));
    let trials: [(&str, Make); 9] = [
        ("store::ttl_scenarios", || Box::pin(ttl_scenarios())),
        ("store::recorded_sequence_gives_the_in_memory_results", || {
            Box::pin(sequence())
        }),
        ("store::tables_and_migrations_as_python_makes_them", || {
            Box::pin(tables())
        }),
        ("store::no_index_without_pgvector", || {
            Box::pin(no_index_without_pgvector())
        }),
        ("store::a_batch_failing_in_sql_stores_nothing", || {
            Box::pin(failing_batch())
        }),
        ("store::what_postgresql_cannot_hold_is_refused", || Box::pin(refusals())),
        ("store::sweep_runs_in_bounded_slices_and_no_secret_leaks", || {
            Box::pin(sweep_and_secrets())
        }),
        ("store::opened_by_url_with_a_background_sweeper", || {
            Box::pin(opened_by_url())
        }),
        ("store::read_only_writes_nothing_and_restarts_no_ttl", || {
            Box::pin(read_only())
        }),
    ];
    for (name, body) in trials {
        out.push(harness::tokio(name, &[&crate::POSTGRES], 2, body));
    }
    out
}

type Body = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;
type Make = fn() -> Body;

async fn shared_store(mode: StatementMode) -> PostgresStore {
    let db = postgres_support::shared_database().expect("the shared database");
    PostgresStore::builder()
        .url(url_of(&db))
        .statement_mode(mode)
        .max_connections(2)
        .open()
        .await
        .expect("open the store")
}

async fn fresh() -> (postgres_support::TestDatabase, String) {
    let db = postgres_support::fresh_database().await.expect("a fresh database");
    let url = url_of(&db.0);
    (db, url)
}

fn matches_the_oracle() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(shared_store(StatementMode::Prepared));
    crate::store_suite::matches_the_oracle(&store, 16, &rt);
}

async fn ttl_scenarios() {
    let (_db, url) = fresh().await;
    crate::store_suite::ttl_scenarios(|ttl, clock| clocked(&url, ttl, clock)).await;
}

/// A store on `url` with this TTL configuration and clock.
async fn clocked(url: &str, ttl: TtlConfig, clock: crate::store_suite::BoxedClock) -> PostgresStore {
    let builder = PostgresStore::builder().url(url).ttl(ttl).clock(clock);
    builder.open().await.expect("open the store")
}

/// Without an index (the server has no pgvector) the sequence's queries
/// are plain searches: the results of the in-memory store without an
/// index, but for the order of items put in one batch (insertion order
/// there, tied on `updated_at` here).
async fn sequence() {
    let (_db, url) = fresh().await;
    let store = PostgresStore::open(url).await.unwrap();
    let ours = crate::store_sequence::run_on(&store).await;
    let memory = crate::store_sequence::run_on(&checkpointer::store::InMemoryStore::new()).await;
    let path = crate::store_sequence::sequence_path();
    crate::store_sequence::assert_same_but_ties(&path, &ours, &memory, "the in-memory store", &[]);
}

async fn tables() {
    let (db, url) = fresh().await;
    let store = PostgresStore::open(&url).await.unwrap();
    // a second setup (another process, or Python's afterwards) runs nothing
    store.setup().await.unwrap();
    let client = postgres_support::connect(&db.0).await.unwrap();
    let versions: Vec<i32> = client
        .query("SELECT v FROM store_migrations ORDER BY v", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [0, 1, 2, 3]);
    let schema = postgres_support::schema_of(&db.0).await;
    for expected in [
        "store.value jsonb NO - #3",
        "store.created_at timestamp with time zone YES CURRENT_TIMESTAMP #4",
        "store.expires_at timestamp with time zone YES - #6",
        "store.ttl_minutes integer YES - #7",
        "store_prefix_idx: CREATE INDEX store_prefix_idx ON public.store USING btree (prefix text_pattern_ops)",
        "idx_store_expires_at: CREATE INDEX idx_store_expires_at ON public.store USING btree (expires_at) WHERE (expires_at IS NOT NULL)",
        "store_pkey: PRIMARY KEY (prefix, key)",
    ] {
        assert!(schema.iter().any(|l| l == expected), "{expected} not in {schema:#?}");
    }
    // rows as Python's store writes them (times from the server's clock,
    // `expires_at` as NOW() plus an interval) are read; expired ones are not
    client
        .batch_execute(
            "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) VALUES
             ('users.ada', 'prefs', '{\"theme\": \"dark\", \"é\": [1.5, null]}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, NULL, NULL),
             ('users.ada', 'old', '{}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, NOW() - '1 second'::interval, 5),
             ('users.ada', 'later', '{}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, NOW() + '300.0 seconds'::interval, 5)",
        )
        .await
        .unwrap();
    crate::store_suite::python_rows_read(&store).await;
    let ns = Namespace::new(["users", "ada"]).unwrap();
    // ours as Python reads them: a put keeps created_at, ttl_minutes whole
    store
        .put_op(PutOp::new(ns.clone(), "ours", json!({"a": [1, 2.5]})).ttl(Ttl::Minutes(90.5)))
        .await
        .unwrap();
    let first = store.get(&ns, "ours").await.unwrap().unwrap();
    store.put(&ns, "ours", json!({"a": 2})).await.unwrap();
    let second = store.get(&ns, "ours").await.unwrap().unwrap();
    assert_eq!(second.created_at, first.created_at, "created_at is the first put's");
    assert!(second.updated_at > first.updated_at);
    let row = client
        .query_one(
            "SELECT value::text, ttl_minutes, expires_at IS NULL FROM store WHERE key = 'ours'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), r#"{"a": 2}"#);
    assert_eq!(row.get::<_, Option<i32>>(1), None, "the second put has no TTL");
    assert!(row.get::<_, bool>(2));
}

async fn no_index_without_pgvector() {
    let (db, url) = fresh().await;
    let client = postgres_support::connect(&db.0).await.unwrap();
    let available: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let index = IndexConfig::new(16, Arc::new(HashedNgramEmbeddings::new(16)));
    let opened = PostgresStore::builder().url(url).index(index).open().await;
    if available {
        // a server with pgvector: the vector tables are made
        opened.expect("pgvector is available");
        println!("note: this server has pgvector; the refusal was not exercised");
        return;
    }
    assert!(
        matches!(opened, Err(Error::Store(StoreError::PgvectorMissing))),
        "{opened:?}"
    );
    let message = opened.unwrap_err().to_string();
    assert!(message.contains("pgvector"), "{message}");
    let made: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_class WHERE relname IN ('store', 'store_migrations', 'store_vectors', 'vector_migrations')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(made, 0, "nothing created before the refusal");
}

/// A batch whose last write fails in the server (a trigger refuses one
/// key) leaves none of its writes, nor the TTL refresh of its reads.
async fn failing_batch() {
    let (db, url) = fresh().await;
    let (clock, read) = manual_clock();
    let store = clocked(&url, TtlConfig::default(), Box::new(read)).await;
    let ns = Namespace::new(["docs"]).unwrap();
    store
        .put_op(PutOp::new(ns.clone(), "kept", json!({"v": 1})).ttl(Ttl::Minutes(10.0)))
        .await
        .unwrap();
    let client = postgres_support::connect(&db.0).await.unwrap();
    client
        .batch_execute(
            "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN IF NEW.key = 'boom' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
             CREATE TRIGGER refuse_boom BEFORE INSERT ON store FOR EACH ROW EXECUTE FUNCTION refuse_boom();",
        )
        .await
        .unwrap();
    crate::store_suite::advance(&clock, 9);
    let out = store
        .batch(vec![
            Op::Get(checkpointer::store::GetOp::new(ns.clone(), "kept")),
            Op::Put(PutOp::delete(ns.clone(), "kept")),
            Op::Put(PutOp::new(ns.clone(), "a", json!({}))),
            Op::Put(PutOp::new(ns.clone(), "boom", json!({}))),
        ])
        .await;
    assert!(matches!(out, Err(Error::Storage { .. })), "{out:?}");
    assert!(
        store.get(&ns, "a").await.unwrap().is_none(),
        "a put of the failed batch"
    );
    crate::store_suite::advance(&clock, 2);
    let quiet = SearchOp::new(ns.clone()).refresh_ttl(false);
    assert!(
        store.search(quiet).await.unwrap().is_empty(),
        "neither the delete nor the get's refresh of the failed batch happened: expired at minute 10"
    );
}

async fn refusals() {
    let db = postgres_support::shared_database().expect("the shared database");
    let store = PostgresStore::open(url_of(&db)).await.unwrap();
    let ns = fresh_namespace(&[]);
    let nul = store
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "a", json!({}))),
            Op::Put(PutOp::new(ns.clone(), "b", json!({"text": "a\u{0}b"}))),
        ])
        .await;
    assert!(matches!(nul, Err(Error::InvalidInput { .. })), "{nul:?}");
    let key = store.put(&ns, "k\u{0}", json!({})).await;
    assert!(matches!(key, Err(Error::InvalidInput { .. })), "{key:?}");
    assert!(store.get(&ns, "k\u{0}").await.unwrap().is_none());
    // beyond the INT column: i32::MAX minutes and one more
    let long = f64::from(i32::MAX) + 1.0;
    let ttl = store
        .put_op(PutOp::new(ns.clone(), "a", json!({})).ttl(Ttl::Minutes(long)))
        .await;
    assert!(
        matches!(ttl, Err(Error::Store(StoreError::InvalidTtl { .. }))),
        "{ttl:?}"
    );
    assert!(
        store.search(SearchOp::new(ns.clone())).await.unwrap().is_empty(),
        "nothing stored"
    );
    store
        .put_op(PutOp::new(ns.clone(), "a", json!({})).ttl(Ttl::Minutes(f64::from(i32::MAX))))
        .await
        .unwrap();
    assert!(store.get(&ns, "a").await.unwrap().is_some());
}

async fn sweep_and_secrets() {
    let db = postgres_support::shared_database().expect("the shared database");
    let store = PostgresStore::open(url_of(&db)).await.unwrap();
    let ns = fresh_namespace(&[]);
    let ops: Vec<Op> = (0..1201)
        .map(|i| Op::Put(PutOp::new(ns.clone(), format!("k{i}"), json!({"i": i})).ttl(Ttl::Minutes(0.0))))
        .collect();
    store.batch(ops).await.unwrap();
    store.put(&ns, "live", json!({})).await.unwrap();
    let swept = store.sweep_ttl().await.unwrap();
    assert!(swept >= 1201, "swept {swept}");
    assert_eq!(
        store.search(SearchOp::new(ns.clone()).limit(2000)).await.unwrap().len(),
        1
    );
    // a password in the URL is in no error and no Debug output
    let builder = PostgresStore::builder().url("postgresql://app:hunter2-secret@127.0.0.1:1/app");
    assert!(!format!("{builder:?}").contains("hunter2"));
    let store = builder
        .call_timeout(Some(std::time::Duration::from_secs(5)))
        .build()
        .unwrap();
    assert!(!format!("{store:?}").contains("hunter2"));
    let err = store.get(&ns, "k").await.unwrap_err();
    assert!(!format!("{err} {err:?}").contains("hunter2"), "{err:?}");
    let bad = PostgresStore::builder()
        .url("postgresql://app:hunter2-secret@db:port/app")
        .build();
    let err = bad.unwrap_err();
    assert!(!format!("{err} {err:?}").contains("hunter2"), "{err:?}");
}

async fn opened_by_url() {
    let (_db, url) = fresh().await;
    // the front door creates the tables of a fresh database
    let store = checkpointer::store::open(&url).await.unwrap();
    let ns = fresh_namespace(&["by_url"]);
    store.put(&ns, "a", json!({"x": 1})).await.unwrap();
    assert_eq!(store.get(&ns, "a").await.unwrap().unwrap().value["x"], 1);
    assert!(store.sweeper().is_none(), "no TTL configuration, no sweeper");
    drop(store);
    // with a sweep interval: expired items leave the table with no call
    let swept = checkpointer::store::StoreOptions::new()
        .ttl(TtlConfig::default())
        .sweep_interval(std::time::Duration::from_millis(50))
        .open(&url)
        .await
        .unwrap();
    let ops: Vec<Op> = (0..30)
        .map(|i| Op::Put(PutOp::new(ns.clone(), format!("t{i}"), json!({"i": i})).ttl(Ttl::Minutes(0.0))))
        .collect();
    swept.batch(ops).await.unwrap();
    let sweeper = swept.sweeper().expect("sweep_interval starts one");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while sweeper.swept() < 30 {
        assert!(
            std::time::Instant::now() < deadline,
            "swept {} of 30 in 30 s",
            sweeper.swept()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(swept.sweep_ttl().await.unwrap(), 0, "nothing left for a manual sweep");
    assert_eq!(swept.get(&ns, "a").await.unwrap().unwrap().value["x"], 1);
    drop(swept);
    sweeper.stopped().await.unwrap();
}

async fn read_only() {
    let (db, url) = fresh().await;
    let client = postgres_support::connect(&db.0).await.unwrap();
    let tables = async || -> i64 {
        client
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    };
    // a database without a store: refused, and nothing created in it
    let empty = checkpointer::store::StoreOptions::new()
        .read_only(true)
        .open(&url)
        .await
        .map(drop)
        .unwrap_err();
    assert!(
        matches!(&empty, Error::Storage { .. }) && empty.to_string().contains("no store table"),
        "{empty:?}"
    );
    assert_eq!(tables().await, 0, "a read-only open creates nothing");
    // a store behind its last migration is refused too
    client
        .batch_execute("CREATE TABLE store (prefix text, key text); CREATE TABLE store_migrations (v INTEGER PRIMARY KEY); INSERT INTO store_migrations VALUES (0), (1)")
        .await
        .unwrap();
    let behind = PostgresStore::builder()
        .url(&url)
        .read_only(true)
        .open()
        .await
        .unwrap_err();
    assert!(behind.to_string().contains("migration 1 of 3"), "{behind:?}");
    client
        .batch_execute("DROP TABLE store; DROP TABLE store_migrations")
        .await
        .unwrap();

    let writer = PostgresStore::open(&url).await.unwrap();
    let ns = fresh_namespace(&["ro"]);
    writer
        .put_op(PutOp::new(ns.clone(), "t", json!({"x": 1})).ttl(Ttl::Minutes(10.0)))
        .await
        .unwrap();
    let expires = async || -> std::time::SystemTime {
        client
            .query_one("SELECT expires_at FROM store WHERE key = 't'", &[])
            .await
            .unwrap()
            .get(0)
    };
    let before = expires().await;
    let before_tables = tables().await;

    let ttl = TtlConfig {
        refresh_on_read: Some(true),
        ..TtlConfig::default()
    };
    let ro = checkpointer::store::StoreOptions::new()
        .read_only(true)
        .ttl(ttl)
        .sweep_interval(std::time::Duration::from_millis(10))
        .open(&url)
        .await
        .unwrap();
    assert!(ro.sweeper().is_none(), "a read-only store starts no sweeper");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(ro.get(&ns, "t").await.unwrap().unwrap().value["x"], 1);
    assert_eq!(
        ro.search(SearchOp::new(ns.clone()).refresh_ttl(true))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(expires().await, before, "reads restart no TTL");
    let put = ro.put(&ns, "u", json!({})).await.unwrap_err();
    assert!(matches!(put, Error::Unsupported { operation: "put", .. }), "{put:?}");
    assert!(matches!(ro.sweep_ttl().await, Err(Error::Unsupported { .. })));
    let direct = PostgresStore::builder().url(&url).read_only(true).open().await.unwrap();
    assert!(matches!(direct.setup().await, Err(Error::Unsupported { .. })));
    assert!(ro.get(&ns, "u").await.unwrap().is_none(), "nothing stored");
    assert_eq!(tables().await, before_tables, "no table created");
    // an index needs store_vectors, which a read-only open does not create
    let index = IndexConfig::new(8, Arc::new(HashedNgramEmbeddings::new(8)));
    let vectors = PostgresStore::builder()
        .url(&url)
        .read_only(true)
        .index(index)
        .open()
        .await
        .unwrap_err();
    assert!(
        matches!(vectors, Error::Store(StoreError::InvalidIndex { .. })),
        "{vectors:?}"
    );
}

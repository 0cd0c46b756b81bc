//! Fencing on `PostgresSaver` (`tests/support/fencing.rs`; the single-store
//! scenarios are conformance checks, `conformance::fencing`) against the real
//! server: two savers with pools of their own are two processes' writers,
//! in both statement modes; a writer's lease survives its connections
//! being terminated.

use std::time::Duration;

use checkpointer::fence::Fence;
use checkpointer::postgres::{PostgresSaver, StatementMode};
use checkpointer::{Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error};

use crate::fencing_support as fencing;
use crate::harness;
use crate::postgres_support::{self, saver_on, shared_database};

fn two(mode: StatementMode) -> Option<(PostgresSaver, PostgresSaver)> {
    let db = shared_database()?;
    Some((saver_on(&db, mode, 4), saver_on(&db, mode, 4)))
}

#[cfg(feature = "conformance")]
async fn fencing_two_writers_one_lineage() {
    for mode in [StatementMode::Prepared, StatementMode::Unnamed] {
        let Some((a, b)) = two(mode) else { return };
        checkpointer::conformance::fencing::two_writers_race(&a, &b, 20)
            .await
            .unwrap();
    }
}

async fn fencing_stale_owner_races_new_owner() {
    for mode in [StatementMode::Prepared, StatementMode::Unnamed] {
        let Some((a, b)) = two(mode) else { return };
        fencing::stale_owner_races_new_owner(&a, &b, 20).await;
    }
}

async fn fencing_lease_expires_and_is_taken_over() {
    let Some((a, b)) = two(StatementMode::Prepared) else {
        return;
    };
    fencing::lease_expires_and_is_taken_over(&a, &b, Duration::from_millis(400), Duration::from_millis(150)).await;
}

async fn fencing_ownership_is_the_stores() {
    let Some((a, reopened)) = two(StatementMode::Prepared) else {
        return;
    };
    fencing::ownership_is_the_stores(&a, &reopened).await;
}

crate::maintained!(PostgresSaver);

async fn fencing_maintenance_is_fenced() {
    for mode in [StatementMode::Prepared, StatementMode::Unnamed] {
        let Some((a, b)) = two(mode) else { return };
        fencing::maintenance_is_fenced(&a, &b).await;
    }
}

async fn fencing_purge_leases_of_deleted_threads() {
    for mode in [StatementMode::Prepared, StatementMode::Unnamed] {
        let Some((a, _)) = two(mode) else { return };
        fencing::purge_leases_of_deleted_threads(&a).await;
    }
}

/// The writer's connections are terminated by the server between two of
/// its writes: the lease is the server's, so once the pool reconnects the
/// writer goes on with the same epoch, and another writer is still
/// refused.
async fn fencing_lease_survives_terminated_connections() {
    let Some(db) = shared_database() else { return };
    let url = postgres_support::url_of(&db);
    let store = PostgresSaver::builder()
        .url(format!("{url}?application_name=fenced_victim"))
        .max_connections(2)
        .build()
        .unwrap();
    let a = store.fenced(Fence::new("victim", Duration::from_secs(30))).unwrap();
    let thread = format!("fence-reconnect-{}", rand::random::<u64>());
    let lease = a.acquire(&thread).await.unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let put = |parent: CheckpointConfig| {
        let a = &a;
        let meta = &meta;
        async move { a.put(&parent, &Checkpoint::new(0), meta, &Default::default()).await }
    };
    let first = put(CheckpointConfig::new(&thread)).await.unwrap();
    let killer = postgres_support::connect(&db).await.unwrap();
    let killed: i64 = killer
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'fenced_victim'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(killed > 0, "the writer's connections were terminated");
    // the first call may find a dead pooled connection: not applied, or
    // unknown; the saver reconnects for the next
    let mut second = None;
    for _ in 0..3 {
        match put(first.clone()).await {
            Ok(config) => {
                second = Some(config);
                break;
            }
            Err(Error::Fenced { .. }) => panic!("the lease was lost with the connection"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let second = second.expect("the writer writes again after reconnecting");
    assert_eq!(a.renew(&thread).await.unwrap().epoch, lease.epoch);
    let other = saver_on(&db, StatementMode::Prepared, 1)
        .fenced(Fence::new("other", Duration::from_secs(30)))
        .unwrap();
    assert!(matches!(other.acquire(&thread).await, Err(Error::Fenced { .. })));
    assert_eq!(
        store.get_tuple(&second).await.unwrap().unwrap().parent_config,
        Some(first)
    );
}

/// Python's tables keep their shape: the lease is a table of its own.
#[cfg(feature = "conformance")]
async fn fencing_leaves_pythons_tables_alone() {
    let Some(db) = postgres_support::fresh_database().await else {
        return;
    };
    let store = saver_on(&db.0, StatementMode::Prepared, 2);
    store.setup().await.unwrap();
    let before = postgres_support::schema_of(&db.0).await;
    checkpointer::conformance::fencing::fencing_owner_writes_freely(&store)
        .await
        .unwrap();
    let after = postgres_support::schema_of(&db.0).await;
    let added: Vec<&String> = after.iter().filter(|c| !before.contains(c)).collect();
    assert!(
        !added.is_empty() && added.iter().all(|c| c.contains("checkpointer_leases")),
        "{added:?}"
    );
    assert!(before.iter().all(|c| after.contains(c)), "a table Python reads changed");
    drop(store);
}

pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        #[cfg(feature = "conformance")]
        harness::tokio(
            "fencing::fencing_two_writers_one_lineage",
            &[&crate::POSTGRES],
            2,
            fencing_two_writers_one_lineage,
        ),
        harness::tokio(
            "fencing::fencing_stale_owner_races_new_owner",
            &[&crate::POSTGRES],
            2,
            fencing_stale_owner_races_new_owner,
        ),
        harness::tokio(
            "fencing::fencing_lease_expires_and_is_taken_over",
            &[&crate::POSTGRES],
            2,
            fencing_lease_expires_and_is_taken_over,
        ),
        harness::tokio(
            "fencing::fencing_ownership_is_the_stores",
            &[&crate::POSTGRES],
            2,
            fencing_ownership_is_the_stores,
        ),
        harness::tokio(
            "fencing::fencing_maintenance_is_fenced",
            &[&crate::POSTGRES],
            2,
            fencing_maintenance_is_fenced,
        ),
        harness::tokio(
            "fencing::fencing_purge_leases_of_deleted_threads",
            &[&crate::POSTGRES],
            2,
            fencing_purge_leases_of_deleted_threads,
        ),
        harness::tokio(
            "fencing::fencing_lease_survives_terminated_connections",
            &[&crate::POSTGRES],
            2,
            fencing_lease_survives_terminated_connections,
        ),
        #[cfg(feature = "conformance")]
        harness::tokio(
            "fencing::fencing_leaves_pythons_tables_alone",
            &[&crate::POSTGRES],
            2,
            fencing_leaves_pythons_tables_alone,
        ),
    ]
}

//! The Store conformance suite: one async check per rule of the
//! [`Store`] contract, named `<op>_<property>`, listed once
//! in [`checks`]. Checks isolate themselves under a fresh random first
//! label, so they may share one database. Vector checks run when the store
//! has an index (and are skipped, reported so, otherwise); they compute the
//! expected scores with the store's own embedding function.
//!
//! ```
//! use std::sync::Arc;
//! use checkpointer::store::{InMemoryStore, Store};
//!
//! checkpointer::store_conformance_tests!(|| async { Arc::new(InMemoryStore::new()) as Arc<dyn Store> });
//! # fn main() {}
//! ```

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::Store;
pub use crate::conformance::{CheckFailure, CheckResult, Outcome, Skip};

/// Returns a [`CheckFailure`] from the enclosing check unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            return Err($crate::conformance::CheckFailure::new(format!(
                "{} [{}:{}]", format_args!($($fmt)+), file!(), line!()
            )));
        }
    };
}

/// Returns a [`CheckFailure`] unless `got == expected`.
macro_rules! ensure_eq {
    ($got:expr, $expected:expr, $($fmt:tt)+) => {
        match (&$got, &$expected) {
            (got, expected) => {
                if got != expected {
                    return Err($crate::conformance::CheckFailure::new(format!(
                        "{}: got {:?}, expected {:?} [{}:{}]",
                        format_args!($($fmt)+), got, expected, file!(), line!()
                    )));
                }
            }
        }
    };
}

mod checks;
pub mod model;
mod vector;

/// The function of a check.
pub type StoreCheckFn = for<'a> fn(&'a dyn Store) -> BoxFuture<'a, CheckResult>;

/// One named check.
#[derive(Clone, Copy)]
pub struct StoreCheck {
    name: &'static str,
    needs_index: bool,
    func: StoreCheckFn,
}

impl std::fmt::Debug for StoreCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreCheck")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StoreCheck {
    /// The check's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Runs the check: skipped when it needs an index the store lacks; a
    /// panic is a failure.
    pub async fn run(&self, store: &dyn Store) -> Outcome {
        if self.needs_index && store.index_config().is_none() {
            return Outcome::Skipped("the store has no index (vector search)".to_owned());
        }
        match std::panic::AssertUnwindSafe((self.func)(store)).catch_unwind().await {
            Ok(Ok(())) => Outcome::Passed,
            Ok(Err(failure)) => Outcome::Failed(failure),
            Err(_) => Outcome::Failed(CheckFailure::new("panicked")),
        }
    }
}

/// Expands into one `#[test]` per store check, each running it against a
/// store made by `factory` (a closure returning a future of
/// `Arc<dyn Store>`, or of `Result<Arc<dyn Store>, Skip>`).
#[macro_export]
macro_rules! store_conformance_tests {
    ($factory:expr $(,)?) => {
        $crate::__store_checks!(@tests ($factory));
    };
}

/// The single list of store checks.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_checks {
    ($($mode:tt)*) => {
        $crate::__store_emit! {
            [$($mode)*]
            checks::put_get_round_trip: false,
            checks::get_missing_is_none: false,
            checks::put_overwrites: false,
            checks::delete_removes: false,
            checks::delete_missing_is_noop: false,
            checks::put_empty_namespace_refused: false,
            checks::put_reserved_root_refused: false,
            checks::put_non_object_value_refused: false,
            checks::put_invalid_ttl_refused: false,
            checks::batch_results_in_op_order: false,
            checks::batch_reads_see_state_before_puts: false,
            checks::batch_last_put_wins: false,
            checks::batch_refused_stores_nothing: false,
            checks::search_prefix_matches_whole_labels: false,
            checks::search_filter_implicit_eq: false,
            checks::search_filter_string_and_null_eq: false,
            checks::search_filter_eq: false,
            checks::search_filter_ne: false,
            checks::search_filter_gt: false,
            checks::search_filter_gte: false,
            checks::search_filter_lt: false,
            checks::search_filter_lte: false,
            checks::search_filter_nested_object: false,
            checks::search_filter_unknown_operator_refused: false,
            checks::search_pages_partition_results: false,
            checks::list_namespaces_prefix: false,
            checks::list_namespaces_suffix_and_wildcard: false,
            checks::list_namespaces_max_depth: false,
            checks::list_namespaces_sorted_and_paged: false,
            checks::list_namespaces_max_depth_zero_refused: false,
            checks::ttl_expired_never_read: false,
            checks::ttl_long_is_kept: false,
            checks::ttl_sweep_removes_expired: false,
            vector::vector_search_orders_by_score: true,
            vector::vector_search_score_is_cosine: true,
            vector::vector_search_item_ranks_by_best_vector: true,
            vector::vector_search_with_filter: true,
            vector::vector_search_index_off_keeps_no_vectors: true,
        }
    };
}

/// Expands the store check list as tests or as the registry.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_emit {
    ([@tests ($factory:expr)] $($module:ident :: $name:ident : $index:expr),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::store::conformance::run_test(::std::stringify!($name), $factory);
            }
        )*
    };
    ([@registry] $($module:ident :: $name:ident : $index:expr),* $(,)?) => {
        static CHECKS: &[$crate::store::conformance::StoreCheck] = &[
            $(
                $crate::store::conformance::StoreCheck::__new(
                    ::std::stringify!($name),
                    $index,
                    |store| ::std::boxed::Box::pin($crate::store::conformance::$module::$name(store)),
                ),
            )*
        ];
    };
}

impl StoreCheck {
    #[doc(hidden)]
    pub const fn __new(name: &'static str, needs_index: bool, func: StoreCheckFn) -> StoreCheck {
        StoreCheck {
            name,
            needs_index,
            func,
        }
    }
}

crate::__store_checks!(@registry);

/// Every store check, in a fixed order.
pub fn checks() -> &'static [StoreCheck] {
    CHECKS
}

/// Runs every check against `store`: `(name, outcome)` in [`checks`] order.
pub async fn run_all(store: &dyn Store) -> Vec<(&'static str, Outcome)> {
    let mut out = Vec::with_capacity(CHECKS.len());
    for check in CHECKS {
        out.push((check.name, check.run(store).await));
    }
    out
}

/// What a [`store_conformance_tests!`](crate::store_conformance_tests) factory returns.
pub trait StoreOrSkip {
    /// The store, or why there is none.
    ///
    /// # Errors
    /// The factory's [`Skip`].
    fn store_or_skip(self) -> Result<Arc<dyn Store>, Skip>;
}

impl StoreOrSkip for Arc<dyn Store> {
    fn store_or_skip(self) -> Result<Arc<dyn Store>, Skip> {
        Ok(self)
    }
}

impl StoreOrSkip for Result<Arc<dyn Store>, Skip> {
    fn store_or_skip(self) -> Result<Arc<dyn Store>, Skip> {
        self
    }
}

/// Runs the check `name` against a store made by `factory` on a fresh
/// runtime; the body of each generated test.
///
/// # Panics
/// When the check fails or no check is named `name`: a test harness.
pub fn run_test<F, Fut>(name: &str, factory: F)
where
    F: FnOnce() -> Fut,
    Fut: Future,
    Fut::Output: StoreOrSkip,
{
    let Some(check) = CHECKS.iter().find(|c| c.name == name) else {
        panic!("no store check is named `{name}`");
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|err| panic!("cannot build a tokio runtime: {err}"));
    let outcome = runtime.block_on(async {
        match factory().await.store_or_skip() {
            Ok(store) => check.run(&*store).await,
            Err(Skip(reason)) => Outcome::Skipped(reason),
        }
    });
    match outcome {
        Outcome::Passed => {}
        Outcome::Skipped(reason) => println!("skipped: {reason}"),
        Outcome::Failed(failure) => panic!("store check `{name}` failed: {failure}"),
    }
}

/// A fresh namespace root for one check: `["t<random hex>", labels...]`.
pub fn fresh_namespace(labels: &[&str]) -> super::Namespace {
    let root = format!("t{:032x}", rand::random::<u128>());
    let all = std::iter::once(root.as_str()).chain(labels.iter().copied());
    super::Namespace::new(all).unwrap_or_default()
}

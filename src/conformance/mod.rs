//! The conformance suite: one async check per rule every [`CheckpointSaver`]
//! must follow: LangGraph's conformance suite, the trait's `# Contract` and
//! this crate's own rules (see `docs/design.md`, *Conformance suite*).
//!
//! Every check is an `async fn(&dyn CheckpointSaver) -> CheckResult` named
//! `<op>_<property>`, listed once in [`checks`]. Checks isolate themselves with
//! fresh random thread ids, so they can share one database and never assume an
//! empty store. A check of an extended operation is skipped, and reported as
//! such, when the saver's [`CheckpointSaver::capabilities`] does not declare it.
//!
//! Three ways to run the suite:
//!
//! - [`conformance_tests!`](crate::conformance_tests) expands into one
//!   `#[test]` per check for a saver factory (the usual way for a backend);
//! - [`run_all`] runs every check against one saver and returns a [`Report`];
//! - [`checks`] and [`check`] give single checks to run with [`Check::run`].
//!
//! ```
//! use std::sync::Arc;
//! use checkpointer::{CheckpointSaver, InMemorySaver};
//!
//! checkpointer::conformance_tests!(|| async {
//!     Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>
//! });
//! # fn main() {}
//! ```

use crate::checkpoint::{ChannelVersions, CheckpointMetadata, CheckpointTuple, PendingWrite};
use crate::config::CheckpointConfig;
use crate::saver::{CheckpointSaver, CheckpointSaverExt, ListOptions};
use crate::serde::Value;
use crate::version::ChannelVersion;

/// Returns a [`CheckFailure`] from the enclosing check unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::conformance::CheckFailure::new(format!(
                "{} [{}:{}]",
                format_args!($($fmt)+),
                file!(),
                line!()
            )));
        }
    };
}

/// Returns a [`CheckFailure`] from the enclosing check unless `got == expected`.
macro_rules! ensure_eq {
    ($got:expr, $expected:expr, $($fmt:tt)+) => {
        // A match keeps temporaries of both expressions alive, as assert_eq! does.
        match (&$got, &$expected) {
            (got, expected) => {
                if got != expected {
                    return Err($crate::conformance::CheckFailure::new(format!(
                        "{}: got {:?}, expected {:?} [{}:{}]",
                        format_args!($($fmt)+),
                        got,
                        expected,
                        file!(),
                        line!()
                    )));
                }
            }
        }
    };
}

mod builders;
pub mod contract;
pub mod copy_thread;
pub mod delete_for_runs;
pub mod delete_thread;
pub mod delta_channel_history;
pub mod encoded;
pub mod fencing;
pub mod get_tuple;
pub mod identifiers;
pub mod large_threads;
pub mod limits;
pub mod list;
pub mod list_threads;
mod macros;
pub mod model;
pub mod options;
pub mod prune;
pub mod put;
pub mod put_writes;
pub mod retain;
pub mod stored_values;
mod suite;
#[cfg(test)]
mod tests;
pub mod thread_keys;

pub(crate) use builders::{
    channel_versions, checkpoint_with, get, has_value, id_of, ids, list, list_ids, marked_metadata, marker_filter,
    metadata_eq, pending_after, put_all, put_chain, put_empty, put_new, put_writes, pw, stored_config, str_version,
};
pub use builders::{generate_checkpoint, generate_config, generate_metadata, new_thread_id, MARKER_KEY};
pub use suite::{
    check, checks, run_all, run_test, Capability, Check, CheckFailure, CheckFn, CheckReport, CheckResult, Outcome,
    Report, SaverOrSkip, Skip,
};

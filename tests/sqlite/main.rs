//! `SqliteSaver`: what it stores and reads (Python's fixtures included), the
//! conformance suite and the model-based property test, the task ids of
//! Python's pending writes, bad input, many
//! writers at once and crash safety under SIGKILL. One test binary, one module
//! per former test file; `concurrency` and `crash` re-run one of their own
//! tests of this binary in child processes (`sqlite_support::test_name`).

#[path = "../support/catalogue.rs"]
mod catalogue_support;

#[path = "../support/sqlite.rs"]
mod sqlite_support;

#[path = "../support/fencing.rs"]
mod fencing_support;

#[path = "../support/retention.rs"]
mod retention_support;
#[path = "../support/step_crash.rs"]
mod step_crash_support;

mod bad_input;
mod concurrency;
#[cfg(feature = "conformance")]
mod conformance;
mod crash;
mod fencing;
#[cfg(feature = "render")]
mod fixtures;
#[cfg(feature = "conformance")]
mod model;
mod permanent;
mod read_only;
#[cfg(feature = "render")]
mod render_fixtures;
mod retain_crash;
mod step_crash;
mod storage;
#[cfg(all(feature = "store", feature = "conformance"))]
mod store;
#[cfg(all(feature = "store", feature = "conformance"))]
#[path = "../support/store_sequence.rs"]
mod store_sequence;
#[cfg(all(feature = "store", feature = "conformance"))]
#[path = "../support/store_suite.rs"]
mod store_suite;
mod task_ids;
mod verify;

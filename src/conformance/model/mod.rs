//! Model-based testing: random sequences of every saver operation, run
//! against a saver under test and against [`ContractModel`] (the oracle: the
//! trait's `# Contract` written plainly, a few ordered maps), comparing every
//! result. A difference fails the run, and proptest shrinks the sequence to a
//! minimal one. Every backend is checked this way, `InMemorySaver` included.
//!
//! The operations draw from small pools (3 threads, 3 namespaces, 8
//! checkpoint ids, 4 channels, integer and string versions, 3 run ids) so
//! that sequences collide: re-puts of an id, writes before their
//! checkpoint, forks from old parents, copies onto used threads, prunes of
//! delta-channel histories, filters that match and miss.
//!
//! ```
//! use std::sync::Arc;
//! use checkpointer::conformance::model::{check_against_oracle, ModelConfig};
//! use checkpointer::{CheckpointSaver, InMemorySaver};
//!
//! let stats = check_against_oracle(
//!     || async { Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver> },
//!     ModelConfig::default().cases(4).max_ops(10),
//! )
//! .unwrap_or_else(|failure| panic!("{failure}"));
//! assert_eq!(stats.cases, 4);
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;

use parking_lot::Mutex;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

use super::suite::runtime;
use super::{SaverOrSkip, Skip};
use crate::setters::setters;

mod ops;
mod oracle;
mod replay;

pub use ops::{model_checkpoint_id, ops_strategy, value_for, ModelOp, PutChannel, WriteTarget};
pub use oracle::ContractModel;
pub use replay::{replay, ReplaySettings};

/// How many cases, how long, and whether the saver under test is fresh for
/// each case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// Random sequences to run (default: env `PROPTEST_CASES`, else 64).
    pub cases: u32,
    /// Longest sequence (default: env `MODEL_MAX_OPS`, else 40).
    pub max_ops: usize,
    /// Whether the factory returns an empty saver for each case (default).
    /// When false (a shared database), thread and run ids get a per-case
    /// prefix and whole-store results (`list` without a thread,
    /// `list_threads`) are restricted to the case's threads; `list` without
    /// a thread then applies its `limit` after that restriction.
    pub exclusive: bool,
    /// Whether metadata keeps its key order (default). False for stores that
    /// normalize it (Postgres JSONB): metadata is then compared with keys
    /// sorted, at every level.
    pub ordered_metadata: bool,
    /// A fixed seed for the random sequences (default: env
    /// `PROPTEST_RNG_SEED`, else a fresh one per run).
    pub seed: Option<u64>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
            std::env::var(name).ok().and_then(|v| v.parse().ok())
        }
        ModelConfig {
            cases: env("PROPTEST_CASES").unwrap_or(64),
            max_ops: env("MODEL_MAX_OPS").map_or(40, |n: u32| n as usize),
            exclusive: true,
            ordered_metadata: true,
            seed: env("PROPTEST_RNG_SEED"),
        }
    }
}

impl ModelConfig {
    setters! {
        /// Sets the number of cases.
        pub fn cases(cases: u32) => cases = cases;

        /// Sets the longest sequence.
        pub fn max_ops(max_ops: usize) => max_ops = max_ops;
    }

    /// The store does not keep metadata key order (see
    /// [`ModelConfig::ordered_metadata`]).
    pub fn unordered_metadata(mut self) -> Self {
        self.ordered_metadata = false;
        self
    }

    setters! {
        /// Fixes the seed, so the run is repeatable.
        pub fn seed(seed: u64) => seed = Some(seed);
    }

    /// The factory's savers share one store (see [`ModelConfig::exclusive`]).
    pub fn shared_store(mut self) -> Self {
        self.exclusive = false;
        self
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelStats {
    /// Sequences run (shrinking runs excluded).
    pub cases: u32,
    /// Operations run on both savers, by name (shrinking runs included).
    pub ops: BTreeMap<&'static str, u64>,
    /// Generated operations left out (a `put_writes` whose checkpoint does
    /// not exist, see [`ModelOp::PutWrites`]), by name.
    pub skipped_ops: BTreeMap<&'static str, u64>,
    /// Why nothing ran, when the factory returned a [`Skip`].
    pub skipped: Option<String>,
}

impl ModelStats {
    /// Operations run, all kinds.
    pub fn total_ops(&self) -> u64 {
        self.ops.values().sum()
    }
}

/// Operations a [`replay`] ran and left out, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Run on both savers.
    pub ran: BTreeMap<&'static str, u64>,
    /// Left out (see [`ModelStats::skipped_ops`]).
    pub skipped: BTreeMap<&'static str, u64>,
}

/// A sequence on which the saver under test and the oracle disagree, shrunk
/// by proptest.
#[derive(Debug, Clone)]
pub struct ModelFailure {
    /// The minimal sequence.
    pub ops: Vec<ModelOp>,
    /// What differed (or what went wrong).
    pub reason: String,
}

impl fmt::Display for ModelFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "the saver differs from the ContractModel oracle: {}", self.reason)?;
        writeln!(f, "minimal sequence ({} operations):", self.ops.len())?;
        for (i, op) in self.ops.iter().enumerate() {
            writeln!(f, "  {i:>2}: {op:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ModelFailure {}

/// Runs `config.cases` random sequences against a saver made by `factory`
/// (called once per sequence, shrinking runs included) and against a fresh
/// [`ContractModel`], comparing every result. The factory may return
/// `Arc<dyn CheckpointSaver>` or `Result<_, Skip>` like the conformance
/// suite's.
///
/// # Errors
/// The minimal sequence on which the two differ, with the difference.
///
/// # Panics
/// When no tokio runtime can be built (this is a test harness).
pub fn check_against_oracle<F, Fut>(factory: F, config: ModelConfig) -> Result<ModelStats, ModelFailure>
where
    F: Fn() -> Fut,
    Fut: Future,
    Fut::Output: SaverOrSkip,
{
    let rt = runtime();
    let stats = Mutex::new(ModelStats::default());
    let skip: Mutex<Option<Skip>> = Mutex::new(None);
    let mut runner = TestRunner::new(Config {
        cases: config.cases,
        failure_persistence: None,
        rng_seed: config.seed.map_or(RngSeed::Random, RngSeed::Fixed),
        ..Config::default()
    });
    // One case: a fresh saver from the factory, a fresh oracle.
    let run_case = |ops: &[ModelOp], verbose: bool| -> Result<(), String> {
        if skip.lock().is_some() {
            return Ok(());
        }
        let settings = ReplaySettings {
            prefix: if config.exclusive {
                String::new()
            } else {
                format!("m{:016x}-", rand::random::<u64>())
            },
            exclusive: config.exclusive,
            verbose,
            ordered_metadata: config.ordered_metadata,
        };
        let mut counts = OpCounts::default();
        let out = rt.block_on(async {
            let saver = match factory().await.saver_or_skip() {
                Ok(saver) => saver,
                Err(reason) => {
                    *skip.lock() = Some(reason);
                    return Ok(());
                }
            };
            let oracle = ContractModel::new();
            replay(&*saver, &oracle, ops, &settings, &mut counts).await
        });
        let mut stats = stats.lock();
        for (name, n) in counts.ran {
            *stats.ops.entry(name).or_default() += n;
        }
        for (name, n) in counts.skipped {
            *stats.skipped_ops.entry(name).or_default() += n;
        }
        out
    };
    let result = runner.run(&ops_strategy(config.max_ops), |ops| {
        run_case(&ops, false).map_err(TestCaseError::fail)
    });
    if let Some(Skip(reason)) = skip.lock().take() {
        let mut stats = stats.into_inner();
        stats.skipped = Some(reason);
        return Ok(stats);
    }
    match result {
        Ok(()) => {
            let mut stats = stats.into_inner();
            stats.cases = config.cases;
            Ok(stats)
        }
        Err(TestError::Fail(reason, ops)) => {
            // Describe the minimal case in full (if it fails again).
            let reason = run_case(&ops, true)
                .err()
                .unwrap_or_else(|| format!("{} (did not fail again when replayed)", reason.message()));
            Err(ModelFailure { ops, reason })
        }
        Err(TestError::Abort(reason)) => Err(ModelFailure {
            ops: Vec::new(),
            reason: format!("aborted: {}", reason.message()),
        }),
    }
}

//! The workload generator of `benches/workload/` reproduces the op stream
//! and read plan of `../shared/peer/WORKLOAD.md` exactly: the published
//! digests, and byte for byte `testdata/peer/workload-sample.jsonl` and
//! `testdata/peer/workload-sample.reads.json` (T=2, S=6, seed 42, R=8, G=2).

#[path = "../../benches/workload/generator.rs"]
mod generator;

use crate::harness;
use std::path::PathBuf;

/// `testdata/peer/`: the workload sample Python's `bench_python.py` wrote.
fn peer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/peer")
}

fn digest_matches_workload_md() {
    assert_eq!(
        generator::digest(42, 100, 100),
        "eea02be7a85ef389022e843beca9f5bb486e731fbd2ff968007be80e9863deac"
    );
    assert_eq!(
        generator::digest(42, 2, 6),
        "ce42c75374f60e7fcfba32b0c3cfb5c680ffeab89b3a33df43fbc203c7cea1b3"
    );
}

fn ids_and_timestamps_match_the_examples() {
    assert_eq!(
        generator::checkpoint_id(0, 0, 100),
        "1f000000-0000-6000-8000-000000000000"
    );
    assert_eq!(
        generator::checkpoint_id(0, 1, 100),
        "1f000000-0000-6001-8001-000000000000"
    );
    assert_eq!(generator::checkpoint_ts(0, 1, 100), "2025-01-01T00:00:00.001000+00:00");
    // day and month roll-over: g = 86_400_000 ms is 2025-01-02
    assert_eq!(
        generator::checkpoint_ts(864, 0, 100_000),
        "2025-01-02T00:00:00.000000+00:00"
    );
    assert_eq!(
        generator::checkpoint_ts(0, 31 * 86_400_000 + 3_723_456, usize::MAX / 2),
        "2025-02-01T01:02:03.456000+00:00"
    );
}

fn dump_equals_workload_sample() {
    let dir = peer_dir();
    let expected = std::fs::read_to_string(dir.join("workload-sample.jsonl")).unwrap();
    let ours = generator::dump(42, 2, 6);
    for (i, (a, b)) in ours.lines().zip(expected.lines()).enumerate() {
        assert_eq!(a, b, "line {}", i + 1);
    }
    assert_eq!(ours, expected);

    let reads = std::fs::read_to_string(dir.join("workload-sample.reads.json")).unwrap();
    assert_eq!(generator::read_plan(42, 2, 6, 8, 2).to_python_json(), reads);
}

/// The tests of this module, for the harness of `main.rs`.
pub(crate) fn tests() -> Vec<harness::Trial> {
    vec![
        harness::test(
            "workload_sample::digest_matches_workload_md",
            &[],
            digest_matches_workload_md,
        ),
        harness::test(
            "workload_sample::ids_and_timestamps_match_the_examples",
            &[],
            ids_and_timestamps_match_the_examples,
        ),
        harness::test(
            "workload_sample::dump_equals_workload_sample",
            &[],
            dump_equals_workload_sample,
        ),
    ]
}

//! The suite's own tests: every test of LangGraph's conformance suite and
//! every name in the trait's `# Contract` is a check, and check names are
//! unique.

use super::*;

/// Every test of LangGraph's conformance suite, under our `<op>_` names
/// (see `docs/design.md`, *Conformance suite*).
const LANGGRAPH_SUITE: &[(&str, usize, &[&str])] = &[
    (
        "put_",
        17,
        &[
            "returns_config",
            "roundtrip",
            "preserves_channel_values",
            "preserves_channel_versions",
            "preserves_versions_seen",
            "preserves_metadata",
            "root_namespace",
            "child_namespace",
            "default_namespace",
            "multiple_checkpoints_same_thread",
            "multiple_threads_isolated",
            "parent_config",
            "incremental_channel_update",
            "new_channel_added",
            "channel_removed",
            "preserves_run_id",
            "preserves_versions_seen_values",
        ],
    ),
    (
        "put_writes_",
        10,
        &[
            "basic",
            "multiple_writes_same_task",
            "multiple_tasks",
            "preserves_task_id",
            "preserves_channel_and_value",
            "task_path",
            "idempotent",
            "special_channels",
            "across_namespaces",
            "cleared_on_next_checkpoint",
        ],
    ),
    (
        "get_tuple_",
        10,
        &[
            "nonexistent_returns_none",
            "latest_when_no_checkpoint_id",
            "specific_checkpoint_id",
            "config_structure",
            "checkpoint_fields",
            "metadata",
            "parent_config",
            "pending_writes",
            "respects_namespace",
            "nonexistent_checkpoint_id",
        ],
    ),
    (
        "list_",
        16,
        &[
            "all",
            "by_thread",
            "by_namespace",
            "ordering",
            "metadata_filter_single_key",
            "metadata_filter_step",
            "metadata_filter_multiple_keys",
            "metadata_filter_no_match",
            "metadata_custom_keys",
            "before",
            "limit",
            "limit_plus_before",
            "combined_thread_and_filter",
            "empty_result",
            "includes_pending_writes",
            "multiple_namespaces",
        ],
    ),
    (
        "delete_thread_",
        5,
        &[
            "removes_checkpoints",
            "removes_writes",
            "removes_all_namespaces",
            "preserves_other_threads",
            "nonexistent_noop",
        ],
    ),
    (
        "delete_for_runs_",
        7,
        &[
            "single",
            "multiple",
            "preserves_other_runs",
            "removes_writes",
            "empty_list_noop",
            "nonexistent_noop",
            "across_namespaces",
        ],
    ),
    (
        "copy_thread_",
        8,
        &[
            "basic",
            "all_checkpoints",
            "preserves_metadata",
            "preserves_namespaces",
            "preserves_writes",
            "preserves_ordering",
            "source_unchanged",
            "nonexistent_source",
        ],
    ),
    (
        "prune_",
        8,
        &[
            "keep_latest_single_thread",
            "keep_latest_multiple_threads",
            "keep_latest_across_namespaces",
            "keep_latest_preserves_writes",
            "delete_all",
            "preserves_other_threads",
            "empty_list_noop",
            "nonexistent_noop",
        ],
    ),
    (
        "delta_channel_history_",
        8,
        &[
            "returns_writes_oldest_first",
            "seed_is_nearest_snapshot",
            "excludes_target_pending_writes",
            "multi_channel",
            "empty_channels_returns_empty",
            "walk_to_root_no_seed",
            "migration_plain_value_as_seed",
            "seed_ancestor_own_writes_are_replayed",
        ],
    ),
];

#[test]
fn every_langgraph_test_is_a_check() {
    for (prefix, count, names) in LANGGRAPH_SUITE {
        assert_eq!(names.len(), *count, "{prefix}");
        for name in *names {
            let full = format!("{prefix}{name}");
            assert!(check(&full).is_some(), "LangGraph's test {full} has no check");
        }
    }
}

#[test]
fn every_contract_name_is_a_check() {
    let source = include_str!("../saver/mod.rs");
    let start = source.find("/// # Contract").expect("contract section");
    let end = start + source[start..].find("#[async_trait]").expect("end of the trait docs");
    // Groups "(check `a`)" / "(checks `a`, `b`)", possibly across lines.
    let mut names = Vec::new();
    let mut rest = &source[start..end];
    while let Some(open) = rest.find("(check") {
        let close = open + rest[open..].find(')').expect("closing )");
        let group = &rest[open..close];
        if group.starts_with("(check ") || group.starts_with("(checks ") {
            names.extend(group.split('`').skip(1).step_by(2).map(str::to_owned));
        }
        rest = &rest[close..];
    }
    assert!(names.len() >= 26, "parsed {names:?}");
    for name in &names {
        assert!(check(name).is_some(), "contract name {name} has no check");
    }
}

#[test]
fn names_are_unique_and_prefixed_by_their_operation() {
    let mut seen = std::collections::HashSet::new();
    for c in checks() {
        assert!(seen.insert(c.name()), "duplicate check {}", c.name());
        let op = c.capability().name();
        let prefixed = c.name().starts_with(op)
            || (c.capability() == Capability::PutWrites && c.name().starts_with("pending_writes"))
            || c.capability() == Capability::Capabilities;
        assert!(prefixed, "{} is not named after {op}", c.name());
    }
}

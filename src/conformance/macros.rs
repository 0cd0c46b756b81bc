//! The one list of checks, expanded by [`conformance_tests!`](crate::conformance_tests)
//! into a test per check and by the suite into its registry.

/// Expands into one `#[test] fn <check_name>()` per conformance check, each
/// running that check against a saver made by `factory`.
///
/// `factory` is an expression evaluated once per test: a closure (or
/// function) taking no argument and returning a future of
/// `Arc<dyn CheckpointSaver>`, or of `Result<Arc<dyn CheckpointSaver>, Skip>`
/// for backends that need a server (see [`Skip`](crate::conformance::Skip)).
/// Each test builds its own multi-thread tokio runtime, so the calling crate
/// needs no tokio macros. Checks of extended
/// operations the saver does not declare pass and print `skipped: <reason>`.
///
/// Savers of a shared database may be returned by every call: checks isolate
/// themselves with fresh thread ids.
///
/// ```
/// use std::sync::Arc;
/// use checkpointer::{CheckpointSaver, InMemorySaver};
///
/// mod in_memory {
///     use super::*;
///     checkpointer::conformance_tests!(|| async {
///         Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>
///     });
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr $(,)?) => {
        $crate::__conformance_each_check!(@tests ($factory));
    };
}

/// The single list of checks, fed to `__conformance_emit` in one of its modes.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_each_check {
    ($($mode:tt)*) => {
        $crate::__conformance_emit! {
            [$($mode)*]
            put::put_returns_config: Put,
            put::put_roundtrip: Put,
            put::put_preserves_channel_values: Put,
            put::put_preserves_channel_versions: Put,
            put::put_preserves_versions_seen: Put,
            put::put_preserves_metadata: Put,
            put::put_root_namespace: Put,
            put::put_child_namespace: Put,
            put::put_default_namespace: Put,
            put::put_multiple_checkpoints_same_thread: Put,
            put::put_multiple_threads_isolated: Put,
            put::put_parent_config: Put,
            put::put_incremental_channel_update: Put,
            put::put_new_channel_added: Put,
            put::put_channel_removed: Put,
            put::put_preserves_run_id: Put,
            put::put_preserves_versions_seen_values: Put,
            put_writes::put_writes_basic: PutWrites,
            put_writes::put_writes_multiple_writes_same_task: PutWrites,
            put_writes::put_writes_multiple_tasks: PutWrites,
            put_writes::put_writes_preserves_task_id: PutWrites,
            put_writes::put_writes_preserves_channel_and_value: PutWrites,
            put_writes::put_writes_task_path: PutWrites,
            put_writes::put_writes_idempotent: PutWrites,
            put_writes::put_writes_special_channels: PutWrites,
            put_writes::put_writes_across_namespaces: PutWrites,
            put_writes::put_writes_cleared_on_next_checkpoint: PutWrites,
            get_tuple::get_tuple_nonexistent_returns_none: GetTuple,
            get_tuple::get_tuple_latest_when_no_checkpoint_id: GetTuple,
            get_tuple::get_tuple_specific_checkpoint_id: GetTuple,
            get_tuple::get_tuple_config_structure: GetTuple,
            get_tuple::get_tuple_checkpoint_fields: GetTuple,
            get_tuple::get_tuple_metadata: GetTuple,
            get_tuple::get_tuple_parent_config: GetTuple,
            get_tuple::get_tuple_pending_writes: GetTuple,
            get_tuple::get_tuple_respects_namespace: GetTuple,
            get_tuple::get_tuple_nonexistent_checkpoint_id: GetTuple,
            list::list_all: List,
            list::list_by_thread: List,
            list::list_by_namespace: List,
            list::list_ordering: List,
            list::list_metadata_filter_single_key: List,
            list::list_metadata_filter_step: List,
            list::list_metadata_filter_multiple_keys: List,
            list::list_metadata_filter_no_match: List,
            list::list_metadata_custom_keys: List,
            list::list_before: List,
            list::list_limit: List,
            list::list_limit_plus_before: List,
            list::list_combined_thread_and_filter: List,
            list::list_empty_result: List,
            list::list_includes_pending_writes: List,
            list::list_multiple_namespaces: List,
            delete_thread::delete_thread_removes_checkpoints: DeleteThread,
            delete_thread::delete_thread_removes_writes: DeleteThread,
            delete_thread::delete_thread_removes_all_namespaces: DeleteThread,
            delete_thread::delete_thread_preserves_other_threads: DeleteThread,
            delete_thread::delete_thread_nonexistent_noop: DeleteThread,
            contract::put_overwrites_same_id: Put,
            contract::put_keeps_values_outside_new_versions: Put,
            contract::put_versioned_channel_without_value: Put,
            contract::put_nan_and_nul_never_lost: Put,
            contract::put_writes_special_channels_overwrite: PutWrites,
            contract::put_writes_mixed_batch_per_write: PutWrites,
            contract::put_writes_before_checkpoint: PutWrites,
            contract::put_writes_requires_checkpoint_id: PutWrites,
            contract::put_writes_nan_and_nul_never_lost: PutWrites,
            contract::pending_writes_sorted: PutWrites,
            contract::get_tuple_latest_is_max_id: GetTuple,
            contract::list_all_namespaces: List,
            contract::list_before_excludes_boundary: List,
            contract::list_limit_after_filter: List,
            contract::list_checkpoint_id_restricts: List,
            contract::list_filter_nested_key_order: List,
            contract::list_filter_null_matches_missing: List,
            contract::list_filter_bool_is_not_int: List,
            contract::list_filter_hostile_keys: List,
            contract::delete_thread_removes_values: DeleteThread,
            contract::capabilities_match_behaviour: Capabilities,
            limits::put_empty_checkpoint_id_refused: Put,
            limits::put_nesting_at_limit_round_trips: Put,
            limits::put_nesting_beyond_limit_refused: Put,
            limits::put_writes_nesting_beyond_limit_refused: PutWrites,
            limits::list_filter_nesting_beyond_limit_refused: List,
            limits::list_filter_wide_maps_compare_by_content: List,
            limits::put_deep_extension_chains_and_pending_sends_refused: Put,
            identifiers::put_empty_thread_id_round_trips: Put,
            identifiers::put_huge_thread_id_kept_or_refused: Put,
            identifiers::put_nul_in_identifiers_kept_or_refused: Put,
            identifiers::put_sql_in_every_string_is_data: Put,
            identifiers::list_wildcards_in_namespace_match_exactly: List,
            identifiers::put_non_uuid_checkpoint_ids_order_as_strings: Put,
            identifiers::put_huge_checkpoint_id_kept_or_refused: Put,
            identifiers::put_hostile_channel_names_kept_or_refused: Put,
            identifiers::put_writes_hostile_task_ids_kept_or_refused: PutWrites,
            identifiers::list_hostile_metadata_keys_match_exactly: List,
            identifiers::put_nul_in_metadata_kept_or_refused: Put,
            identifiers::put_non_finite_metadata_kept_or_refused: Put,
            stored_values::put_value_100_mb_binary_round_trips: Put,
            stored_values::put_value_100_mb_string_round_trips: Put,
            stored_values::put_nesting_120_levels_round_trips: Put,
            stored_values::put_nan_infinity_negative_zero_round_trip: Put,
            stored_values::put_nul_in_values_round_trips: Put,
            stored_values::put_extreme_integers_round_trip: Put,
            stored_values::put_odd_map_keys_round_trip: Put,
            stored_values::put_version_counters_beyond_64_bits: Put,
            options::list_limit_zero_and_max: List,
            options::list_before_id_of_another_thread: List,
            options::list_before_extremes: List,
            options::get_tuple_empty_checkpoint_id_means_none: GetTuple,
            options::put_writes_without_checkpoint_id_refused: PutWrites,
            options::put_writes_ten_thousand_in_one_call: PutWrites,
            options::copy_thread_onto_itself_refused: CopyThread,
            options::copy_thread_unstorable_source_is_unknown: CopyThread,
            options::delete_for_runs_hostile_id_lists_delete_nothing: DeleteForRuns,
            options::delta_channel_history_many_hostile_channels: DeltaChannelHistory,
            options::list_threads_extremes: ListThreads,
            large_threads::put_writes_hundred_thousand_while_another_thread_reads: PutWrites,
            large_threads::delete_for_runs_in_one_large_thread: DeleteForRuns,
            large_threads::copy_thread_of_a_large_thread_while_another_thread_reads: CopyThread,
            large_threads::prune_of_a_large_thread_while_another_thread_reads: Prune,
            delete_for_runs::delete_for_runs_single: DeleteForRuns,
            delete_for_runs::delete_for_runs_multiple: DeleteForRuns,
            delete_for_runs::delete_for_runs_preserves_other_runs: DeleteForRuns,
            delete_for_runs::delete_for_runs_removes_writes: DeleteForRuns,
            delete_for_runs::delete_for_runs_empty_list_noop: DeleteForRuns,
            delete_for_runs::delete_for_runs_nonexistent_noop: DeleteForRuns,
            delete_for_runs::delete_for_runs_across_namespaces: DeleteForRuns,
            delete_for_runs::delete_for_runs_across_threads: DeleteForRuns,
            delete_for_runs::delete_for_runs_keeps_values_of_remaining: DeleteForRuns,
            copy_thread::copy_thread_basic: CopyThread,
            copy_thread::copy_thread_all_checkpoints: CopyThread,
            copy_thread::copy_thread_preserves_metadata: CopyThread,
            copy_thread::copy_thread_preserves_namespaces: CopyThread,
            copy_thread::copy_thread_preserves_writes: CopyThread,
            copy_thread::copy_thread_preserves_ordering: CopyThread,
            copy_thread::copy_thread_source_unchanged: CopyThread,
            copy_thread::copy_thread_nonexistent_source: CopyThread,
            copy_thread::copy_thread_existing_target_errors: CopyThread,
            copy_thread::copy_thread_preserves_parents_and_task_paths: CopyThread,
            prune::prune_keep_latest_single_thread: Prune,
            prune::prune_keep_latest_multiple_threads: Prune,
            prune::prune_keep_latest_across_namespaces: Prune,
            prune::prune_keep_latest_preserves_writes: Prune,
            prune::prune_delete_all: Prune,
            prune::prune_preserves_other_threads: Prune,
            prune::prune_empty_list_noop: Prune,
            prune::prune_nonexistent_noop: Prune,
            prune::prune_keep_latest_keeps_referenced_values: Prune,
            prune::prune_keep_latest_forgets_pruned_parents: Prune,
            prune::prune_keep_latest_keeps_delta_ancestors: Prune,
            prune::prune_keep_latest_removes_call_namespaces: Prune,
            delta_channel_history::delta_channel_history_returns_writes_oldest_first: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_seed_is_nearest_snapshot: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_excludes_target_pending_writes: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_multi_channel: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_empty_channels_returns_empty: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_walk_to_root_no_seed: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_migration_plain_value_as_seed: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_seed_ancestor_own_writes_are_replayed: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_missing_target: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_nil_value_is_seed: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_follows_parents: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_target_is_config_id_or_latest: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_writes_sorted_within_checkpoint: DeltaChannelHistory,
            delta_channel_history::delta_channel_history_parent_cycle_terminates: DeltaChannelHistory,
            list_threads::list_threads_ordering: ListThreads,
            list_threads::list_threads_after_cursor: ListThreads,
            list_threads::list_threads_limit: ListThreads,
            list_threads::list_threads_filter: ListThreads,
            list_threads::list_threads_filter_applies_to_latest: ListThreads,
            list_threads::list_threads_latest_across_namespaces: ListThreads,
            thread_keys::thread_keys_lists_checkpoints_and_writes: ThreadKeys,
            thread_keys::thread_keys_of_unknown_or_deleted_thread_are_empty: ThreadKeys,
            thread_keys::thread_keys_include_writes_of_missing_checkpoints: ThreadKeys,
            thread_keys::thread_keys_list_a_replaced_write_once: ThreadKeys,
            encoded::encoded_put_round_trips_bytes: Encoded,
            encoded::encoded_reads_match_decoded_reads: Encoded,
            encoded::encoded_bad_input_is_refused_as_decoded: Encoded,
            fencing::fencing_two_writers_one_lineage: Fencing,
            fencing::fencing_stale_writer_is_refused: Fencing,
            fencing::fencing_atomic_step_is_whole: Fencing,
            fencing::fencing_owner_writes_freely: Fencing,
            fencing::fencing_bad_fences_are_refused: Fencing,
            retain::retain_keep_last: Retain,
            retain::retain_keep_newer_than: Retain,
            retain::retain_keeps_latest_per_namespace: Retain,
            retain::retain_keeps_interrupts_and_pending_writes: Retain,
            retain::retain_keeps_fork_points: Retain,
            retain::retain_keeps_marked: Retain,
            retain::retain_keeps_delta_history: Retain,
            retain::retain_keeps_values_of_kept_checkpoints: Retain,
            retain::retain_deletes_idle_threads: Retain,
            retain::retain_refuses_contradictory_policy: Retain,
            retain::retain_dry_run_writes_nothing: Retain,
            retain::fencing_retain_checks_the_lease: Fencing,
        }
    };
}

/// Expands the check list in one mode: `@tests (factory)` for
/// [`conformance_tests!`](crate::conformance_tests), `@registry` for
/// [`checks`](crate::conformance::checks).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_emit {
    ([@tests ($factory:expr)] $($module:ident :: $name:ident : $cap:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::conformance::run_test(::std::stringify!($name), $factory);
            }
        )*
    };
    ([@registry] $($module:ident :: $name:ident : $cap:ident),* $(,)?) => {
        static CHECKS: &[$crate::conformance::Check] = &[
            $(
                $crate::conformance::Check {
                    name: ::std::stringify!($name),
                    capability: $crate::conformance::Capability::$cap,
                    func: |saver| ::std::boxed::Box::pin($crate::conformance::$module::$name(saver)),
                },
            )*
        ];
    };
}

//! The conformance suite: every behaviour of the ledger, written once against the
//! [`Store`](backstop_core::Store) trait. A backend runs it with [`conformance_suite!`],
//! giving an async function that returns a fresh, migrated store and a guard that keeps its
//! database alive (a temporary file, a per-test schema…).
//!
//! ```ignore
//! async fn fresh() -> (std::sync::Arc<dyn backstop_core::Store>, impl Send) { ... }
//! backstop_store_tests::conformance_suite!(fresh);
//! ```

mod callbacks;
pub mod cases;
mod checkpoints;
mod claim;
mod complete;
mod enqueue;
mod entities;
pub mod fixtures;
pub mod groups;
mod holds;
mod hosts;
mod intake;
mod leadership;
mod leases;
mod limits;
mod manual;
pub mod outbox;
mod pauses;
pub mod proxy;
mod reads;
mod redrive;
mod retention;
mod schedules;
mod schema;
pub mod server;
mod watch;

pub use fixtures::*;

/// Generates one `#[tokio::test]` per conformance case, each on a fresh store from `$make`.
///
/// With `skip_if = EXPR` (a `bool`), every test evaluates `EXPR` first and, when it is true,
/// passes without running: for a backend whose database server may not be configured (the
/// expression says so on stderr).
#[macro_export]
macro_rules! conformance_suite {
    ($make:path) => {
        $crate::conformance_suite!($make, skip_if = false);
    };
    ($make:path, skip_if = $skip:expr) => {
        $crate::conformance_suite!(@each $make, $skip;
            enqueue_creates_a_pending_task,
            enqueue_preserves_payload_bytes,
            enqueue_same_payload_returns_the_existing_task,
            enqueue_different_payload_conflicts_and_changes_nothing,
            batch_enqueue_reports_each_item_in_order,
            large_batches_with_a_taken_key_report_it,
            concurrent_enqueues_are_all_durable_and_distinct,
            concurrent_enqueues_of_one_key_create_one_task,
            concurrent_enqueues_keep_each_creation_time,
            claim_leases_only_due_tasks_of_the_kind,
            claim_respects_the_limit_and_run_at_order,
            concurrent_claims_never_share_a_task,
            success_completes_and_records_the_attempt,
            a_success_note_is_the_attempts_error_and_not_the_tasks,
            retry_reschedules_and_keeps_every_attempt,
            failure_and_skip_end_the_task_with_reasons,
            stale_completion_is_rejected_and_recorded,
            heartbeat_extends_held_leases_and_reports_lost_ones,
            rescue_returns_expired_leases_to_pending_or_failed,
            expire_compensates_pending_tasks_past_their_deadline,
            release_gives_leases_back,
            a_held_task_counts_no_attempt_until_it_starts,
            a_lapsed_hold_is_claimed_again_without_rescue_or_attempt,
            a_held_task_is_heartbeated_and_given_back_unstarted,
            a_canceled_held_task_loses_its_hold,
            outcomes_and_starts_are_written_together,
            a_running_attempt_given_back_with_its_budget_spent_fails,
            manual_retry_renews_the_budget_and_records_the_actor,
            resolve_and_cancel_follow_the_state_machine,
            a_refused_manual_action_leaves_the_task_claimable,
            list_filters_and_paginates_newest_first,
            counts_cover_every_task_once,
            migrate_is_idempotent,
            leadership_is_refused_to_another_owner_while_valid,
            leadership_passes_on_after_expiry,
            leadership_renewal_by_the_holder_extends_it,
            resigned_leadership_is_taken_at_once,
            racing_owners_elect_exactly_one,
            prune_deletes_only_old_tasks_of_the_status,
            prune_takes_bounded_batches,
            beats_are_overwritten_by_name_and_listed_by_prefix,
            the_write_probe_passes_and_leaves_nothing,
            backlog_counts_pending_due_overdue_and_running_per_kind,
            audit_pages_walk_the_ledger_in_id_order,
            a_ledger_driven_through_every_transition_audits_clean,
            a_retry_storm_audits_without_drift,
            tasks_are_looked_up_by_many_keys_at_once,
            a_succeeded_task_is_redriven_with_the_run_on_its_timeline,
            statement_runs_are_recorded_and_listed_newest_first,
            scans_walk_one_kind_and_status_in_id_order,
            transitions_answer_applied_duplicate_rejected_and_stale,
            a_repeated_paid_never_undoes_refunding,
            rejected_and_stale_events_may_apply_when_sent_again,
            entities_are_separate_per_machine_and_id,
            concurrent_transitions_on_one_entity_apply_each_event_once,
            concurrent_versions_on_one_entity_only_move_forward,
            concurrent_callbacks_through_the_order_machine_stay_consistent,
            callback_accepted_creates_its_task_with_its_record,
            callback_resent_is_a_duplicate_and_creates_nothing,
            callback_rejections_are_recorded_without_a_task,
            concurrent_callbacks_of_one_event_create_one_task,
            callbacks_are_listed_per_source_newest_first_with_a_cursor,
            a_failed_intake_is_a_dead_letter_at_once,
            a_failed_intake_is_retried_like_any_dead_letter,
            a_compensated_intake_is_stored_compensated,
            a_callback_task_is_written_with_its_intake,
            a_batch_mixes_run_failed_and_compensated_intakes,
            the_origin_is_on_the_created_event,
            a_batch_mixes_intakes_and_origins,
            a_repeat_with_an_origin_is_a_redelivered_event,
            redeliveries_in_one_batch_are_each_recorded,
            a_first_advance_creates_the_schedule,
            schedule_advances_are_fenced_by_planned_until,
            racing_first_advances_store_exactly_one,
            a_batch_of_advances_answers_each_item_on_its_own,
            racing_batches_store_exactly_one_advance_per_schedule,
            a_pause_by_hand_round_trips_and_advances_leave_it,
            schedule_definitions_are_registered_and_removed_keeping_progress,
            schedules_are_listed_by_name_in_byte_order,
            every_field_of_schedule_progress_round_trips,
            the_database_clock_is_near_the_local_clock,
            a_saved_checkpoint_reaches_the_next_attempt,
            a_zombie_checkpoint_is_rejected_and_recorded,
            a_suspended_attempt_is_not_counted,
            a_group_runs_one_task_at_a_time_in_commit_order,
            a_parked_task_keeps_its_own_run_at,
            a_retry_keeps_its_group_waiting,
            a_failed_task_blocks_its_group_until_retried_or_resolved,
            with_skip_a_failed_task_lets_its_group_go_on,
            with_skip_a_dead_letter_retried_by_hand_holds_its_group_again,
            every_end_of_a_task_unparks_the_next,
            a_parked_task_that_ends_is_parked_no_longer,
            a_rescued_task_holds_its_group_until_it_ends,
            groups_are_separate_per_kind,
            a_batch_orders_its_group_in_batch_order_and_repeats_keep_their_place,
            a_repeat_of_an_ended_task_does_not_park_a_new_one_behind_it,
            one_batch_places_new_open_and_ended_groups_each_as_its_own,
            group_head_and_list_show_a_group,
            concurrent_enqueues_into_one_group_are_claimed_in_group_order,
            enqueues_and_completions_across_many_groups_never_deadlock,
            pauses_of_each_cause_are_kept_side_by_side,
            a_trip_counts_once_and_a_retry_after_only_moves_later,
            a_resume_clears_what_it_names_and_is_recorded,
            concurrent_trips_keep_the_highest_count,
            a_limited_claim_takes_only_keys_with_a_free_slot,
            a_limited_claim_starts_at_most_what_it_may_start,
            a_lapsed_lease_frees_its_slot,
            a_full_key_does_not_starve_the_others,
            concurrent_limited_claims_never_exceed_the_max,
            a_rate_limited_key_starts_its_burst_and_moves_the_rest_with_an_event,
            a_quiet_key_gets_its_whole_burst_again,
            concurrent_rate_limited_claims_share_one_rate,
            a_full_key_spends_none_of_its_rate,
            limit_overrides_round_trip_with_their_history,
            a_claim_follows_a_keys_override,
            random_interleavings_never_run_more_than_max_of_a_key,
            a_claim_in_a_completion_takes_the_slot_it_frees,
            a_host_limit_counts_every_kind_on_the_host,
            concurrent_host_claims_never_exceed_the_max
        );
    };
    (@each $make:path, $skip:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if $skip {
                    return;
                }
                let (store, _guard) = $make().await;
                $crate::cases::$case(store).await;
            }
        )*
    };
}

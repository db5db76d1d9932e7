//! A store that can be cut off from its database, as a network partition would: once cut,
//! every call hangs (never answers), like a request to a server that no longer replies. It
//! also notes the shape of every outcome write passing through it.

use backstop_core::store::*;
use backstop_core::{
    CallbackRecord, Event, ListCallbacksParams, RecordCallbackParams, RecordedCallback, Task,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One `complete` call: how many outcomes it wrote and how many attempts it started.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code, reason = "read only by the test binaries that count writes")]
pub struct Write {
    pub outcomes: usize,
    pub starts: usize,
    /// Slots its claims asked to fill (a limited kind's outcomes claim in their write).
    pub claims: usize,
}

/// Passes every call to `inner` until [`Cut::cut`]; from then on calls never complete.
pub struct Cut {
    inner: Arc<dyn Store>,
    cut: AtomicBool,
    writes: Mutex<Vec<Write>>,
    claims: AtomicUsize,
    /// Says claims do not ride completions, as a server store does.
    no_riding: AtomicBool,
}

impl Cut {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Cut> {
        Arc::new(Cut {
            inner,
            cut: AtomicBool::new(false),
            writes: Mutex::default(),
            claims: AtomicUsize::new(0),
            no_riding: AtomicBool::new(false),
        })
    }

    /// Says, from now on, that claims do not ride completions (as PostgreSQL's store does),
    /// whatever the inner store says.
    #[allow(dead_code, reason = "used only by the test binaries that count claims")]
    pub fn without_riding(&self) {
        self.no_riding.store(true, Ordering::SeqCst);
    }

    /// Claims made on their own (not in an outcome's write) so far.
    #[allow(dead_code, reason = "read only by the test binaries that count claims")]
    pub fn claims(&self) -> usize {
        self.claims.load(Ordering::SeqCst)
    }

    /// Cuts the store off: calls made from now on hang.
    #[allow(
        dead_code,
        reason = "used only by the test binaries that cut the store off"
    )]
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// The outcome writes so far, in order.
    #[allow(dead_code, reason = "read only by the test binaries that count writes")]
    pub fn writes(&self) -> Vec<Write> {
        self.writes.lock().unwrap().clone()
    }

    fn gate<'a, T: Send + 'a>(
        &self,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        if self.cut.load(Ordering::SeqCst) {
            Box::pin(std::future::pending())
        } else {
            call
        }
    }
}

impl Migrations for Cut {
    fn migrate(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.gate(self.inner.migrate())
    }

    fn check_writable(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.gate(self.inner.check_writable())
    }
}

impl Enqueue for Cut {
    fn enqueue(&self, p: EnqueueParams) -> BoxFuture<'_, Result<Vec<EnqueueResult>, StoreError>> {
        self.gate(self.inner.enqueue(p))
    }
}

impl Tasks for Cut {
    fn get(&self, p: GetParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        self.gate(self.inner.get(p))
    }

    fn get_by_key(&self, p: GetByKeyParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        self.gate(self.inner.get_by_key(p))
    }

    fn timeline(&self, p: TimelineParams) -> BoxFuture<'_, Result<Vec<Event>, StoreError>> {
        self.gate(self.inner.timeline(p))
    }

    fn list(&self, p: ListParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        self.gate(self.inner.list(p))
    }

    fn counts(&self, p: CountsParams) -> BoxFuture<'_, Result<StatusCounts, StoreError>> {
        self.gate(self.inner.counts(p))
    }

    fn scan(&self, p: ScanParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        self.gate(self.inner.scan(p))
    }

    fn tasks_by_keys(&self, p: KeysParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        self.gate(self.inner.tasks_by_keys(p))
    }

    fn group_head(&self, p: GroupHeadParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        self.gate(self.inner.group_head(p))
    }
}

impl Leases for Cut {
    fn claim(&self, p: ClaimParams) -> BoxFuture<'_, Result<Vec<ClaimedTask>, StoreError>> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        self.gate(self.inner.claim(p))
    }

    fn complete(&self, p: CompleteParams) -> BoxFuture<'_, Result<CompleteResult, StoreError>> {
        self.writes.lock().unwrap().push(Write {
            outcomes: p.completions.len(),
            starts: p.starts.as_ref().map_or(0, |s| s.tasks.len()),
            claims: p.claims.iter().map(|c| c.limit).sum(),
        });
        self.gate(self.inner.complete(p))
    }

    fn heartbeat(&self, p: HeartbeatParams) -> BoxFuture<'_, Result<Vec<LeaseRef>, StoreError>> {
        self.gate(self.inner.heartbeat(p))
    }

    fn release(&self, p: ReleaseParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.gate(self.inner.release(p))
    }

    fn claims_ride_completions(&self) -> bool {
        !self.no_riding.load(Ordering::SeqCst) && self.inner.claims_ride_completions()
    }
}

impl Checkpoints for Cut {
    fn checkpoint(&self, p: CheckpointParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>> {
        self.gate(self.inner.checkpoint(p))
    }

    fn suspend(&self, p: SuspendParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>> {
        self.gate(self.inner.suspend(p))
    }
}

impl Rescue for Cut {
    fn rescue(&self, p: RescueParams) -> BoxFuture<'_, Result<Vec<Rescued>, StoreError>> {
        self.gate(self.inner.rescue(p))
    }

    fn expire(&self, p: ExpireParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.gate(self.inner.expire(p))
    }
}

impl ManualActions for Cut {
    fn retry(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        self.gate(self.inner.retry(p))
    }

    fn resolve(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        self.gate(self.inner.resolve(p))
    }

    fn cancel(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        self.gate(self.inner.cancel(p))
    }

    fn redrive(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        self.gate(self.inner.redrive(p))
    }
}

impl Cluster for Cut {
    fn acquire_leadership(
        &self,
        p: LeadershipParams,
    ) -> BoxFuture<'_, Result<Leadership, StoreError>> {
        self.gate(self.inner.acquire_leadership(p))
    }

    fn resign_leadership(&self, p: ResignParams) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.gate(self.inner.resign_leadership(p))
    }

    fn beat(&self, p: BeatParams) -> BoxFuture<'_, Result<(), StoreError>> {
        self.gate(self.inner.beat(p))
    }

    fn beats(&self, p: BeatsParams) -> BoxFuture<'_, Result<Vec<Beat>, StoreError>> {
        self.gate(self.inner.beats(p))
    }

    fn forget_beats(&self, p: ForgetBeatsParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.gate(self.inner.forget_beats(p))
    }
}

impl Backlog for Cut {
    fn backlog(&self, p: BacklogParams) -> BoxFuture<'_, Result<Vec<KindBacklog>, StoreError>> {
        self.gate(self.inner.backlog(p))
    }

    fn audit_page(&self, p: AuditParams) -> BoxFuture<'_, Result<AuditPage, StoreError>> {
        self.gate(self.inner.audit_page(p))
    }
}

impl Retention for Cut {
    fn prune(&self, p: PruneParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.gate(self.inner.prune(p))
    }
}

impl Statements for Cut {
    fn record_statement_run(
        &self,
        p: RecordStatementRunParams,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.gate(self.inner.record_statement_run(p))
    }

    fn statement_runs(
        &self,
        p: StatementRunsParams,
    ) -> BoxFuture<'_, Result<Vec<StatementRun>, StoreError>> {
        self.gate(self.inner.statement_runs(p))
    }

    fn statement_run(
        &self,
        p: StatementRunParams,
    ) -> BoxFuture<'_, Result<Option<StatementRun>, StoreError>> {
        self.gate(self.inner.statement_run(p))
    }
}

impl Entities for Cut {
    fn transition_entity(
        &self,
        p: TransitionParams,
    ) -> BoxFuture<'_, Result<TransitionOutcome, StoreError>> {
        self.gate(self.inner.transition_entity(p))
    }

    fn entity(&self, p: EntityParams) -> BoxFuture<'_, Result<Option<EntityHistory>, StoreError>> {
        self.gate(self.inner.entity(p))
    }
}

impl Callbacks for Cut {
    fn record_callback(
        &self,
        p: RecordCallbackParams,
    ) -> BoxFuture<'_, Result<RecordedCallback, StoreError>> {
        self.gate(self.inner.record_callback(p))
    }

    fn list_callbacks(
        &self,
        p: ListCallbacksParams,
    ) -> BoxFuture<'_, Result<Vec<CallbackRecord>, StoreError>> {
        self.gate(self.inner.list_callbacks(p))
    }
}

impl Schedules for Cut {
    fn schedules(
        &self,
        p: SchedulesParams,
    ) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, StoreError>> {
        self.gate(self.inner.schedules(p))
    }

    fn advance_schedules(
        &self,
        items: Vec<AdvanceScheduleParams>,
    ) -> BoxFuture<'_, Result<Vec<bool>, StoreError>> {
        self.gate(self.inner.advance_schedules(items))
    }

    fn pause_schedule(
        &self,
        p: PauseScheduleParams,
    ) -> BoxFuture<'_, Result<ScheduleRecord, StoreError>> {
        self.gate(self.inner.pause_schedule(p))
    }

    fn define_schedule(
        &self,
        p: DefineScheduleParams,
    ) -> BoxFuture<'_, Result<ScheduleRecord, StoreError>> {
        self.gate(self.inner.define_schedule(p))
    }

    fn database_now(&self) -> BoxFuture<'_, Result<Option<jiff::Timestamp>, StoreError>> {
        self.gate(self.inner.database_now())
    }
}

impl Pauses for Cut {
    fn pauses(
        &self,
        p: PausesParams,
    ) -> BoxFuture<'_, Result<Vec<backstop_core::pause::PauseRecord>, StoreError>> {
        self.gate(self.inner.pauses(p))
    }

    fn pause(&self, p: PauseParams) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.gate(self.inner.pause(p))
    }

    fn resume(
        &self,
        p: ResumeParams,
    ) -> BoxFuture<'_, Result<Vec<backstop_core::pause::PauseRecord>, StoreError>> {
        self.gate(self.inner.resume(p))
    }

    fn pause_history(
        &self,
        p: PauseHistoryParams,
    ) -> BoxFuture<'_, Result<Vec<backstop_core::pause::PauseEntry>, StoreError>> {
        self.gate(self.inner.pause_history(p))
    }
}

impl LimitOverrides for Cut {
    fn limit_overrides(
        &self,
        p: LimitOverridesParams,
    ) -> BoxFuture<'_, Result<Vec<LimitOverride>, StoreError>> {
        self.gate(self.inner.limit_overrides(p))
    }

    fn set_limit_override(
        &self,
        p: SetLimitOverrideParams,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.gate(self.inner.set_limit_override(p))
    }

    fn clear_limit_override(
        &self,
        p: ClearLimitOverrideParams,
    ) -> BoxFuture<'_, Result<Option<LimitOverride>, StoreError>> {
        self.gate(self.inner.clear_limit_override(p))
    }

    fn limit_override_history(
        &self,
        p: LimitOverrideHistoryParams,
    ) -> BoxFuture<'_, Result<Vec<OverrideChange>, StoreError>> {
        self.gate(self.inner.limit_override_history(p))
    }
}

impl WorkWatch for Cut {}

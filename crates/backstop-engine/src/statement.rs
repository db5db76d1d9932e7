//! Statement reconciliation over the real ledger: [`StoreLedger`] gives `backstop-statement`
//! the tasks of one kind (amounts read from their payloads), and [`run`] records the run,
//! reconciles, and with `apply` re-drives each `missing_record` task exactly once per run.

use backstop_core::manual::REDRIVE;
use backstop_core::store::{KeysParams, ManualParams, ScanParams, StatementRun};
use backstop_core::store::{RecordStatementRunParams, StatementRunParams, TimelineParams};
use backstop_core::{EventType, Status, Store, StoreError, Task, TaskId};
use backstop_statement::{
    BreakClass, Ledger, LedgerEntry, LedgerPage, Money, Observer, Options, ReconcileError, Report,
    ScanQuery, Verdict, parse_currency, reconcile,
};
use std::io::Read;
use std::sync::Arc;

/// Where a task's payload holds its amount (integer minor units) and currency, as JSON
/// pointers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmountPointers {
    pub amount: String,
    pub currency: String,
    /// The currency of a payload that has an amount but no currency at `currency` (a ledger
    /// whose payloads carry only an amount); `None`: such amounts are not compared, and the
    /// verdict says so.
    pub default_currency: Option<String>,
}

impl Default for AmountPointers {
    fn default() -> Self {
        AmountPointers {
            amount: "/amount".into(),
            currency: "/currency".into(),
            default_currency: None,
        }
    }
}

/// The ledger's tasks of one kind, as statement reconciliation sees them.
pub struct StoreLedger {
    store: Arc<dyn Store>,
    kind: String,
    pointers: AmountPointers,
}

impl StoreLedger {
    pub fn new(store: Arc<dyn Store>, kind: impl Into<String>, pointers: AmountPointers) -> Self {
        StoreLedger {
            store,
            kind: kind.into(),
            pointers,
        }
    }

    fn entry(&self, t: &Task) -> LedgerEntry {
        LedgerEntry {
            task_id: t.id,
            key: t.key.clone(),
            status: t.status,
            amount: amount(&t.payload, &self.pointers),
            finished_at: t.status.is_final().then_some(t.updated_at),
        }
    }
}

/// The task's amount, when its payload has an integer amount and a valid currency (its own,
/// or the default when it has none).
fn amount(payload: &[u8], p: &AmountPointers) -> Option<Money> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let minor = match v.pointer(&p.amount)? {
        serde_json::Value::Number(n) => n.as_i64()?,
        serde_json::Value::String(s) => backstop_statement::parse_minor(s).ok()?,
        _ => return None,
    };
    let code = match v.pointer(&p.currency) {
        Some(c) => c.as_str()?,
        None => p.default_currency.as_deref()?,
    };
    let currency = parse_currency(code).ok()?;
    Some(Money::new(minor, &currency))
}

impl Ledger for StoreLedger {
    type Error = StoreError;

    async fn lookup(&mut self, keys: &[String]) -> Result<Vec<LedgerEntry>, StoreError> {
        let tasks = self
            .store
            .tasks_by_keys(KeysParams {
                kind: self.kind.clone(),
                keys: keys.to_vec(),
            })
            .await?;
        Ok(tasks.iter().map(|t| self.entry(t)).collect())
    }

    async fn succeeded_page(&mut self, q: &ScanQuery) -> Result<LedgerPage, StoreError> {
        let after = q
            .cursor
            .as_deref()
            .map(|c| {
                c.parse::<TaskId>()
                    .map_err(|e| StoreError::Database(format!("bad scan cursor {c:?}: {e}").into()))
            })
            .transpose()?;
        let tasks = self
            .store
            .scan(ScanParams {
                kind: self.kind.clone(),
                status: Status::Succeeded,
                after,
                limit: q.limit,
            })
            .await?;
        let next = (tasks.len() == q.limit)
            .then(|| tasks.last().map(|t| t.id.to_string()))
            .flatten();
        Ok(LedgerPage {
            entries: tasks.iter().map(|t| self.entry(t)).collect(),
            next,
        })
    }
}

/// The verdict recorded on a run whose statement could not be reconciled at all.
pub const FAILED: &str = "FAILED";

/// Collects the tasks `--apply` re-drives: every `missing_record` break, whether or not the
/// report's list was capped.
#[derive(Default)]
struct Missing(Vec<TaskId>);

impl Observer for Missing {
    fn on_break(&mut self, b: &backstop_statement::Break) -> std::io::Result<()> {
        if b.class == BreakClass::MissingRecord
            && let Some(id) = b.task_id
        {
            self.0.push(id);
        }
        Ok(())
    }
}

/// One reconciliation to run.
pub struct StatementJob {
    /// The run's id (the same reconciliation run again must give the same id).
    pub run_id: String,
    /// The statement's name, for the run record.
    pub statement: String,
    pub options: Options,
    pub pointers: AmountPointers,
    /// Re-drive each `missing_record` task (never on an `INCOMPLETE` verdict).
    pub apply: bool,
}

/// What a run found and did.
#[derive(Debug)]
pub struct StatementOutcome {
    pub report: Report,
    /// Tasks re-driven by this invocation.
    pub redriven: u64,
    /// `missing_record` tasks this run had already re-driven (an earlier, interrupted or
    /// repeated invocation), or that are no longer `succeeded`.
    pub skipped: u64,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum StatementError {
    #[error(transparent)]
    Reconcile(#[from] ReconcileError),
    #[error("ledger: {0}")]
    Store(#[from] StoreError),
}

/// A run's id: the same kind, reading rules, window and statement bytes give the same id, so
/// that a repeated or resumed `--apply` re-drives nothing twice. `params` describes everything
/// but the bytes.
pub fn run_id(params: &str, mut statement: impl Read) -> std::io::Result<String> {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    ctx.update(params.as_bytes());
    ctx.update(b"\n");
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = statement.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    let d = ctx.finish();
    let hex: String = d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("st-{hex}"))
}

/// The parameters a run id covers, in a fixed form.
pub fn run_params(o: &Options, expect_count: Option<u64>) -> String {
    format!(
        "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        o.kind, o.read.format, o.read.columns, o.since, o.until, o.grace, expect_count
    )
}

/// The actor a run's re-drives are recorded with.
pub fn run_actor(run_id: &str) -> String {
    format!("reconcile:{run_id}")
}

/// Records the run, reconciles, applies when asked, and records the outcome.
pub async fn run<R: Read, O: Observer>(
    store: Arc<dyn Store>,
    job: StatementJob,
    input: R,
    observer: &mut O,
) -> Result<StatementOutcome, StatementError> {
    let kind = job.options.kind.clone();
    let mut record = StatementRun {
        id: job.run_id.clone(),
        kind: kind.clone(),
        statement: job.statement.clone(),
        started_at: job.options.now,
        finished_at: None,
        verdict: None,
        applied: 0,
        report: None,
    };
    // Re-drives of an earlier, interrupted invocation of this run still count.
    let base = store
        .statement_run(StatementRunParams {
            id: job.run_id.clone(),
        })
        .await?
        .map_or(0, |r| r.applied);
    record.applied = base;
    store
        .record_statement_run(RecordStatementRunParams {
            run: record.clone(),
        })
        .await?;
    let mut ledger = StoreLedger::new(store.clone(), kind, job.pointers.clone());
    let mut missing = Missing::default();
    let report = match reconcile(
        &mut ledger,
        input,
        &job.options,
        &mut (&mut *observer, &mut missing),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => {
            // A statement refused (unreadable header, bad window, …) closes its run as
            // failed, with why, instead of leaving a run that never finishes.
            record.finished_at = Some(jiff::Timestamp::now().max(job.options.now));
            record.verdict = Some(FAILED.into());
            record.report = Some(serde_json::json!({ "error": e.to_string() }).to_string());
            store
                .record_statement_run(RecordStatementRunParams { run: record })
                .await?;
            return Err(e.into());
        }
    };
    let (mut redriven, mut skipped) = (0, 0);
    if job.apply && report.verdict != Verdict::Incomplete {
        let actor = run_actor(&job.run_id);
        for id in &missing.0 {
            let done_before = store
                .timeline(TimelineParams { id: *id })
                .await?
                .iter()
                .any(|e| e.kind == EventType::Redriven && e.actor.as_deref() == Some(&actor));
            if done_before {
                skipped += 1;
                continue;
            }
            let asked = store
                .redrive(ManualParams {
                    id: *id,
                    actor: actor.clone(),
                    reason: Some(format!(
                        "missing_record: the provider's statement {} has no record of it",
                        job.statement
                    )),
                    max_attempts: None,
                    now: job.options.now,
                })
                .await;
            match asked {
                Ok(_) => redriven += 1,
                // Running again already (re-driven by hand, say): nothing to do.
                Err(StoreError::WrongStatus { .. }) => skipped += 1,
                Err(e) => return Err(e.into()),
            }
            if redriven % 100 == 0 {
                record.applied = base + redriven;
                store
                    .record_statement_run(RecordStatementRunParams {
                        run: record.clone(),
                    })
                    .await?;
            }
        }
        tracing::info!(run = %job.run_id, action = REDRIVE.name, redriven, skipped, "applied");
    }
    record.applied = base + redriven;
    record.finished_at = Some(jiff::Timestamp::now().max(job.options.now));
    record.verdict = Some(report.verdict.as_str().to_string());
    record.report = Some(serde_json::to_string(&report).expect("plain data"));
    store
        .record_statement_run(RecordStatementRunParams { run: record })
        .await?;
    Ok(StatementOutcome {
        report,
        redriven,
        skipped,
    })
}

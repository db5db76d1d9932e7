//! `/v1/reconciliations`: upload a provider's statement and reconcile it against the ledger's
//! tasks of one kind; list the runs; fetch a run's report. The same as `backstop reconcile`.

use super::problems::{InvalidParameters, Unauthorized, UnknownKind};
use crate::extract::{ApiPath, ApiQuery, BodyError, read_body_within};
use crate::problem::Problem;
use crate::state::AppState;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use backstop_core::duration::parse_duration;
use backstop_core::store::StatementRunParams;
use backstop_core::store::StatementRunsParams;
use backstop_engine::statement::{self, AmountPointers, StatementError, StatementJob};
use backstop_statement::{ColumnMap, Options, ReadOptions, ReconcileError, StatementFormat};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(show))
}

/// How to read the statement and what to reconcile.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReconcileQuery {
    /// The kind of task the statement is about.
    kind: String,
    /// `csv` (with a header row, the default) or `jsonl`.
    format: Option<String>,
    /// Which column holds what: `key=COL,amount=COL,currency=COL,status=COL,at=COL`.
    map: Option<String>,
    /// Ledger tasks that succeeded at or after this (RFC 3339) are expected in the statement.
    since: Option<String>,
    /// ...and at or before this.
    until: Option<String>,
    /// Lag allowed between the two sides (`15m` by default).
    grace: Option<String>,
    /// The number of data rows the statement must have.
    expect_count: Option<u64>,
    /// Where a task's payload holds its amount in minor units (JSON pointer, `/amount`).
    amount_pointer: Option<String>,
    /// Where a task's payload holds its currency (JSON pointer, `/currency`).
    currency_pointer: Option<String>,
    /// The currency of payloads that carry an amount but no currency (e.g. `CNY`); without
    /// it such amounts are not compared and the verdict is at best `INCOMPLETE`.
    currency: Option<String>,
    /// Re-drive each `missing_record` task, once per run (never when `INCOMPLETE`).
    #[serde(default)]
    apply: bool,
}

/// What a reconciliation found and did.
#[derive(Serialize, ToSchema)]
pub struct RunResult {
    /// The run's id: the same statement and parameters are the same run.
    run: String,
    /// `RECONCILED`, `RECONCILED_WITH_PENDING`, `BREAKS` or `INCOMPLETE`.
    verdict: String,
    /// Tasks re-driven by this request.
    redriven: u64,
    /// Missing tasks this run had re-driven already, or that run again by now.
    skipped: u64,
    /// The report: `verdict`, `counts`, `totals`, `breaks` (capped), `malformed`.
    #[schema(value_type = Object)]
    report: serde_json::Value,
}

/// One recorded run.
#[derive(Serialize, ToSchema)]
pub struct RunView {
    id: String,
    kind: String,
    statement: String,
    started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<String>,
    applied: u64,
    /// The report, when fetched one run at a time and the run finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    report: Option<serde_json::Value>,
}

/// Runs, newest first.
#[derive(Serialize, ToSchema)]
pub struct RunList {
    runs: Vec<RunView>,
}

/// Listing filters.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only runs of this kind.
    kind: Option<String>,
    /// Most runs returned (default 50).
    limit: Option<usize>,
}

fn time(o: &Option<String>, name: &str) -> Result<Option<jiff::Timestamp>, Problem> {
    o.as_deref()
        .map(|s| {
            s.parse::<jiff::Timestamp>().map_err(|e| {
                Problem::invalid(format!("{name}: {s:?} is not an RFC 3339 time: {e}"))
            })
        })
        .transpose()
}

/// Reconciles the statement in the body (up to `api.max_body`; larger statements go through
/// `backstop reconcile`).
#[utoipa::path(post, path = "/v1/reconciliations", tag = "reconciliations", operation_id = "create_reconciliation",
    params(ReconcileQuery),
    request_body(content = String, content_type = "text/csv", description = "The statement: CSV with a header row, or JSON lines"),
    responses(
        (status = 200, description = "The run and its report", body = RunResult),
        (status = 400, description = "The statement cannot be read", body = Problem, content_type = "application/problem+json"),
        Unauthorized,
        UnknownKind,
        (status = 413, description = "Statement over the body limit", body = Problem, content_type = "application/problem+json"),
        InvalidParameters,
    ))]
async fn create(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ReconcileQuery>,
    req: Request,
) -> Result<Json<RunResult>, Problem> {
    let engine = state.engine();
    if !engine.kinds().contains_key(&q.kind) {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "unknown-kind",
            format!("unknown kind {:?}", q.kind),
        ));
    }
    let format = match &q.format {
        Some(f) => f
            .parse::<StatementFormat>()
            .map_err(|e| Problem::invalid(e.to_string()))?,
        None => StatementFormat::Csv,
    };
    let columns = match &q.map {
        Some(m) => m
            .parse::<ColumnMap>()
            .map_err(|e| Problem::invalid(format!("map: {e}")))?,
        None => ColumnMap::default(),
    };
    let mut options = Options::new(q.kind.clone(), engine.clock().now());
    options.read = ReadOptions {
        format,
        columns,
        ..ReadOptions::default()
    };
    options.since = time(&q.since, "since")?;
    options.until = time(&q.until, "until")?;
    if let Some(g) = &q.grace {
        options.grace = parse_duration(g).map_err(|e| Problem::invalid(format!("grace: {e}")))?;
    }
    options.expect_count = q.expect_count;
    let default_currency = q
        .currency
        .as_deref()
        .map(backstop_statement::parse_currency)
        .transpose()
        .map_err(|e| Problem::invalid(format!("currency: {e}")))?;
    let limit = state.limits().max_body;
    let body: Bytes = read_body_within(req.into_body(), limit, state.limits().body_timeout)
        .await
        .map_err(|e| match e {
            BodyError::TimedOut(p) => p,
            BodyError::TooLarge => Problem::too_large(format!(
                "the statement is over the limit of {limit} bytes (api.max_body); use `backstop reconcile` for larger files"
            )),
        })?;
    let params = statement::run_params(&options, q.expect_count);
    let run_id = statement::run_id(&params, &body[..]).map_err(|e| Problem::internal(&e))?;
    let defaults = AmountPointers::default();
    let job = StatementJob {
        run_id: run_id.clone(),
        statement: "uploaded".into(),
        options,
        pointers: AmountPointers {
            amount: q.amount_pointer.unwrap_or(defaults.amount),
            currency: q.currency_pointer.unwrap_or(defaults.currency),
            default_currency,
        },
        apply: q.apply,
    };
    let outcome = statement::run(engine.store().clone(), job, &body[..], &mut ())
        .await
        .map_err(|e| match e {
            StatementError::Reconcile(ReconcileError::Read(r)) => {
                Problem::bad_request(format!("the statement cannot be read: {r}"))
            }
            StatementError::Reconcile(ReconcileError::Window(w)) => {
                Problem::invalid(format!("invalid window: {w}"))
            }
            StatementError::Store(s) => s.into(),
            other => Problem::internal(&other),
        })?;
    Ok(Json(RunResult {
        run: run_id,
        verdict: outcome.report.verdict.as_str().to_string(),
        redriven: outcome.redriven,
        skipped: outcome.skipped,
        report: serde_json::to_value(&outcome.report).map_err(|e| Problem::internal(&e))?,
    }))
}

fn view(r: backstop_core::store::StatementRun, with_report: bool) -> RunView {
    let fmt = backstop_core::wire_time::format;
    RunView {
        id: r.id,
        kind: r.kind,
        statement: r.statement,
        started_at: fmt(r.started_at),
        finished_at: r.finished_at.map(fmt),
        verdict: r.verdict,
        applied: r.applied,
        report: r
            .report
            .filter(|_| with_report)
            .and_then(|s| serde_json::from_str(&s).ok()),
    }
}

/// Reconciliation runs, newest first.
#[utoipa::path(get, path = "/v1/reconciliations", tag = "reconciliations", operation_id = "list_reconciliations",
    params(ListQuery),
    responses(
        (status = 200, description = "Runs, newest first (without their reports)", body = RunList),
        Unauthorized,
        InvalidParameters,
    ))]
async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<RunList>, Problem> {
    let max = state.limits().max_list;
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > max {
        return Err(Problem::invalid(format!(
            "limit must be between 1 and {max} (api.max_list)"
        )));
    }
    let runs = state
        .engine()
        .store()
        .statement_runs(StatementRunsParams {
            kind: q.kind,
            limit,
        })
        .await?;
    Ok(Json(RunList {
        runs: runs.into_iter().map(|r| view(r, false)).collect(),
    }))
}

/// One run with its report.
#[utoipa::path(get, path = "/v1/reconciliations/{id}", tag = "reconciliations", operation_id = "show_reconciliation",
    params(("id" = String, Path, description = "Run id (`st-…`)")),
    responses(
        (status = 200, description = "The run and its report", body = RunView),
        Unauthorized,
        (status = 404, description = "No such run", body = Problem, content_type = "application/problem+json"),
    ))]
async fn show(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RunView>, Problem> {
    match state
        .engine()
        .store()
        .statement_run(StatementRunParams { id: id.clone() })
        .await?
    {
        Some(r) => Ok(Json(view(r, true))),
        None => Err(Problem::not_found(format!("no reconciliation run {id:?}"))),
    }
}

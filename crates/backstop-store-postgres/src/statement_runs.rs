//! Statement reconciliation runs: recorded at the start and at the end of each run.
//!
//! The [`Statements`] impl is here, next to its SQL.

use crate::PostgresStore;
use crate::row::{col, opt_time, time};
use crate::types::Time;
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::store::{BoxFuture, Statements};
use backstop_core::store::{StatementRun, StatementRunsParams};
use sqlx::postgres::PgRow;

const RECORD: &str = "
INSERT INTO {schema}.statement_runs
    (id, kind, statement, started_at, finished_at, verdict, applied, report)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO UPDATE SET
    kind = EXCLUDED.kind, statement = EXCLUDED.statement, started_at = EXCLUDED.started_at,
    finished_at = EXCLUDED.finished_at, verdict = EXCLUDED.verdict,
    applied = EXCLUDED.applied, report = EXCLUDED.report";

const LIST: &str = "
SELECT id, kind, statement, started_at, finished_at, verdict, applied, NULL::text AS report
FROM {schema}.statement_runs WHERE $1::text IS NULL OR kind = $1
ORDER BY started_at DESC LIMIT $2";

const GET: &str = "
SELECT id, kind, statement, started_at, finished_at, verdict, applied, report
FROM {schema}.statement_runs WHERE id = $1";

impl Statements for PostgresStore {
    fn record_statement_run(&self, run: StatementRun) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { record(&self.db, &run).await })
    }

    fn statement_runs(
        &self,
        p: StatementRunsParams,
    ) -> BoxFuture<'_, Result<Vec<StatementRun>, StoreError>> {
        Box::pin(async move { list(&self.db, &p).await })
    }

    fn statement_run<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StatementRun>, StoreError>> {
        Box::pin(get(&self.db, id))
    }
}

pub(crate) async fn record(db: &Db, r: &StatementRun) -> Result<(), StoreError> {
    sqlx::query(db.schema.sql(RECORD))
        .bind(&r.id)
        .bind(&r.kind)
        .bind(&r.statement)
        .bind(Time(r.started_at))
        .bind(r.finished_at.map(Time))
        .bind(&r.verdict)
        .bind(r.applied as i64)
        .bind(&r.report)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(())
}

fn run(r: &PgRow) -> Result<StatementRun, StoreError> {
    Ok(StatementRun {
        id: col(r, "id")?,
        kind: col(r, "kind")?,
        statement: col(r, "statement")?,
        started_at: time(r, "started_at")?,
        finished_at: opt_time(r, "finished_at")?,
        verdict: col(r, "verdict")?,
        applied: col::<i64>(r, "applied")? as u64,
        report: col(r, "report")?,
    })
}

pub(crate) async fn list(
    db: &Db,
    p: &StatementRunsParams,
) -> Result<Vec<StatementRun>, StoreError> {
    let rows = sqlx::query(db.schema.sql(LIST))
        .bind(&p.kind)
        .bind(p.limit as i64)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter().map(run).collect()
}

pub(crate) async fn get(db: &Db, id: &str) -> Result<Option<StatementRun>, StoreError> {
    let row = sqlx::query(db.schema.sql(GET))
        .bind(id)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?;
    row.as_ref().map(run).transpose()
}

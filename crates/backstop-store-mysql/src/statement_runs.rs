//! Statement reconciliation runs: recorded at the start and at the end of each run.
//!
//! The [`Statements`] impl is here, next to its SQL.

use crate::Db;
use crate::MysqlStore;
use crate::row::{col, from_ms, to_ms};
use crate::tx::db_err;
use backstop_core::StoreError;
use backstop_core::store::{BoxFuture, Statements};
use backstop_core::store::{StatementRun, StatementRunsParams};
use sqlx::mysql::MySqlRow;

const RECORD: &str = "
INSERT INTO {statement_runs}
    (id, kind, statement, started_at, finished_at, verdict, applied, report)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    kind = VALUES(kind), statement = VALUES(statement), started_at = VALUES(started_at),
    finished_at = VALUES(finished_at), verdict = VALUES(verdict), applied = VALUES(applied),
    report = VALUES(report)";

const LIST: &str = "
SELECT id, kind, statement, started_at, finished_at, verdict, applied, NULL AS report
FROM {statement_runs} WHERE ? IS NULL OR kind = ? ORDER BY started_at DESC LIMIT ?";

const GET: &str = "
SELECT id, kind, statement, started_at, finished_at, verdict, applied, report
FROM {statement_runs} WHERE id = ?";

impl Statements for MysqlStore {
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
    sqlx::query(db.tables.q(RECORD))
        .bind(&r.id)
        .bind(&r.kind)
        .bind(&r.statement)
        .bind(to_ms(r.started_at))
        .bind(r.finished_at.map(to_ms))
        .bind(&r.verdict)
        .bind(r.applied as i64)
        .bind(&r.report)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(())
}

fn run(r: &MySqlRow) -> Result<StatementRun, StoreError> {
    Ok(StatementRun {
        id: col(r, "id")?,
        kind: col(r, "kind")?,
        statement: col(r, "statement")?,
        started_at: from_ms(col(r, "started_at")?),
        finished_at: col::<Option<i64>, _>(r, "finished_at")?.map(from_ms),
        verdict: col(r, "verdict")?,
        applied: col::<i64, _>(r, "applied")? as u64,
        report: col(r, "report")?,
    })
}

pub(crate) async fn list(
    db: &Db,
    p: &StatementRunsParams,
) -> Result<Vec<StatementRun>, StoreError> {
    let rows = sqlx::query(db.tables.q(LIST))
        .bind(&p.kind)
        .bind(&p.kind)
        .bind(p.limit as i64)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter().map(run).collect()
}

pub(crate) async fn get(db: &Db, id: &str) -> Result<Option<StatementRun>, StoreError> {
    let row = sqlx::query(db.tables.q(GET))
        .bind(id)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?;
    row.as_ref().map(run).transpose()
}

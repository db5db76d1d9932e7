//! Statement reconciliation runs (the [`Statements`] impl): recorded at the start and at the end of each run.

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use backstop_core::StoreError;
use backstop_core::store::{BoxFuture, StatementRun, StatementRunsParams, Statements};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Row, SqliteConnection};

impl Statements for SqliteStore {
    fn record_statement_run(&self, run: StatementRun) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            record(&mut w, &run).await
        })
    }

    fn statement_runs(
        &self,
        p: StatementRunsParams,
    ) -> BoxFuture<'_, Result<Vec<StatementRun>, StoreError>> {
        Box::pin(async move { list(&self.inner.readers, &p).await })
    }

    fn statement_run<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StatementRun>, StoreError>> {
        Box::pin(get(&self.inner.readers, id))
    }
}

pub(crate) async fn record(
    conn: &mut SqliteConnection,
    r: &StatementRun,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO backstop_statement_runs
            (id, kind, statement, started_at, finished_at, verdict, applied, report)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (id) DO UPDATE SET
            kind = excluded.kind, statement = excluded.statement,
            started_at = excluded.started_at, finished_at = excluded.finished_at,
            verdict = excluded.verdict, applied = excluded.applied, report = excluded.report",
    )
    .bind(&r.id)
    .bind(&r.kind)
    .bind(&r.statement)
    .bind(to_ms(r.started_at))
    .bind(r.finished_at.map(to_ms))
    .bind(&r.verdict)
    .bind(r.applied as i64)
    .bind(&r.report)
    .execute(conn)
    .await
    .map_err(db_err)?;
    Ok(())
}

fn run(r: &SqliteRow) -> StatementRun {
    StatementRun {
        id: r.get("id"),
        kind: r.get("kind"),
        statement: r.get("statement"),
        started_at: from_ms(r.get("started_at")),
        finished_at: r.get::<Option<i64>, _>("finished_at").map(from_ms),
        verdict: r.get("verdict"),
        applied: r.get::<i64, _>("applied") as u64,
        report: r.get("report"),
    }
}

pub(crate) async fn list(
    pool: &SqlitePool,
    p: &StatementRunsParams,
) -> Result<Vec<StatementRun>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, kind, statement, started_at, finished_at, verdict, applied, NULL AS report
         FROM backstop_statement_runs WHERE ?1 IS NULL OR kind = ?1
         ORDER BY started_at DESC LIMIT ?2",
    )
    .bind(&p.kind)
    .bind(p.limit as i64)
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    Ok(rows.iter().map(run).collect())
}

pub(crate) async fn get(pool: &SqlitePool, id: &str) -> Result<Option<StatementRun>, StoreError> {
    let row = sqlx::query(
        "SELECT id, kind, statement, started_at, finished_at, verdict, applied, report
         FROM backstop_statement_runs WHERE id = ?1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
    .map_err(db_err)?;
    Ok(row.as_ref().map(run))
}

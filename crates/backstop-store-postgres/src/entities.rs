//! Guarded state transitions: each request about an entity is decided in one transaction that
//! first makes sure the entity's row exists (`ON CONFLICT DO NOTHING`), then locks it
//! (`FOR UPDATE`), so requests about one entity wait for one another and each decides on what
//! the one before it committed; the decision is recorded whatever it is.
//!
//! The [`Entities`] impl is here, next to its SQL.

use crate::PostgresStore;
use crate::row::{col, time};
use crate::types::Time;
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::entity::{self, Answer, Entity, EntityDecision};
use backstop_core::store::{BoxFuture, Entities};
use backstop_core::store::{EntityHistory, EntityParams, TransitionOutcome, TransitionParams};
use sqlx::postgres::PgRow;

/// Creates the entity in its initial state unless it exists (`$1` machine, `$2` id, `$3`
/// initial, `$4` now). A concurrent creator's uncommitted row makes this wait for its commit.
const CREATE: &str = "
INSERT INTO {schema}.entities (machine, entity_id, state, created_at, updated_at)
VALUES ($1, $2, $3, $4, $4)
ON CONFLICT (machine, entity_id) DO NOTHING";

const LOCK: &str = "
SELECT state, version, decisions, created_at, updated_at
FROM {schema}.entities WHERE machine = $1 AND entity_id = $2
FOR UPDATE";

const READ: &str = "
SELECT state, version, decisions, created_at, updated_at
FROM {schema}.entities WHERE machine = $1 AND entity_id = $2";

const APPLIED_BEFORE: &str = "
SELECT EXISTS (SELECT 1 FROM {schema}.entity_events
               WHERE machine = $1 AND entity_id = $2 AND event_id = $3)";

const RECORD_APPLIED: &str = "
INSERT INTO {schema}.entity_events (machine, entity_id, event_id, at) VALUES ($1, $2, $3, $4)";

const WRITE_BACK: &str = "
UPDATE {schema}.entities SET state = $3, version = $4, decisions = $5, updated_at = $6
WHERE machine = $1 AND entity_id = $2";

const RECORD_DECISION: &str = "
INSERT INTO {schema}.entity_decisions
    (machine, entity_id, event_id, from_state, to_state, answer, version, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// At most `$3` decisions (the entity's count), oldest first.
const HISTORY: &str = "
SELECT event_id, from_state, to_state, answer, version, at
FROM {schema}.entity_decisions WHERE machine = $1 AND entity_id = $2
ORDER BY seq LIMIT $3";

fn entity_row(machine: &str, id: &str, r: &PgRow) -> Result<Entity, StoreError> {
    let decisions: i64 = col(r, "decisions")?;
    Ok(Entity {
        machine: machine.to_string(),
        id: id.to_string(),
        state: col(r, "state")?,
        version: col(r, "version")?,
        decisions: decisions as u64,
        created_at: time(r, "created_at")?,
        updated_at: time(r, "updated_at")?,
    })
}

fn decision_row(r: &PgRow) -> Result<EntityDecision, StoreError> {
    let answer: String = col(r, "answer")?;
    Ok(EntityDecision {
        event_id: col(r, "event_id")?,
        from: col(r, "from_state")?,
        to: col(r, "to_state")?,
        answer: answer
            .parse()
            .map_err(|e| StoreError::Database(format!("in the database: {e}")))?,
        version: col(r, "version")?,
        at: time(r, "at")?,
    })
}

impl Entities for PostgresStore {
    fn transition_entity(
        &self,
        p: TransitionParams,
    ) -> BoxFuture<'_, Result<TransitionOutcome, StoreError>> {
        Box::pin(async move { transition(&self.db, &p).await })
    }

    fn entity(&self, p: EntityParams) -> BoxFuture<'_, Result<Option<EntityHistory>, StoreError>> {
        Box::pin(async move { entity(&self.db, &p).await })
    }
}

pub(crate) async fn transition(
    db: &Db,
    p: &TransitionParams,
) -> Result<TransitionOutcome, StoreError> {
    let (machine, id) = (p.machine.as_str(), p.entity_id.as_str());
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    sqlx::query(db.schema.sql(CREATE))
        .bind(machine)
        .bind(id)
        .bind(&p.initial)
        .bind(Time(p.now))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let row = sqlx::query(db.schema.sql(LOCK))
        .bind(machine)
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    let before = entity_row(machine, id, &row)?;
    // READ COMMITTED: this statement sees everything committed before the lock was granted.
    let applied_before: bool = sqlx::query_scalar(db.schema.sql(APPLIED_BEFORE))
        .bind(machine)
        .bind(id)
        .bind(&p.event_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    let out = entity::decide(p, before, applied_before);
    if out.answer == Answer::Applied {
        sqlx::query(db.schema.sql(RECORD_APPLIED))
            .bind(machine)
            .bind(id)
            .bind(&p.event_id)
            .bind(Time(p.now))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    let e = &out.entity;
    sqlx::query(db.schema.sql(WRITE_BACK))
        .bind(machine)
        .bind(id)
        .bind(&e.state)
        .bind(e.version)
        .bind(e.decisions as i64)
        .bind(Time(e.updated_at))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let d = &out.decision;
    sqlx::query(db.schema.sql(RECORD_DECISION))
        .bind(machine)
        .bind(id)
        .bind(&d.event_id)
        .bind(&d.from)
        .bind(&d.to)
        .bind(d.answer.as_str())
        .bind(d.version)
        .bind(Time(d.at))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    Ok(out)
}

pub(crate) async fn entity(db: &Db, p: &EntityParams) -> Result<Option<EntityHistory>, StoreError> {
    let Some(row) = sqlx::query(db.schema.sql(READ))
        .bind(&p.machine)
        .bind(&p.id)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
    else {
        return Ok(None);
    };
    let entity = entity_row(&p.machine, &p.id, &row)?;
    let decisions = sqlx::query(db.schema.sql(HISTORY))
        .bind(&p.machine)
        .bind(&p.id)
        .bind(entity.decisions as i64)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(decision_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(EntityHistory { entity, decisions }))
}

//! Guarded state transitions: each request about an entity is decided in one transaction that
//! first makes sure the entity's row exists, then locks it (`FOR UPDATE`), so requests about
//! one entity wait for one another and each decides on what the one before it committed; the
//! decision is recorded whatever it is. Creating a new entity from many requests at once can
//! deadlock InnoDB's insert locks; the loser is rolled back whole and tried again.
//!
//! The [`Entities`] impl is here, next to its SQL.

use crate::Db;
use crate::MysqlStore;
use crate::row::{col, from_ms, text, to_ms};
use crate::tx::{Fail, Retry, db_err, transaction};
use backstop_core::StoreError;
use backstop_core::entity::{self, Answer, Entity, EntityDecision};
use backstop_core::store::{BoxFuture, Entities};
use backstop_core::store::{EntityHistory, EntityParams, TransitionOutcome, TransitionParams};
use sqlx::MySqlConnection;
use sqlx::mysql::MySqlRow;

/// Creates the entity in its initial state unless it exists; an existing row is left as it
/// is (the no-op update only takes its lock). Binds: machine, id, initial, now, now.
const CREATE: &str = "
INSERT INTO {entities} (machine, entity_id, state, created_at, updated_at)
VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE machine = machine";

const LOCK: &str = "
SELECT state, version, decisions, created_at, updated_at
FROM {entities} WHERE machine = ? AND entity_id = ?
FOR UPDATE";

const READ: &str = "
SELECT state, version, decisions, created_at, updated_at
FROM {entities} WHERE machine = ? AND entity_id = ?";

const APPLIED_BEFORE: &str = "
SELECT COUNT(*) FROM {entity_events} WHERE machine = ? AND entity_id = ? AND event_id = ?";

const RECORD_APPLIED: &str = "
INSERT INTO {entity_events} (machine, entity_id, event_id, at) VALUES (?, ?, ?, ?)";

/// Binds: state, version, decisions, updated_at, machine, id.
const WRITE_BACK: &str = "
UPDATE {entities} SET state = ?, version = ?, decisions = ?, updated_at = ?
WHERE machine = ? AND entity_id = ?";

const RECORD_DECISION: &str = "
INSERT INTO {entity_decisions}
    (machine, entity_id, event_id, from_state, to_state, answer, version, at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

/// At most the entity's count of decisions, oldest first.
const HISTORY: &str = "
SELECT event_id, from_state, to_state, answer, version, at
FROM {entity_decisions} WHERE machine = ? AND entity_id = ?
ORDER BY seq LIMIT ?";

fn entity_row(machine: &str, id: &str, r: &MySqlRow) -> Result<Entity, StoreError> {
    let decisions: i64 = col(r, "decisions")?;
    Ok(Entity {
        machine: machine.to_string(),
        id: id.to_string(),
        state: text(r, "state")?,
        version: col(r, "version")?,
        decisions: decisions as u64,
        created_at: from_ms(col(r, "created_at")?),
        updated_at: from_ms(col(r, "updated_at")?),
    })
}

fn decision_row(r: &MySqlRow) -> Result<EntityDecision, StoreError> {
    let answer: String = col(r, "answer")?;
    Ok(EntityDecision {
        event_id: text(r, "event_id")?,
        from: text(r, "from_state")?,
        to: text(r, "to_state")?,
        answer: answer
            .parse()
            .map_err(|e| StoreError::Database(format!("in the database: {e}")))?,
        version: col(r, "version")?,
        at: from_ms(col(r, "at")?),
    })
}

impl Entities for MysqlStore {
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
    transaction!(db, Retry::Locks, |conn| transition_locked(db, conn, p)
        .await)
}

/// The decision, in a transaction that holds the entity's lock from its first statement.
async fn transition_locked(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &TransitionParams,
) -> Result<TransitionOutcome, Fail> {
    let t = &db.tables;
    let (machine, id) = (p.machine.as_bytes(), p.entity_id.as_bytes());
    let now = to_ms(p.now);
    sqlx::query(t.q(CREATE))
        .bind(machine)
        .bind(id)
        .bind(p.initial.as_bytes())
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    let row = sqlx::query(t.q(LOCK))
        .bind(machine)
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
    let before = entity_row(&p.machine, &p.entity_id, &row)?;
    // READ COMMITTED: this statement sees everything committed before the lock was granted.
    let applied_before: i64 = sqlx::query_scalar(t.q(APPLIED_BEFORE))
        .bind(machine)
        .bind(id)
        .bind(p.event_id.as_bytes())
        .fetch_one(&mut *conn)
        .await?;
    let out = entity::decide(p, before, applied_before > 0);
    if out.answer == Answer::Applied {
        sqlx::query(t.q(RECORD_APPLIED))
            .bind(machine)
            .bind(id)
            .bind(p.event_id.as_bytes())
            .bind(now)
            .execute(&mut *conn)
            .await?;
    }
    let e = &out.entity;
    sqlx::query(t.q(WRITE_BACK))
        .bind(e.state.as_bytes())
        .bind(e.version)
        .bind(e.decisions as i64)
        .bind(to_ms(e.updated_at))
        .bind(machine)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    let d = &out.decision;
    sqlx::query(t.q(RECORD_DECISION))
        .bind(machine)
        .bind(id)
        .bind(d.event_id.as_bytes())
        .bind(d.from.as_bytes())
        .bind(d.to.as_bytes())
        .bind(d.answer.as_str())
        .bind(d.version)
        .bind(to_ms(d.at))
        .execute(&mut *conn)
        .await?;
    Ok(out)
}

pub(crate) async fn entity(db: &Db, p: &EntityParams) -> Result<Option<EntityHistory>, StoreError> {
    let t = &db.tables;
    let Some(row) = sqlx::query(t.q(READ))
        .bind(p.machine.as_bytes())
        .bind(p.id.as_bytes())
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
    else {
        return Ok(None);
    };
    let entity = entity_row(&p.machine, &p.id, &row)?;
    let decisions = sqlx::query(t.q(HISTORY))
        .bind(p.machine.as_bytes())
        .bind(p.id.as_bytes())
        .bind(entity.decisions as i64)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(decision_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(EntityHistory { entity, decisions }))
}

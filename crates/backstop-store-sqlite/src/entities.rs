//! Guarded state transitions (the [`Entities`] impl): each request about an entity is decided in one `BEGIN
//! IMMEDIATE` transaction on the single writer, so requests about one entity (and all others)
//! are decided one at a time; the decision is recorded whatever it is.

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use backstop_core::StoreError;
use backstop_core::entity::{self, Answer, Entity, EntityDecision};
use backstop_core::store::{
    BoxFuture, Entities, EntityHistory, EntityParams, TransitionOutcome, TransitionParams,
};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Connection, Row, SqliteConnection};

/// Creates the entity in its initial state unless it exists (`?1` machine, `?2` id, `?3`
/// initial, `?4` now).
const CREATE: &str = "
INSERT INTO backstop_entities (machine, entity_id, state, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?4)
ON CONFLICT (machine, entity_id) DO NOTHING";

const READ: &str = "
SELECT state, version, decisions, created_at, updated_at
FROM backstop_entities WHERE machine = ?1 AND entity_id = ?2";

const APPLIED_BEFORE: &str = "
SELECT EXISTS (SELECT 1 FROM backstop_entity_events
               WHERE machine = ?1 AND entity_id = ?2 AND event_id = ?3)";

const RECORD_APPLIED: &str = "
INSERT INTO backstop_entity_events (machine, entity_id, event_id, at) VALUES (?1, ?2, ?3, ?4)";

const WRITE_BACK: &str = "
UPDATE backstop_entities SET state = ?3, version = ?4, decisions = ?5, updated_at = ?6
WHERE machine = ?1 AND entity_id = ?2";

const RECORD_DECISION: &str = "
INSERT INTO backstop_entity_decisions
    (machine, entity_id, event_id, from_state, to_state, answer, version, at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// At most `?3` decisions (the entity's count), oldest first.
const HISTORY: &str = "
SELECT event_id, from_state, to_state, answer, version, at
FROM backstop_entity_decisions WHERE machine = ?1 AND entity_id = ?2
ORDER BY seq LIMIT ?3";

fn entity_row(machine: &str, id: &str, r: &SqliteRow) -> Entity {
    Entity {
        machine: machine.to_string(),
        id: id.to_string(),
        state: r.get("state"),
        version: r.get("version"),
        decisions: r.get::<i64, _>("decisions") as u64,
        created_at: from_ms(r.get("created_at")),
        updated_at: from_ms(r.get("updated_at")),
    }
}

impl Entities for SqliteStore {
    fn transition_entity(
        &self,
        p: TransitionParams,
    ) -> BoxFuture<'_, Result<TransitionOutcome, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            transition(&mut w, &p).await
        })
    }

    fn entity(&self, p: EntityParams) -> BoxFuture<'_, Result<Option<EntityHistory>, StoreError>> {
        Box::pin(async move { entity(&self.inner.readers, &p).await })
    }
}

pub(crate) async fn transition(
    conn: &mut SqliteConnection,
    p: &TransitionParams,
) -> Result<TransitionOutcome, StoreError> {
    let (machine, id) = (p.machine.as_str(), p.entity_id.as_str());
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    sqlx::query(CREATE)
        .bind(machine)
        .bind(id)
        .bind(&p.initial)
        .bind(to_ms(p.now))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let row = sqlx::query(READ)
        .bind(machine)
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    let before = entity_row(machine, id, &row);
    let applied_before: bool = sqlx::query_scalar(APPLIED_BEFORE)
        .bind(machine)
        .bind(id)
        .bind(&p.event_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    let out = entity::decide(p, before, applied_before);
    if out.answer == Answer::Applied {
        sqlx::query(RECORD_APPLIED)
            .bind(machine)
            .bind(id)
            .bind(&p.event_id)
            .bind(to_ms(p.now))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    let e = &out.entity;
    sqlx::query(WRITE_BACK)
        .bind(machine)
        .bind(id)
        .bind(&e.state)
        .bind(e.version)
        .bind(e.decisions as i64)
        .bind(to_ms(e.updated_at))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let d = &out.decision;
    sqlx::query(RECORD_DECISION)
        .bind(machine)
        .bind(id)
        .bind(&d.event_id)
        .bind(&d.from)
        .bind(&d.to)
        .bind(d.answer.as_str())
        .bind(d.version)
        .bind(to_ms(d.at))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    Ok(out)
}

pub(crate) async fn entity(
    pool: &SqlitePool,
    p: &EntityParams,
) -> Result<Option<EntityHistory>, StoreError> {
    let Some(row) = sqlx::query(READ)
        .bind(&p.machine)
        .bind(&p.id)
        .fetch_optional(pool)
        .await
        .map_err(db_err)?
    else {
        return Ok(None);
    };
    let entity = entity_row(&p.machine, &p.id, &row);
    let rows = sqlx::query(HISTORY)
        .bind(&p.machine)
        .bind(&p.id)
        .bind(entity.decisions as i64)
        .fetch_all(pool)
        .await
        .map_err(db_err)?;
    let decisions = rows
        .iter()
        .map(|r| {
            let answer: String = r.get("answer");
            Ok(EntityDecision {
                event_id: r.get("event_id"),
                from: r.get("from_state"),
                to: r.get("to_state"),
                answer: answer
                    .parse()
                    .map_err(|e| StoreError::Database(format!("in the database: {e}")))?,
                version: r.get("version"),
                at: from_ms(r.get("at")),
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Some(EntityHistory { entity, decisions }))
}

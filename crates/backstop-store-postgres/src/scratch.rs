//! Scratch ledgers for tests, benches and harnesses: a schema of its own with a fresh, unique
//! name on a PostgreSQL server, a store opened on it, and dropping it again. The SQL lives
//! here, next to the migrations that decide what the schema holds, so that callers never write
//! their own `DROP SCHEMA`. Every object the migrations create lives in the ledger's schema
//! (tables by name, their indexes and triggers with them, the trigger functions by name), so
//! dropping the schema with `CASCADE` drops exactly what they made.

use crate::connect::PostgresOptions;
use crate::schema::Schema;
use crate::{PostgresStore, db_err};
use backstop_core::{Cause, StoreError};
use sqlx::{Connection, PgConnection};

/// A schema of its own on a server, named `{label}_{UUIDv7 in hex}`. Nothing exists until a
/// store opens on it (migrating creates the schema); nothing is dropped until
/// [`ScratchSchema::drop_all`] (or its blocking twin) is called.
#[derive(Clone, Debug)]
pub struct ScratchSchema {
    /// The server URL as given, backstop's own parameters included.
    server: String,
    /// Options for a store on the scratch schema.
    opts: PostgresOptions,
    schema: Schema,
}

impl ScratchSchema {
    /// A fresh schema on the server at `url` (a `postgres:` or `postgresql:` URL; a `schema=`
    /// in it is overridden). `label` says whose schema it is (`test`, `bench`, …): lower-case
    /// letters, digits and `_`, at most 30 bytes, so that the name stays within PostgreSQL's 63.
    pub fn new(url: &str, label: &str) -> Result<Self, StoreError> {
        let mut opts = PostgresOptions::from_url(url)?;
        opts.schema = format!("{label}_{}", uuid::Uuid::now_v7().simple());
        // Checks the name too: a label too long or of other characters fails here.
        let schema = Schema::new(&opts.schema)?;
        Ok(ScratchSchema {
            server: url.to_string(),
            opts,
            schema,
        })
    }

    /// The schema's name, e.g. `bench_019a…`.
    pub fn name(&self) -> &str {
        &self.opts.schema
    }

    /// Options for a store on the scratch schema (the server's, with this schema).
    pub fn options(&self) -> PostgresOptions {
        self.opts.clone()
    }

    /// The URL of the scratch ledger, for [`PostgresStore::open`] or `backstop --database`:
    /// the server's URL as given with `schema=` added.
    pub fn url(&self) -> String {
        let sep = if self.server.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}", self.server, self.name())
    }

    /// Opens a store on the scratch schema, creating it (migrating) if needed.
    pub async fn open(&self) -> Result<PostgresStore, StoreError> {
        PostgresStore::open_with(self.options()).await
    }

    /// Settles the busy tables as a long-running server's autovacuum and background analysis
    /// would (dead rows vacuumed, statistics current), and checkpoints, so that a bench
    /// measures an empty and a prefilled ledger alike. The checkpoint needs superuser or
    /// `pg_checkpoint`; without it the rest is still done.
    pub async fn settle(&self) -> Result<(), StoreError> {
        let mut conn = self.connection().await?;
        let vacuumed = sqlx::raw_sql(
            self.schema
                .sql("VACUUM ANALYZE {schema}.tasks, {schema}.events, {schema}.task_groups"),
        )
        .execute(&mut conn)
        .await
        .map_err(db_err);
        if vacuumed.is_ok() {
            let _ = sqlx::raw_sql("CHECKPOINT").execute(&mut conn).await;
        }
        let _ = conn.close().await;
        vacuumed.map(|_| ())
    }

    /// Drops the schema with everything in it, if it exists.
    pub async fn drop_all(&self) -> Result<(), StoreError> {
        let mut conn = self.connection().await?;
        let dropped = sqlx::raw_sql(self.schema.sql("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .execute(&mut conn)
            .await
            .map_err(db_err);
        let _ = conn.close().await;
        dropped.map(|_| ())
    }

    /// [`ScratchSchema::drop_all`] for a `Drop` impl: a test's guard is dropped inside the
    /// test's runtime, which cannot be blocked on, so this runs on a thread and a runtime of
    /// its own and waits for them.
    pub fn drop_all_blocking(&self) -> Result<(), StoreError> {
        let scratch = self.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| StoreError::Database(Cause::with_context("a runtime to drop in", e)))?
                .block_on(scratch.drop_all())
        })
        .join()
        .map_err(|_| StoreError::Database("the thread dropping the schema panicked".into()))?
    }

    /// One connection of its own (no pool: one statement or two).
    async fn connection(&self) -> Result<PgConnection, StoreError> {
        PgConnection::connect(&self.opts.url)
            .await
            .map_err(|e| StoreError::Open(Cause::with_context("PostgreSQL", e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What lives in a namespace: `kind name` of every relation (tables, indexes, sequences,
    /// views), function and type in it.
    const OBJECTS: &str = "
        SELECT kind || ' ' || name FROM (
            SELECT 'relation' AS kind, c.relname::text AS name FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1
            UNION ALL
            SELECT 'function', p.proname::text FROM pg_proc p
                JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
            UNION ALL
            SELECT 'type', t.typname::text FROM pg_type t
                JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1
        ) o ORDER BY 1";

    async fn objects_in(conn: &mut PgConnection, namespace: &str) -> Vec<String> {
        sqlx::query_scalar(OBJECTS)
            .bind(namespace)
            .fetch_all(conn)
            .await
            .unwrap()
    }

    #[test]
    fn names_are_unique_and_within_the_limit() {
        let url = "postgres://postgres@127.0.0.1:5432/test?schema=app&max_connections=3";
        let (a, b) = (
            ScratchSchema::new(url, "bench").unwrap(),
            ScratchSchema::new(url, "bench").unwrap(),
        );
        assert_ne!(a.name(), b.name());
        assert!(a.name().starts_with("bench_"));
        assert_eq!(a.options().max_connections, 3);
        assert_eq!(a.url(), format!("{url}&schema={}", a.name()));
        assert!(ScratchSchema::new(url, &"l".repeat(30)).is_ok());
        assert!(ScratchSchema::new(url, &"l".repeat(31)).is_err());
        assert!(ScratchSchema::new(url, "Bench").is_err());
    }

    /// The migrations create their objects in the scratch schema only, and dropping leaves
    /// none of them behind. Runs against `BACKSTOP_TEST_POSTGRES_URL` (passes untested
    /// without it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_leaves_nothing_of_the_migrations_behind() {
        let Some(url) = std::env::var("BACKSTOP_TEST_POSTGRES_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            eprintln!("skipped: BACKSTOP_TEST_POSTGRES_URL is not set");
            return;
        };
        let scratch = ScratchSchema::new(&url, "scratch").unwrap();
        let mut conn = PgConnection::connect(&scratch.options().url).await.unwrap();
        // Other tests make schemas of their own meanwhile, never objects in `public`.
        let public = objects_in(&mut conn, "public").await;
        assert!(objects_in(&mut conn, scratch.name()).await.is_empty());
        let store = scratch.open().await.unwrap();
        store.close().await;
        let made = objects_in(&mut conn, scratch.name()).await;
        for table in [
            "tasks",
            "events",
            "leaders",
            "callbacks",
            "schema_migrations",
        ] {
            assert!(made.contains(&format!("relation {table}")), "{made:?}");
        }
        assert!(
            made.contains(&"function notify_work".to_string()),
            "{made:?}"
        );
        assert_eq!(
            objects_in(&mut conn, "public").await,
            public,
            "the migrations made something outside their schema"
        );
        scratch.settle().await.unwrap();
        scratch.drop_all().await.unwrap();
        assert_eq!(
            objects_in(&mut conn, scratch.name()).await,
            Vec::<String>::new()
        );
        let left: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
                .bind(scratch.name())
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert!(!left, "the schema is gone");
        conn.close().await.unwrap();
        // Dropping what is already gone is no error (a guard may drop after a failed open).
        scratch.drop_all_blocking().unwrap();
    }
}

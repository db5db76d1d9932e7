//! An engine on a fresh schema of the test server, with an in-process kind whose handler
//! reports every start, and the means to hurt it: its connections are named after the schema
//! (`application_name`), so a test kills only its own and never another test's.

#![allow(dead_code)] // Each test file uses its own part.

use crate::common::SchemaGuard;
use backstop_core::store::Tasks;
use backstop_core::{KindConfig, Outcome};
use backstop_engine::{Engine, EngineOptions, handler};
use backstop_store_postgres::{PostgresOptions, PostgresStore};
use sqlx::{Connection, PgConnection};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The kind every rig runs.
pub const KIND: &str = "rig.work";

/// One handler start: the task's key and id, and when.
pub struct Started {
    pub key: String,
    pub id: backstop_core::TaskId,
    pub at: Instant,
}

pub struct Rig {
    pub guard: SchemaGuard,
    /// The `application_name` of the engine's connections (its listener's is this and
    /// ` wake-ups`).
    pub app: String,
    pub store: PostgresStore,
    pub engine: Engine,
    pub started: mpsc::UnboundedReceiver<Started>,
    stop: Option<oneshot::Sender<()>>,
    run: Option<JoinHandle<()>>,
}

/// Options for a store on the guard's schema whose connections are named `app`.
pub fn named(guard: &SchemaGuard, app: &str, max_connections: u32) -> PostgresOptions {
    let mut opts = guard.options();
    let sep = if opts.url.contains('?') { '&' } else { '?' };
    opts.url = format!("{}{sep}application_name={app}", opts.url);
    opts.max_connections = max_connections;
    opts
}

impl Rig {
    /// Starts an engine with `opts` and the kind `kind` (whose name must be [`KIND`]); the
    /// handler takes `work` per attempt.
    pub async fn start(
        opts: EngineOptions,
        kind: KindConfig,
        max_connections: u32,
        work: Duration,
    ) -> Rig {
        let guard = SchemaGuard::new();
        let app = guard.schema.clone();
        let store = PostgresStore::open_with(named(&guard, &app, max_connections))
            .await
            .expect("open the store");
        let (tx, started) = mpsc::unbounded_channel();
        let h = handler(move |ctx| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(Started {
                    key: ctx.key.clone(),
                    id: ctx.id,
                    at: Instant::now(),
                });
                if !work.is_zero() {
                    tokio::time::sleep(work).await;
                }
                Outcome::Success
            }
        });
        assert_eq!(kind.name, KIND);
        let engine = Engine::builder(Arc::new(store.clone()))
            .options(opts)
            .handler(KIND, h)
            .kind(kind)
            .build()
            .expect("engine");
        let (stop, rx) = oneshot::channel::<()>();
        let e = engine.clone();
        let run = tokio::spawn(async move {
            e.run(async {
                let _ = rx.await;
            })
            .await
        });
        Rig {
            guard,
            app,
            store,
            engine,
            started,
            stop: Some(stop),
            run: Some(run),
        }
    }

    /// A second store on the same schema, as another process would open it.
    pub async fn other_store(&self) -> PostgresStore {
        PostgresStore::open_with(named(&self.guard, &format!("{}-other", self.app), 2))
            .await
            .expect("another store")
    }

    /// Stops the engine and waits for it.
    pub async fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(r) = self.run.take() {
            r.await.expect("the engine's run");
        }
    }

    /// The pid of the listener's connection, once it listens.
    pub async fn listener_pid(&self) -> Option<i32> {
        let mut c = admin(&self.guard).await;
        sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity
             WHERE application_name = $1 || ' wake-ups' AND query LIKE 'LISTEN%'",
        )
        .bind(&self.app)
        .fetch_optional(&mut c)
        .await
        .expect("pg_stat_activity")
    }

    /// Waits (up to `within`) for a listening connection other than `not`; its pid.
    pub async fn wait_for_listener(&self, not: Option<i32>, within: Duration) -> i32 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(pid) = self.listener_pid().await
                && Some(pid) != not
            {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "no listener connected within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Terminates the backends of this rig's connections whose name matches `pattern`
    /// (a `LIKE` pattern; `%` is added after the rig's name); returns how many.
    pub async fn kill(&self, pattern: &str) -> i64 {
        let mut c = admin(&self.guard).await;
        sqlx::query_scalar(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name LIKE $1 AND pid <> pg_backend_pid()",
        )
        .bind(format!("{}{pattern}%", self.app))
        .fetch_one(&mut c)
        .await
        .expect("pg_terminate_backend")
    }

    /// Waits for `n` starts, up to `within`; the starts received.
    pub async fn starts(&mut self, n: usize, within: Duration) -> Vec<Started> {
        let deadline = tokio::time::Instant::now() + within;
        let mut got = Vec::new();
        while got.len() < n {
            match tokio::time::timeout_at(deadline, self.started.recv()).await {
                Ok(Some(s)) => got.push(s),
                _ => break,
            }
        }
        got
    }

    /// The tasks' counts per status.
    pub async fn counts(&self) -> backstop_core::StatusCounts {
        self.store.counts(None).await.expect("counts")
    }
}

/// A connection of the test's own, outside every pool under test.
pub async fn admin(guard: &SchemaGuard) -> PgConnection {
    let url = guard.options().url;
    PgConnection::connect(&url).await.expect("admin connection")
}

/// Percentiles of durations, in milliseconds: (p50, p99, max).
pub fn percentiles(mut d: Vec<Duration>) -> (f64, f64, f64) {
    d.sort();
    let ms = |x: Duration| x.as_secs_f64() * 1000.0;
    let at = |q: f64| ms(d[((d.len() as f64 - 1.0) * q).round() as usize]);
    (at(0.5), at(0.99), ms(*d.last().expect("some")))
}

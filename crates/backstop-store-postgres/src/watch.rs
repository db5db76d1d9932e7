//! Wake-ups (the [`WorkWatch`] impl): `LISTEN` on the schema's channel (filled by the `tasks_notify_work` trigger of
//! migration 4 at the commit of every insert into `tasks`, whoever ran it), on a connection of
//! its own outside the pool, reporting to the engine the kinds that got work.
//!
//! It is only a hint — engines still poll — so the listener never holds anything up: a lost
//! connection (server restart, `pg_terminate_backend`, network) is reported, and it reconnects
//! with backoff (0.1 s doubling to 5 s) forever; an idle connection is pinged every 30 s, so a
//! silently dead one is noticed too.

use crate::PostgresStore;
use backstop_core::store::{BoxFuture, WorkSignal, WorkSink, WorkWatch};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use std::time::Duration;
use tokio::time::timeout;

/// First wait before reconnecting; doubles up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A connection quiet for this long is pinged.
const PING_AFTER: Duration = Duration::from_secs(30);
/// How long connecting, subscribing or a ping may take before the connection counts as lost.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

impl WorkWatch for PostgresStore {
    fn watch_work(&self, sink: WorkSink) -> Option<BoxFuture<'static, ()>> {
        let connect = (*self.db.pool.connect_options()).clone();
        let channel = channel(self.db.schema.name());
        Some(Box::pin(run(connect, channel, sink)))
    }
}

/// The channel the trigger notifies for a schema: its name (at most 57 bytes, so that the
/// channel fits PostgreSQL's 63) and `.tasks`. Schema names are ASCII.
fn channel(schema: &str) -> String {
    format!("{}.tasks", &schema[..schema.len().min(57)])
}

/// Listens until dropped.
async fn run(connect: PgConnectOptions, channel: String, sink: WorkSink) {
    let name = format!(
        "{} wake-ups",
        connect.get_application_name().unwrap_or("backstop")
    );
    let connect = connect.application_name(&name);
    let mut backoff = BACKOFF_MIN;
    loop {
        let mut connected = false;
        let error = session(&connect, &channel, &sink, &mut connected).await;
        if connected {
            backoff = BACKOFF_MIN;
            sink(WorkSignal::Disconnected {
                error: error.clone(),
            });
        }
        tracing::warn!(
            channel = %channel, error = %error, retry_in_ms = backoff.as_millis() as u64,
            "wake-up listener lost its connection; reconnecting (polling still finds work)"
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// One connection's life: returns why it ended. `connected` is set once it listens.
async fn session(
    connect: &PgConnectOptions,
    channel: &str,
    sink: &WorkSink,
    connected: &mut bool,
) -> String {
    // A pool of one, used only to open the connection: the listener is never counted against
    // (nor waits for) the store's own pool.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(ANSWER_WITHIN)
        .connect_lazy_with(connect.clone());
    let listener = timeout(ANSWER_WITHIN, async {
        let mut l = PgListener::connect_with(&pool).await?;
        l.ignore_pool_close_event(true);
        l.eager_reconnect(false);
        l.listen(channel).await?;
        Ok::<_, sqlx::Error>(l)
    })
    .await;
    let mut listener = match listener {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => return e.to_string(),
        Err(_) => return "no answer in time".into(),
    };
    *connected = true;
    tracing::info!(channel = %channel, "wake-up listener connected");
    sink(WorkSignal::Connected);
    loop {
        match timeout(PING_AFTER, listener.try_recv()).await {
            Ok(Ok(Some(n))) => sink(WorkSignal::Work {
                kinds: n
                    .payload()
                    .split(' ')
                    .filter(|k| !k.is_empty())
                    .map(str::to_string)
                    .collect(),
            }),
            Ok(Ok(None)) => return "the connection was closed".into(),
            Ok(Err(e)) => return e.to_string(),
            Err(_) => {
                let ping = sqlx::query("SELECT 1").execute(&mut listener);
                match timeout(ANSWER_WITHIN, ping).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return e.to_string(),
                    Err(_) => return "no answer to a ping in time".into(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_fits_postgresql_names() {
        assert_eq!(channel("backstop"), "backstop.tasks");
        let long = "a".repeat(63);
        assert_eq!(channel(&long).len(), 63);
    }
}

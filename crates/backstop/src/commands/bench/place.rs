//! Where a bench's ledger lives: a fresh SQLite file in a temporary directory, or with
//! `--database` a scratch schema (PostgreSQL) or table prefix (MySQL/MariaDB) on that server,
//! made and dropped through the store crate's scratch API, so that no SQL is written here.

use anyhow::{Context, Result, bail};
use backstop_store_mysql::ScratchPrefix;
use backstop_store_postgres::ScratchSchema;
use std::path::PathBuf;

/// Where the bench runs.
pub(super) enum Place {
    Sqlite(TempDir),
    /// A fresh schema on a PostgreSQL server.
    Postgres(ScratchSchema),
    /// A fresh table prefix on a MySQL/MariaDB server.
    Mysql(ScratchPrefix),
}

impl Place {
    pub(super) fn new(database: Option<&str>) -> Result<Place> {
        let Some(url) = database else {
            return Ok(Place::Sqlite(TempDir::new("bench")?));
        };
        match url.split(':').next().unwrap_or("") {
            "sqlite" => Ok(Place::Sqlite(TempDir::new("bench")?)),
            "postgres" | "postgresql" => {
                if url.contains("schema=") {
                    bail!("--database: leave out schema=; the bench makes a fresh schema");
                }
                Ok(Place::Postgres(
                    ScratchSchema::new(url, "bench").context("--database")?,
                ))
            }
            "mysql" | "mariadb" => {
                if url.contains("prefix=") {
                    bail!("--database: leave out prefix=; the bench makes a fresh table prefix");
                }
                Ok(Place::Mysql(
                    ScratchPrefix::new(url, "bench").context("--database")?,
                ))
            }
            _ => bail!("--database: expected a sqlite://, postgres:// or mysql:// URL"),
        }
    }

    pub(super) fn url(&self) -> String {
        match self {
            Place::Sqlite(dir) => dir.sqlite_url(),
            Place::Postgres(schema) => schema.url(),
            Place::Mysql(prefix) => prefix.url(),
        }
    }

    pub(super) fn store(&self) -> &'static str {
        match self {
            Place::Sqlite(_) => "sqlite",
            Place::Postgres(_) => "postgres",
            Place::Mysql(_) => "mysql",
        }
    }

    pub(super) fn isolated_in(&self) -> Option<String> {
        match self {
            Place::Sqlite(_) => None,
            Place::Postgres(schema) => Some(schema.name().to_string()),
            Place::Mysql(prefix) => Some(prefix.prefix().to_string()),
        }
    }

    /// Statistics and dead rows settled as a long-running server's would be (autovacuum and
    /// background analysis): the same for an empty and a prefilled ledger.
    pub(super) async fn settle(&self) -> Result<()> {
        match self {
            Place::Sqlite(_) => {}
            Place::Postgres(schema) => schema.settle().await?,
            Place::Mysql(prefix) => prefix.settle().await?,
        }
        Ok(())
    }

    /// Runs `measure` in a fresh place for `database` (see [`Place::new`]), then drops what
    /// it made, whether the measurement worked or not.
    pub(super) async fn measure_in<R>(
        database: Option<&str>,
        measure: impl AsyncFnOnce(&Place) -> Result<R>,
    ) -> Result<R> {
        let place = Place::new(database)?;
        let r = measure(&place).await;
        place
            .drop_all()
            .await
            .context("dropping the bench's tables")?;
        r
    }

    /// Drops the schema or the prefixed tables the bench made.
    pub(super) async fn drop_all(&self) -> Result<()> {
        match self {
            Place::Sqlite(_) => {}
            Place::Postgres(schema) => schema.drop_all().await?,
            Place::Mysql(prefix) => prefix.drop_all().await?,
        }
        Ok(())
    }
}

/// A fresh directory for a bench's database, removed when dropped.
pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn new(name: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("backstop-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }

    /// The URL of a SQLite database inside the directory.
    pub(super) fn sqlite_url(&self) -> String {
        format!("sqlite://{}", self.0.join("bench.db").display())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

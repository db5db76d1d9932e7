//! Where a scenario's ledger lives: a fresh SQLite file, PostgreSQL schema or MySQL/MariaDB
//! table prefix, dropped afterwards (the server ones made and dropped through the store
//! crates' scratch API, which knows what the migrations create); and the database-side faults
//! (backend kills, a server restart), run through the servers' own command-line tools.

use anyhow::{Context, bail};
use backstop_store_mysql::ScratchPrefix;
use backstop_store_postgres::ScratchSchema;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which store a scenario runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    Mysql,
}

impl Backend {
    /// The name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::Mysql => "mariadb",
        }
    }
}

/// Server URLs the PostgreSQL and MySQL scenarios use (`None`: those scenarios are skipped).
#[derive(Clone, Debug, Default)]
pub struct Servers {
    pub postgres: Option<String>,
    pub mysql: Option<String>,
}

/// One scenario's ledger.
#[derive(Clone, Debug)]
pub struct Database {
    /// The server URL without backstop's own parameters (PostgreSQL, MySQL), or the file.
    base: String,
    /// The schema, the table prefix, or the file path; also the `application_name` of
    /// backstop's PostgreSQL connections, which is how the backend kills find them.
    pub name: String,
    file: Option<PathBuf>,
    scratch: Option<Scratch>,
}

/// The store crate's scratch ledger behind a server-backed [`Database`].
#[derive(Clone, Debug)]
enum Scratch {
    Postgres(ScratchSchema),
    Mysql(ScratchPrefix),
}

impl Database {
    /// A fresh ledger for `backend` (in `dir` for SQLite); `Err` with the reason when its
    /// server is not configured.
    pub fn new(backend: Backend, servers: &Servers, dir: &Path) -> anyhow::Result<Database> {
        let (base, file, scratch) = match backend {
            Backend::Sqlite => {
                let file = dir.join("ledger.db");
                (file.display().to_string(), Some(file), None)
            }
            Backend::Postgres => {
                let base = servers
                    .postgres
                    .clone()
                    .context("no PostgreSQL: set BACKSTOP_TEST_POSTGRES_URL or --postgres-url")?;
                let scratch = ScratchSchema::new(&base, "chaos")?;
                (base, None, Some(Scratch::Postgres(scratch)))
            }
            Backend::Mysql => {
                let base = servers
                    .mysql
                    .clone()
                    .context("no MySQL/MariaDB: set BACKSTOP_TEST_MYSQL_URL or --mysql-url")?;
                let scratch = ScratchPrefix::new(&base, "chaos")?;
                (base, None, Some(Scratch::Mysql(scratch)))
            }
        };
        let name = match &scratch {
            None => base.clone(),
            Some(Scratch::Postgres(s)) => s.name().to_string(),
            Some(Scratch::Mysql(s)) => s.prefix().to_string(),
        };
        Ok(Database {
            base,
            name,
            file,
            scratch,
        })
    }

    /// The `--database` URL backstop opens; `max_page_count` limits a SQLite file's size.
    pub fn url(&self, max_page_count: Option<u32>) -> String {
        match &self.scratch {
            None => match max_page_count {
                Some(n) => format!("sqlite://{}?max_page_count={n}", self.base),
                None => format!("sqlite://{}", self.base),
            },
            // The scratch URL already has a query (`schema=`).
            Some(Scratch::Postgres(s)) => format!("{}&application_name={}", s.url(), self.name),
            Some(Scratch::Mysql(s)) => s.url(),
        }
    }

    /// Terminates every PostgreSQL backend connection backstop holds on this ledger (its
    /// pools and its LISTEN connection); returns how many.
    pub fn kill_backends(&self) -> anyhow::Result<u64> {
        let sql = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = '{}' AND pid <> pg_backend_pid()",
            self.name
        );
        let out = psql(&self.base, &sql)?;
        Ok(out.trim().parse().unwrap_or(0))
    }

    /// Drops what the scenario made (best effort: leftovers are only clutter).
    pub async fn drop_all(&self) {
        let done = match &self.scratch {
            None => {
                if let Some(f) = &self.file {
                    for suffix in ["", "-wal", "-shm"] {
                        let _ = std::fs::remove_file(format!("{}{suffix}", f.display()));
                    }
                }
                Ok(())
            }
            Some(Scratch::Postgres(s)) => s.drop_all().await,
            Some(Scratch::Mysql(s)) => s.drop_all().await,
        };
        if let Err(e) = done {
            eprintln!("chaos: could not drop {}: {e:#}", self.name);
        }
    }
}

/// Restarts the machine's PostgreSQL cluster (the one in /etc/postgresql), waiting until it
/// is back.
pub fn restart_postgres() -> anyhow::Result<()> {
    let version = std::fs::read_dir("/etc/postgresql")
        .context("no /etc/postgresql: cannot restart PostgreSQL")?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .context("no cluster under /etc/postgresql")?;
    let out = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .output()
        .context("cannot run pg_ctlcluster")?;
    if !out.status.success() {
        bail!(
            "pg_ctlcluster {version} main restart: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn psql(url: &str, sql: &str) -> anyhow::Result<String> {
    let out = Command::new("psql")
        .args([url, "-qtAXc", sql])
        .output()
        .context("cannot run psql (the PostgreSQL scenarios need it)")?;
    if !out.status.success() {
        bail!("psql: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

//! Where a scenario's ledger lives: a fresh SQLite file, PostgreSQL schema or MySQL/MariaDB
//! table prefix, dropped afterwards; and the database-side faults (backend kills, a server
//! restart), run through the servers' own command-line clients.

use anyhow::{Context, bail};
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
    pub backend: Backend,
    /// The server URL without backstop's own parameters (PostgreSQL, MySQL), or the file.
    base: String,
    /// The schema, the table prefix, or the file path; also the `application_name` of
    /// backstop's PostgreSQL connections, which is how the backend kills find them.
    pub name: String,
    file: Option<PathBuf>,
}

impl Database {
    /// A fresh ledger for `backend` (in `dir` for SQLite); `Err` with the reason when its
    /// server is not configured.
    pub fn new(backend: Backend, servers: &Servers, dir: &Path) -> anyhow::Result<Database> {
        let unique = format!("chaos_{:016x}", rand::random::<u64>());
        let (base, file) = match backend {
            Backend::Sqlite => {
                let file = dir.join("ledger.db");
                (file.display().to_string(), Some(file))
            }
            Backend::Postgres => (
                servers
                    .postgres
                    .clone()
                    .context("no PostgreSQL: set BACKSTOP_TEST_POSTGRES_URL or --postgres-url")?,
                None,
            ),
            Backend::Mysql => (
                servers
                    .mysql
                    .clone()
                    .context("no MySQL/MariaDB: set BACKSTOP_TEST_MYSQL_URL or --mysql-url")?,
                None,
            ),
        };
        let name = match backend {
            Backend::Mysql => format!("{unique}_"),
            _ => unique,
        };
        Ok(Database {
            backend,
            base,
            name,
            file,
        })
    }

    /// The `--database` URL backstop opens; `max_page_count` limits a SQLite file's size.
    pub fn url(&self, max_page_count: Option<u32>) -> String {
        let sep = |b: &str| if b.contains('?') { '&' } else { '?' };
        match self.backend {
            Backend::Sqlite => match max_page_count {
                Some(n) => format!("sqlite://{}?max_page_count={n}", self.base),
                None => format!("sqlite://{}", self.base),
            },
            Backend::Postgres => format!(
                "{}{}schema={}&application_name={}",
                self.base,
                sep(&self.base),
                self.name,
                self.name
            ),
            Backend::Mysql => format!("{}{}prefix={}", self.base, sep(&self.base), self.name),
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
    pub fn drop_all(&self) {
        let done = match self.backend {
            Backend::Sqlite => {
                if let Some(f) = &self.file {
                    for suffix in ["", "-wal", "-shm"] {
                        let _ = std::fs::remove_file(format!("{}{suffix}", f.display()));
                    }
                }
                Ok(())
            }
            Backend::Postgres => psql(
                &self.base,
                &format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name),
            )
            .map(|_| ()),
            Backend::Mysql => drop_mysql_prefix(&self.base, &self.name),
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

/// `mysql://user[:password]@host[:port]/db` as the `mariadb` client's arguments.
fn mysql_args(url: &str) -> anyhow::Result<Vec<String>> {
    let rest = url
        .strip_prefix("mysql://")
        .context("expected a mysql:// URL")?;
    let rest = rest.split('?').next().unwrap_or(rest);
    let (auth, hostdb) = rest.rsplit_once('@').unwrap_or(("root", rest));
    let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
    let (hostport, db) = hostdb.split_once('/').unwrap_or((hostdb, ""));
    let (host, port) = hostport.split_once(':').unwrap_or((hostport, "3306"));
    let mut args = vec![
        format!("--host={host}"),
        format!("--port={port}"),
        format!("--user={user}"),
    ];
    if !password.is_empty() {
        args.push(format!("--password={password}"));
    }
    args.push(db.to_string());
    Ok(args)
}

fn mariadb(url: &str, sql: &str) -> anyhow::Result<String> {
    let out = Command::new("mariadb")
        .args(mysql_args(url)?)
        .args(["-N", "-B", "-e", sql])
        .output()
        .context("cannot run the mariadb client (the MariaDB scenarios need it)")?;
    if !out.status.success() {
        bail!("mariadb: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn drop_mysql_prefix(url: &str, prefix: &str) -> anyhow::Result<()> {
    // The prefix is `chaos_` and hex: only the underscores need escaping in LIKE.
    let pattern = format!("{}%", prefix.replace('_', "\\\\_"));
    let tables = mariadb(
        url,
        &format!(
            "SELECT table_name FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name LIKE '{pattern}'"
        ),
    )?;
    let tables: Vec<&str> = tables.lines().filter(|l| !l.is_empty()).collect();
    if !tables.is_empty() {
        mariadb(url, &format!("DROP TABLE IF EXISTS {}", tables.join(", ")))?;
    }
    Ok(())
}

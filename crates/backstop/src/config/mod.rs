//! `backstop.toml`: the kinds, their targets and policies, engine tuning, and the state machines
//! of guarded transitions. A wrong file is rejected at start with the file, the key and what is
//! wrong.
//!
//! Each section has its file, with its checks and its tests: `[engine]` in `engine.rs`,
//! `[retention]` in `retention.rs`, `[kinds.NAME]` in `kinds.rs`, `[api]` in `api.rs`,
//! `[reconciler]` in `reconciler.rs`, `[[alerts]]` in `alerts.rs`, `[machines.NAME]` in
//! `machines.rs`, `[sources.NAME]` in `sources.rs`, `[bridges.NAME]` in `bridges.rs` (and a
//! kind's broker target in `broker_target.rs`), `[schedules.NAME]` in `schedules.rs`. This file reads the whole and holds the
//! checks several sections share.

mod alerts;
mod api;
mod breaker;
mod bridge_sources;
mod bridges;
mod broker_target;
mod engine;
mod hosts;
mod kinds;
mod limits;
mod machines;
mod ordering;
mod reconciler;
mod requires;
mod retention;
mod schedules;
pub mod sources;

pub use api::{ApiConfig, DEFAULT_LISTEN};
pub use sources::SourceConfig;

use alerts::RawSink;
use api::RawApi;
use backstop_core::{KindConfig, Machine};
use backstop_engine::EngineOptions;
use backstop_engine::alerts::AlertOptions;
use engine::RawEngine;
use kinds::RawKind;
use machines::RawMachine;
use reconciler::RawReconciler;
use retention::RawRetention;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The checked configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The file it came from, if any.
    pub source: Option<PathBuf>,
    /// `database` from the file.
    pub database: Option<String>,
    pub kinds: Vec<KindConfig>,
    pub engine: EngineOptions,
    pub api: ApiConfig,
    /// `[[alerts]]` sinks, with the window and failure rate from `[reconciler]`.
    pub alerts: AlertOptions,
    /// `[machines.NAME]`: the state machines of guarded transitions.
    pub machines: Vec<Machine>,
    /// `[sources.NAME]`: inbound callback sources.
    pub sources: Vec<SourceConfig>,
    /// `[bridges.NAME]`: broker consumers into the ledger.
    pub bridges: Vec<backstop_core::broker::BridgeConfig>,
    /// `[schedules.NAME]`: cron schedules, each instant a task.
    pub schedules: Vec<backstop_core::schedule::Schedule>,
}

/// Builds the error of a key that is wrong: `invalid(key, what is wrong)`.
type Invalid<'a> = &'a dyn Fn(String, String) -> ConfigError;

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {error}")]
    Read { file: String, error: String },
    #[error("{file}: {error}")]
    Syntax { file: String, error: String },
    #[error("{file}: {key}: {error}")]
    Invalid {
        file: String,
        key: String,
        error: String,
    },
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    database: Option<String>,
    #[serde(default)]
    engine: RawEngine,
    #[serde(default)]
    kinds: BTreeMap<String, RawKind>,
    #[serde(default)]
    api: RawApi,
    #[serde(default)]
    retention: RawRetention,
    #[serde(default)]
    reconciler: RawReconciler,
    #[serde(default)]
    alerts: Vec<RawSink>,
    #[serde(default)]
    machines: BTreeMap<String, RawMachine>,
    #[serde(default)]
    sources: BTreeMap<String, sources::RawSource>,
    #[serde(default)]
    bridges: BTreeMap<String, bridges::RawBridge>,
    #[serde(default)]
    schedules: BTreeMap<String, backstop_core::schedule::ScheduleDef>,
    #[serde(default)]
    hosts: BTreeMap<String, hosts::RawHost>,
}

impl Config {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            file: file.clone(),
            error: e.to_string(),
        })?;
        let mut c = Config::parse(&text, &file)?;
        c.source = Some(path.to_path_buf());
        Ok(c)
    }

    /// Parses TOML text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            file: file.into(),
            error: syntax_error(text, &e),
        })?;
        let invalid = |key: String, error: String| ConfigError::Invalid {
            file: file.into(),
            key,
            error,
        };
        let mut engine = engine::engine(&raw.engine, &invalid)?;
        engine.retention = retention::retention(&raw.retention, &invalid)?;
        let mut kinds = kinds::kinds(raw.kinds, &invalid)?;
        hosts::hosts(raw.hosts, &mut kinds, &invalid)?;
        let api = api::api(raw.api, &invalid)?;
        let mut alerts = reconciler::reconciler(&raw.reconciler, &mut engine, &invalid)?;
        alerts::sinks(raw.alerts, &mut alerts, &check_url, &invalid)?;
        let machines = machines::machines(raw.machines, &invalid)?;
        requires::check(&kinds, &machines, &invalid)?;
        let base = Path::new(file).parent().unwrap_or(Path::new(""));
        let sources = sources::sources(raw.sources, &kinds, base, &invalid)?;
        let bridges = bridges::bridges(raw.bridges, &kinds, &invalid)?;
        let schedules = schedules::schedules(raw.schedules, &kinds, &invalid)?;
        Ok(Config {
            source: None,
            database: raw.database,
            kinds,
            engine,
            api,
            alerts,
            machines,
            sources,
            bridges,
            schedules,
        })
    }
}

/// One line: where, the line itself, and what is wrong in words (serde says `expected u32`
/// for "a whole number").
fn syntax_error(text: &str, e: &toml::de::Error) -> String {
    let mut what = e.message().trim().replace('\n', " ");
    for (rust, words) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number of 0 or more"),
        ("expected usize", "expected a whole number of 0 or more"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
    ] {
        what = what.replace(rust, words);
    }
    let Some(span) = e.span() else {
        return what;
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    let shown = text.lines().nth(line - 1).unwrap_or("").trim();
    format!("line {line}, column {column} (`{shown}`): {what}")
}

fn positive(n: usize) -> Result<usize, String> {
    if n == 0 {
        Err("must be at least 1".into())
    } else {
        Ok(n)
    }
}

fn nonzero(d: Duration) -> Result<Duration, String> {
    if d.is_zero() {
        Err("must be greater than zero".into())
    } else {
        Ok(d)
    }
}

fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("{url:?} is not an http:// or https:// URL"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("{url:?} has no host"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Config;

    /// Each text is refused with an error that starts with the file and contains the wanted text.
    pub(crate) fn assert_refused(cases: &[(&str, &str)]) {
        for &(text, want) in cases {
            let err = Config::parse(text, "t.toml").unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
            assert!(err.starts_with("t.toml"), "{err}");
        }
    }

    #[test]
    fn syntax_errors_say_where_and_what_in_words() {
        assert_refused(&[
            (
                "[kinds.a]\nurl = \"http://x\"\nmax_attempts = \"x\"",
                "t.toml: line 3, column 16 (`max_attempts = \"x\"`): invalid type: string \"x\", expected a whole number from 0 to 4294967295",
            ),
            (
                "[api]\nmax_list = -1",
                "t.toml: line 2, column 12 (`max_list = -1`): invalid value: integer `-1`, expected a whole number of 0 or more",
            ),
        ]);
    }
}

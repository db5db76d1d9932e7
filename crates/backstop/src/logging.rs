//! Structured logs to stderr; JSON for machines.

use crate::cli::LogFormat;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Installs the subscriber. Long-running commands log at `info`, one-shot commands only
/// warnings, unless `RUST_LOG` says otherwise.
pub fn init(format: LogFormat, long_running: bool) {
    let default = if long_running { "info" } else { "warn" };
    // lapin logs every message RabbitMQ returns, with its headers and body, at WARN: a
    // payload may hold personal data, and backstop records the return on the task itself.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{default},lapin=error")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only for people: a file or a pipe gets plain `key=value` text.
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

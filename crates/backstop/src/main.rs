//! The `backstop` binary.

// glibc's allocator spent ~15% of push-delivery CPU in malloc/free and consolidation;
// mimalloc's per-thread free lists cost a fraction of that (numbers in BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cli;
mod commands;
mod error_line;
mod logging;
mod open_files;

use clap::Parser;
use clap::error::ErrorKind;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    logging::init(cli.log_format, cli.command.is_long_running());
    match open_files::raise_to_hard_limit() {
        Ok(n) => tracing::debug!(open_files = n, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the error and its causes.
            eprintln!("error: {}", error_line::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Help and version print in full; a usage mistake prints one line and exits 2.
fn usage_error(e: clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        _ => {
            eprintln!("{} (see --help)", first_paragraph(&e.render().to_string()));
            ExitCode::from(2)
        }
    }
}

/// clap's first paragraph as one line: "the following required arguments were not
/// provided:" is followed by the arguments' names on lines of their own, and those names are
/// the point of the message.
fn first_paragraph(text: &str) -> String {
    let mut lines = text
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim);
    let head = lines.next().unwrap_or("error: bad usage").to_string();
    let rest: Vec<&str> = lines.collect();
    if rest.is_empty() {
        head
    } else {
        format!("{head} {}", rest.join(", "))
    }
}

//! The command line.

use backstop::Status;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// backstop: an accountable ledger for asynchronous work.
#[derive(Parser)]
#[command(name = "backstop", version, about)]
pub struct Cli {
    /// Database URL: sqlite://FILE (default sqlite://backstop.db), postgres://…, mysql://…
    #[arg(long, global = true, env = "BACKSTOP_DATABASE_URL")]
    pub database: Option<String>,
    /// Configuration file (default: backstop.toml in the working directory, if present).
    #[arg(long, global = true, env = "BACKSTOP_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// Log output formats.
#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the engine for the configured kinds and the HTTP API until SIGINT/SIGTERM.
    Serve(ServeArgs),
    /// Put a task in the ledger; prints its id.
    Enqueue(EnqueueArgs),
    /// List and inspect tasks.
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// Dead letters: failed tasks kept until retried or resolved.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Broker bridges: what each process's bridges consume, whether they are connected, and
    /// their counts (received = inserted + deduplicated + rejected + in flight).
    #[command(subcommand)]
    Bridges(BridgesCommand),
    /// Schedules: list them with their next instants and last ticks, run one now, pause,
    /// resume, backfill a range.
    #[command(subcommand)]
    Schedules(SchedulesCommand),
    /// Kinds: pause or resume one's dispatch by hand (every process on the ledger obeys), or
    /// show what pauses it now (by hand, its breaker, a Retry-After) and its history.
    #[command(subcommand)]
    Kinds(KindsCommand),
    /// Limits per key: a kind's limits and overrides, one key's limits and history; override a
    /// key's `max` or rate at run time (every process obeys from its next claim), or clear it.
    #[command(subcommand)]
    Limits(LimitsCommand),
    /// Apply database migrations (idempotent).
    Migrate,
    /// Measure throughput on this machine: the ledger (default), or the HTTP API and push
    /// delivery (`bench http`).
    Bench(BenchArgs),
    /// API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Reconcile a provider's statement (CSV or JSON lines) against the ledger's tasks of one
    /// kind: classify every difference, give a verdict, and with --apply re-drive the tasks
    /// the provider has no record of. Exits 0 when reconciled, 3 on breaks, 4 when the
    /// statement is incomplete.
    Reconcile(ReconcileArgs),
    /// Explain one task in plain words: its state, what happened, what happens next and when.
    Why { id: String },
    /// Summarise health: the reconciler's last pass, live processes, backlog and overdue work
    /// per kind with the reason, dead letters by kind. Exits 1 when something needs a person.
    Doctor {
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct ServeArgs {
    /// Where the HTTP API listens (overrides api.listen; default 127.0.0.1:7300).
    #[arg(long, env = "BACKSTOP_LISTEN")]
    pub listen: Option<std::net::SocketAddr>,
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Make a new random API token: prints the secret once, and the [[api.tokens]] entry
    /// (which holds only its SHA-256) for backstop.toml.
    New {
        /// Who the token is for; recorded on the timeline of the manual actions it takes.
        name: String,
    },
}

impl Command {
    /// Commands that run until stopped log more.
    pub fn is_long_running(&self) -> bool {
        matches!(self, Command::Serve(_))
    }

    /// Commands about the tasks of a ledger that must exist already; the others make one
    /// when it is missing (serve, enqueue, migrate) or need none.
    pub fn needs_ledger(&self) -> bool {
        matches!(
            self,
            Command::Tasks(_)
                | Command::Dead(_)
                | Command::Bridges(_)
                | Command::Schedules(_)
                | Command::Kinds(_)
                | Command::Limits(_)
                | Command::Why { .. }
                | Command::Doctor { .. }
        )
    }
}

#[derive(Args)]
pub struct EnqueueArgs {
    /// The task's kind, as configured (e.g. sms.send).
    pub kind: String,
    /// The business id (order number, refund id…); unique per kind forever.
    pub key: String,
    /// The payload, JSON; stored byte for byte.
    #[arg(long)]
    pub payload: String,
    /// Run no earlier than this from now (e.g. 30s, 5m).
    #[arg(long, value_parser = duration)]
    pub delay: Option<std::time::Duration>,
    /// Never run after this long from now (e.g. 48h).
    #[arg(long, value_parser = duration)]
    pub expires_in: Option<std::time::Duration>,
    /// Override the kind's attempt limit.
    #[arg(long, value_parser = whole::<u32>)]
    pub max_attempts: Option<u32>,
    /// The ordering group: the group's tasks of this kind run one at a time, in the order
    /// their enqueues commit (wins over the kind's `ordering.group` pointer).
    #[arg(long)]
    pub group: Option<String>,
    /// Print the task as JSON instead of its id.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum TasksCommand {
    /// Tasks, newest first.
    List(ListArgs),
    /// One task and its whole timeline.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct ListArgs {
    #[arg(long)]
    pub kind: Option<String>,
    #[arg(long, value_parser = status)]
    pub status: Option<Status>,
    /// Only tasks of this ordering group.
    #[arg(long)]
    pub group: Option<String>,
    #[arg(long, default_value_t = 50, value_parser = list_limit)]
    pub limit: u32,
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum BridgesCommand {
    /// Every configured bridge, per process, as its last beat says.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum KindsCommand {
    /// Pause KIND: nothing of it is claimed or leased until resumed; its tasks stay pending
    /// and spend no attempts.
    Pause {
        kind: String,
        /// Why (required; kept in the kind's history).
        #[arg(long)]
        reason: String,
    },
    /// Resume KIND: clears its pause by hand and any breaker or Retry-After pause.
    Resume {
        kind: String,
        /// Why (kept in the kind's history).
        #[arg(long)]
        reason: Option<String>,
    },
    /// What pauses KIND now, and its latest pauses and resumes.
    Show {
        kind: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum LimitsCommand {
    /// KIND's limits per key and every key's override, or (with KEY) that key's limits in
    /// force, its override and its history.
    Show {
        kind: String,
        key: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Override KEY's limits of KIND: `--max` (most running at once) and/or `--rate` (starts
    /// per `--period`, `--burst` at once), in place of the kind's.
    Set {
        kind: String,
        key: String,
        /// Most attempts of the key running at once (the kind needs limits.concurrency).
        #[arg(long, value_parser = whole::<u32>)]
        max: Option<u32>,
        /// Starts per period for the key (the kind needs limits.rate).
        #[arg(long, value_parser = whole::<u32>)]
        rate: Option<u32>,
        /// The rate's period (default 1s).
        #[arg(long, value_parser = duration, requires = "rate")]
        period: Option<std::time::Duration>,
        /// Starts a quiet key may make at once (default 1).
        #[arg(long, value_parser = whole::<u32>, requires = "rate")]
        burst: Option<u32>,
        /// Why (required; kept in the key's history).
        #[arg(long)]
        reason: String,
    },
    /// Clear KEY's override: it follows KIND's limits again.
    Clear {
        kind: String,
        key: String,
        /// Why (required; kept in the key's history).
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand)]
pub enum SchedulesCommand {
    /// Every configured schedule: next instants, last ticks with their status, missed and
    /// overlapped counts.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Run the schedule now, by hand (recorded as such; a planned instant keeps its own row).
    Trigger {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Pause: each instant until resumed is a compensated row ("paused: …").
    Pause {
        name: String,
        /// Why, kept with the pause.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Resume a paused schedule.
    Resume { name: String },
    /// Create the rows of every instant in [--from, --to] that has none, to run now.
    /// Idempotent: a second backfill of the range creates nothing.
    Backfill {
        name: String,
        /// RFC 3339, e.g. 2026-12-01T00:00:00Z.
        #[arg(long)]
        from: jiff::Timestamp,
        /// RFC 3339; not in the future.
        #[arg(long)]
        to: jiff::Timestamp,
        /// Count what it would create, and create nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum DeadCommand {
    /// Failed tasks, newest first.
    List {
        #[arg(long)]
        kind: Option<String>,
        #[arg(long, default_value_t = 50, value_parser = list_limit)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Put failed (or compensated) tasks back to pending, with a fresh attempt budget.
    Retry {
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Close a failed task as compensated, with the reason.
    Resolve {
        id: String,
        #[arg(long)]
        reason: String,
    },
}

/// `backstop bench [ledger|http|hooks|reconciler]`: without a subcommand, the ledger bench (its flags may be
/// given directly, as in `backstop bench --tasks 20000`).
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    #[command(flatten)]
    pub ledger: LedgerBenchArgs,
}

/// What to measure.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// The ledger itself, with a no-op in-process handler (the default).
    Ledger(LedgerBenchArgs),
    /// The HTTP API and push delivery on loopback, each next to its raw HTTP ceiling.
    Http(HttpBenchArgs),
    /// Inbound callbacks on loopback: reply latency at a fixed rate, sustained throughput.
    Hooks(HooksBenchArgs),
    /// One reconciler pass over a ledger of many finished and some due tasks.
    Reconciler(ReconcilerBenchArgs),
    /// Statement reconciliation of a large statement against a ledger of as many tasks.
    Statement(StatementBenchArgs),
    /// Broker bridges and targets (RabbitMQ, Redis lists and streams, Kafka, NATS JetStream),
    /// each next to its raw ceiling with the same client: a consumer that acks without a
    /// ledger, a confirmed publisher without a ledger.
    Brokers(BrokersBenchArgs),
    /// Many schedules firing every minute: how late their tick rows are written and what the
    /// process costs; and one catch-up of 1,000 missed instants.
    Schedules(SchedulesBenchArgs),
    /// One running attempt saving its cursor again and again: the latency of a checkpoint,
    /// from the call to its durable commit.
    Checkpoints(CheckpointsBenchArgs),
    /// A large backlog in one ordering group, and tasks of another group enqueued meanwhile:
    /// how soon the other group's tasks start (no head-of-line blocking across groups).
    Groups(GroupsBenchArgs),
}

/// Flags of `backstop bench groups`.
#[derive(Args)]
pub struct GroupsBenchArgs {
    /// Tasks queued in group A before the measurement.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 1_000_000)]
    pub backlog: usize,
    /// Tasks of group B measured, one after another.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 200)]
    pub probes: usize,
    /// The pause between one B task's start and the next one's enqueue.
    #[arg(long, value_parser = duration, default_value = "50ms")]
    pub every: std::time::Duration,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `backstop bench checkpoints`.
#[derive(Args)]
pub struct CheckpointsBenchArgs {
    /// Checkpoints saved, one after another.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 10_000)]
    pub checkpoints: usize,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `backstop bench schedules`.
#[derive(Args)]
pub struct SchedulesBenchArgs {
    /// Schedules, each `* * * * *`.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 10_000)]
    pub schedules: usize,
    /// Minutes measured (after the first whole minute).
    #[arg(long, value_parser = whole::<usize>, default_value_t = 2)]
    pub minutes: usize,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `backstop bench brokers`.
#[derive(Args)]
pub struct BrokersBenchArgs {
    /// Messages per measurement.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 20_000)]
    pub messages: usize,
    /// The RabbitMQ to measure; none: RabbitMQ is not measured.
    #[arg(long)]
    pub amqp: Option<String>,
    /// The Redis to measure; none: Redis is not measured.
    #[arg(long)]
    pub redis: Option<String>,
    /// The Kafka cluster to measure (kafka://host:9092), on topics the bench creates (4
    /// partitions each) and leaves behind; none: Kafka is not measured.
    #[arg(long)]
    pub kafka: Option<String>,
    /// The NATS server to measure (nats://host:4222, JetStream enabled), on streams the bench
    /// creates and deletes; none: NATS is not measured.
    #[arg(long)]
    pub nats: Option<String>,
    /// Unacknowledged messages per bridge (and per raw consumer).
    #[arg(long, value_parser = whole::<u16>, default_value_t = 256)]
    pub prefetch: u16,
    /// Publishes in flight at once (the target kind's concurrency, and the raw publisher's).
    #[arg(long, value_parser = whole::<usize>, default_value_t = 256)]
    pub concurrency: usize,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `backstop bench statement`.
#[derive(Args)]
pub struct StatementBenchArgs {
    /// Rows in the statement, and succeeded tasks in the ledger.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 1_000_000)]
    pub rows: usize,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `backstop reconcile`.
#[derive(Args)]
pub struct ReconcileArgs {
    /// The kind of task the statement is about.
    pub kind: String,
    /// The provider's statement file.
    #[arg(long)]
    pub statement: std::path::PathBuf,
    /// csv (with a header row) or jsonl; guessed from the file name when not given.
    #[arg(long)]
    pub format: Option<String>,
    /// Which column holds what: key=COL,amount=COL,currency=COL,status=COL,at=COL.
    #[arg(long)]
    pub map: Option<String>,
    /// Ledger tasks that succeeded at or after this (RFC 3339) are expected in the statement
    /// (default: the statement's earliest record).
    #[arg(long)]
    pub since: Option<jiff::Timestamp>,
    /// ...and at or before this (default: the statement's latest record).
    #[arg(long)]
    pub until: Option<jiff::Timestamp>,
    /// Lag allowed between the two sides before a difference is a break.
    #[arg(long, default_value = "15m", value_parser = duration)]
    pub grace: std::time::Duration,
    /// The number of data rows the statement must have (declared out of band).
    #[arg(long, value_parser = whole::<u64>)]
    pub expect_count: Option<u64>,
    /// Where a task's payload holds its amount in minor units (a JSON pointer).
    #[arg(long, default_value = "/amount")]
    pub amount_pointer: String,
    /// Where a task's payload holds its currency (a JSON pointer).
    #[arg(long, default_value = "/currency")]
    pub currency_pointer: String,
    /// The currency of payloads that carry an amount but no currency (e.g. CNY); without it
    /// such amounts are not compared and the verdict is at best INCOMPLETE.
    #[arg(long, value_name = "CODE")]
    pub currency: Option<String>,
    /// Re-drive each `missing_record` task, once per run (never on an INCOMPLETE verdict).
    #[arg(long)]
    pub apply: bool,
    /// Write report.json, breaks.csv, malformed.csv and summary.txt into this directory.
    #[arg(long)]
    pub report: Option<std::path::PathBuf>,
    /// Print the JSON report to stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `backstop bench reconciler`.
#[derive(Args)]
pub struct ReconcilerBenchArgs {
    /// Finished (succeeded) tasks in the ledger.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 1_000_000)]
    pub finished: usize,
    /// Pending tasks already due (and overdue) in the ledger.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 1000)]
    pub due: usize,
    /// Passes to time.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 30)]
    pub passes: usize,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `backstop bench ledger`.
#[derive(Args)]
pub struct LedgerBenchArgs {
    /// Tasks to enqueue and drain.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 200_000)]
    pub tasks: usize,
    /// Tasks per enqueue batch.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 1000)]
    pub batch: usize,
    /// Attempts that may run at once.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 4096)]
    pub concurrency: usize,
    /// Before measuring, fill the ledger with this many finished (succeeded) tasks, each
    /// enqueued, claimed and completed through the store, to see how growth changes the drain.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 0)]
    pub prefill_finished: usize,
    /// Spread the tasks over this many ordering groups (task i in group i mod N, the kind
    /// ordered with `on_failure = "block"`), to compare FIFO per group with the unordered
    /// drain (0, the default: no groups).
    #[arg(long, value_parser = whole::<usize>, default_value_t = 0)]
    pub groups: usize,
    /// Spread the tasks over this many tenants (`"tenant"` in the payload, task i of tenant
    /// i mod N) and limit the kind to `--limit-max` attempts at once per tenant
    /// (`limits.concurrency`), to measure what the limit costs (0, the default: no limit).
    #[arg(long, value_parser = whole::<usize>, default_value_t = 0)]
    pub limit_keys: usize,
    /// With `--limit-keys`: the most attempts at once per tenant (0: no concurrency limit,
    /// to measure `--rate-limit` alone).
    #[arg(long, value_parser = whole::<usize>, default_value_t = 64)]
    pub limit_max: usize,
    /// With `--limit-keys`: also limit each tenant to this many starts a second, as many at
    /// once (`limits.rate`; 0, the default: no rate limit). Set it above what a tenant can
    /// reach to measure what keeping the rate costs, below to watch it throttle.
    #[arg(long, value_parser = whole::<u32>, default_value_t = 0)]
    pub rate_limit: u32,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
    /// The server to measure on, from the global `--database` flag given on the command line
    /// (postgres:// or mysql://; the bench works in a fresh schema or table prefix and drops it
    /// afterwards). Without it, a fresh temporary SQLite file.
    #[arg(skip)]
    pub database: Option<String>,
}

/// Flags of `backstop bench http`.
#[derive(Args)]
pub struct HttpBenchArgs {
    /// Tasks per measurement (single enqueue, batched enqueue, push delivery).
    #[arg(long, value_parser = whole::<usize>, default_value_t = 20_000)]
    pub tasks: usize,
    /// Concurrent keep-alive connections of the client, and the push kind's concurrency.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 32)]
    pub concurrency: usize,
    /// Tasks per POST /v1/tasks/batch.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 1000)]
    pub batch: usize,
    /// Milliseconds the push target takes to answer, as a real receiver would (the raw push
    /// ceiling waits as long); 0: at once.
    #[arg(long, value_parser = whole::<u64>, default_value_t = 0)]
    pub target_delay_ms: u64,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `backstop bench hooks`.
#[derive(Args)]
pub struct HooksBenchArgs {
    /// Callbacks per second of the fixed-rate (latency) phase.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 2000)]
    pub rate: usize,
    /// Seconds of the fixed-rate phase.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 10)]
    pub seconds: usize,
    /// Callbacks of the sustained-throughput phase.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 100_000)]
    pub requests: usize,
    /// Concurrent keep-alive connections of the sustained phase.
    #[arg(long, value_parser = whole::<usize>, default_value_t = 64)]
    pub concurrency: usize,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// A count given on the command line; said in words when it is not one, not as Rust's
/// "invalid digit found in string".
fn whole<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .parse()
        .map_err(|_| "expected a whole number of 0 or more, such as 100".to_string())
}

/// A listing's `--limit`.
fn list_limit(s: &str) -> Result<u32, String> {
    const MAX: u32 = 10_000;
    match whole::<u32>(s) {
        Ok(n) if (1..=MAX).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from 1 to {MAX}")),
    }
}

fn duration(s: &str) -> Result<std::time::Duration, String> {
    backstop_core::duration::parse_duration(s).map_err(|e| e.to_string())
}

fn status(s: &str) -> Result<Status, String> {
    s.parse()
        .map_err(|e: backstop_core::task::UnknownStatus| e.to_string())
}

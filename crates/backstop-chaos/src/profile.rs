//! The scenarios of each profile: `short` (CI, a few minutes on two cores) and `long` (more
//! tasks, more faults, MariaDB too).

use crate::database::Backend;
use std::time::Duration;

/// What goes wrong during a scenario.
#[derive(Clone, Debug)]
pub enum Fault {
    /// SIGKILL a random process `count` times, a random pause in `every` apart, restarting it
    /// at once.
    Kills {
        count: usize,
        every: (Duration, Duration),
    },
    /// `pg_terminate_backend` on all of backstop's connections, `rounds` times, `every` apart.
    BackendKills { rounds: usize, every: Duration },
    /// Restart the PostgreSQL cluster `count` times, `every` apart.
    Restarts { count: usize, every: Duration },
    /// The SQLite file limited to `max_page_count` pages until enqueues are refused; it stays
    /// full for `full_for`, then the process restarts without the limit (space freed).
    DiskFull {
        max_page_count: u32,
        full_for: Duration,
    },
    /// Every answer of the target delayed past the kind's timeout for `lasting`.
    SlowTarget { lasting: Duration },
    /// The target answers 503 for `lasting`, then 200.
    RecoveringTarget { lasting: Duration },
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub backend: Backend,
    pub processes: usize,
    /// Tasks enqueued, evenly over `span` (a little longer than the faults, so that the last
    /// fault lands while work flows).
    pub tasks: usize,
    pub span: Duration,
    pub fault: Fault,
    /// How long after the last fault every acknowledged task must have been delivered.
    pub recovery_limit: Duration,
}

/// The profiles' names.
pub const PROFILES: [&str; 2] = ["short", "long"];

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The scenarios of `profile`, or `None` for an unknown name.
pub fn scenarios(profile: &str) -> Option<Vec<Scenario>> {
    // The long profile scales tasks, faults and spans by these.
    let (t, f, s) = match profile {
        "short" => (1, 1, 1),
        "long" => (5, 3, 3),
        _ => return None,
    };
    let limit = secs(60 * s as u64);
    let mut all = vec![
        Scenario {
            name: "sqlite-kill",
            backend: Backend::Sqlite,
            processes: 1,
            tasks: 3000 * t,
            span: secs(15 * s as u64),
            fault: Fault::Kills {
                count: 10 * f,
                every: (ms(700), ms(1500)),
            },
            recovery_limit: limit,
        },
        Scenario {
            name: "pg-kill-3",
            backend: Backend::Postgres,
            processes: 3,
            tasks: 4000 * t,
            span: secs(15 * s as u64),
            fault: Fault::Kills {
                count: 8 * f,
                every: (ms(1000), ms(2000)),
            },
            recovery_limit: limit,
        },
        Scenario {
            name: "pg-backend-kill",
            backend: Backend::Postgres,
            processes: 2,
            tasks: 3000 * t,
            span: secs(11 * s as u64),
            fault: Fault::BackendKills {
                rounds: 20 * f,
                every: ms(400),
            },
            recovery_limit: limit,
        },
        Scenario {
            name: "pg-restart",
            backend: Backend::Postgres,
            processes: 2,
            tasks: 3000 * t,
            span: secs(8 * s as u64),
            fault: Fault::Restarts {
                count: f,
                every: secs(5),
            },
            recovery_limit: limit,
        },
        Scenario {
            name: "sqlite-disk-full",
            backend: Backend::Sqlite,
            processes: 1,
            tasks: 3000 * t,
            span: secs(10 * s as u64),
            fault: Fault::DiskFull {
                max_page_count: 50 * t as u32,
                full_for: secs(4),
            },
            recovery_limit: limit,
        },
        Scenario {
            name: "slow-target",
            backend: Backend::Sqlite,
            processes: 1,
            tasks: 2000 * t,
            span: secs(8 * s as u64),
            fault: Fault::SlowTarget {
                lasting: secs(5 * s as u64),
            },
            recovery_limit: limit,
        },
        Scenario {
            name: "recovering-target",
            backend: Backend::Sqlite,
            processes: 1,
            tasks: 2000 * t,
            span: secs(8 * s as u64),
            fault: Fault::RecoveringTarget {
                lasting: secs(5 * s as u64),
            },
            recovery_limit: limit,
        },
    ];
    if profile == "long" {
        all.insert(
            2,
            Scenario {
                name: "mariadb-kill-3",
                backend: Backend::Mysql,
                processes: 3,
                tasks: 4000 * t,
                span: secs(15 * s as u64),
                fault: Fault::Kills {
                    count: 8 * f,
                    every: (ms(1000), ms(2000)),
                },
                recovery_limit: limit,
            },
        );
    }
    Some(all)
}

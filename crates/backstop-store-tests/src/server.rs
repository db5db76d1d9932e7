//! Suites that need a database server: the server's URL from an environment variable, or a
//! visible `skipped:` line when none is configured.

/// The URL in `var`, when it names a test server.
pub fn server_url(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|u| !u.is_empty())
}

/// True (after saying so on stderr) when `var` names no server: the test passes untested.
pub fn skip_without(var: &str) -> bool {
    if server_url(var).is_some() {
        return false;
    }
    eprintln!("skipped: {var} is not set");
    true
}

//! An error and its causes as the one line the CLI prints: each cause after a colon, except a
//! cause whose text the line already holds (a `StoreError` displays its cause, and so would
//! otherwise print it twice). Newlines become spaces.

use std::error::Error;

/// `e` and its sources, `outer: inner: …`, each text once.
pub fn error_line(e: &(dyn Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        next = cause.source();
    }
    line.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use backstop_core::StoreError;
    use backstop_core::store::Cause;

    #[test]
    fn a_store_error_s_cause_is_printed_once_after_the_context() {
        let store = StoreError::Unavailable(Cause::new(std::io::Error::other("disk full")));
        let e = anyhow::Error::new(store).context("enqueue sms.send/a");
        assert_eq!(
            error_line(e.as_ref()),
            "enqueue sms.send/a: the ledger is unavailable: disk full"
        );
    }

    #[test]
    fn every_distinct_cause_is_printed() {
        let e = anyhow::anyhow!("inner\nline")
            .context("middle")
            .context("outer");
        assert_eq!(error_line(e.as_ref()), "outer: middle: inner line");
    }
}

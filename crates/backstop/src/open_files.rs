//! The open-file limit. Most systems start a process with a soft limit of 1024 descriptors
//! and a much higher hard limit; every connection, database handle and outgoing delivery
//! takes one, so a busy server runs into the soft limit long before the machine minds.

/// Raises the soft limit on open files to the hard limit; returns the soft limit in force
/// afterwards (unchanged when raising is refused).
pub fn raise_to_hard_limit() -> std::io::Result<libc::rlim_t> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from a struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        return Ok(raised.rlim_cur);
    }
    Ok(lim.rlim_cur)
}

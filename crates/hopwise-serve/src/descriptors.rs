//! The open-file limit against the connection limit. Every connection is a descriptor; a process
//! whose limit is below `max_connections` fails its accepts (EMFILE) long before the connection limit
//! refuses anyone, and then `/healthz` waits behind the failing accepts. So at startup the soft
//! limit is raised towards the hard one, and where even that is too low, the connection limit is
//! lowered to what fits, with a warning that says how to raise it.

/// Descriptors kept for what is not a client connection: the model and index files, the log, the
/// backends' own connections.
const HEADROOM: u64 = 128;

/// What to do about a soft limit: raise it to `raise_to`, and serve `connections` at most.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    raise_to: Option<u64>,
    connections: usize,
}

/// The plan for `connections` plus `reserve` connections under the limits `soft` and `hard`.
fn plan(connections: usize, reserve: usize, soft: u64, hard: u64) -> Plan {
    let wanted = (connections + reserve) as u64 + HEADROOM;
    if soft >= wanted {
        return Plan { raise_to: None, connections };
    }
    let reachable = wanted.min(hard.max(soft));
    let raise_to = (reachable > soft).then_some(reachable);
    let fits = reachable.saturating_sub(HEADROOM + reserve as u64).max(1);
    Plan { raise_to, connections: connections.min(usize::try_from(fits).unwrap_or(usize::MAX)) }
}

/// Raises the soft open-file limit as far as `max_connections` needs, or lowers `max_connections`
/// to what the limit allows. Returns the warning to log when it had to lower it.
pub(crate) fn fit(max_connections: &mut usize, reserve: usize) -> Option<String> {
    let (soft, hard) = limits()?;
    let mut wanted = plan(*max_connections, reserve, soft, hard);
    if let Some(raise_to) = wanted.raise_to {
        if !raise(raise_to, hard) {
            wanted = plan(*max_connections, reserve, soft, soft);
        }
    }
    if wanted.connections >= *max_connections {
        return None;
    }
    let needed = (*max_connections + reserve) as u64 + HEADROOM;
    let warning = format!(
        "the open-file limit allows {} connections, not max_connections = {}: serving with {0}; \
         raise the limit (`ulimit -n {needed}`) or lower max_connections",
        wanted.connections, *max_connections
    );
    *max_connections = wanted.connections;
    Some(warning)
}

#[cfg(unix)]
fn limits() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit into the struct it is given and reads nothing else.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    // `rlim_t` is not `u64` on every unix target.
    #[allow(clippy::unnecessary_cast)]
    ok.then_some((limit.rlim_cur as u64, limit.rlim_max as u64))
}

#[cfg(unix)]
fn raise(soft: u64, hard: u64) -> bool {
    let limit = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: setrlimit reads one rlimit from the struct it is given.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 }
}

#[cfg(not(unix))]
fn limits() -> Option<(u64, u64)> {
    None
}

#[cfg(not(unix))]
fn raise(_soft: u64, _hard: u64) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_with_room_is_left_alone() {
        assert_eq!(plan(512, 8, 1024, 4096), Plan { raise_to: None, connections: 512 });
    }

    #[test]
    fn a_low_soft_limit_is_raised_as_far_as_needed() {
        assert_eq!(plan(512, 8, 256, 1_048_576), Plan { raise_to: Some(512 + 8 + HEADROOM), connections: 512 });
    }

    #[test]
    fn a_low_hard_limit_lowers_the_connection_limit() {
        let got = plan(512, 8, 256, 300);
        assert_eq!(got, Plan { raise_to: Some(300), connections: (300 - HEADROOM - 8) as usize });
        // Even a limit below the headroom leaves one connection, never zero.
        assert_eq!(plan(512, 8, 64, 64).connections, 1);
    }

    #[test]
    fn the_process_limit_ends_up_fitting_the_connections() {
        let mut connections = 64;
        fit(&mut connections, 8);
        let (soft, _) = limits().expect("getrlimit works on this platform");
        assert!(soft >= (connections + 8) as u64 + HEADROOM || connections < 64, "soft {soft}, {connections}");
    }
}

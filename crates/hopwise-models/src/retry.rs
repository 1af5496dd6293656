//! Retry timing: exponential backoff with full jitter, or the server's own `Retry-After`.

use std::time::Duration;

use rand::Rng;

#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    /// Ceiling of the first retry's delay; doubles with each retry.
    pub base: Duration,
    /// No computed delay exceeds this.
    pub cap: Duration,
    /// A server's `Retry-After` is honoured up to this long.
    pub retry_after_cap: Duration,
}

impl Backoff {
    /// Delay before retry number `retry` (0 for the first retry). Full jitter (uniform in
    /// `[0, min(cap, base * 2^retry)]`) spreads out clients that failed together, so they do not all
    /// come back at the same instant.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wanted) = retry_after {
            return wanted.min(self.retry_after_cap);
        }
        let ceiling = self.base.saturating_mul(1u32 << retry.min(20)).min(self.cap);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::thread_rng().gen_range(0..=nanos))
    }
}

/// Parses a `Retry-After` header given in seconds (the form rate limiters use). The HTTP-date form
/// yields `None`, and the caller falls back to its own backoff.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    if seconds.is_finite() && seconds >= 0.0 {
        Some(Duration::from_secs_f64(seconds.min(86_400.0)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backoff() -> Backoff {
        Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(1_000),
            retry_after_cap: Duration::from_secs(5),
        }
    }

    #[test]
    fn delays_stay_under_the_doubling_ceiling_and_the_cap() {
        let b = backoff();
        for retry in 0..30 {
            let ceiling = Duration::from_millis(100 * (1u64 << retry.min(10))).min(b.cap);
            for _ in 0..50 {
                assert!(b.delay(retry, None) <= ceiling, "retry {retry}");
            }
        }
    }

    #[test]
    fn delays_are_jittered() {
        let b = backoff();
        let samples: Vec<Duration> = (0..64).map(|_| b.delay(3, None)).collect();
        let first = samples[0];
        assert!(samples.iter().any(|d| *d != first), "64 identical delays: no jitter");
    }

    #[test]
    fn retry_after_is_honoured_up_to_its_cap() {
        let b = backoff();
        assert_eq!(b.delay(0, Some(Duration::from_secs(2))), Duration::from_secs(2));
        assert_eq!(b.delay(0, Some(Duration::from_secs(600))), Duration::from_secs(5));
    }

    #[test]
    fn retry_after_parses_seconds_only() {
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("0.25"), Some(Duration::from_millis(250)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("NaN"), None);
    }
}

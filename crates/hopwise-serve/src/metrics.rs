//! Prometheus metrics in the text exposition format, kept by hand: a few counters and one latency
//! histogram do not justify a metrics framework.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use hopwise_core::Stats;

/// Upper bounds (seconds) of the latency histogram's buckets: from static files to slow questions.
const BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (slot, bound) in self.counts.iter_mut().zip(BUCKETS) {
            if secs <= *bound {
                *slot += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }
}

#[derive(Default)]
pub struct Metrics {
    /// (route, status) -> requests.
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<BTreeMap<String, Histogram>>,
    /// (strategy, outcome) -> questions.
    questions: Mutex<BTreeMap<(String, &'static str), u64>>,
    llm_calls: AtomicU64,
    retrieval_rounds: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    rejected_busy: AtomicU64,
    rejected_connections: AtomicU64,
    connections_open: AtomicU64,
}

/// The process's memory and descriptors, from `/proc/self` (Linux; `None` elsewhere): exported on
/// `/metrics` under the conventional `process_*` names, and read by the load and soak tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessUsage {
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    pub open_fds: u64,
}

impl ProcessUsage {
    pub fn read() -> Option<Self> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let kib = |name: &str| -> Option<u64> {
            status.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse().ok()
        };
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        Some(Self { rss_bytes: kib("VmRSS:")? * 1024, peak_rss_bytes: kib("VmHWM:")? * 1024, open_fds })
    }

    pub fn rss_mib(&self) -> f64 {
        self.rss_bytes as f64 / (1024.0 * 1024.0)
    }

    pub fn peak_rss_mib(&self) -> f64 {
        self.peak_rss_bytes as f64 / (1024.0 * 1024.0)
    }
}

/// Counts a connection as open for as long as it lives.
pub struct OpenConnection<'a>(&'a AtomicU64);

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Counters stay meaningful after a panic elsewhere; never let poison take the endpoint down.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Label values are route templates and strategy names, but escape anyway.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Metrics {
    pub fn record_request(&self, route: &str, status: u16, elapsed: Duration) {
        *lock(&self.requests).entry((route.to_string(), status)).or_default() += 1;
        lock(&self.latency).entry(route.to_string()).or_default().observe(elapsed.as_secs_f64());
    }

    pub fn record_work(&self, stats: &Stats) {
        self.llm_calls.fetch_add(stats.llm_calls, Ordering::Relaxed);
        self.retrieval_rounds.fetch_add(stats.retrieval_rounds, Ordering::Relaxed);
        self.prompt_tokens.fetch_add(stats.prompt_tokens, Ordering::Relaxed);
        self.completion_tokens.fetch_add(stats.completion_tokens, Ordering::Relaxed);
    }

    pub fn record_question(&self, strategy: &str, outcome: &'static str) {
        *lock(&self.questions).entry((strategy.to_string(), outcome)).or_default() += 1;
    }

    pub fn rejected_busy(&self) {
        self.rejected_busy.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection refused because `max_connections` were open.
    pub fn rejected_connection(&self) {
        self.rejected_connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_opened(&self) -> OpenConnection<'_> {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(&self.connections_open)
    }

    pub fn llm_calls(&self) -> u64 {
        self.llm_calls.load(Ordering::Relaxed)
    }

    /// The exposition text. `in_flight` is sampled by the caller.
    pub fn render(&self, in_flight: usize, max_concurrency: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP hopwise_http_requests_total HTTP requests by route template and status.");
        let _ = writeln!(out, "# TYPE hopwise_http_requests_total counter");
        for ((route, status), n) in lock(&self.requests).iter() {
            let _ = writeln!(out, "hopwise_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}", label(route));
        }
        let _ = writeln!(out, "# HELP hopwise_http_request_duration_seconds Time to the response head, by route.");
        let _ = writeln!(out, "# TYPE hopwise_http_request_duration_seconds histogram");
        for (route, h) in lock(&self.latency).iter() {
            let route = label(route);
            for (bound, n) in BUCKETS.iter().zip(&h.counts) {
                let _ = writeln!(
                    out,
                    "hopwise_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "hopwise_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(out, "hopwise_http_request_duration_seconds_sum{{route=\"{route}\"}} {}", h.sum);
            let _ = writeln!(out, "hopwise_http_request_duration_seconds_count{{route=\"{route}\"}} {}", h.count);
        }
        let _ = writeln!(out, "# HELP hopwise_questions_total Questions finished, by strategy and outcome.");
        let _ = writeln!(out, "# TYPE hopwise_questions_total counter");
        for ((strategy, outcome), n) in lock(&self.questions).iter() {
            let _ =
                writeln!(out, "hopwise_questions_total{{strategy=\"{}\",outcome=\"{outcome}\"}} {n}", label(strategy));
        }
        let counters = [
            ("hopwise_llm_calls_total", "Model calls made.", &self.llm_calls),
            ("hopwise_retrieval_rounds_total", "Retrieval rounds made.", &self.retrieval_rounds),
            ("hopwise_prompt_tokens_total", "Prompt tokens sent to the model.", &self.prompt_tokens),
            ("hopwise_completion_tokens_total", "Completion tokens received from the model.", &self.completion_tokens),
            (
                "hopwise_rejected_busy_total",
                "Requests refused with 503 because all slots were taken.",
                &self.rejected_busy,
            ),
            (
                "hopwise_rejected_connections_total",
                "Connections closed at once because max_connections were open.",
                &self.rejected_connections,
            ),
        ];
        for (name, help, value) in counters {
            let _ =
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", value.load(Ordering::Relaxed));
        }
        let _ = writeln!(out, "# HELP hopwise_in_flight Questions being answered now.\n# TYPE hopwise_in_flight gauge");
        let _ = writeln!(out, "hopwise_in_flight {in_flight}");
        let _ =
            writeln!(out, "# HELP hopwise_max_concurrency The configured limit.\n# TYPE hopwise_max_concurrency gauge");
        let _ = writeln!(out, "hopwise_max_concurrency {max_concurrency}");
        let _ = writeln!(
            out,
            "# HELP hopwise_connections_open HTTP connections open now.\n# TYPE hopwise_connections_open gauge"
        );
        let _ = writeln!(out, "hopwise_connections_open {}", self.connections_open.load(Ordering::Relaxed));
        if let Some(usage) = ProcessUsage::read() {
            let gauges = [
                ("process_resident_memory_bytes", "Resident memory.", usage.rss_bytes),
                ("process_resident_memory_peak_bytes", "Peak resident memory.", usage.peak_rss_bytes),
                ("process_open_fds", "Open file descriptors.", usage.open_fds),
            ];
            for (name, help, value) in gauges {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.record_request("/v1/ask", 200, Duration::from_millis(3));
        m.record_request("/v1/ask", 200, Duration::from_millis(700));
        let text = m.render(0, 4);
        assert!(text.contains("hopwise_http_requests_total{route=\"/v1/ask\",status=\"200\"} 2"), "{text}");
        assert!(text.contains("_bucket{route=\"/v1/ask\",le=\"0.005\"} 1"), "{text}");
        assert!(text.contains("_bucket{route=\"/v1/ask\",le=\"1\"} 2"), "{text}");
        assert!(text.contains("_count{route=\"/v1/ask\"} 2"), "{text}");
        if cfg!(target_os = "linux") {
            let usage = ProcessUsage::read().expect("/proc/self");
            assert!(usage.rss_bytes > 0 && usage.peak_rss_bytes >= usage.rss_bytes && usage.open_fds > 0);
            assert!(text.contains("\nprocess_open_fds "), "{text}");
        }
    }
}

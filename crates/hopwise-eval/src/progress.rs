//! Progress reporting for the runner: a callback receives a snapshot after every finished job.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgressSnapshot {
    /// Jobs finished, including those resumed from an earlier run.
    pub done: usize,
    pub total: usize,
    /// Jobs found finished in `results.jsonl` at start.
    pub resumed: usize,
    /// Mean accuracy (cover-EM / label accuracy) over all finished jobs.
    pub accuracy: f64,
    pub elapsed: Duration,
    /// Estimated time left, from this session's pace.
    pub eta: Option<Duration>,
    /// `dataset/id strategy` of the job that just finished.
    pub last: Option<String>,
    /// Jobs whose backend failed this session (retried by the next run).
    pub failed: usize,
}

pub trait ProgressSink: Send + Sync {
    fn update(&self, snapshot: &ProgressSnapshot);
    fn finish(&self, _snapshot: &ProgressSnapshot) {}
}

impl<F: Fn(&ProgressSnapshot) + Send + Sync> ProgressSink for F {
    fn update(&self, snapshot: &ProgressSnapshot) {
        self(snapshot)
    }
}

/// Reports nothing.
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn update(&self, _: &ProgressSnapshot) {}
}

/// A terminal progress bar with running accuracy and ETA.
pub struct IndicatifProgress {
    bar: ProgressBar,
}

impl IndicatifProgress {
    pub fn new() -> Self {
        let bar = ProgressBar::new(0);
        let style =
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Self { bar }
    }
}

impl Default for IndicatifProgress {
    fn default() -> Self {
        Self::new()
    }
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

impl ProgressSink for IndicatifProgress {
    fn update(&self, s: &ProgressSnapshot) {
        self.bar.set_length(s.total as u64);
        self.bar.set_position(s.done as u64);
        let eta = s.eta.map_or_else(|| "?".to_string(), fmt_duration);
        let failed = if s.failed > 0 { format!(" | {} failed", s.failed) } else { String::new() };
        self.bar.set_message(format!(
            "acc {:.1}% | elapsed {} | eta {}{failed} | {}",
            100.0 * s.accuracy,
            fmt_duration(s.elapsed),
            eta,
            s.last.as_deref().unwrap_or("")
        ));
    }
    fn finish(&self, s: &ProgressSnapshot) {
        self.update(s);
        self.bar.finish();
    }
}

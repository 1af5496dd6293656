//! Totals and percentiles over replayed calls, per backend.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::replay::Outcome;

#[derive(Debug, Default, Clone)]
pub struct Totals {
    pub wall: Duration,
    pub outcomes: Vec<Outcome>,
}

impl Totals {
    pub fn add(&mut self, wall: Duration, outcomes: Vec<Outcome>) {
        self.wall += wall;
        self.outcomes.extend(outcomes);
    }

    fn sum(&self, f: impl Fn(&Outcome) -> u64) -> u64 {
        self.outcomes.iter().map(f).sum()
    }

    pub fn errors(&self) -> usize {
        self.outcomes.iter().filter(|o| o.text.is_err()).count()
    }

    /// Latency percentile `p` (0–100) over the calls, in seconds.
    pub fn latency(&self, p: f64) -> f64 {
        let mut seconds: Vec<f64> = self.outcomes.iter().map(|o| o.latency.as_secs_f64()).collect();
        percentile(&mut seconds, p)
    }

    pub fn row(&self, name: &str) -> String {
        let wall = self.wall.as_secs_f64().max(1e-9);
        let completion = self.sum(|o| o.completion_tokens);
        let prompt = self.sum(|o| o.prompt_tokens);
        let cached = self.sum(|o| o.cached_prompt_tokens);
        format!(
            "| {name} | {} | {} | {:.1} | {:.3} | {:.2} | {:.2} | {:.2} | {prompt} | {:.1}% | {completion} |",
            self.outcomes.len(),
            self.errors(),
            wall,
            self.outcomes.len() as f64 / wall,
            completion as f64 / wall,
            self.latency(50.0),
            self.latency(90.0),
            100.0 * cached as f64 / prompt.max(1) as f64,
        )
    }

    /// Calls whose text differs from `other`'s for the same call.
    pub fn differing(&self, other: &Totals) -> usize {
        let theirs: BTreeMap<(usize, usize), &Result<String, String>> =
            other.outcomes.iter().map(|o| ((o.question, o.index), &o.text)).collect();
        self.outcomes.iter().filter(|o| theirs.get(&(o.question, o.index)).is_some_and(|text| **text != o.text)).count()
    }
}

pub const HEADER: &str = "| backend | calls | errors | wall s | calls/s | output tok/s | p50 latency s | p90 latency s | prompt tokens | cached | output tokens |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = (p / 100.0 * (values.len() - 1) as f64).round() as usize;
    values[rank.min(values.len() - 1)]
}

pub fn median(values: &mut [f64]) -> f64 {
    percentile(values, 50.0)
}

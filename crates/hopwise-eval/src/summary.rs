//! `summary.md` and `summary.json`, always recomputed from `results.jsonl` so the tables can be
//! checked against the per-example records.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bootstrap::{mean_interval, Interval};
use crate::dataset::Task;
use crate::error::Result;
use crate::metrics::{breakdown, mean};
use crate::paired::{compare, PairedComparison, BASELINE};
use crate::results::{read_results, write_atomic, ResultRecord};

/// Means over the records of one strategy on one dataset (or on all datasets).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub strategy: String,
    /// `None` for the all-datasets row of the efficiency table.
    pub dataset: Option<String>,
    pub n: usize,
    pub accuracy: f64,
    pub cover_em: f64,
    pub em: f64,
    pub f1: f64,
    pub rouge_l: f64,
    pub fact_check: bool,
    pub errors: usize,
    pub best_effort: usize,
    pub input_words: f64,
    pub output_words: f64,
    pub llm_calls: f64,
    pub retrieval_rounds: f64,
    pub seconds: f64,
    pub prompt_tokens: f64,
    pub completion_tokens: f64,
    /// Prompt tokens the backend served from its prefix cache (part of `prompt_tokens`).
    #[serde(default)]
    pub cached_prompt_tokens: f64,
    /// Retrieval metrics over the records that have them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<RetrievalCell>,
    /// 95 % bootstrap intervals over the cell's questions (`None` for an empty cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Intervals>,
}

/// Percentile-bootstrap intervals of a cell's means (see [`crate::bootstrap`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Intervals {
    pub accuracy: Interval,
    pub em: Interval,
    pub f1: Interval,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RetrievalCell {
    pub n: usize,
    pub k: usize,
    pub hits: f64,
    pub map: f64,
    pub mrr: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeCell {
    pub strategy: String,
    pub dataset: String,
    pub qtype: String,
    pub n: usize,
    pub accuracy: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub records: usize,
    /// In order of first appearance in the results.
    pub strategies: Vec<String>,
    pub datasets: Vec<String>,
    /// One per (strategy, dataset) with results.
    pub cells: Vec<Cell>,
    /// One per strategy over all its records.
    pub overall: Vec<Cell>,
    pub by_type: Vec<TypeCell>,
    /// Every strategy against rtr on the same questions, per dataset (when the run has rtr).
    #[serde(default)]
    pub paired: Vec<PairedComparison>,
    /// The run's configuration (`run.json`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<crate::config::RunFingerprint>,
}

impl Summary {
    pub fn cell(&self, strategy: &str, dataset: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.strategy == strategy && c.dataset.as_deref() == Some(dataset))
    }
}

fn cell(strategy: &str, dataset: Option<&str>, records: &[&ResultRecord]) -> Cell {
    let m = |f: &dyn Fn(&ResultRecord) -> f64| mean(records.iter().map(|r| f(r)));
    let with_retrieval: Vec<_> = records.iter().filter_map(|r| r.retrieval).collect();
    let retrieval = (!with_retrieval.is_empty()).then(|| RetrievalCell {
        n: with_retrieval.len(),
        k: with_retrieval[0].k,
        hits: mean(with_retrieval.iter().map(|s| s.hits)),
        map: mean(with_retrieval.iter().map(|s| s.map)),
        mrr: mean(with_retrieval.iter().map(|s| s.mrr)),
    });
    Cell {
        strategy: strategy.to_string(),
        dataset: dataset.map(str::to_string),
        n: records.len(),
        accuracy: m(&|r| r.metrics.accuracy),
        cover_em: m(&|r| r.metrics.cover_em),
        em: m(&|r| r.metrics.em),
        f1: m(&|r| r.metrics.f1),
        rouge_l: m(&|r| r.metrics.rouge_l),
        fact_check: records.iter().any(|r| r.task == Task::FactCheck),
        errors: records.iter().filter(|r| r.error.is_some()).count(),
        best_effort: records.iter().filter(|r| r.best_effort).count(),
        input_words: m(&|r| r.stats.input_words as f64),
        output_words: m(&|r| r.stats.output_words as f64),
        llm_calls: m(&|r| r.stats.llm_calls as f64),
        retrieval_rounds: m(&|r| r.stats.retrieval_rounds as f64),
        seconds: m(&|r| r.seconds),
        prompt_tokens: m(&|r| r.stats.prompt_tokens as f64),
        completion_tokens: m(&|r| r.stats.completion_tokens as f64),
        cached_prompt_tokens: m(&|r| r.stats.cached_prompt_tokens as f64),
        retrieval,
        intervals: intervals(records),
    }
}

fn intervals(records: &[&ResultRecord]) -> Option<Intervals> {
    let scores = |f: &dyn Fn(&ResultRecord) -> f64| -> Vec<f64> { records.iter().map(|r| f(r)).collect() };
    Some(Intervals {
        accuracy: mean_interval(&scores(&|r| r.metrics.accuracy))?,
        em: mean_interval(&scores(&|r| r.metrics.em))?,
        f1: mean_interval(&scores(&|r| r.metrics.f1))?,
    })
}

/// Every strategy against [`BASELINE`] on each dataset, in strategy order.
fn paired_with_baseline(unique: &[&ResultRecord], strategies: &[String], datasets: &[String]) -> Vec<PairedComparison> {
    let of = |strategy: &str, dataset: &str| -> Vec<&ResultRecord> {
        unique.iter().copied().filter(|r| r.strategy == strategy && r.dataset == dataset).collect()
    };
    let mut out = Vec::new();
    for dataset in datasets {
        let baseline = of(BASELINE, dataset);
        if baseline.is_empty() {
            continue;
        }
        for strategy in strategies.iter().filter(|s| s.as_str() != BASELINE) {
            out.extend(compare(dataset, BASELINE, &baseline, strategy, &of(strategy, dataset)));
        }
    }
    out
}

/// Aggregates records. A key (dataset, id, strategy) seen twice counts once (the first). Strategies
/// are listed in catalog order, datasets in order of first appearance.
pub fn summarize(records: &[ResultRecord]) -> Summary {
    let mut seen = HashSet::new();
    let unique: Vec<&ResultRecord> = records.iter().filter(|r| seen.insert(r.key())).collect();
    let mut strategies: Vec<String> = Vec::new();
    let mut datasets: Vec<String> = Vec::new();
    for r in &unique {
        if !strategies.contains(&r.strategy) {
            strategies.push(r.strategy.clone());
        }
        if !datasets.contains(&r.dataset) {
            datasets.push(r.dataset.clone());
        }
    }
    // Known strategies in catalog order (baselines after ToQD), others after them as first seen.
    let catalog_rank =
        |s: &String| hopwise_reason::strategy::STRATEGIES.iter().position(|row| row.name == s).unwrap_or(usize::MAX);
    strategies.sort_by_key(catalog_rank);
    let mut cells = Vec::new();
    let mut overall = Vec::new();
    let mut by_type = Vec::new();
    for s in &strategies {
        let of_strategy: Vec<&ResultRecord> = unique.iter().copied().filter(|r| &r.strategy == s).collect();
        overall.push(cell(s, None, &of_strategy));
        for d in &datasets {
            let rs: Vec<&ResultRecord> = of_strategy.iter().copied().filter(|r| &r.dataset == d).collect();
            if rs.is_empty() {
                continue;
            }
            cells.push(cell(s, Some(d), &rs));
            let types =
                breakdown(rs.iter().map(|r| (r.qtype.clone().unwrap_or_else(|| "-".into()), r.metrics.accuracy)));
            for (qtype, (n, accuracy)) in types {
                by_type.push(TypeCell { strategy: s.clone(), dataset: d.clone(), qtype, n, accuracy });
            }
        }
    }
    let paired = paired_with_baseline(&unique, &strategies, &datasets);
    Summary { records: unique.len(), strategies, datasets, cells, overall, by_type, paired, config: None }
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}

/// ` [28.00, 56.00]`: an interval in percent, after its value in summary.md.
fn bracket(interval: Option<Interval>) -> String {
    interval.map_or_else(String::new, |i| format!(" [{}, {}]", pct(i.low), pct(i.high)))
}

/// `42.0 [28.0, 56.0]`: a mean and its interval, in percent.
pub fn pct_with_interval(value: f64, interval: Option<Interval>) -> String {
    match interval {
        Some(i) => format!("{:.1} [{:.1}, {:.1}]", 100.0 * value, 100.0 * i.low, 100.0 * i.high),
        None => format!("{:.1}", 100.0 * value),
    }
}

/// `+4.0 [-6.0, 14.0]`: a paired difference and its interval, in percentage points.
pub fn points_with_interval(difference: &crate::bootstrap::PairedDifference) -> String {
    let i = difference.interval;
    format!("{:+.1} [{:+.1}, {:+.1}]", 100.0 * difference.mean, 100.0 * i.low, 100.0 * i.high)
}

/// The paired comparisons as a Markdown table.
pub fn render_paired(out: &mut String, paired: &[PairedComparison]) {
    let _ = writeln!(
        out,
        "| dataset | strategy | vs | n | Δ EM (pp) [95% CI] | Δ cover-EM (pp) [95% CI] | Δ F1 (pp) [95% CI] | wins / ties / losses (EM) |"
    );
    let _ = writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|");
    for p in paired {
        let em = &p.em;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} / {} |",
            p.dataset,
            p.strategy,
            p.baseline,
            em.n,
            points_with_interval(em),
            points_with_interval(&p.accuracy),
            points_with_interval(&p.f1),
            em.wins,
            em.ties,
            em.losses
        );
    }
    out.push('\n');
}

fn metric_table(out: &mut String, s: &Summary, title: &str, value: &dyn Fn(&Cell) -> String) {
    let _ = writeln!(out, "### {title}\n");
    let _ = writeln!(out, "| strategy | {} |", s.datasets.join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(s.datasets.len()));
    for strategy in &s.strategies {
        let row: Vec<String> =
            s.datasets.iter().map(|d| s.cell(strategy, d).map_or_else(|| "–".to_string(), value)).collect();
        let _ = writeln!(out, "| {strategy} | {} |", row.join(" | "));
    }
    out.push('\n');
}

/// Renders the summary in the papers' layout: strategies in rows, datasets in columns.
pub fn render_markdown(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Evaluation summary\n");
    let _ = writeln!(
        out,
        "Recomputed from `results.jsonl` ({} records); do not edit by hand. Scores are percentages over \
         the n examples in each cell.\n",
        s.records
    );
    if let Some(c) = &s.config {
        let _ = writeln!(
            out,
            "Model `{}`, retriever `{}`, k = {}.\n",
            c.model,
            c.retriever.as_deref().unwrap_or("none"),
            c.k,
        );
    }
    let _ = writeln!(out, "## Accuracy\n");
    let _ = writeln!(
        out,
        "Brackets: 95 % percentile-bootstrap interval over the cell's questions ({} resamples, fixed seed).\n",
        crate::bootstrap::RESAMPLES
    );
    metric_table(&mut out, s, "cover-EM (fact checking: label accuracy)", &|c| {
        format!("{} (n={}){}", pct(c.accuracy), c.n, bracket(c.intervals.map(|i| i.accuracy)))
    });
    metric_table(&mut out, s, "EM", &|c| format!("{}{}", pct(c.em), bracket(c.intervals.map(|i| i.em))));
    metric_table(&mut out, s, "F1", &|c| format!("{}{}", pct(c.f1), bracket(c.intervals.map(|i| i.f1))));
    metric_table(&mut out, s, "ROUGE-L", &|c| pct(c.rouge_l));

    if !s.paired.is_empty() {
        let _ = writeln!(out, "## Paired with {BASELINE} (same questions)\n");
        let _ = writeln!(
            out,
            "Differences are `strategy - {BASELINE}` per question, averaged; the interval resamples questions \
             (pairs kept together). Wins / ties / losses count questions by cover-EM.\n"
        );
        render_paired(&mut out, &s.paired);
    }

    let _ = writeln!(out, "## Efficiency (mean per question)\n");
    let _ = writeln!(out, "| strategy | dataset | n | input words | output words | LLM calls | retrieval rounds | seconds | prompt tokens | cached prompt tokens | completion tokens | errors | best-effort |");
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let rows = s.overall.iter().chain(s.cells.iter());
    for c in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {} | {} |",
            c.strategy,
            c.dataset.as_deref().unwrap_or("**all**"),
            c.n,
            c.input_words,
            c.output_words,
            c.llm_calls,
            c.retrieval_rounds,
            c.seconds,
            c.prompt_tokens,
            c.cached_prompt_tokens,
            c.completion_tokens,
            c.errors,
            c.best_effort
        );
    }
    out.push('\n');

    let with_retrieval: Vec<&Cell> = s.cells.iter().filter(|c| c.retrieval.is_some()).collect();
    if !with_retrieval.is_empty() {
        let _ = writeln!(out, "## Retrieval quality of the passages used (against gold evidence)\n");
        let _ = writeln!(out, "| strategy | dataset | n | K | Hits@K | MAP@K | MRR@K |");
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|");
        for c in with_retrieval {
            if let Some(r) = &c.retrieval {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |",
                    c.strategy,
                    c.dataset.as_deref().unwrap_or(""),
                    r.n,
                    r.k,
                    r.hits,
                    r.map,
                    r.mrr
                );
            }
        }
        out.push('\n');
    }

    let _ = writeln!(out, "## Accuracy by question type\n");
    for d in &s.datasets {
        let types: Vec<String> = {
            let mut t: Vec<String> = s.by_type.iter().filter(|c| &c.dataset == d).map(|c| c.qtype.clone()).collect();
            t.sort();
            t.dedup();
            t
        };
        let _ = writeln!(out, "### {d}\n");
        let _ = writeln!(out, "| strategy | {} |", types.join(" | "));
        let _ = writeln!(out, "|---|{}", "---:|".repeat(types.len()));
        for strategy in &s.strategies {
            let row: Vec<String> = types
                .iter()
                .map(|t| {
                    s.by_type
                        .iter()
                        .find(|c| &c.strategy == strategy && &c.dataset == d && &c.qtype == t)
                        .map_or_else(|| "–".to_string(), |c| format!("{} (n={})", pct(c.accuracy), c.n))
                })
                .collect();
            if row.iter().any(|c| c != "–") {
                let _ = writeln!(out, "| {strategy} | {} |", row.join(" | "));
            }
        }
        out.push('\n');
    }
    out
}

/// Reads `results.jsonl` in `out_dir` and rewrites `summary.md` and `summary.json` from it.
pub fn write_summary(out_dir: &Path) -> Result<Summary> {
    let (records, _) = read_results(&out_dir.join("results.jsonl"))?;
    let mut summary = summarize(&records);
    summary.config = std::fs::read(out_dir.join("run.json")).ok().and_then(|b| serde_json::from_slice(&b).ok());
    write_atomic(&out_dir.join("summary.md"), render_markdown(&summary).as_bytes())?;
    let json = serde_json::to_vec_pretty(&summary).map_err(|e| crate::EvalError::Config(e.to_string()))?;
    write_atomic(&out_dir.join("summary.json"), &json)?;
    Ok(summary)
}

/// Per-dataset, per-strategy accuracy as a map, handy for callers and tests.
pub fn accuracy_table(s: &Summary) -> BTreeMap<(String, String), f64> {
    s.cells.iter().filter_map(|c| c.dataset.clone().map(|d| ((c.strategy.clone(), d), c.accuracy))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::scored_record;

    /// rtr right on questions 0..8 of 20, toqd on 4..14: toqd wins 6, loses 4, ties 10.
    fn records() -> Vec<ResultRecord> {
        let score = |hit: bool| f64::from(u8::from(hit));
        let mut out: Vec<ResultRecord> =
            (0..20).map(|i| scored_record("d", &i.to_string(), "rtr", score(i < 8), score(i < 8))).collect();
        out.extend((0..20).map(|i| {
            let mut r = scored_record("d", &i.to_string(), "toqd", score((4..14).contains(&i)), 0.5);
            r.stats.prompt_tokens = 300;
            r.stats.cached_prompt_tokens = if i % 2 == 0 { 200 } else { 0 };
            r
        }));
        out
    }

    #[test]
    fn cells_carry_intervals_and_efficiency_and_pair_with_rtr() {
        let s = summarize(&records());
        let toqd = s.cell("toqd", "d").expect("toqd cell");
        let i = toqd.intervals.expect("intervals");
        assert_eq!(toqd.accuracy, 0.5);
        assert!(i.accuracy.low < 0.5 && 0.5 < i.accuracy.high && i.accuracy.low >= 0.0, "{i:?}");
        assert_eq!(i.f1, Interval { low: 0.5, high: 0.5 }, "every question scored 0.5");
        assert_eq!((toqd.prompt_tokens, toqd.cached_prompt_tokens), (300.0, 100.0));
        assert_eq!(summarize(&records()), s, "fixed seed: the same records give the same summary");

        assert_eq!(s.paired.len(), 1);
        let p = &s.paired[0].accuracy;
        assert_eq!((p.n, p.wins, p.ties, p.losses), (20, 6, 10, 4));
        assert!((p.mean - 0.1).abs() < 1e-12 && p.interval.contains(0.1), "{p:?}");

        let md = render_markdown(&s);
        let bracket = format!("| 50.00 (n=20) [{:.2}, {:.2}] |", 100.0 * i.accuracy.low, 100.0 * i.accuracy.high);
        assert!(md.contains(&bracket), "{md}");
        assert!(md.contains("| d | toqd | rtr | 20 | +10.0 ["), "{md}");
        assert!(md.contains("| 6 / 10 / 4 |"), "{md}");
    }

    #[test]
    fn rows_written_before_cached_prompt_tokens_existed_read_as_zero() {
        let mut json = serde_json::to_value(&records()[20]).expect("to json");
        let stats = json["stats"].as_object_mut().expect("stats object");
        assert!(stats.remove("cached_prompt_tokens").is_some());
        let old: ResultRecord = serde_json::from_value(json).expect("an older row still reads");
        assert_eq!((old.stats.prompt_tokens, old.stats.cached_prompt_tokens), (300, 0));
    }
}

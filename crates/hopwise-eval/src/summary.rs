//! `summary.md` and `summary.json`, always recomputed from `results.jsonl` so the tables can be
//! checked against the per-example records.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::dataset::Task;
use crate::error::Result;
use crate::metrics::{breakdown, mean};
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
    }
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
    Summary { records: unique.len(), strategies, datasets, cells, overall, by_type, config: None }
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
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
    metric_table(&mut out, s, "cover-EM (fact checking: label accuracy)", &|c| {
        format!("{} (n={})", pct(c.accuracy), c.n)
    });
    metric_table(&mut out, s, "EM", &|c| pct(c.em));
    metric_table(&mut out, s, "F1", &|c| pct(c.f1));
    metric_table(&mut out, s, "ROUGE-L", &|c| pct(c.rouge_l));

    let _ = writeln!(out, "## Efficiency (mean per question)\n");
    let _ = writeln!(out, "| strategy | dataset | n | input words | output words | LLM calls | retrieval rounds | seconds | prompt tokens | cached prompt tokens | errors | best-effort |");
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let rows = s.overall.iter().chain(s.cells.iter());
    for c in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {} | {} |",
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
    use hopwise_core::Stats;

    use super::*;
    use crate::results::RecordMetrics;

    fn record(id: &str, prompt_tokens: u64, cached_prompt_tokens: u64) -> ResultRecord {
        ResultRecord {
            dataset: "d".into(),
            id: id.into(),
            strategy: "toqd".into(),
            question: "q".into(),
            qtype: None,
            task: Task::Qa,
            prediction: "p".into(),
            gold: vec!["p".into()],
            metrics: RecordMetrics::default(),
            retrieval: None,
            stats: Stats { prompt_tokens, cached_prompt_tokens, ..Stats::default() },
            seconds: 1.0,
            best_effort: false,
            error: None,
            trace: None,
        }
    }

    #[test]
    fn cached_prompt_tokens_are_averaged_and_shown() {
        let summary = summarize(&[record("a", 1000, 600), record("b", 500, 100)]);
        let cell = summary.cell("toqd", "d").expect("cell");
        assert_eq!((cell.prompt_tokens, cell.cached_prompt_tokens), (750.0, 350.0));
        let markdown = render_markdown(&summary);
        assert!(markdown.contains("| prompt tokens | cached prompt tokens |"), "{markdown}");
        assert!(markdown.contains("| 750.0 | 350.0 |"), "{markdown}");
        // Summaries written before the field existed still load.
        let mut old = serde_json::to_value(cell).expect("json");
        old.as_object_mut().expect("object").remove("cached_prompt_tokens");
        let back: Cell = serde_json::from_value(old).expect("old cell loads");
        assert_eq!(back.cached_prompt_tokens, 0.0);
    }
}

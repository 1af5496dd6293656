//! What a run is: [`EvalConfig`] (given by the caller) and the configuration fingerprint stored in
//! `run.json`, which keeps results of different configurations from being mixed in one directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hopwise_core::Prompts;
use hopwise_reason::StrategyOptions;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{EvalError, Result};
use crate::results::write_atomic;

/// One evaluation run: a grid of datasets × strategies written to `out_dir`.
#[derive(Debug, Clone)]
pub struct EvalConfig {
    /// Dataset files (normalised JSONL or an original format); each file's stem names its column.
    pub datasets: Vec<PathBuf>,
    /// Strategy names as in `hopwise_reason::strategy::CATALOG`.
    pub strategies: Vec<String>,
    /// Options per strategy name (missing: defaults).
    pub strategy_options: BTreeMap<String, StrategyOptions>,
    /// First N examples of each dataset (file order).
    pub limit: Option<usize>,
    /// Example × strategy jobs in flight at once.
    pub concurrency: usize,
    pub out_dir: PathBuf,
    /// Passages per retrieval round (recorded in the fingerprint; the context factory applies it).
    pub k: usize,
    /// K of Hits@K / MAP@K / MRR@K over the passages a strategy used.
    pub retrieval_k: usize,
    /// Backend names for the fingerprint, e.g. `local:qwen2.5-1.5b`, `bm25:hotpotqa_corpus`.
    pub model: String,
    pub retriever: Option<String>,
    /// See [`prompts_hash`].
    pub prompts_hash: String,
    /// Anything else that changes results (sampling parameters, budgets, seeds …).
    pub settings: BTreeMap<String, Value>,
    /// Draw the PNG/SVG plots after the run.
    pub plots: bool,
    /// Stop the run after this many jobs in a row fail in a backend (failed jobs are retried by the
    /// next run, so a dead server does not fill the results with empty answers).
    pub max_consecutive_failures: usize,
}

impl EvalConfig {
    pub fn new(datasets: Vec<PathBuf>, strategies: Vec<String>, out_dir: PathBuf) -> Self {
        Self {
            datasets,
            strategies,
            strategy_options: BTreeMap::new(),
            limit: None,
            concurrency: 4,
            out_dir,
            k: 5,
            retrieval_k: 10,
            model: String::new(),
            retriever: None,
            prompts_hash: prompts_hash(&Prompts::default()),
            settings: BTreeMap::new(),
            plots: true,
            max_consecutive_failures: 5,
        }
    }

    pub fn options_for(&self, strategy: &str) -> StrategyOptions {
        self.strategy_options.get(strategy).cloned().unwrap_or_default()
    }

    pub fn fingerprint(&self) -> RunFingerprint {
        RunFingerprint {
            schema: RUN_SCHEMA,
            model: self.model.clone(),
            retriever: self.retriever.clone(),
            k: self.k,
            prompts_hash: self.prompts_hash.clone(),
            settings: self.settings.clone(),
            strategy_options: self.strategies.iter().map(|s| (s.clone(), self.options_for(s))).collect(),
        }
    }
}

const RUN_SCHEMA: u32 = 1;

/// The settings that must not change between runs writing to one output directory. Strategies may
/// be added to a directory later; a strategy already present must keep its options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFingerprint {
    pub schema: u32,
    pub model: String,
    pub retriever: Option<String>,
    pub k: usize,
    pub prompts_hash: String,
    #[serde(default)]
    pub settings: BTreeMap<String, Value>,
    #[serde(default)]
    pub strategy_options: BTreeMap<String, StrategyOptions>,
}

impl RunFingerprint {
    /// The first difference between a stored fingerprint and this one, if any.
    pub fn difference(&self, stored: &RunFingerprint) -> Option<String> {
        let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
        let checks: [(&str, String, String); 5] = [
            ("model", show(&stored.model), show(&self.model)),
            ("retriever", show(&stored.retriever), show(&self.retriever)),
            ("k", show(&stored.k), show(&self.k)),
            ("prompts", stored.prompts_hash.clone(), self.prompts_hash.clone()),
            ("settings", show(&stored.settings), show(&self.settings)),
        ];
        for (what, before, now) in checks {
            if before != now {
                return Some(format!("{what} was {before}, now {now}"));
            }
        }
        for (name, options) in &self.strategy_options {
            if let Some(before) = stored.strategy_options.get(name).filter(|b| *b != options) {
                return Some(format!("options of `{name}` were {:?}, now {:?}", before.0, options.0));
            }
        }
        None
    }
}

/// Checks `run.json` in `out_dir` against `current`, or creates it. On success the stored file lists
/// the union of the strategies run so far.
pub fn check_run_dir(out_dir: &Path, current: &RunFingerprint) -> Result<()> {
    let path = out_dir.join("run.json");
    let merged = match std::fs::read(&path) {
        Ok(bytes) => {
            let stored: RunFingerprint = serde_json::from_slice(&bytes).map_err(|e| EvalError::ConfigMismatch {
                out_dir: out_dir.to_path_buf(),
                difference: format!("run.json cannot be read: {e}"),
            })?;
            if let Some(difference) = current.difference(&stored) {
                return Err(EvalError::ConfigMismatch { out_dir: out_dir.to_path_buf(), difference });
            }
            let mut merged = stored;
            merged.strategy_options.extend(current.strategy_options.clone());
            merged
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if out_dir.join("results.jsonl").exists() {
                return Err(EvalError::ConfigMismatch {
                    out_dir: out_dir.to_path_buf(),
                    difference: "results.jsonl exists but run.json is missing, so its configuration is unknown".into(),
                });
            }
            current.clone()
        }
        Err(e) => return Err(EvalError::Read { path, source: e }),
    };
    let json = serde_json::to_vec_pretty(&merged).map_err(|e| EvalError::Config(e.to_string()))?;
    write_atomic(&path, &json)
}

/// A stable hash of every prompt template in force (names and texts).
pub fn prompts_hash(prompts: &Prompts) -> String {
    let mut h = Sha256::new();
    for name in prompts.names() {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(prompts.template(name).unwrap_or("").as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path) -> EvalConfig {
        let mut c = EvalConfig::new(vec![], vec!["cot".into()], dir.to_path_buf());
        c.model = "m1".into();
        c
    }

    #[test]
    fn a_different_configuration_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = config(dir.path());
        check_run_dir(dir.path(), &c.fingerprint()).expect("first run");
        check_run_dir(dir.path(), &c.fingerprint()).expect("same config resumes");

        let mut other = c.clone();
        other.model = "m2".into();
        let err = check_run_dir(dir.path(), &other.fingerprint()).expect_err("model differs");
        let msg = err.to_string();
        assert!(msg.contains("model was \"m1\", now \"m2\"") && msg.contains("new --out"), "{msg}");

        let mut k = c.clone();
        k.k = 10;
        assert!(check_run_dir(dir.path(), &k.fingerprint()).is_err());

        let mut opts = c.clone();
        let mut o = StrategyOptions::default();
        o.set("samples", serde_json::json!(3));
        opts.strategy_options.insert("cot".into(), o);
        assert!(check_run_dir(dir.path(), &opts.fingerprint()).is_err(), "options of a finished strategy changed");

        let mut more = c.clone();
        more.strategies.push("direct".into());
        check_run_dir(dir.path(), &more.fingerprint()).expect("adding a strategy is fine");
        let stored: RunFingerprint =
            serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).expect("read")).expect("parse");
        assert!(stored.strategy_options.contains_key("direct") && stored.strategy_options.contains_key("cot"));
    }

    #[test]
    fn results_without_run_json_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("results.jsonl"), "").expect("write");
        assert!(check_run_dir(dir.path(), &config(dir.path()).fingerprint()).is_err());
    }

    #[test]
    fn prompts_hash_changes_with_a_template() {
        let base = prompts_hash(&Prompts::default());
        let mut o = BTreeMap::new();
        o.insert("direct".to_string(), "Just answer: {question}".to_string());
        let changed = Prompts::default().with_overrides(&o).expect("override");
        assert_ne!(base, prompts_hash(&changed));
        assert_eq!(base, prompts_hash(&Prompts::default()));
    }
}

//! What a run is: [`EvalConfig`] (given by the caller) and the configuration fingerprint stored in
//! `run.json`, which keeps results of different configurations from being mixed in one directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hopwise_core::{Prompts, Protocol};
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
    /// Strategy names as in `hopwise_reason::strategy::STRATEGIES`.
    pub strategies: Vec<String>,
    /// Options per strategy name (missing: defaults).
    pub strategy_options: BTreeMap<String, StrategyOptions>,
    /// Examples of each dataset passed over before any is run (file order): `skip = 50` with
    /// `limit = 100` runs examples 51 to 150. Recorded in the fingerprint when not zero.
    pub skip: usize,
    /// Most examples of each dataset run, after the skipped ones.
    pub limit: Option<usize>,
    /// Example × strategy jobs in flight at once.
    pub concurrency: usize,
    pub out_dir: PathBuf,
    /// Passages per retrieval round (recorded in the fingerprint; the context factory applies it).
    pub k: usize,
    /// K of Hits@K / MAP@K / MRR@K over the passages a strategy used.
    pub retrieval_k: usize,
    /// The model backend's [identity](hopwise_core::Llm::identity): kind, server address, model file.
    pub model: String,
    pub retriever: Option<String>,
    /// The templates in force; each strategy's fingerprint hashes the ones it renders.
    pub prompts: Prompts,
    /// Anything else that changes results (sampling parameters, budgets, seeds …).
    pub settings: BTreeMap<String, Value>,
    /// Draw the PNG/SVG plots after the run.
    pub plots: bool,
    /// Stop the run after this many jobs in a row fail in a backend (failed jobs are retried by the
    /// next run, so a dead server does not fill the results with empty answers).
    pub max_consecutive_failures: usize,
    /// Start no new job once this much wall time has passed; jobs in flight finish and are written, so
    /// the run ends between questions and the next run resumes from there.
    pub time_budget: Option<std::time::Duration>,
}

impl EvalConfig {
    pub fn new(datasets: Vec<PathBuf>, strategies: Vec<String>, out_dir: PathBuf) -> Self {
        Self {
            datasets,
            strategies,
            strategy_options: BTreeMap::new(),
            skip: 0,
            limit: None,
            concurrency: 4,
            out_dir,
            k: 5,
            retrieval_k: 10,
            model: String::new(),
            retriever: None,
            prompts: Prompts::default(),
            settings: BTreeMap::new(),
            plots: true,
            max_consecutive_failures: 5,
            time_budget: None,
        }
    }

    pub fn options_for(&self, strategy: &str) -> StrategyOptions {
        self.strategy_options.get(strategy).cloned().unwrap_or_default()
    }

    /// The settings, plus the skipped examples when there are any: a run over another range of a
    /// dataset is another run (a run with no skip keeps the fingerprint it always had).
    fn settings_with_range(&self) -> BTreeMap<String, Value> {
        let mut settings = self.settings.clone();
        if self.skip > 0 {
            settings.insert("skip".into(), self.skip.into());
        }
        settings
    }

    /// The fingerprint of this run. Fails for an unknown strategy or invalid options.
    pub fn fingerprint(&self) -> Result<RunFingerprint> {
        let mut strategy_prompts = BTreeMap::new();
        for name in &self.strategies {
            strategy_prompts.insert(name.clone(), strategy_prompts_hash(&self.prompts, name, &self.options_for(name))?);
        }
        Ok(RunFingerprint {
            schema: RUN_SCHEMA,
            model: self.model.clone(),
            retriever: self.retriever.clone(),
            k: self.k,
            settings: self.settings_with_range(),
            strategy_options: self.strategies.iter().map(|s| (s.clone(), self.options_for(s))).collect(),
            strategy_prompts,
        })
    }
}

/// 2: the model is the backend's identity (server address, model file), and prompts are hashed per
/// strategy.
const RUN_SCHEMA: u32 = 2;

/// The settings that must not change between runs writing to one output directory. Strategies may
/// be added to a directory later; a strategy already present must keep its options and its prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFingerprint {
    pub schema: u32,
    pub model: String,
    pub retriever: Option<String>,
    pub k: usize,
    #[serde(default)]
    pub settings: BTreeMap<String, Value>,
    #[serde(default)]
    pub strategy_options: BTreeMap<String, StrategyOptions>,
    /// Per strategy, the [`prompts_hash`] of the templates it renders.
    #[serde(default)]
    pub strategy_prompts: BTreeMap<String, String>,
}

impl RunFingerprint {
    /// The first difference between a stored fingerprint and this one, if any.
    pub fn difference(&self, stored: &RunFingerprint) -> Option<String> {
        let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
        let checks: [(&str, String, String); 5] = [
            ("schema", show(&stored.schema), show(&self.schema)),
            ("model", show(&stored.model), show(&self.model)),
            ("retriever", show(&stored.retriever), show(&self.retriever)),
            ("k", show(&stored.k), show(&self.k)),
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
        for (name, hash) in &self.strategy_prompts {
            if let Some(before) = stored.strategy_prompts.get(name).filter(|b| *b != hash) {
                return Some(format!("the prompts of `{name}` changed (hash {before}, now {hash})"));
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
            merged.strategy_prompts.extend(current.strategy_prompts.clone());
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

/// The [`prompts_hash`] of the templates strategy `name` renders with `options` (and `system`, which
/// every call sends): what a run's fingerprint records per strategy.
pub fn strategy_prompts_hash(prompts: &Prompts, name: &str, options: &StrategyOptions) -> Result<String> {
    let strategy = hopwise_reason::strategy::build(name, options)?;
    let mut templates = vec!["system"];
    templates.extend_from_slice(hopwise_reason::ctx::SHARED_FRAGMENTS);
    templates.extend(hopwise_reason::strategy::templates(strategy.as_ref()));
    Ok(prompts_hash(prompts, &templates))
}

/// A stable hash of the named templates (names and texts; a name with no template counts as empty).
/// A part (a phrase list, or a fragment code assembles into prompts) counts only when overridden: its
/// built-in text belongs to the code that uses it, which the row's commit records, and only a
/// replacement is configuration.
pub fn prompts_hash(prompts: &Prompts, names: &[&str]) -> String {
    let mut names: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !prompts.protocol(name).is_some_and(Protocol::is_part) || prompts.is_overridden(name))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut h = Sha256::new();
    for name in names {
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
        let mut c = EvalConfig::new(vec![], vec!["cot-sc".into()], dir.to_path_buf());
        c.model = "m1".into();
        c
    }

    #[test]
    fn a_different_configuration_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = config(dir.path());
        check_run_dir(dir.path(), &c.fingerprint().unwrap()).expect("first run");
        check_run_dir(dir.path(), &c.fingerprint().unwrap()).expect("same config resumes");

        let mut other = c.clone();
        other.model = "m2".into();
        let err = check_run_dir(dir.path(), &other.fingerprint().unwrap()).expect_err("model differs");
        let msg = err.to_string();
        assert!(msg.contains("model was \"m1\", now \"m2\"") && msg.contains("new --out"), "{msg}");

        let mut k = c.clone();
        k.k = 10;
        assert!(check_run_dir(dir.path(), &k.fingerprint().unwrap()).is_err());

        let mut opts = c.clone();
        let mut o = StrategyOptions::default();
        o.set("samples", serde_json::json!(3));
        opts.strategy_options.insert("cot-sc".into(), o);
        assert!(
            check_run_dir(dir.path(), &opts.fingerprint().unwrap()).is_err(),
            "options of a finished strategy changed"
        );

        let mut more = c.clone();
        more.strategies.push("direct".into());
        check_run_dir(dir.path(), &more.fingerprint().unwrap()).expect("adding a strategy is fine");
        let stored: RunFingerprint =
            serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).expect("read")).expect("parse");
        assert!(stored.strategy_options.contains_key("direct") && stored.strategy_options.contains_key("cot-sc"));
    }

    #[test]
    fn results_without_run_json_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("results.jsonl"), "").expect("write");
        assert!(check_run_dir(dir.path(), &config(dir.path()).fingerprint().unwrap()).is_err());
    }

    #[test]
    fn prompts_hash_changes_with_a_template() {
        let base = prompts_hash(&Prompts::default(), &["direct", "system"]);
        let mut o = BTreeMap::new();
        o.insert("direct".to_string(), "Just answer: {question}".to_string());
        let changed = Prompts::default().with_overrides(&o).expect("override");
        assert_ne!(base, prompts_hash(&changed, &["direct", "system"]));
        assert_eq!(base, prompts_hash(&Prompts::default(), &["system", "direct"]));
    }

    /// A built-in part (phrase list, fragment) is code, not configuration: listing it leaves the hash
    /// as it was; a replacement changes it.
    #[test]
    fn a_part_enters_the_hash_only_when_replaced() {
        let list = hopwise_reason::protocol::Hedges::TEMPLATE;
        let base = prompts_hash(&Prompts::default(), &["system", "direct"]);
        assert_eq!(base, prompts_hash(&Prompts::default(), &["system", "direct", list]));
        let o = BTreeMap::from([(list.to_string(), "weiß nicht".to_string())]);
        let replaced = Prompts::default().with_overrides(&o).expect("override");
        assert_ne!(base, prompts_hash(&replaced, &["system", "direct", list]));
        assert_eq!(base, prompts_hash(&replaced, &["system", "direct"]), "only a strategy that reads it");
        // A fragment likewise: code assembles it into prompts.
        assert_eq!(base, prompts_hash(&Prompts::default(), &["system", "direct", "hgot_demos"]));
        let o = BTreeMap::from([("hgot_demos".to_string(), "Beispiele:\n{examples}\n".to_string())]);
        let replaced = Prompts::default().with_overrides(&o).expect("override");
        assert_ne!(base, prompts_hash(&replaced, &["system", "direct", "hgot_demos"]));
    }

    /// The NLI judge's template is in the fingerprint of the configurations that ask the judge (HGOT,
    /// `uar` with NLI similarity) and of no other: a Jaccard-gated `uar` or `always-retrieve` never
    /// renders it.
    #[test]
    fn the_judge_template_touches_only_configurations_that_judge() {
        let mut o = BTreeMap::new();
        o.insert("nli_judge".to_string(), "P: {premise} H: {hypothesis}".to_string());
        let changed = Prompts::default().with_overrides(&o).expect("override");
        let options = |json: serde_json::Value| match json {
            serde_json::Value::Object(map) => StrategyOptions(map),
            _ => StrategyOptions::default(),
        };
        let touched = |name: &str, opts: serde_json::Value| {
            let before = strategy_prompts_hash(&Prompts::default(), name, &options(opts.clone())).expect("builds");
            before != strategy_prompts_hash(&changed, name, &options(opts)).expect("builds")
        };
        assert!(touched("hgot", serde_json::json!({})));
        assert!(touched("uar", serde_json::json!({"uncertainty": "numsets"})));
        assert!(touched("uar", serde_json::json!({"uncertainty": "ecc", "similarity": "nli"})));
        assert!(!touched("uar", serde_json::json!({})), "deg-jaccard");
        assert!(!touched("uar", serde_json::json!({"uncertainty": "eigv"})), "Jaccard by default");
        assert!(!touched("always-retrieve", serde_json::json!({})));
        assert!(!touched("flare-instruct", serde_json::json!({})));
    }

    /// A changed template makes exactly the strategies that render it stale: the folder of a `direct`
    /// run still resumes after a ToQD prompt changed; a `toqd` run does not.
    #[test]
    fn a_changed_template_touches_only_the_strategies_that_use_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = config(dir.path());
        c.strategies = vec!["direct".into(), "toqd".into()];
        check_run_dir(dir.path(), &c.fingerprint().unwrap()).expect("first run");

        let mut o = BTreeMap::new();
        o.insert("toqd_summary".to_string(), "Answer {question} from {dialog}".to_string());
        let mut direct_only = c.clone();
        direct_only.strategies = vec!["direct".into()];
        direct_only.prompts = Prompts::default().with_overrides(&o).expect("override");
        check_run_dir(dir.path(), &direct_only.fingerprint().unwrap()).expect("direct does not render toqd_summary");

        let mut toqd = direct_only.clone();
        toqd.strategies = vec!["toqd".into()];
        let err = check_run_dir(dir.path(), &toqd.fingerprint().unwrap()).expect_err("toqd renders it");
        assert!(err.to_string().contains("prompts of `toqd` changed"), "{err}");

        let mut other_server = c.clone();
        other_server.model = "openai endpoint=http://127.0.0.2:9/v1/chat/completions model=m1".into();
        assert!(check_run_dir(dir.path(), &other_server.fingerprint().unwrap()).is_err(), "another server");
    }
}

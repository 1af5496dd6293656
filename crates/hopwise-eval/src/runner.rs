//! The evaluation runner: every (dataset, example, strategy) job runs through a caller-given context
//! factory, at most `concurrency` at a time; each finished job is appended to `results.jsonl` (one
//! fsync'd line) with its trace under `traces/<strategy>/<dataset>/<id>.json`. Jobs already in
//! `results.jsonl` are skipped, so a killed run resumes where it stopped. One run at a time writes to
//! a directory (`lock`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use hopwise_core::text::normalize_answer;
use hopwise_core::{EventKind, Recorder, Trace};
use hopwise_reason::strategy::{build, run};
use hopwise_reason::{Ctx, ReasonError, Strategy};
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::config::{check_run_dir, EvalConfig};
use crate::dataset::{load_dataset, Example, SkippedRecord, Task};
use crate::error::{EvalError, Result};
use crate::lock::RunLock;
use crate::metrics::{label_accuracy, retrieval_scores, score_answer, RetrievalScores};
use crate::progress::{ProgressSink, ProgressSnapshot};
use crate::results::{write_atomic, RecordKey, RecordMetrics, ResultRecord, ResultsLog};
use crate::summary::{write_summary, Summary};

/// One unit of work handed to the context factory.
#[derive(Debug, Clone)]
pub struct Job {
    pub dataset: String,
    pub example: Arc<Example>,
    pub strategy: String,
}

/// Builds the per-question context (backends, prompts, budgets) for a job, around the recorder the
/// runner made for it. This is where a caller plugs in real backends.
pub trait CtxFactory: Send + Sync {
    fn make(&self, job: &Job, rec: Recorder) -> Result<Ctx>;
}

impl<F> CtxFactory for F
where
    F: Fn(&Job, Recorder) -> Result<Ctx> + Send + Sync,
{
    fn make(&self, job: &Job, rec: Recorder) -> Result<Ctx> {
        self(job, rec)
    }
}

/// A job whose backend failed before any answer was produced. It is not written to
/// `results.jsonl`, so the next run retries it.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedJob {
    pub dataset: String,
    pub id: String,
    pub strategy: String,
    pub error: String,
}

enum JobOutcome {
    Done(Box<ResultRecord>),
    Failed(FailedJob),
}

#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Jobs in the grid.
    pub total: usize,
    /// Jobs found finished at start.
    pub resumed: usize,
    /// Jobs run now.
    pub ran: usize,
    /// Jobs whose backend failed (not written; retried by the next run).
    pub failed: Vec<FailedJob>,
    /// Jobs not started because the time budget ran out (the next run does them).
    pub not_started: usize,
    /// Dataset records that could not be loaded.
    pub skipped: Vec<SkippedRecord>,
    pub summary: Summary,
    /// Anything the caller should tell the user (e.g. plots not drawn).
    pub notes: Vec<String>,
}

/// Runs the grid described by `config`. See the module docs.
pub async fn run_eval(
    config: &EvalConfig,
    factory: Arc<dyn CtxFactory>,
    progress: &dyn ProgressSink,
) -> Result<RunOutcome> {
    if config.datasets.is_empty() {
        return Err(EvalError::Config("no dataset given".into()));
    }
    if config.strategies.is_empty() {
        return Err(EvalError::Config("no strategy given".into()));
    }
    let mut strategies: Vec<(String, Arc<dyn Strategy>)> = Vec::new();
    for name in &config.strategies {
        // `direct,direct` names one strategy: each job runs once.
        if strategies.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        let strategy: Arc<dyn Strategy> = Arc::from(build(name, &config.options_for(name))?);
        strategies.push((name.clone(), strategy));
    }

    let mut datasets = Vec::new();
    let mut skipped = Vec::new();
    for path in &config.datasets {
        let ds = load_dataset(path)?;
        if datasets.iter().any(|(name, _): &(String, Vec<Arc<Example>>)| *name == ds.name) {
            return Err(EvalError::DuplicateDataset(ds.name));
        }
        skipped.extend(ds.skipped);
        let examples =
            ds.examples.into_iter().skip(config.skip).take(config.limit.unwrap_or(usize::MAX)).map(Arc::new).collect();
        datasets.push((ds.name, examples));
    }

    let out = config.out_dir.clone();
    create_out_dir(&out)?;
    // Held until this function returns: no second run writes here meanwhile.
    let _lock = RunLock::acquire(&out)?;
    check_run_dir(&out, &config.fingerprint()?)?;
    let (mut log, finished) = ResultsLog::open(&out.join("results.jsonl"))?;
    let finished: HashMap<RecordKey, f64> = finished.iter().map(|r| (r.key(), r.metrics.accuracy)).collect();

    let mut jobs = Vec::new();
    let mut resumed = 0usize;
    let mut accuracy_sum = 0.0;
    for (dataset, examples) in &datasets {
        for example in examples {
            for (name, strategy) in &strategies {
                let key = (dataset.clone(), example.id.clone(), name.clone());
                if let Some(acc) = finished.get(&key) {
                    resumed += 1;
                    accuracy_sum += acc;
                    continue;
                }
                let job = Job { dataset: dataset.clone(), example: example.clone(), strategy: name.clone() };
                jobs.push((job, strategy.clone()));
            }
        }
    }
    let total = resumed + jobs.len();
    let started = Instant::now();
    let mut snapshot = ProgressSnapshot { done: resumed, total, resumed, ..Default::default() };
    snapshot.accuracy = if resumed > 0 { accuracy_sum / resumed as f64 } else { 0.0 };
    progress.update(&snapshot);

    let concurrency = config.concurrency.max(1);
    let mut pending = jobs.into_iter();
    let mut running: JoinSet<Result<JobOutcome>> = JoinSet::new();
    let mut ran = 0usize;
    let mut failed: Vec<FailedJob> = Vec::new();
    let mut failing_in_a_row = 0usize;
    let out_of_time = || config.time_budget.is_some_and(|budget| started.elapsed() >= budget);
    // Errors stop the loop; the summary is still brought up to date with what finished.
    let stopped: Result<()> = loop {
        while running.len() < concurrency && !out_of_time() {
            let Some((job, strategy)) = pending.next() else {
                break;
            };
            let factory = factory.clone();
            let out = out.clone();
            let retrieval_k = config.retrieval_k;
            running.spawn(async move { run_job(job, strategy, factory.as_ref(), &out, retrieval_k).await });
        }
        let Some(joined) = running.join_next().await else {
            break Ok(());
        };
        let record = match joined {
            Ok(Ok(JobOutcome::Done(record))) => *record,
            Ok(Ok(JobOutcome::Failed(job))) => {
                failing_in_a_row += 1;
                failed.push(job);
                if failing_in_a_row >= config.max_consecutive_failures.max(1) {
                    running.abort_all();
                    let last = failed.last().map(|f| f.error.clone()).unwrap_or_default();
                    break Err(EvalError::BackendFailing { count: failing_in_a_row, last });
                }
                snapshot.failed = failed.len();
                progress.update(&snapshot);
                continue;
            }
            Ok(Err(e)) => {
                running.abort_all();
                break Err(e);
            }
            Err(join_error) => {
                running.abort_all();
                break Err(EvalError::Config(format!("a job crashed: {join_error}")));
            }
        };
        if let Err(e) = log.append(&record) {
            running.abort_all();
            break Err(e);
        }
        ran += 1;
        failing_in_a_row = 0;
        accuracy_sum += record.metrics.accuracy;
        let elapsed = started.elapsed();
        let attempted = ran + failed.len();
        let remaining = total.saturating_sub(resumed + attempted);
        snapshot = ProgressSnapshot {
            done: resumed + ran,
            total,
            resumed,
            accuracy: accuracy_sum / (resumed + ran) as f64,
            elapsed,
            eta: Some(elapsed.mul_f64(remaining as f64 / attempted as f64)),
            last: Some(format!("{}/{} {}", record.dataset, record.id, record.strategy)),
            failed: failed.len(),
        };
        progress.update(&snapshot);
    };
    if let Err(e) = stopped {
        progress.finish(&snapshot);
        // Best effort: the error that stopped the run matters more than a failed report.
        let _ = regenerate_reports(&out, false);
        return Err(e);
    }
    progress.finish(&snapshot);

    let not_started = pending.len();
    let (summary, mut notes) = regenerate_reports(&out, config.plots)?;
    if not_started > 0 {
        notes.push(format!("time budget reached: {not_started} jobs not started; run again to resume"));
    }
    Ok(RunOutcome { total, resumed, ran, failed, not_started, skipped, summary, notes })
}

/// Creates the output directory, or names the problem when a file stands in its way.
fn create_out_dir(out: &Path) -> Result<()> {
    if out.exists() && !out.is_dir() {
        return Err(EvalError::OutIsAFile(out.to_path_buf()));
    }
    std::fs::create_dir_all(out).map_err(|e| EvalError::Write { path: out.to_path_buf(), source: e })
}

/// Rewrites `summary.md`, `summary.json` and (optionally) the plots from `results.jsonl`. A plot that
/// cannot be drawn is reported in the notes, not as an error.
pub fn regenerate_reports(out_dir: &Path, plots: bool) -> Result<(Summary, Vec<String>)> {
    let summary = write_summary(out_dir)?;
    let mut notes = Vec::new();
    if plots && summary.records > 0 {
        match crate::plots::draw_all(&summary, &out_dir.join("plots")) {
            Ok(n) => notes.extend(n),
            Err(e) => notes.push(format!("plots not drawn: {e}")),
        }
    }
    Ok((summary, notes))
}

async fn run_job(
    job: Job,
    strategy: Arc<dyn Strategy>,
    factory: &dyn CtxFactory,
    out_dir: &Path,
    retrieval_k: usize,
) -> Result<JobOutcome> {
    let question = job.example.prompt_question();
    let rec = Recorder::new(&question, &job.strategy);
    let ctx = factory.make(&job, rec.clone())?;
    let started = Instant::now();
    let outcome = run(strategy.as_ref(), &ctx, &question).await;
    let seconds = started.elapsed().as_secs_f64();
    let (trace, error) = match outcome {
        Ok(trace) => (trace, None),
        // The loader rejects empty questions, so this is a per-example oddity, not a setup error.
        Err(ReasonError::EmptyQuestion) => (rec.finish("", None), Some(ReasonError::EmptyQuestion.to_string())),
        Err(e) => return Err(e.into()),
    };
    if trace.answer.trim().is_empty() {
        if let Some(backend_error) = first_backend_error(&trace) {
            let Job { dataset, example, strategy } = job;
            return Ok(JobOutcome::Failed(FailedJob {
                dataset,
                id: example.id.clone(),
                strategy,
                error: backend_error,
            }));
        }
    }
    let error = error.or_else(|| {
        (trace.best_effort && trace.answer.is_empty()).then(|| trace.notes.join("; ")).filter(|n| !n.is_empty())
    });
    let relative = trace_path(&job);
    let json = serde_json::to_vec_pretty(&trace).map_err(|e| EvalError::Config(e.to_string()))?;
    write_atomic(&out_dir.join(&relative), &json)?;
    Ok(JobOutcome::Done(Box::new(score_record(&job, &trace, seconds, retrieval_k, error, Some(relative)))))
}

/// The first model or retrieval call in the trace that failed.
fn first_backend_error(trace: &Trace) -> Option<String> {
    trace.events.iter().find_map(|e| match &e.kind {
        EventKind::LlmCall { error: Some(m), .. } | EventKind::Retrieval { error: Some(m), .. } => Some(m.clone()),
        _ => None,
    })
}

/// `traces/<strategy>/<dataset>/<id>.json`; ids with characters unsafe in file names are cleaned and
/// given a short hash so two ids never share a file.
pub fn trace_path(job: &Job) -> String {
    let id = &job.example.id;
    let clean: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect();
    let clean = clean.trim_start_matches('.').to_string();
    let name = if clean == *id && !clean.is_empty() {
        clean
    } else {
        format!("{clean}-{}", &hex::encode(Sha256::digest(id.as_bytes()))[..8])
    };
    let dir: PathBuf = ["traces", &job.strategy, &job.dataset].iter().collect();
    dir.join(format!("{name}.json")).to_string_lossy().into_owned()
}

/// Scores a finished trace into a results line.
pub fn score_record(
    job: &Job,
    trace: &Trace,
    seconds: f64,
    retrieval_k: usize,
    error: Option<String>,
    trace_file: Option<String>,
) -> ResultRecord {
    let ex = &job.example;
    let answers = score_answer(&trace.answer, &ex.answers);
    let label = (ex.task == Task::FactCheck)
        .then(|| ex.answers.first().map_or(0.0, |gold| label_accuracy(&trace.answer, gold)));
    let metrics = RecordMetrics {
        accuracy: label.unwrap_or(answers.cover_em),
        cover_em: answers.cover_em,
        em: answers.em,
        f1: answers.f1,
        rouge_l: answers.rouge_l,
        label_accuracy: label,
    };
    ResultRecord {
        dataset: job.dataset.clone(),
        id: ex.id.clone(),
        strategy: job.strategy.clone(),
        question: ex.question.clone(),
        qtype: ex.qtype.clone(),
        task: ex.task,
        prediction: trace.answer.clone(),
        gold: ex.answers.clone(),
        metrics,
        confidence: trace.confidence,
        retrieval: retrieval_of(ex, trace, retrieval_k),
        stats: trace.stats.clone(),
        seconds,
        best_effort: trace.best_effort,
        error,
        trace: trace_file,
    }
}

/// Retrieval metrics of the passages the trace used, matched to the gold evidence by normalised
/// title where the example names titles, else by passage id.
fn retrieval_of(ex: &Example, trace: &Trace, k: usize) -> Option<RetrievalScores> {
    if trace.stats.retrieval_rounds == 0 {
        return None;
    }
    let passages = trace.evidence();
    let (ranked, gold): (Vec<String>, HashSet<String>) = if !ex.evidence_titles.is_empty() {
        (
            passages.iter().map(|p| normalize_answer(&p.title)).collect(),
            ex.evidence_titles.iter().map(|t| normalize_answer(t)).collect(),
        )
    } else if !ex.evidence_ids.is_empty() {
        (passages.iter().map(|p| p.id.clone()).collect(), ex.evidence_ids.iter().cloned().collect())
    } else {
        return None;
    };
    Some(retrieval_scores(&ranked, &gold, k))
}

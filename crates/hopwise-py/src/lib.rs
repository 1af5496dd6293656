//! `hopwise._native`: the native half of the `hopwise` Python package (its typed face is
//! `python/hopwise/__init__.py`). An [`Engine`] holds the same [`hopwise_reason::Runtime`] that
//! `hopwise ask` and `hopwise serve` build through `hopwise-runtime`, so a question asked from Python
//! gets the trace the CLI writes. Traces, events and reports cross into Python as JSON text, which
//! the Python side reads into its own types.
//!
//! Every wait releases the GIL and wakes at [`SIGNAL_POLL`] to let Python deliver Ctrl-C, which
//! aborts the running question.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hopwise_config::{Config, GeneralOverrides, ModelOverrides, Overrides, RunOverrides};
use hopwise_core::graph_text::{self, GraphFormat};
use hopwise_core::{Event, Retriever, Trace};
use hopwise_reason::strategy::STRATEGIES;
use hopwise_reason::{ReasonError, Request, Runtime};
use hopwise_runtime::eval::{evaluate as evaluate_plan, outcome_json, EvalPlan};
use hopwise_runtime::Needs;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::task::JoinHandle;

create_exception!(_native, HopwiseError, PyException, "A question or command that hopwise could not complete.");
create_exception!(
    _native,
    BackendError,
    HopwiseError,
    "The model or retrieval backend failed (unreachable, refused, or answered with an error)."
);

/// How often a wait wakes to let Python deliver a signal (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// A Python exception for a Rust error: input errors are `ValueError`, backend failures
/// `BackendError`, everything else `HopwiseError`.
fn py_err(e: anyhow::Error) -> PyErr {
    let message = format!("{e:#}");
    if let Some(reason) = e.downcast_ref::<ReasonError>() {
        return reason_err(reason, message);
    }
    if e.downcast_ref::<hopwise_config::ConfigError>().is_some() {
        return PyValueError::new_err(message);
    }
    if e.downcast_ref::<hopwise_core::Error>().is_some_and(|c| c.backend_kind().is_some()) {
        return BackendError::new_err(message);
    }
    HopwiseError::new_err(message)
}

fn reason_err(e: &ReasonError, message: String) -> PyErr {
    match e {
        ReasonError::EmptyQuestion
        | ReasonError::InvalidOption(_)
        | ReasonError::UnknownStrategy(_)
        | ReasonError::NeedsRetriever(_)
        | ReasonError::ServerPathOption { .. } => PyValueError::new_err(message),
        ReasonError::Core(c) if c.backend_kind().is_some() => BackendError::new_err(message),
        _ => HopwiseError::new_err(message),
    }
}

fn json_err(e: serde_json::Error) -> PyErr {
    HopwiseError::new_err(format!("cannot write JSON: {e}"))
}

/// Waits for `handle` with the GIL released, waking every [`SIGNAL_POLL`] for Python's signal
/// handlers; a raised signal (KeyboardInterrupt) aborts the task and propagates.
fn wait<T: Send + 'static>(py: Python<'_>, tokio: &tokio::runtime::Runtime, handle: &mut JoinHandle<T>) -> PyResult<T> {
    loop {
        let joined =
            py.allow_threads(|| tokio.block_on(async { tokio::time::timeout(SIGNAL_POLL, &mut *handle).await }));
        match joined {
            Ok(result) => {
                return result.map_err(|e| HopwiseError::new_err(format!("the question's task ended abnormally: {e}")))
            }
            Err(_) => {
                if let Err(interrupt) = py.check_signals() {
                    handle.abort();
                    return Err(interrupt);
                }
            }
        }
    }
}

/// The JSON an answered question crosses into Python as: the trace and the passages its answer
/// rests on. A question without an answer is an error, as it is for the CLI and the server: a
/// `BackendError` when a backend failed, else a `HopwiseError`.
fn answered(trace: &Trace) -> PyResult<String> {
    if let Some(why) = trace.missing_answer_reason() {
        return Err(match trace.first_backend_failure() {
            Some(failure) => BackendError::new_err(format!("no answer could be produced: {failure}")),
            None => HopwiseError::new_err(format!("no answer could be produced: {why}")),
        });
    }
    let citations: Vec<_> = trace.supporting().into_iter().cloned().collect();
    serde_json::to_string(&serde_json::json!({"trace": trace, "citations": citations})).map_err(json_err)
}

/// The config file (`path`, else `$HOPWISE_CONFIG`, else `./hopwise.toml`) with `overrides` laid over it.
fn configure(path: Option<PathBuf>, overrides: &Overrides) -> PyResult<Config> {
    let mut config = Config::load(path.as_deref()).map_err(|e| PyValueError::new_err(e.to_string()))?;
    config.apply(overrides).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(config)
}

fn async_runtime() -> PyResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| HopwiseError::new_err(format!("cannot start the async runtime: {e}")))
}

/// Configuration, backends and a tokio runtime, built once; questions are asked of it.
#[pyclass(module = "hopwise._native", frozen)]
struct Engine {
    tokio: Arc<tokio::runtime::Runtime>,
    runtime: Arc<Runtime>,
}

/// Keyword arguments of `Engine.ask` and `Engine.ask_stream` beyond the question.
struct Ask {
    strategy: Option<String>,
    options: Option<String>,
    k: Option<usize>,
    max_llm_calls: Option<u64>,
    max_seconds: Option<f64>,
    no_retrieval: bool,
}

impl Engine {
    fn prepare(&self, question: String, a: Ask) -> PyResult<hopwise_reason::Prepared> {
        let options = match a.options.as_deref() {
            None => serde_json::Map::new(),
            Some(text) => match serde_json::from_str(text) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => return Err(PyValueError::new_err("options must be a JSON object of strategy options")),
            },
        };
        let request = Request {
            question,
            strategy: a.strategy,
            options,
            k: a.k,
            max_llm_calls: a.max_llm_calls,
            max_seconds: a.max_seconds,
            no_retrieval: a.no_retrieval,
            ..Request::default()
        };
        self.runtime.prepare(request).map_err(|e| {
            let message = e.to_string();
            reason_err(&e, message)
        })
    }
}

#[pymethods]
impl Engine {
    /// Reads the config file (`config`, else `$HOPWISE_CONFIG`, else `./hopwise.toml`), lays the
    /// given settings over it, then loads the model and opens the index (when one is given or the
    /// configured one exists; without it, strategies that retrieve are refused).
    #[new]
    #[pyo3(signature = (*, model=None, base_url=None, index=None, config=None, home=None, strategy=None, k=None, threads=None, retriever=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: Option<String>,
        base_url: Option<String>,
        index: Option<PathBuf>,
        config: Option<PathBuf>,
        home: Option<PathBuf>,
        strategy: Option<String>,
        k: Option<usize>,
        threads: Option<u32>,
        retriever: Option<String>,
    ) -> PyResult<Self> {
        let explicit_index = index.is_some();
        let retriever = retriever
            .map(|name| name.parse::<hopwise_config::RetrieverKind>())
            .transpose()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let overrides = Overrides {
            general: GeneralOverrides { home, index, retriever, ..Default::default() },
            model: ModelOverrides { model, base_url, threads, ..Default::default() },
            run: RunOverrides { strategy, k },
            ..Overrides::default()
        };
        let cfg = configure(config, &overrides)?;
        let tokio = async_runtime()?;
        let retriever = explicit_index
            || cfg.general.retriever.is_remote()
            || cfg.index_dir().join(hopwise_index::layout::META_FILE).is_file();
        let needs = Needs { retriever, embedder: true, wrap_retriever: true, ..Needs::default() };
        let runtime = py.allow_threads(|| tokio.block_on(hopwise_runtime::build(&cfg, &needs))).map_err(py_err)?;
        Ok(Self { tokio: Arc::new(tokio), runtime: Arc::new(runtime) })
    }

    /// Answers `question`; returns `{"trace": …, "citations": […]}` as JSON.
    #[pyo3(signature = (question, *, strategy=None, options=None, k=None, max_llm_calls=None, max_seconds=None, no_retrieval=false))]
    #[allow(clippy::too_many_arguments)]
    fn ask(
        &self,
        py: Python<'_>,
        question: String,
        strategy: Option<String>,
        options: Option<String>,
        k: Option<usize>,
        max_llm_calls: Option<u64>,
        max_seconds: Option<f64>,
        no_retrieval: bool,
    ) -> PyResult<String> {
        let prepared =
            self.prepare(question, Ask { strategy, options, k, max_llm_calls, max_seconds, no_retrieval })?;
        let runtime = self.runtime.clone();
        let mut task = self.tokio.spawn(async move { runtime.answer(&prepared, None).await });
        let trace = wait(py, &self.tokio, &mut task)?.map_err(|e| py_err(e.into()))?;
        answered(&trace)
    }

    /// Starts answering `question`; the returned stream yields each trace event as it is recorded,
    /// then the answer.
    #[pyo3(signature = (question, *, strategy=None, options=None, k=None, max_llm_calls=None, max_seconds=None, no_retrieval=false))]
    #[allow(clippy::too_many_arguments)]
    fn ask_stream(
        &self,
        question: String,
        strategy: Option<String>,
        options: Option<String>,
        k: Option<usize>,
        max_llm_calls: Option<u64>,
        max_seconds: Option<f64>,
        no_retrieval: bool,
    ) -> PyResult<EventStream> {
        let prepared =
            self.prepare(question, Ask { strategy, options, k, max_llm_calls, max_seconds, no_retrieval })?;
        let runtime = self.runtime.clone();
        let (tx, rx) = unbounded_channel();
        let task = self.tokio.spawn(async move { runtime.answer(&prepared, Some(tx)).await });
        Ok(EventStream { tokio: self.tokio.clone(), events: rx, task: Some(task) })
    }
}

/// The events of one question, then its answer. Iterating waits with the GIL released; Ctrl-C
/// aborts the question. Dropping the stream aborts it too.
#[pyclass(module = "hopwise._native")]
struct EventStream {
    tokio: Arc<tokio::runtime::Runtime>,
    events: UnboundedReceiver<Event>,
    task: Option<JoinHandle<hopwise_reason::error::Result<Trace>>>,
}

#[pymethods]
impl EventStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// `{"event": …}` for each recorded event, then `{"answer": {"trace": …, "citations": …}}`.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<String>> {
        if self.task.is_none() {
            return Ok(None);
        }
        let tokio = self.tokio.clone();
        let events = &mut self.events;
        loop {
            let received =
                py.allow_threads(|| tokio.block_on(async { tokio::time::timeout(SIGNAL_POLL, events.recv()).await }));
            match received {
                Ok(Some(event)) => {
                    return serde_json::to_string(&serde_json::json!({"event": event})).map(Some).map_err(json_err)
                }
                // The recorder is gone: the question has ended.
                Ok(None) => break,
                Err(_) => {
                    if let Err(interrupt) = py.check_signals() {
                        if let Some(task) = self.task.take() {
                            task.abort();
                        }
                        return Err(interrupt);
                    }
                }
            }
        }
        let Some(mut task) = self.task.take() else { return Ok(None) };
        let trace = wait(py, &tokio, &mut task)?.map_err(|e| py_err(e.into()))?;
        let done = answered(&trace)?;
        Ok(Some(format!("{{\"answer\": {done}}}")))
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The executed graph of a trace (JSON) as Mermaid or Graphviz DOT text.
#[pyfunction]
fn graph(trace: &str, format: &str) -> PyResult<String> {
    let trace: Trace = serde_json::from_str(trace).map_err(|e| PyValueError::new_err(format!("not a trace: {e}")))?;
    let format = match format {
        "mermaid" => GraphFormat::Mermaid,
        "dot" => GraphFormat::Dot,
        other => return Err(PyValueError::new_err(format!("graph format `{other}`: choose mermaid or dot"))),
    };
    Ok(graph_text::render(&trace, format))
}

/// The strategies, as JSON: `[{"name", "description", "needs_retriever"}]`.
#[pyfunction]
fn strategies() -> PyResult<String> {
    let rows: Vec<_> = STRATEGIES.iter().map(|s| s.describe()).collect();
    serde_json::to_string(&rows).map_err(json_err)
}

/// Builds (or adds to) the BM25 index in `dir` from corpus files or folders, and with `dense` the
/// dense index beside it (all-MiniLM-L6-v2 from the data directory `home`, as `hopwise index
/// --dense`); returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (paths, dir, *, dense=false, home=None, config=None))]
fn build_index(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    dir: PathBuf,
    dense: bool,
    home: Option<PathBuf>,
    config: Option<PathBuf>,
) -> PyResult<String> {
    // A missing embedder fails before any indexing work.
    let embedder = if dense {
        let home = GeneralOverrides { home, ..Default::default() };
        let cfg = configure(config, &Overrides { general: home, ..Overrides::default() })?;
        Some(
            hopwise_runtime::backends::require_embedder_for(&cfg, &dir)
                .map_err(|e| PyValueError::new_err(format!("{e:#}")))?,
        )
    } else {
        None
    };
    let options = hopwise_index::IndexOptions::default();
    let report = py
        .allow_threads(|| hopwise_index::build_index(&paths, &dir, &options, &|_| {}))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut value = serde_json::to_value(&report).map_err(json_err)?;
    if let Some(embedder) = embedder {
        let tokio = async_runtime()?;
        let dense_options = hopwise_index::DenseOptions::default();
        let built = py
            .allow_threads(|| {
                tokio.block_on(hopwise_index::build_dense(&dir, embedder.as_ref(), &dense_options, &|_| {}))
            })
            .map_err(|e| HopwiseError::new_err(format!("dense index: {e}")))?;
        if let Some(map) = value.as_object_mut() {
            map.insert("dense".into(), serde_json::to_value(&built).map_err(json_err)?);
        }
    }
    serde_json::to_string(&value).map_err(json_err)
}

/// The `k` best passages of the BM25 index in `dir` for `query`, as JSON.
#[pyfunction]
#[pyo3(signature = (dir, query, k=5))]
fn search(py: Python<'_>, dir: PathBuf, query: String, k: usize) -> PyResult<String> {
    let retriever = hopwise_index::Bm25Retriever::open(&dir).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let found = py.allow_threads(|| {
        let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        tokio.block_on(retriever.retrieve(&query, k)).map_err(std::io::Error::other)
    });
    let passages = found.map_err(|e| HopwiseError::new_err(format!("search failed: {e}")))?;
    serde_json::to_string(&passages).map_err(json_err)
}

/// Runs `strategies` over `datasets` into the results folder `out`, as `hopwise eval` does
/// (resumable: finished jobs are kept); returns the outcome as JSON.
#[pyfunction]
#[pyo3(signature = (datasets, strategies, out, *, skip=0, limit=None, concurrency=1, options=None, context=false, cache=true, model=None, base_url=None, index=None, config=None, home=None, threads=None))]
#[allow(clippy::too_many_arguments)]
fn evaluate(
    py: Python<'_>,
    datasets: Vec<PathBuf>,
    strategies: Vec<String>,
    out: PathBuf,
    skip: usize,
    limit: Option<usize>,
    concurrency: usize,
    options: Option<String>,
    context: bool,
    cache: bool,
    model: Option<String>,
    base_url: Option<String>,
    index: Option<PathBuf>,
    config: Option<PathBuf>,
    home: Option<PathBuf>,
    threads: Option<u32>,
) -> PyResult<String> {
    let options = match options.as_deref().map(serde_json::from_str) {
        None => serde_json::Map::new(),
        Some(Ok(serde_json::Value::Object(map))) => map,
        Some(_) => return Err(PyValueError::new_err("options must be a JSON object of strategy options")),
    };
    let overrides = Overrides {
        general: GeneralOverrides { home, index, ..Default::default() },
        model: ModelOverrides { model, base_url, threads, ..Default::default() },
        ..Overrides::default()
    };
    let cfg = configure(config, &overrides)?;
    let plan = EvalPlan {
        datasets,
        strategies,
        out,
        skip,
        limit,
        concurrency,
        options,
        context,
        cache,
        ..EvalPlan::default()
    };
    let tokio = async_runtime()?;
    let mut task = tokio.spawn(async move { evaluate_plan(cfg, &plan, &hopwise_eval::NoProgress).await });
    let outcome = wait(py, &tokio, &mut task)?.map_err(py_err)?;
    serde_json::to_string(&outcome_json(&outcome)).map_err(json_err)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add_class::<EventStream>()?;
    m.add_function(wrap_pyfunction!(graph, m)?)?;
    m.add_function(wrap_pyfunction!(strategies, m)?)?;
    m.add_function(wrap_pyfunction!(build_index, m)?)?;
    m.add_function(wrap_pyfunction!(search, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    m.add("HopwiseError", m.py().get_type::<HopwiseError>())?;
    m.add("BackendError", m.py().get_type::<BackendError>())?;
    Ok(())
}
